// The relay's two ends on the main loop, joined by two relay threads over loopback UDP: an
// encoded stream's access units go from a registry through egress::EgressPublisher, out as
// datagrams, in on the other thread, and into a second registry through RelaySource, where a test
// publisher checks every byte against the producer's content hash. The handlers are the test's and
// carry one access unit per datagram with its frame info in front; the real session is packets, FEC
// and SRTP (docs/wan.md). What this checks is the loop side: descriptions, pins given back,
// buffers given back, accounting on both ends.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/clock.h"
#include "egress/egress_publisher.h"
#include "media/publishers/test_publisher.h"
#include "media/stream_registry.h"
#include "relay/relay_source.h"
#include "transport/transport_thread.h"

using namespace syncd;
using namespace syncd::relay;

namespace {

constexpr size_t kInfoBytes = kFrameIdBytes + kFrameTimeBytes;

// Sender: a description datagram (the APP packet) on stream open, then one datagram per frame.
struct DatagramSender final : transport::TransportHandler {
  transport::TransportThread* thread = nullptr;
  std::vector<uint8_t> out = std::vector<uint8_t>(65000);
  void on_start(transport::TransportThread& t, uint64_t) override { thread = &t; }
  void on_datagram(std::span<uint8_t>, const sockaddr_storage&, uint64_t) override {}
  void on_message(transport::ToTransport& m, uint64_t) override {
    if (m.kind == transport::ToTransport::Kind::kStreamOpened) {
      const size_t n = write_stream_description(m.description, out);
      thread->send_datagram({out.data(), n});
    } else if (m.kind == transport::ToTransport::Kind::kFrame) {
      const media::FrameInfo& info = m.slot->info;
      FrameInfoWire w{info.sequence, info.content_hash, info.capture_time_us, info.flags, 0};
      write_frame_id(w, out.data());
      write_frame_time(w, out.data() + kFrameIdBytes);
      std::memcpy(out.data() + kInfoBytes, m.slot->pixels, info.bytes);
      transport::FromTransport done;
      done.kind = transport::FromTransport::Kind::kFrameDone;
      done.slot = m.slot;
      done.stream_id = m.stream_id;
      done.sent = thread->send_datagram({out.data(), kInfoBytes + info.bytes});
      thread->send_to_main(done);
    }
  }
  void on_timer(uint64_t) override {}
  void on_stop(uint64_t) override {}
};

// Receiver: buffers lent to the main loop until it gives them back (kBufferFree).
struct DatagramReceiver final : transport::TransportHandler {
  static constexpr uint32_t kBuffers = 8;
  transport::TransportThread* thread = nullptr;
  std::vector<std::vector<uint8_t>> buffers =
      std::vector<std::vector<uint8_t>>(kBuffers, std::vector<uint8_t>(65000));
  std::vector<bool> lent = std::vector<bool>(kBuffers);
  uint64_t dropped_no_buffer = 0;
  void on_start(transport::TransportThread& t, uint64_t) override { thread = &t; }
  void on_datagram(std::span<uint8_t> d, const sockaddr_storage&, uint64_t now) override {
    transport::FromTransport m;
    if (StreamDescription desc; parse_stream_description(d, desc) == DescriptionError::kNone) {
      m.kind = transport::FromTransport::Kind::kDescription;
      m.description = desc;
      thread->send_to_main(m);
      return;
    }
    uint32_t b = 0;
    while (b < kBuffers && lent[b]) ++b;
    if (b == kBuffers || d.size() < kInfoBytes) {
      ++dropped_no_buffer;
      return;
    }
    FrameInfoWire w;
    read_frame_id(d.first(kFrameIdBytes), w);
    read_frame_time(d.subspan(kFrameIdBytes, kFrameTimeBytes), w);
    std::memcpy(buffers[b].data(), d.data() + kInfoBytes, d.size() - kInfoBytes);
    lent[b] = true;
    m.kind = transport::FromTransport::Kind::kFrameIn;
    m.buffer = b;
    m.data = buffers[b].data();
    m.bytes = d.size() - kInfoBytes;
    m.sequence = w.sequence;
    m.content_hash = w.content_hash;
    m.capture_time_us = w.capture_time_us;
    m.flags = w.flags;
    m.complete_ns = now;
    thread->send_to_main(m);
  }
  void on_message(transport::ToTransport& m, uint64_t) override {
    if (m.kind == transport::ToTransport::Kind::kBufferFree) lent[m.buffer] = false;
  }
  void on_timer(uint64_t) override {}
  void on_stop(uint64_t) override {}
};

struct Ends {
  egress::EgressPublisher* publisher = nullptr;
  RelaySource* source = nullptr;
};

}  // namespace

TEST(RelayLink, AccessUnitsCrossFromOneRegistryToAnotherVerified) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  Ends ends;
  auto receive_handler = std::make_unique<DatagramReceiver>();
  DatagramReceiver* rh = receive_handler.get();
  transport::TransportThread receiving(
      {"127.0.0.1", 0, "", 0}, std::move(receive_handler),
      [](transport::FromTransport& m, void* ctx) {
        auto* e = static_cast<Ends*>(ctx);
        if (m.kind == transport::FromTransport::Kind::kDescription)
          e->source->on_description(m.description);
        else if (m.kind == transport::FromTransport::Kind::kFrameIn)
          e->source->on_frame_in(m, core::monotonic_ns());
      },
      &ends);
  std::string error;
  ASSERT_TRUE(receiving.start(&loop, error)) << error;
  transport::TransportThread sending(
      {"0.0.0.0", 0, "127.0.0.1", receiving.local_port()}, std::make_unique<DatagramSender>(),
      [](transport::FromTransport& m, void* ctx) {
        auto* e = static_cast<Ends*>(ctx);
        ASSERT_EQ(m.kind, transport::FromTransport::Kind::kFrameDone);
        e->publisher->on_frame_done(m);
      },
      &ends);
  ASSERT_TRUE(sending.start(&loop, error)) << error;

  // The sending syncd's registry: a raw stream (not relayed) and an encoded one (relayed).
  media::StreamRegistry sender_registry;
  auto publisher = std::make_unique<egress::EgressPublisher>(sending, "");
  ends.publisher = publisher.get();
  sender_registry.add_publisher(std::move(publisher));
  // The receiving syncd's: the relayed stream appears here, checked by a test publisher.
  media::StreamRegistry receiver_registry;
  auto verifier = std::make_unique<media::TestPublisher>();
  media::TestPublisher* test = verifier.get();
  receiver_registry.add_publisher(std::move(verifier));
  RelaySource source(receiver_registry, receiving);
  ends.source = &source;

  media::OpenError open_error;
  media::StreamConfig raw{"raw", 64, 32, media::PixelFormat::kRgba8, 60, 4};
  ASSERT_NE(sender_registry.open(raw, 1, open_error), nullptr);
  media::StreamConfig au{"relayed-cam", 640, 360, media::PixelFormat::kH264, 60, 8};
  media::Stream* stream = sender_registry.open(au, 1, open_error);
  ASSERT_NE(stream, nullptr);
  EXPECT_EQ(ends.publisher->relayed_stream(), stream->id());

  auto run_until = [&](auto done) {
    const uint64_t deadline = core::monotonic_ns() + 5'000'000'000ull;
    while (!done() && core::monotonic_ns() < deadline) uv_run(&loop, UV_RUN_NOWAIT);
    return done();
  };
  ASSERT_TRUE(run_until([&] { return source.stream() != nullptr; }));
  EXPECT_EQ(source.stream()->config().name, "relayed-cam");
  EXPECT_EQ(source.stream()->config().format, media::PixelFormat::kH264);
  EXPECT_EQ(source.stream()->config().width, 640u);

  std::mt19937 rng(7);
  constexpr uint64_t kFrames = 60;
  for (uint64_t seq = 1; seq <= kFrames; ++seq) {
    const size_t size = 1 + rng() % 40000;
    media::IngestRequest r;
    r.stream_id = stream->id();
    r.owner = 1;
    r.flags = media::frame_flag::kHasContentHash;
    r.sequence = seq;
    r.payload_bytes = size;
    r.start_ns = core::monotonic_ns();
    media::IngestRefusal why;
    media::SlotLease lease = sender_registry.begin(r, why);
    ASSERT_TRUE(lease) << seq;
    for (size_t i = 0; i < size; ++i) lease.pixels()[i] = uint8_t(rng());
    lease.info().content_hash = XXH3_64bits(lease.pixels(), size);
    ASSERT_TRUE(lease.commit(size, core::monotonic_ns()));
    // One at a time, as a paced producer at 60 fps would: each comes back before the next.
    ASSERT_TRUE(run_until([&] { return source.counters().frames_in == seq; })) << seq;
  }
  const egress::EgressPublisherCounters* sent = ends.publisher->counters(stream->id());
  ASSERT_NE(sent, nullptr);
  EXPECT_EQ(sent->offered, kFrames);
  EXPECT_EQ(sent->sent, kFrames);
  EXPECT_EQ(sent->in_flight, 0u);
  EXPECT_EQ(sent->dropped_total(), 0u);
  EXPECT_EQ(source.counters().frames_committed, kFrames);
  EXPECT_EQ(source.counters().frames_without_stream, 0u);
  const media::TestVerdicts* v = test->verdicts(source.stream()->id());
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->verified, kFrames);  // every byte of every access unit, after the crossing
  EXPECT_EQ(v->verify_failures(), 0u);
  EXPECT_EQ(v->sequence_gaps, 0u);
  EXPECT_EQ(rh->dropped_no_buffer, 0u);

  // The relayed stream closes; the next encoded stream opened is relayed instead.
  sender_registry.close(stream);
  EXPECT_EQ(ends.publisher->relayed_stream(), 0u);
  media::StreamConfig next{"second", 320, 180, media::PixelFormat::kH264, 30, 8};
  media::Stream* second = sender_registry.open(next, 1, open_error);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(ends.publisher->relayed_stream(), second->id());
  ASSERT_TRUE(
      run_until([&] { return source.stream() && source.stream()->config().name == "second"; }));
  EXPECT_EQ(source.counters().streams_opened, 2u);

  sending.stop();
  receiving.stop();
  source.close();
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}
