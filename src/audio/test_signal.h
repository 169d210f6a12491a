// The checkable test signal of the synthetic backend and of sync-jack-tone (docs/audio.md):
// sample (frame, ch) of a C-channel stream carries the integer (frame * C + ch) mod 2^24 as a
// float. Every integer below 2^24 is exact in float32, so a reader can check each sample
// bit-exactly, and channel order and frame continuity at once. Pure; thread-safe.
#pragma once

#include <cstdint>

namespace syncd::audio {

inline constexpr uint32_t kCounterModulus = 1u << 24;

inline float counter_sample(uint64_t frame, uint32_t channels, uint32_t ch) {
  return float(uint32_t((frame * channels + ch) % kCounterModulus));
}

// Fills `frames` interleaved frames starting at absolute frame `first`. No per-sample modulo:
// the counter runs and wraps by subtraction.
inline void fill_counter(float* out, uint64_t first, uint32_t frames, uint32_t channels) {
  uint32_t v = uint32_t((first * channels) % kCounterModulus);
  const uint32_t n = frames * channels;
  for (uint32_t i = 0; i < n; ++i) {
    out[i] = float(v);
    if (++v == kCounterModulus) v = 0;
  }
}

}  // namespace syncd::audio
