// Lock-free single-producer single-consumer ring of fixed-size elements.
//
// Two free-running indices (the PipeWire spa_ringbuffer scheme): the producer owns write_, the
// consumer owns read_, each published with release and observed with acquire. Exactly one thread
// may call try_push() and exactly one other thread may call try_pop(); size() and capacity() may
// be called from either. No allocation: storage is a member array. A full ring refuses the push;
// the caller counts it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace syncd::core {

template <typename T, size_t N>
class SpscRing {
  static_assert(N >= 2 && (N & (N - 1)) == 0, "capacity must be a power of two");
  static_assert(std::is_trivially_copyable_v<T>, "elements are copied in and out");

 public:
  // Producer thread only. False when full.
  bool try_push(const T& value) {
    const uint32_t w = write_.load(std::memory_order_relaxed);
    if (w - read_.load(std::memory_order_acquire) >= N) return false;
    slots_[w & (N - 1)] = value;
    write_.store(w + 1, std::memory_order_release);
    return true;
  }
  // Consumer thread only. False when empty.
  bool try_pop(T& out) {
    const uint32_t r = read_.load(std::memory_order_relaxed);
    if (write_.load(std::memory_order_acquire) == r) return false;
    out = slots_[r & (N - 1)];
    read_.store(r + 1, std::memory_order_release);
    return true;
  }
  size_t size() const {
    const uint32_t r = read_.load(std::memory_order_acquire);  // first: then w - r cannot wrap
    return write_.load(std::memory_order_acquire) - r;
  }
  static constexpr size_t capacity() { return N; }

 private:
  // Separate cache lines so the two threads do not false-share their indices.
  alignas(64) std::atomic<uint32_t> write_{0};
  alignas(64) std::atomic<uint32_t> read_{0};
  alignas(64) T slots_[N]{};
};

}  // namespace syncd::core
