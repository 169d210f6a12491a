// Resident memory of this process, read from /proc/self/statm. procfs is answered from kernel
// memory without touching a disk, so the loop thread may call it (once a second).
#pragma once

#include <cstdint>

namespace syncd::core {

// Resident set size in bytes; 0 when unavailable. Any thread.
uint64_t resident_memory_bytes();

}  // namespace syncd::core
