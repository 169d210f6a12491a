// In-place XOR of a WebSocket payload with its 4-byte masking key (RFC 6455 section 5.3).
//
// Hand-written because this is the hottest loop in syncd: every byte of a 1080p frame (8.3 MB,
// 60 times a second) passes through it. The kernel is chosen once at run time from the CPU's
// features (AVX2 on x86-64, NEON on arm64, scalar otherwise). Pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace syncd::ws {

// mask_key: the four key bytes as they appear on the wire, loaded little-endian
// (key byte j == (mask_key >> 8*j) & 0xff). phase: offset of data[0] within the frame payload,
// so that a payload split across many reads can be unmasked piece by piece.
using UnmaskFn = void (*)(uint8_t* data, size_t size, uint32_t mask_key, uint64_t phase);

void unmask_scalar(uint8_t* data, size_t size, uint32_t mask_key, uint64_t phase);
// nullptr when the kernel is not compiled in or the CPU lacks it.
UnmaskFn unmask_avx2_kernel();
UnmaskFn unmask_neon_kernel();

// The best kernel for this CPU, resolved on first use.
void unmask(uint8_t* data, size_t size, uint32_t mask_key, uint64_t phase);
const char* unmask_kernel_name();

}  // namespace syncd::ws
