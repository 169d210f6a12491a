// Carries plain values from one thread to a libuv loop on another: an SPSC ring and a uv_async
// that wakes the receiving loop, which drains the ring in its callback.
//
// WorkerHandoff serves a worker that sleeps on a futex; this serves a thread that runs its own
// libuv loop (the WAN relay's), which must not block on anything but its loop. Two channels, one
// each way, make a hand-off between two loops: the main loop sends a pinned frame slot to the
// relay loop, and the relay loop sends the slot back to be released (docs/wan.md).
//
// Nothing allocates after open(). A full ring refuses the value; the sender counts it. uv_async
// coalesces wake-ups, so the callback drains everything queued, however many sends woke it.
//
// Threads: open() and close() on the receiving loop's thread (or before that loop runs); send()
// on exactly one sending thread; the Receive callback on the receiving loop's thread. close()
// only once the sender has stopped sending (its thread joined, or its loop done with the
// channel): uv_async_send on a closing handle is undefined, and the channel does not lock.
#pragma once

#include <uv.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/async_handle.h"
#include "core/spsc_ring.h"

namespace syncd::core {

template <typename T, size_t N>
class LoopChannel {
 public:
  using ReceiveFn = void (*)(T& value, void* context);

  LoopChannel() = default;
  LoopChannel(const LoopChannel&) = delete;
  LoopChannel& operator=(const LoopChannel&) = delete;

  // Binds the channel to the loop that receives. 0 or a libuv error.
  int open(uv_loop_t* receiving_loop, ReceiveFn receive, void* context) {
    receive_ = receive;
    context_ = context;
    if (const int rc = open_async_handle(receiving_loop, &LoopChannel::on_async, this, async_))
      return rc;
    open_.store(true, std::memory_order_release);
    return 0;
  }

  // Sending thread. False (nothing queued) when the ring is full or the channel is not open.
  bool send(const T& value) {
    if (!open_.load(std::memory_order_acquire) || !ring_.try_push(value)) return false;
    uv_async_send(async_);
    return true;
  }

  // Receiving loop's thread: delivers what is queued, then closes the async handle (the loop
  // must run once more to finish closing it). Values sent afterwards are refused. Idempotent.
  void close() {
    if (!open_.exchange(false, std::memory_order_acq_rel)) return;
    drain();
    close_async_handle(async_);
    async_ = nullptr;
  }

  // Receiving loop's thread: delivers what is queued now (also what on_async does).
  void drain() {
    T value;
    while (ring_.try_pop(value)) receive_(value, context_);
  }

  size_t queued() const { return ring_.size(); }
  static constexpr size_t capacity() { return N; }

 private:
  static void on_async(uv_async_t* handle) { static_cast<LoopChannel*>(handle->data)->drain(); }

  ReceiveFn receive_ = nullptr;
  void* context_ = nullptr;
  SpscRing<T, N> ring_;
  uv_async_t* async_ = nullptr;  // on the heap, freed by its close callback (worker_handoff.h)
  std::atomic<bool> open_{false};
};

}  // namespace syncd::core
