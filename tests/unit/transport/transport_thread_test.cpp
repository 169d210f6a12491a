// The relay thread's plumbing (src/transport/transport_thread.h): two relay threads over loopback
// UDP, each with its own loop, driven from this thread's loop through the channels. The handlers
// are the test's: the sender's turns a pinned frame into one datagram and gives the slot back; the
// receiver's hands each datagram to the main loop. Built under TSan in CI (scripts/test.sh).
#include "transport/transport_thread.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "core/clock.h"

using namespace syncd;
using namespace syncd::transport;

namespace {

struct SendHandler final : TransportHandler {
  TransportThread* thread = nullptr;
  std::atomic<int> started{0};
  std::atomic<int> stopped{0};
  std::vector<ToTransport> held;  // frames kept back until stop, to check on_stop gives them back
  void on_start(TransportThread& t, uint64_t) override {
    thread = &t;
    started = 1;
  }
  void on_datagram(std::span<uint8_t>, const sockaddr_storage&, uint64_t) override {}
  void on_message(ToTransport& m, uint64_t) override {
    if (m.kind != ToTransport::Kind::kFrame) return;
    if (m.stream_id == 99) {  // keep: returned by on_stop
      held.push_back(m);
      return;
    }
    const media::FrameSlot& slot = *m.slot;
    const bool sent = thread->send_datagram({slot.pixels, slot.info.bytes});
    FromTransport done;
    done.kind = FromTransport::Kind::kFrameDone;
    done.slot = m.slot;
    done.sent = sent;
    thread->send_to_main(done);
  }
  void on_timer(uint64_t) override {}
  void on_stop(uint64_t) override {
    for (ToTransport& m : held) {
      FromTransport done;
      done.kind = FromTransport::Kind::kFrameDone;
      done.slot = m.slot;
      thread->send_to_main(done);
    }
    held.clear();
    stopped = 1;
  }
};

struct ReceiveHandler final : TransportHandler {
  TransportThread* thread = nullptr;
  std::vector<std::vector<uint8_t>>* buffers = nullptr;  // indexed by FromTransport::buffer
  uint32_t next = 0;
  std::atomic<int> timer_calls{0};  // the relay thread's; read by the test
  void on_start(TransportThread& t, uint64_t) override {
    thread = &t;
    t.arm_timer(2'000'000);
  }
  void on_datagram(std::span<uint8_t> d, const sockaddr_storage&, uint64_t now) override {
    // A ring of buffers the main loop reads; the test sends fewer frames than buffers.
    std::vector<uint8_t>& b = (*buffers)[next % buffers->size()];
    b.assign(d.begin(), d.end());
    FromTransport in;
    in.kind = FromTransport::Kind::kFrameIn;
    in.buffer = next++ % uint32_t(buffers->size());
    in.bytes = d.size();
    in.complete_ns = now;
    thread->send_to_main(in);
  }
  void on_message(ToTransport&, uint64_t) override {}
  void on_timer(uint64_t) override {
    if (++timer_calls < 3) thread->arm_timer(1'000'000);
  }
  void on_stop(uint64_t) override {}
};

struct Main {
  int frames_done = 0, frames_sent = 0;
  std::vector<size_t> received_sizes;
  std::vector<std::vector<uint8_t>> buffers = std::vector<std::vector<uint8_t>>(64);
  std::vector<std::vector<uint8_t>> received;
};

}  // namespace

TEST(TransportThread, FramesGoOutAsDatagramsAndComeInOnTheOtherThread) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  Main main;
  auto receive_handler = std::make_unique<ReceiveHandler>();
  ReceiveHandler* rh = receive_handler.get();
  rh->buffers = &main.buffers;
  TransportThread receiver(
      {"127.0.0.1", 0, "", 0}, std::move(receive_handler),
      [](FromTransport& m, void* ctx) {
        auto* mn = static_cast<Main*>(ctx);
        if (m.kind != FromTransport::Kind::kFrameIn) return;
        mn->received.push_back(mn->buffers[m.buffer]);
      },
      &main);
  std::string error;
  ASSERT_TRUE(receiver.start(&loop, error)) << error;
  ASSERT_NE(receiver.local_port(), 0);

  auto send_handler = std::make_unique<SendHandler>();
  SendHandler* sh = send_handler.get();
  TransportThread sender(
      {"0.0.0.0", 0, "127.0.0.1", receiver.local_port()}, std::move(send_handler),
      [](FromTransport& m, void* ctx) {
        auto* mn = static_cast<Main*>(ctx);
        ASSERT_EQ(m.kind, FromTransport::Kind::kFrameDone);
        media::FramePool::unpin(m.slot);
        ++mn->frames_done;
        mn->frames_sent += m.sent;
      },
      &main);
  ASSERT_TRUE(sender.start(&loop, error)) << error;

  media::FramePool* pool = media::FramePool::create(1200, 8);
  constexpr int kFrames = 40;
  for (int i = 0; i < kFrames; ++i) {
    media::FrameSlot* slot = pool->acquire();
    ASSERT_NE(slot, nullptr);
    slot->info.bytes = 100 + size_t(i) * 20;
    std::memset(slot->pixels, i, slot->info.bytes);
    ASSERT_TRUE(media::FramePool::try_pin(slot));
    media::FramePool::release(slot);  // the pin alone holds it now
    ToTransport m;
    m.kind = ToTransport::Kind::kFrame;
    m.slot = slot;
    ASSERT_TRUE(sender.send_to_relay(m));
    // Until the frame came back, so the next acquire finds a free slot.
    const uint64_t deadline = core::monotonic_ns() + 5'000'000'000ull;
    while (main.frames_done <= i && core::monotonic_ns() < deadline) uv_run(&loop, UV_RUN_NOWAIT);
  }
  const uint64_t deadline = core::monotonic_ns() + 5'000'000'000ull;
  while (main.received.size() < kFrames && core::monotonic_ns() < deadline)
    uv_run(&loop, UV_RUN_NOWAIT);
  EXPECT_EQ(main.frames_done, kFrames);
  EXPECT_EQ(main.frames_sent, kFrames);
  ASSERT_EQ(main.received.size(), size_t(kFrames));
  for (int i = 0; i < kFrames; ++i) {
    EXPECT_EQ(main.received[i].size(), 100 + size_t(i) * 20);
    EXPECT_EQ(main.received[i].front(), uint8_t(i));
  }
  EXPECT_EQ(receiver.counters().datagrams_received.load(), uint64_t(kFrames));
  EXPECT_EQ(sender.counters().datagrams_sent.load(), uint64_t(kFrames));
  EXPECT_GE(receiver.counters().receive_batches.load(), 1u);

  // A frame the sender still holds at stop comes back (on_stop), so its pin is released.
  media::FrameSlot* held = pool->acquire();
  ASSERT_NE(held, nullptr);
  ASSERT_TRUE(media::FramePool::try_pin(held));
  media::FramePool::release(held);
  ToTransport keep;
  keep.kind = ToTransport::Kind::kFrame;
  keep.slot = held;
  keep.stream_id = 99;
  ASSERT_TRUE(sender.send_to_relay(keep));
  sender.stop();
  EXPECT_EQ(sh->stopped.load(), 1);
  EXPECT_EQ(main.frames_done, kFrames + 1);
  // The timer runs 2 + 1 + 1 ms after the start, on the relay thread: a loaded machine may take
  // longer than the frames did, so wait for it (the check is that it fires, re-arms, and stops).
  for (int i = 0; i < 5000 && rh->timer_calls.load() < 3; ++i) usleep(1000);
  receiver.stop();
  EXPECT_EQ(rh->timer_calls.load(), 3);
  uv_run(&loop, UV_RUN_DEFAULT);  // finishes closing the channels' handles
  EXPECT_EQ(uv_loop_close(&loop), 0);
  pool->drop_ref();
}

TEST(TransportThread, AnAddressInUseIsSaidAtStart) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  Main main;
  auto h1 = std::make_unique<ReceiveHandler>();
  h1->buffers = &main.buffers;
  TransportThread first(
      {"127.0.0.1", 0, "", 0}, std::move(h1), [](FromTransport&, void*) {}, nullptr);
  std::string error;
  ASSERT_TRUE(first.start(&loop, error)) << error;
  auto h2 = std::make_unique<ReceiveHandler>();
  h2->buffers = &main.buffers;
  TransportThread second(
      {"127.0.0.1", first.local_port(), "", 0}, std::move(h2), [](FromTransport&, void*) {},
      nullptr);
  EXPECT_FALSE(second.start(&loop, error));
  EXPECT_NE(error.find("bind"), std::string::npos) << error;
  first.stop();
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}
