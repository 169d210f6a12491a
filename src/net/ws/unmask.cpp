#include "net/ws/unmask.h"

#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#define SYNC_WS_HAVE_AVX2 1
#elif defined(__aarch64__)
#include <arm_neon.h>
#define SYNC_WS_HAVE_NEON 1
#endif

namespace syncd::ws {
namespace {

// Writes `count` key bytes in payload order starting at `phase`, so a vector load of the result
// lines up with the data regardless of host endianness.
void expand_key(uint8_t* out, size_t count, uint32_t mask_key, uint64_t phase) {
  for (size_t i = 0; i < count; ++i) {
    out[i] = static_cast<uint8_t>(mask_key >> (8 * ((phase + i) & 3)));
  }
}

// Bytes needed to bring `data` to an `alignment` boundary, capped at size.
size_t head_bytes(const uint8_t* data, size_t size, size_t alignment) {
  size_t misalign = reinterpret_cast<uintptr_t>(data) & (alignment - 1);
  size_t head = misalign == 0 ? 0 : alignment - misalign;
  return head < size ? head : size;
}

#if SYNC_WS_HAVE_AVX2
// Only this function is compiled for AVX2, so the rest of the binary still runs on any x86-64.
__attribute__((target("avx2"))) void unmask_avx2(uint8_t* data, size_t size, uint32_t mask_key,
                                                 uint64_t phase) {
  if (size < 64) {
    unmask_scalar(data, size, mask_key, phase);
    return;
  }
  // Aligned stores never straddle cache lines; the head costs at most 31 scalar bytes.
  size_t head = head_bytes(data, size, 32);
  unmask_scalar(data, head, mask_key, phase);
  uint8_t* p = data + head;
  size_t left = size - head;
  phase += head;

  alignas(32) uint8_t key_bytes[32];
  expand_key(key_bytes, sizeof key_bytes, mask_key, phase);
  const __m256i key = _mm256_load_si256(reinterpret_cast<const __m256i*>(key_bytes));

  while (left >= 128) {
    auto* v = reinterpret_cast<__m256i*>(p);
    __m256i a = _mm256_load_si256(v + 0);
    __m256i b = _mm256_load_si256(v + 1);
    __m256i c = _mm256_load_si256(v + 2);
    __m256i d = _mm256_load_si256(v + 3);
    _mm256_store_si256(v + 0, _mm256_xor_si256(a, key));
    _mm256_store_si256(v + 1, _mm256_xor_si256(b, key));
    _mm256_store_si256(v + 2, _mm256_xor_si256(c, key));
    _mm256_store_si256(v + 3, _mm256_xor_si256(d, key));
    p += 128;
    left -= 128;
  }
  while (left >= 32) {
    auto* v = reinterpret_cast<__m256i*>(p);
    _mm256_store_si256(v, _mm256_xor_si256(_mm256_load_si256(v), key));
    p += 32;
    left -= 32;
  }
  // Every step above advanced a multiple of 4 bytes, so the phase is unchanged.
  unmask_scalar(p, left, mask_key, phase);
}
#endif

#if SYNC_WS_HAVE_NEON
void unmask_neon(uint8_t* data, size_t size, uint32_t mask_key, uint64_t phase) {
  uint8_t key_bytes[16];
  expand_key(key_bytes, sizeof key_bytes, mask_key, phase);
  const uint8x16_t key = vld1q_u8(key_bytes);

  uint8_t* p = data;
  size_t left = size;
  while (left >= 64) {
    uint8x16_t a = vld1q_u8(p + 0);
    uint8x16_t b = vld1q_u8(p + 16);
    uint8x16_t c = vld1q_u8(p + 32);
    uint8x16_t d = vld1q_u8(p + 48);
    vst1q_u8(p + 0, veorq_u8(a, key));
    vst1q_u8(p + 16, veorq_u8(b, key));
    vst1q_u8(p + 32, veorq_u8(c, key));
    vst1q_u8(p + 48, veorq_u8(d, key));
    p += 64;
    left -= 64;
  }
  while (left >= 16) {
    vst1q_u8(p, veorq_u8(vld1q_u8(p), key));
    p += 16;
    left -= 16;
  }
  unmask_scalar(p, left, mask_key, phase);
}
#endif

struct Kernel {
  UnmaskFn fn;
  const char* name;
};

Kernel select_kernel() {
  if (UnmaskFn fn = unmask_avx2_kernel()) return {fn, "avx2"};
  if (UnmaskFn fn = unmask_neon_kernel()) return {fn, "neon"};
  return {unmask_scalar, "scalar"};
}

const Kernel& best_kernel() {
  static const Kernel kernel = select_kernel();
  return kernel;
}

}  // namespace

void unmask_scalar(uint8_t* data, size_t size, uint32_t mask_key, uint64_t phase) {
  uint8_t key_bytes[8];
  expand_key(key_bytes, sizeof key_bytes, mask_key, phase);
  uint64_t key;
  std::memcpy(&key, key_bytes, sizeof key);

  size_t i = 0;
  for (; size - i >= 8; i += 8) {
    uint64_t word;
    std::memcpy(&word, data + i, 8);
    word ^= key;
    std::memcpy(data + i, &word, 8);
  }
  // i is a multiple of 8 (hence of 4), so the tail keeps the same key rotation.
  for (; i < size; ++i) data[i] ^= key_bytes[i & 7];
}

UnmaskFn unmask_avx2_kernel() {
#if SYNC_WS_HAVE_AVX2
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) return unmask_avx2;
#endif
  return nullptr;
}

UnmaskFn unmask_neon_kernel() {
#if SYNC_WS_HAVE_NEON
  // Advanced SIMD is mandatory on AArch64.
  return unmask_neon;
#else
  return nullptr;
#endif
}

void unmask(uint8_t* data, size_t size, uint32_t mask_key, uint64_t phase) {
  best_kernel().fn(data, size, mask_key, phase);
}

const char* unmask_kernel_name() {
  return best_kernel().name;
}

}  // namespace syncd::ws
