// abs-send-time: the 24-bit 6.18 fixed-point send time of an RTP header extension
// (http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time, carried as an RFC 8285 one-byte
// element). 18 fraction bits give 2^-18 s (3.8 us) resolution; the 6 integer bits wrap every 64 s.
//
// Pure code: any thread; the unwrapper is not thread-safe, one per received stream.
#pragma once

#include <cstdint>

namespace syncd::congestion {

inline constexpr uint32_t kAbsSendTimeFractionBits = 18;
inline constexpr uint32_t kAbsSendTimeMask = 0xFFFFFF;
inline constexpr uint64_t kAbsSendTimeWrapNs = 64'000'000'000ull;

// The 24-bit value for a send time in nanoseconds (any epoch; only differences matter), rounded
// to the nearest 2^-18 s. Any thread.
constexpr uint32_t abs_send_time_from_ns(uint64_t ns) {
  const uint64_t seconds = ns / 1'000'000'000ull;
  const uint64_t rest_ns = ns % 1'000'000'000ull;
  // rest_ns < 2^30, so the shift cannot overflow; a rounded fraction of exactly 2^18 carries
  // into the seconds through the addition.
  const uint64_t fraction =
      ((rest_ns << kAbsSendTimeFractionBits) + 500'000'000ull) / 1'000'000'000ull;
  return static_cast<uint32_t>(((seconds << kAbsSendTimeFractionBits) + fraction) &
                               kAbsSendTimeMask);
}

// Nanoseconds for a signed count of 2^-18 s units, rounded; split so it cannot overflow for any
// count a stream can reach (int64 nanoseconds last 292 years). Any thread.
constexpr int64_t abs_send_time_units_to_ns(int64_t units) {
  const int64_t whole_seconds = units >> kAbsSendTimeFractionBits;  // floor, also when negative
  const int64_t fraction = units & ((int64_t{1} << kAbsSendTimeFractionBits) - 1);
  return whole_seconds * 1'000'000'000ll +
         ((fraction * 1'000'000'000ll + (int64_t{1} << (kAbsSendTimeFractionBits - 1))) >>
          kAbsSendTimeFractionBits);
}

// Turns the wrapping 24-bit values of one stream into a continuous timeline. Each value is taken
// as the nearest one to the previous value (a step of less than 32 s either way), so wraps at
// 64 s and reordering across a wrap both come out right. The first value maps to its own offset
// in [0, 64 s); earlier (reordered) packets may map below zero.
// Any thread; not thread-safe; one instance per received stream.
class AbsSendTimeUnwrapper {
 public:
  // Send time in nanoseconds on the unwrapped timeline. Bits above the low 24 are ignored.
  int64_t unwrap_ns(uint32_t abs_send_time);

  void reset() { started_ = false; }

 private:
  bool started_ = false;
  uint32_t last_ = 0;
  int64_t unwrapped_units_ = 0;
};

}  // namespace syncd::congestion
