#include "core/unmasking_hasher.h"

#include <algorithm>
#include <cstring>

#include "core/content_hash.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define SYNC_HASH_HAVE_X86 1
#endif

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "XXH3 reads its input little-endian; the stripe loops load it natively");

namespace syncd::core {
namespace {

// XXH3's constants (xxhash_spec.md): the primes, the default secret's size and where in the
// secret each step reads.
constexpr uint64_t kPrime32_1 = 0x9E3779B1U;
constexpr uint64_t kPrime32_2 = 0x85EBCA77U;
constexpr uint64_t kPrime32_3 = 0xC2B2AE3DU;
constexpr uint64_t kPrime64_1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kPrime64_2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kPrime64_3 = 0x165667B19E3779F9ULL;
constexpr uint64_t kPrime64_4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t kPrime64_5 = 0x27D4EB2F165667C5ULL;
constexpr size_t kStripe = 64;
constexpr size_t kSecretSize = 192;
constexpr size_t kStripesPerBlock = (kSecretSize - kStripe) / 8;  // 16: a block is 1 KiB
constexpr size_t kScrambleAt = kSecretSize - kStripe;
constexpr size_t kLastStripeAt = kSecretSize - kStripe - 7;
constexpr size_t kMergeAt = 11;
constexpr size_t kShortInput = 240;  // up to here XXH3 uses other algorithms (libxxhash's)

__extension__ typedef unsigned __int128 uint128;  // GCC and clang; XXH3's 64x64->128 fold

uint64_t read64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// libxxhash's default secret, read once from a state it has reset, so the table is not copied
// here; the unit tests compare every digest with libxxhash's.
struct DefaultSecret {
  alignas(64) uint8_t bytes[kSecretSize];
  DefaultSecret() {
    XXH3_state_t state;
    XXH3_64bits_reset(&state);
    const uint8_t* secret = state.extSecret ? state.extSecret : state.customSecret;
    std::memcpy(bytes, secret, kSecretSize);
  }
};
const uint8_t* default_secret() {
  static const DefaultSecret secret;
  return secret.bytes;
}

// Eight key bytes in payload order from `phase` on, as one little-endian word.
uint64_t mask_word(uint32_t mask_key, uint64_t phase) {
  const unsigned shift = unsigned(phase & 3) * 8;
  const uint32_t rotated = shift ? (mask_key >> shift) | (mask_key << (32 - shift)) : mask_key;
  return uint64_t(rotated) | (uint64_t(rotated) << 32);
}

void xor_bytes(uint8_t* data, size_t size, uint32_t mask_key, uint64_t phase) {
  if (mask_key == 0) return;
  const uint64_t mask = mask_word(mask_key, phase);
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t v = read64(data + i) ^ mask;
    std::memcpy(data + i, &v, sizeof v);
  }
  for (; i < size; ++i) data[i] ^= uint8_t(mask >> (8 * (i & 7)));
}

void accumulate_stripe(uint64_t* acc, const uint8_t* data, const uint8_t* secret) {
  for (size_t i = 0; i < 8; ++i) {
    const uint64_t value = read64(data + 8 * i);
    const uint64_t keyed = value ^ read64(secret + 8 * i);
    acc[i ^ 1] += value;
    acc[i] += (keyed & 0xFFFFFFFFu) * (keyed >> 32);
  }
}

void scramble(uint64_t* acc, const uint8_t* secret) {
  for (size_t i = 0; i < 8; ++i) {
    uint64_t a = acc[i];
    a ^= a >> 47;
    a ^= read64(secret + kScrambleAt + 8 * i);
    acc[i] = a * kPrime32_1;
  }
}

void stripes_portable(uint64_t* acc, uint8_t* data, size_t stripes, size_t stripe_in_block,
                      uint64_t mask8, const uint8_t* secret) {
  for (size_t s = 0; s < stripes; ++s, data += kStripe) {
    if (mask8 != 0) {
      for (size_t i = 0; i < kStripe; i += 8) {
        const uint64_t v = read64(data + i) ^ mask8;
        std::memcpy(data + i, &v, sizeof v);
      }
    }
    accumulate_stripe(acc, data, secret + 8 * stripe_in_block);
    if (++stripe_in_block == kStripesPerBlock) {
      stripe_in_block = 0;
      scramble(acc, secret);
    }
  }
}

#if SYNC_HASH_HAVE_X86
// Only these two functions are compiled for AVX2 / AVX-512, so the rest runs on any x86-64.
// Per stripe: load, XOR the mask, store, then XXH3's accumulate: XOR the secret, multiply the
// low and high halves of each 64-bit lane, add the input with its 64-bit lanes swapped.
template <bool kMasked>
__attribute__((target("avx2"))) void stripes_avx2_body(uint64_t* acc_out, uint8_t* data,
                                                       size_t stripes, size_t stripe_in_block,
                                                       uint64_t mask8, const uint8_t* secret) {
  auto* acc_v = reinterpret_cast<__m256i*>(acc_out);
  __m256i acc0 = _mm256_load_si256(acc_v);
  __m256i acc1 = _mm256_load_si256(acc_v + 1);
  const __m256i mask = _mm256_set1_epi64x(int64_t(mask8));
  const __m256i prime = _mm256_set1_epi32(int32_t(kPrime32_1));
  for (size_t s = 0; s < stripes; ++s, data += kStripe) {
    auto* in = reinterpret_cast<__m256i*>(data);
    __m256i d0 = _mm256_loadu_si256(in);
    __m256i d1 = _mm256_loadu_si256(in + 1);
    if constexpr (kMasked) {
      d0 = _mm256_xor_si256(d0, mask);
      d1 = _mm256_xor_si256(d1, mask);
      _mm256_storeu_si256(in, d0);
      _mm256_storeu_si256(in + 1, d1);
    }
    const auto* key = reinterpret_cast<const __m256i*>(secret + 8 * stripe_in_block);
    const __m256i k0 = _mm256_xor_si256(d0, _mm256_loadu_si256(key));
    const __m256i k1 = _mm256_xor_si256(d1, _mm256_loadu_si256(key + 1));
    const __m256i p0 = _mm256_mul_epu32(k0, _mm256_shuffle_epi32(k0, _MM_SHUFFLE(0, 3, 0, 1)));
    const __m256i p1 = _mm256_mul_epu32(k1, _mm256_shuffle_epi32(k1, _MM_SHUFFLE(0, 3, 0, 1)));
    acc0 = _mm256_add_epi64(
        p0, _mm256_add_epi64(acc0, _mm256_shuffle_epi32(d0, _MM_SHUFFLE(1, 0, 3, 2))));
    acc1 = _mm256_add_epi64(
        p1, _mm256_add_epi64(acc1, _mm256_shuffle_epi32(d1, _MM_SHUFFLE(1, 0, 3, 2))));
    if (++stripe_in_block == kStripesPerBlock) {
      stripe_in_block = 0;
      const auto* scr = reinterpret_cast<const __m256i*>(secret + kScrambleAt);
      __m256i* accs[2] = {&acc0, &acc1};
      for (int i = 0; i < 2; ++i) {
        __m256i a = *accs[i];
        a = _mm256_xor_si256(_mm256_xor_si256(a, _mm256_srli_epi64(a, 47)),
                             _mm256_loadu_si256(scr + i));
        const __m256i lo = _mm256_mul_epu32(a, prime);
        const __m256i hi = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), prime);
        *accs[i] = _mm256_add_epi64(lo, _mm256_slli_epi64(hi, 32));
      }
    }
  }
  _mm256_store_si256(acc_v, acc0);
  _mm256_store_si256(acc_v + 1, acc1);
}

__attribute__((target("avx2"))) void stripes_avx2(uint64_t* acc, uint8_t* data, size_t stripes,
                                                  size_t stripe_in_block, uint64_t mask8,
                                                  const uint8_t* secret) {
  if (mask8 != 0) {
    stripes_avx2_body<true>(acc, data, stripes, stripe_in_block, mask8, secret);
  } else {
    stripes_avx2_body<false>(acc, data, stripes, stripe_in_block, mask8, secret);
  }
}

// GCC 12's AVX-512 intrinsics pass an undefined vector as the merge source of their unmasked
// forms, which -Wmaybe-uninitialized reports at every use.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
template <bool kMasked>
__attribute__((target("avx512f"))) void stripes_avx512_body(uint64_t* acc_out, uint8_t* data,
                                                            size_t stripes, size_t stripe_in_block,
                                                            uint64_t mask8, const uint8_t* secret) {
  __m512i acc = _mm512_load_si512(acc_out);
  const __m512i mask = _mm512_set1_epi64(int64_t(mask8));
  const __m512i prime = _mm512_set1_epi32(int32_t(kPrime32_1));
  for (size_t s = 0; s < stripes; ++s, data += kStripe) {
    __m512i d = _mm512_loadu_si512(data);
    if constexpr (kMasked) {
      d = _mm512_xor_si512(d, mask);
      _mm512_storeu_si512(data, d);
    }
    const __m512i k = _mm512_xor_si512(d, _mm512_loadu_si512(secret + 8 * stripe_in_block));
    const __m512i product =
        _mm512_mul_epu32(k, _mm512_shuffle_epi32(k, _MM_PERM_ENUM(_MM_SHUFFLE(0, 3, 0, 1))));
    const __m512i swapped = _mm512_shuffle_epi32(d, _MM_PERM_ENUM(_MM_SHUFFLE(1, 0, 3, 2)));
    acc = _mm512_add_epi64(product, _mm512_add_epi64(acc, swapped));
    if (++stripe_in_block == kStripesPerBlock) {
      stripe_in_block = 0;
      __m512i a = _mm512_xor_si512(_mm512_xor_si512(acc, _mm512_srli_epi64(acc, 47)),
                                   _mm512_loadu_si512(secret + kScrambleAt));
      const __m512i lo = _mm512_mul_epu32(a, prime);
      const __m512i hi = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), prime);
      acc = _mm512_add_epi64(lo, _mm512_slli_epi64(hi, 32));
    }
  }
  _mm512_store_si512(acc_out, acc);
}

__attribute__((target("avx512f"))) void stripes_avx512(uint64_t* acc, uint8_t* data, size_t stripes,
                                                       size_t stripe_in_block, uint64_t mask8,
                                                       const uint8_t* secret) {
  if (mask8 != 0) {
    stripes_avx512_body<true>(acc, data, stripes, stripe_in_block, mask8, secret);
  } else {
    stripes_avx512_body<false>(acc, data, stripes, stripe_in_block, mask8, secret);
  }
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

bool cpu_has(UnmaskingHasher::Kernel kernel) {
  switch (kernel) {
    case UnmaskingHasher::Kernel::kBest:
    case UnmaskingHasher::Kernel::kPortable:
      return true;
#if SYNC_HASH_HAVE_X86
    case UnmaskingHasher::Kernel::kAvx2:
      return __builtin_cpu_supports("avx2");
    case UnmaskingHasher::Kernel::kAvx512:
      return __builtin_cpu_supports("avx512f");
#else
    case UnmaskingHasher::Kernel::kAvx2:
    case UnmaskingHasher::Kernel::kAvx512:
      return false;
#endif
  }
  return false;
}

UnmaskingHasher::Kernel best_kernel() {
  static const UnmaskingHasher::Kernel best = [] {
    if (cpu_has(UnmaskingHasher::Kernel::kAvx512)) return UnmaskingHasher::Kernel::kAvx512;
    if (cpu_has(UnmaskingHasher::Kernel::kAvx2)) return UnmaskingHasher::Kernel::kAvx2;
    return UnmaskingHasher::Kernel::kPortable;
  }();
  return best;
}

}  // namespace

bool UnmaskingHasher::supported(Kernel kernel) {
  return cpu_has(kernel);
}

const char* UnmaskingHasher::best_kernel_name() {
  switch (best_kernel()) {
    case Kernel::kAvx512:
      return "avx512";
    case Kernel::kAvx2:
      return "avx2";
    default:
      return "portable";
  }
}

UnmaskingHasher::UnmaskingHasher(Kernel kernel) {
  if (kernel == Kernel::kBest) kernel = best_kernel();
  if (!cpu_has(kernel)) kernel = Kernel::kPortable;
  stripes_ = stripes_portable;
#if SYNC_HASH_HAVE_X86
  if (kernel == Kernel::kAvx2) stripes_ = stripes_avx2;
  if (kernel == Kernel::kAvx512) stripes_ = stripes_avx512;
#endif
  begin(nullptr);
}

void UnmaskingHasher::begin(uint8_t* frame) {
  static constexpr uint64_t kInitialAcc[8] = {kPrime32_3, kPrime64_1, kPrime64_2, kPrime64_3,
                                              kPrime64_4, kPrime32_2, kPrime64_5, kPrime32_1};
  std::memcpy(acc_, kInitialAcc, sizeof acc_);
  frame_ = frame;
  filled_ = 0;
  stripes_done_ = 0;
}

void UnmaskingHasher::accumulate_plain(size_t stripe) {
  const uint8_t* secret = default_secret();
  const size_t in_block = stripe % kStripesPerBlock;
  accumulate_stripe(acc_, frame_ + stripe * kStripe, secret + 8 * in_block);
  if (in_block == kStripesPerBlock - 1) scramble(acc_, secret);
}

// XXH3 accumulates every stripe but the one holding the input's last byte in order (that one,
// and the 64 bytes that end the input, are mixed at the digest). The total is not known until
// the digest, so a stripe is accumulated once a byte after it has arrived: each call leaves its
// last 1-64 bytes unmasked but not yet accumulated, and the next call starts with them.
void UnmaskingHasher::update(uint8_t* data, size_t size, uint32_t mask_key, uint64_t phase) {
  if (size == 0) return;
  uint64_t at = filled_;
  const uint64_t end = filled_ + size;
  // The bytes that complete a stripe begun in an earlier call.
  const uint64_t head_end = std::min<uint64_t>((at + kStripe - 1) & ~uint64_t(kStripe - 1), end);
  xor_bytes(data, size_t(head_end - at), mask_key, phase);
  phase += head_end - at;
  at = head_end;
  if ((stripes_done_ + 1) * kStripe <= at && (stripes_done_ + 1) * kStripe < end) {
    accumulate_plain(size_t(stripes_done_++));
  }
  if (at < end) {
    // Here `at` is the start of the next stripe to accumulate.
    const uint64_t stripes = (end - 1 - at) / kStripe;
    stripes_(acc_, frame_ + at, size_t(stripes), size_t(stripes_done_ % kStripesPerBlock),
             mask_key ? mask_word(mask_key, phase) : 0, default_secret());
    stripes_done_ += stripes;
    phase += stripes * kStripe;
    at += stripes * kStripe;
    xor_bytes(frame_ + at, size_t(end - at), mask_key, phase);
  }
  filled_ = end;
}

uint64_t UnmaskingHasher::digest() const {
  if (filled_ <= kShortInput) return content_hash(frame_, size_t(filled_));
  const uint8_t* secret = default_secret();
  alignas(64) uint64_t acc[8];
  std::memcpy(acc, acc_, sizeof acc);
  accumulate_stripe(acc, frame_ + filled_ - kStripe, secret + kLastStripeAt);
  uint64_t h = filled_ * kPrime64_1;
  for (size_t i = 0; i < 4; ++i) {
    const uint128 product = static_cast<uint128>(acc[2 * i] ^ read64(secret + kMergeAt + 16 * i)) *
                            (acc[2 * i + 1] ^ read64(secret + kMergeAt + 16 * i + 8));
    h += uint64_t(product) ^ uint64_t(product >> 64);
  }
  h ^= h >> 37;
  h *= 0x165667919E3779F9ULL;
  return h ^ (h >> 32);
}

}  // namespace syncd::core
