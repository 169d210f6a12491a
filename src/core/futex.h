// Thin wrappers over the Linux futex syscall for a 32-bit word in shared memory (readers wait,
// the writer wakes). Any thread.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <ctime>

namespace syncd::core {

// Sleeps while *word == expected, up to timeout_ms (-1: no limit). Returns on wake, timeout,
// signal or a changed word; the caller re-checks its condition.
inline void futex_wait(uint32_t* word, uint32_t expected, int timeout_ms) {
  timespec ts{timeout_ms / 1000, long(timeout_ms % 1000) * 1'000'000};
  // Not FUTEX_PRIVATE_FLAG: the word lives in memory shared between processes.
  ::syscall(SYS_futex, word, FUTEX_WAIT, expected, timeout_ms < 0 ? nullptr : &ts, nullptr, 0);
}

inline void futex_wake_all(uint32_t* word) {
  ::syscall(SYS_futex, word, FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

}  // namespace syncd::core
