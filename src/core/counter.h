// Figures one thread counts and any thread reads (for /stats and /metrics): relaxed atomics that
// their one writer bumps with a plain load and store. No locked read-modify-write: there is no
// other writer to race with, and a reader sees the latest value or one just before it.
//
// Thread: the counter's one writing thread for these; readers load with memory_order_relaxed.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

namespace syncd::core {

template <typename T>
inline void count(std::atomic<T>& counter, std::type_identity_t<T> by = 1) {
  counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

template <typename T>
inline void set(std::atomic<T>& figure, std::type_identity_t<T> value) {
  figure.store(value, std::memory_order_relaxed);
}

template <typename T>
inline void raise_to(std::atomic<T>& figure, std::type_identity_t<T> value) {
  if (value > figure.load(std::memory_order_relaxed))
    figure.store(value, std::memory_order_relaxed);
}

}  // namespace syncd::core
