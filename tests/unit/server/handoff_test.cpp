// Frames leaving the loop: core::WorkerHandoff carrying pinned pool slots to a worker thread and
// back, with reference counts dropped on both threads. Built and run under TSan in CI
// (scripts/test.sh), which is what these tests are for: a data race here is a failure.
#include <gtest/gtest.h>
#include <uv.h>

#include <atomic>
#include <thread>
#include <vector>

#include "core/content_hash.h"
#include "core/loop_channel.h"
#include "core/worker_handoff.h"
#include "media/frame_pool.h"

using syncd::core::WorkerHandoff;
using syncd::media::FramePool;
using syncd::media::FrameSlot;

namespace {

struct Job {
  FrameSlot* slot;
  uint64_t expected;
  uint64_t hash;
  bool unpin_on_worker;
};

struct Results {
  uint64_t done = 0;
  uint64_t matched = 0;
};

void work(Job& job, void*) {
  job.hash = syncd::core::content_hash(job.slot->pixels, job.slot->info.bytes);
  if (job.unpin_on_worker) {
    FramePool::unpin(job.slot);  // the last reference may go here, off the loop
    job.slot = nullptr;
  }
}

void done(Job& job, void* context) {
  auto* r = static_cast<Results*>(context);
  ++r->done;
  if (job.hash == job.expected) ++r->matched;
  if (job.slot) FramePool::unpin(job.slot);
}

// Runs `frames` frames through a 4-slot pool: the loop fills a slot, pins it for the worker,
// drops its own reference at once (as the registry does after publishing), and the worker or
// the loop drops the pin.
void run_frames(bool unpin_on_worker, int frames, Results& results) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  FramePool* pool = FramePool::create(64 * 1024, 4);
  ASSERT_NE(pool, nullptr);
  WorkerHandoff<Job, 8> handoff(&work, &done, &results);
  ASSERT_EQ(handoff.start(&loop), 0);
  int sent = 0;
  while (sent < frames) {
    FrameSlot* slot = pool->acquire();
    if (!slot) {  // every slot is with the worker: let results come back
      uv_run(&loop, UV_RUN_ONCE);
      continue;
    }
    slot->info.bytes = 64 * 1024;
    for (size_t i = 0; i < slot->info.bytes; i += 64) slot->pixels[i] = uint8_t(sent + i);
    const uint64_t expected = syncd::core::content_hash(slot->pixels, slot->info.bytes);
    const bool pinned = FramePool::try_pin(slot);
    if (pinned && handoff.submit(Job{slot, expected, 0, unpin_on_worker})) {
      ++sent;
    } else if (pinned) {
      FramePool::unpin(slot);  // pinned, but the ring was full
    }
    FramePool::release(slot);
    uv_run(&loop, UV_RUN_NOWAIT);
  }
  while (results.done < uint64_t(frames)) uv_run(&loop, UV_RUN_ONCE);
  handoff.stop();
  uv_run(&loop, UV_RUN_DEFAULT);  // the async handle's close
  EXPECT_EQ(pool->slots_in_use(), 0u);
  EXPECT_EQ(pool->pinned_slots(), 0u);
  pool->drop_ref();
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

}  // namespace

TEST(WorkerHandoff, FramesGoToTheWorkerAndBack) {
  Results r;
  run_frames(/*unpin_on_worker=*/false, 2000, r);
  EXPECT_EQ(r.done, 2000u);
  EXPECT_EQ(r.matched, 2000u);
}

TEST(WorkerHandoff, TheWorkerMayDropTheLastReference) {
  Results r;
  run_frames(/*unpin_on_worker=*/true, 2000, r);
  EXPECT_EQ(r.done, 2000u);
  EXPECT_EQ(r.matched, 2000u);
}

TEST(WorkerHandoff, RefusesPastItsCapacityAndStopsCleanly) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  Results results;
  FramePool* pool = FramePool::create(4096, 8);
  WorkerHandoff<Job, 2> handoff(&work, &done, &results);
  ASSERT_EQ(handoff.start(&loop), 0);
  std::vector<FrameSlot*> slots;
  int accepted = 0;
  for (int i = 0; i < 6; ++i) {
    FrameSlot* s = pool->acquire();
    s->info.bytes = 4096;
    ASSERT_TRUE(FramePool::try_pin(s));
    if (handoff.submit(Job{s, 0, 0, false})) {
      ++accepted;
    } else {
      FramePool::unpin(s);
    }
    FramePool::release(s);
  }
  // Results are only taken back on the loop, so at most 2 were ever in flight.
  EXPECT_EQ(accepted, 2);
  handoff.stop();  // waits for the worker and runs the outstanding results
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_EQ(results.done, 2u);
  EXPECT_EQ(pool->slots_in_use(), 0u);
  pool->drop_ref();
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

TEST(FramePool, PinsAreCappedSoIngestAlwaysFindsASlot) {
  FramePool* pool = FramePool::create(4096, 3);
  ASSERT_EQ(pool->pin_cap(), 2u);
  FrameSlot* a = pool->acquire();
  FrameSlot* b = pool->acquire();
  EXPECT_TRUE(FramePool::try_pin(a));
  EXPECT_TRUE(FramePool::try_pin(b));
  FramePool::release(a);  // the writer's references go; the consumers' pins stay
  FramePool::release(b);
  FrameSlot* c = pool->acquire();  // the next frame still has a slot
  ASSERT_NE(c, nullptr);
  EXPECT_FALSE(FramePool::try_pin(c));  // a third pinned slot would leave none free
  EXPECT_EQ(pool->pins_refused(), 1u);
  EXPECT_TRUE(FramePool::try_pin(a));  // more consumers of a pinned slot cost nothing
  EXPECT_EQ(pool->pinned_slots(), 2u);
  FramePool::release(c);
  FramePool::unpin(a);
  FramePool::unpin(a);
  FramePool::unpin(b);
  EXPECT_EQ(pool->pinned_slots(), 0u);
  EXPECT_EQ(pool->slots_in_use(), 0u);
  pool->drop_ref();
}

TEST(FramePool, ReleasesFromAnotherThreadAreSeenByAcquire) {
  FramePool* pool = FramePool::create(4096, 4);
  std::atomic<FrameSlot*> handed{nullptr};
  std::atomic<bool> stop{false};
  std::thread releaser([&] {
    while (!stop.load()) {
      if (FrameSlot* s = handed.exchange(nullptr)) {
        s->pixels[0] = 1;  // the consumer's last touch, before its release
        FramePool::release(s);
      }
    }
  });
  int acquired = 0;
  for (int i = 0; i < 20000; ++i) {
    FrameSlot* s = pool->acquire();
    if (!s) continue;
    s->pixels[0] = 0;
    ++acquired;
    FrameSlot* expected = nullptr;
    if (!handed.compare_exchange_strong(expected, s)) FramePool::release(s);
  }
  stop.store(true);
  releaser.join();
  if (FrameSlot* s = handed.exchange(nullptr)) FramePool::release(s);
  EXPECT_GT(acquired, 0);
  EXPECT_EQ(pool->slots_in_use(), 0u);
  pool->drop_ref();
}

// Two loops on two threads, a channel each way: every value crosses to the other loop and
// comes back, in order, with the ring refusing (never losing) what does not fit. Under TSan
// in CI (scripts/test.sh), like the rest of this file.
namespace {
struct EchoLoops {
  static constexpr uint64_t kValues = 200'000;
  syncd::core::LoopChannel<uint64_t, 64> to_remote;  // received on the remote loop
  syncd::core::LoopChannel<uint64_t, 64> to_main;    // received on the main loop
  uv_loop_t remote_loop{};
  uv_async_t remote_stop{};
  uint64_t echoed_refused = 0;  // remote thread
  uint64_t next_expected = 0;   // main thread
  bool in_order = true;

  static void on_remote(uint64_t& v, void* self) {
    auto* s = static_cast<EchoLoops*>(self);
    // The way back has the same capacity: spin until it takes it (the main loop drains it).
    while (!s->to_main.send(v)) {
      ++s->echoed_refused;
      std::this_thread::yield();
    }
  }
  static void on_main(uint64_t& v, void* self) {
    auto* s = static_cast<EchoLoops*>(self);
    if (v != s->next_expected) s->in_order = false;
    ++s->next_expected;
  }
};
}  // namespace

TEST(LoopChannel, ValuesCrossBetweenTwoLoopsInOrderAndNoneIsLost) {
  EchoLoops e;
  uv_loop_t main_loop;
  ASSERT_EQ(uv_loop_init(&main_loop), 0);
  ASSERT_EQ(uv_loop_init(&e.remote_loop), 0);
  ASSERT_EQ(e.to_remote.open(&e.remote_loop, &EchoLoops::on_remote, &e), 0);
  ASSERT_EQ(e.to_main.open(&main_loop, &EchoLoops::on_main, &e), 0);
  ASSERT_EQ(uv_async_init(&e.remote_loop, &e.remote_stop,
                          [](uv_async_t* h) {
                            auto* s = static_cast<EchoLoops*>(h->data);
                            s->to_remote.close();
                            uv_close(reinterpret_cast<uv_handle_t*>(h), nullptr);
                          }),
            0);
  e.remote_stop.data = &e;
  std::thread remote([&] { uv_run(&e.remote_loop, UV_RUN_DEFAULT); });

  uint64_t sent = 0, refused = 0;
  while (e.next_expected < EchoLoops::kValues) {
    while (sent < EchoLoops::kValues && e.to_remote.send(sent)) ++sent;
    if (sent < EchoLoops::kValues) ++refused;
    uv_run(&main_loop, UV_RUN_NOWAIT);
  }
  uv_async_send(&e.remote_stop);
  remote.join();
  e.to_main.close();
  uv_run(&main_loop, UV_RUN_DEFAULT);
  EXPECT_EQ(e.next_expected, EchoLoops::kValues);
  EXPECT_TRUE(e.in_order);
  EXPECT_GT(refused, 0u);             // the 64-slot ring did fill: the refusal path ran
  EXPECT_FALSE(e.to_remote.send(1));  // closed: refused
  EXPECT_EQ(uv_loop_close(&main_loop), 0);
  EXPECT_EQ(uv_loop_close(&e.remote_loop), 0);
}
