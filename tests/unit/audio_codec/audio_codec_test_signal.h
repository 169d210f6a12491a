// Test signals and measurements shared by the audio codec tests: a different sine per channel
// (its frequency is the channel's marker), Goertzel power, and SNR against the delayed input.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace syncd::audio_codec::testing {

// Channel c carries a sine at 300 + 130 c Hz (300 .. 4330 Hz for 32 channels: inside the
// bandwidth Opus keeps at these rates, and 130 Hz apart so a swap is unmistakable) with an
// amplitude code 0.20 + 0.005 c.
inline double channel_frequency(uint32_t c) {
  return 300.0 + 130.0 * c;
}
inline double channel_amplitude(uint32_t c) {
  return 0.20 + 0.005 * c;
}

inline std::vector<float> make_sines(uint32_t channels, size_t frames) {
  std::vector<float> s(frames * channels);
  for (size_t n = 0; n < frames; ++n)
    for (uint32_t c = 0; c < channels; ++c)
      s[n * channels + c] = float(
          channel_amplitude(c) * std::sin(2.0 * M_PI * channel_frequency(c) * double(n) / 48000.0));
  return s;
}

// Power of channel c of an interleaved buffer at frequency f (Goertzel), over frames
// [begin, end).
inline double goertzel(const std::vector<float>& s, uint32_t channels, uint32_t c, double f,
                       size_t begin, size_t end) {
  const double w = 2.0 * M_PI * f / 48000.0;
  const double coeff = 2.0 * std::cos(w);
  double s1 = 0, s2 = 0;
  for (size_t n = begin; n < end; ++n) {
    const double s0 = s[n * channels + c] + coeff * s1 - s2;
    s2 = s1;
    s1 = s0;
  }
  return s1 * s1 + s2 * s2 - coeff * s1 * s2;
}

// Index of the channel frequency (0..channels-1) with the most power in channel c.
inline uint32_t dominant_marker(const std::vector<float>& s, uint32_t channels, uint32_t c,
                                size_t begin, size_t end) {
  uint32_t best = 0;
  double best_power = -1;
  for (uint32_t k = 0; k < channels; ++k) {
    const double p = goertzel(s, channels, c, channel_frequency(k), begin, end);
    if (p > best_power) best_power = p, best = k;
  }
  return best;
}

// SNR in dB of out against in delayed by `delay` frames, over the frames n where use[n / frame]
// is true (all frames when use is empty), for channel c.
inline double snr_db(const std::vector<float>& in, const std::vector<float>& out, uint32_t channels,
                     uint32_t c, size_t delay, size_t frames, const std::vector<bool>& use = {},
                     size_t frame = 480) {
  double signal = 0, noise = 0;
  for (size_t n = delay; n < frames; ++n) {
    if (!use.empty() && !use[n / frame]) continue;
    const double x = in[(n - delay) * channels + c];
    const double e = out[n * channels + c] - x;
    signal += x * x;
    noise += e * e;
  }
  return 10.0 * std::log10(signal / std::max(noise, 1e-20));
}

}  // namespace syncd::audio_codec::testing
