// Clock reads, kept out of the pure cores: protocol and filter code takes time as a parameter.
// Thread-safe.
#pragma once

#include <cstdint>
#include <ctime>

namespace syncd::core {

// CLOCK_MONOTONIC in nanoseconds (vDSO; no syscall on Linux).
inline uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

// CPU time consumed by the calling thread, in nanoseconds.
inline uint64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

}  // namespace syncd::core
