// The checkable test signal of the synthetic backend and of sync-jack-tone (docs/audio.md):
// sample (frame, ch) of a C-channel stream carries the integer (frame * C + ch) mod 2^24 as a
// float. Every integer below 2^24 is exact in float32, so a reader can check each sample
// bit-exactly, and channel order and frame continuity at once. Pure; thread-safe.
#pragma once

#include <cmath>
#include <cstddef>
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

// The tone signal (synthetic:...,tone): channel ch carries a sine of tone_frequency(ch) at
// amplitude kToneAmplitude, phase 0 at absolute frame 0, so a lossy codec's output can be
// recognised per channel (its frequency and level) where the counter cannot be carried.
inline constexpr float kToneAmplitude = 0.25f;
inline double tone_frequency(uint32_t ch) {
  return 300.0 + 150.0 * ch;
}

// Fills `frames` interleaved frames of the tone signal starting at absolute frame `first`. The
// phase is taken modulo the rate in integers (frame * f mod rate), so it stays exact for days.
inline void fill_tone(float* out, uint64_t first, uint32_t frames, uint32_t channels,
                      uint32_t rate) {
  constexpr double kTwoPi = 6.283185307179586;
  for (uint32_t f = 0; f < frames; ++f)
    for (uint32_t ch = 0; ch < channels; ++ch) {
      const uint64_t hz = uint64_t(tone_frequency(ch));
      const uint64_t cycle = ((first + f) % rate) * hz % rate;
      out[size_t(f) * channels + ch] =
          kToneAmplitude * float(std::sin(kTwoPi * double(cycle) / double(rate)));
    }
}

}  // namespace syncd::audio
