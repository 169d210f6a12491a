// Carries jobs from the loop thread to one worker thread and their results back: an SPSC ring
// each way, a futex word to wake the worker, and a uv_async to wake the loop.
//
// This is how a frame leaves the loop: the job holds a pinned frame slot (media::FramePool::
// try_pin), the worker reads or converts it, and the result comes back to the loop, which
// releases the slot. Jobs are plain values (trivially copyable); nothing allocates after start().
// At most N jobs are in flight, so the result ring never overflows; submit() refuses the N+1th
// and the caller counts it as a drop.
//
// Threads: construct, start(), submit(), stop() and the Done callback: the loop thread. The Work
// callback: the worker thread, which never touches the loop.
#pragma once

#include <uv.h>

#include <atomic>
#include <cstdint>
#include <thread>

#include "core/async_handle.h"
#include "core/futex.h"
#include "core/spsc_ring.h"

namespace syncd::core {

template <typename Job, size_t N>
class WorkerHandoff {
 public:
  using WorkFn = void (*)(Job& job, void* context);  // worker thread
  using DoneFn = void (*)(Job& job, void* context);  // loop thread

  WorkerHandoff(WorkFn work, DoneFn done, void* context)
      : work_(work), done_(done), context_(context) {}
  ~WorkerHandoff() { stop(); }
  WorkerHandoff(const WorkerHandoff&) = delete;
  WorkerHandoff& operator=(const WorkerHandoff&) = delete;

  // Starts the worker thread. Control plane.
  int start(uv_loop_t* loop) {
    if (const int rc = open_async_handle(loop, &WorkerHandoff::on_async, this, async_)) return rc;
    async_open_ = true;
    running_.store(true, std::memory_order_relaxed);
    worker_ = std::thread([this] { run(); });
    return 0;
  }

  // Queues a job for the worker. False (nothing queued) when N jobs are in flight or the
  // hand-off is not running. Never blocks or allocates.
  bool submit(const Job& job) {
    if (!async_open_ || in_flight_ == N || !jobs_.try_push(job)) return false;
    ++in_flight_;
    ++submitted_;
    wake_.fetch_add(1, std::memory_order_release);
    futex_wake_all(reinterpret_cast<uint32_t*>(&wake_));
    return true;
  }

  // Joins the worker after it has finished what was queued, runs Done for every result, and
  // closes the async handle. Idempotent.
  void stop() {
    if (!async_open_) return;
    running_.store(false, std::memory_order_release);
    wake_.fetch_add(1, std::memory_order_release);
    futex_wake_all(reinterpret_cast<uint32_t*>(&wake_));
    if (worker_.joinable()) worker_.join();
    drain();
    async_open_ = false;
    close_async_handle(async_);
    async_ = nullptr;
  }

  // Waits until the worker has finished every job in flight and runs Done for each, on the
  // loop thread, without stopping the worker: for a caller that must finish what it lent out
  // (a stream about to close) but keeps the worker. Blocks for at most N jobs' work.
  void flush() {
    while (in_flight_ > 0) {
      drain();
      if (in_flight_ > 0) std::this_thread::yield();
    }
  }

  size_t in_flight() const { return in_flight_; }
  uint64_t submitted() const { return submitted_; }

 private:
  static void on_async(uv_async_t* handle) { static_cast<WorkerHandoff*>(handle->data)->drain(); }

  void drain() {
    Job job;
    while (results_.try_pop(job)) {
      --in_flight_;
      done_(job, context_);
    }
  }

  void run() {
    for (;;) {
      const uint32_t seen = wake_.load(std::memory_order_acquire);
      Job job;
      bool any = false;
      while (jobs_.try_pop(job)) {
        work_(job, context_);
        results_.try_push(job);  // cannot fail: at most N jobs exist
        any = true;
      }
      if (any) uv_async_send(async_);
      if (!running_.load(std::memory_order_acquire) && jobs_.size() == 0) return;
      // Sleeps until submit() or stop() moves the word; a change since `seen` returns at once.
      futex_wait(reinterpret_cast<uint32_t*>(&wake_), seen, 1000);
    }
  }

  WorkFn work_;
  DoneFn done_;
  void* context_;
  SpscRing<Job, N> jobs_;
  SpscRing<Job, N> results_;
  std::atomic<uint32_t> wake_{0};
  std::atomic<bool> running_{false};
  std::thread worker_;
  // On the heap, freed by its close callback: libuv finishes a close on the loop's next turn,
  // and a hand-off destroyed right after stop() (an encoder retired as its last frame came
  // back) left libuv reading freed memory (uv__finish_close's assertion, seen in Chromium's
  // WHEP tests).
  uv_async_t* async_ = nullptr;
  bool async_open_ = false;
  size_t in_flight_ = 0;  // loop thread
  uint64_t submitted_ = 0;
};

}  // namespace syncd::core
