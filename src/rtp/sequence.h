// RTP sequence-number and timestamp arithmetic across 16-bit and 32-bit wraparound.
//
// Pure, header-only. The free functions may be called from any thread. The unwrappers hold state:
// any thread, not thread-safe, one instance per stream (SSRC).
#pragma once

#include <cstdint>

namespace syncd::rtp {

// Signed distance a - b on the 16-bit sequence circle, in [-32768, 32767]. Positive when a comes
// after b (RFC 3550 section A.1 treats the numbers as a circle; half of it is "ahead").
constexpr int32_t sequence_diff(uint16_t a, uint16_t b) {
  return static_cast<int16_t>(static_cast<uint16_t>(a - b));
}

// True when a comes strictly after b. Exactly half a circle apart (0x8000) counts as newer when
// a > b numerically, so that sequence_newer(a, b) and sequence_newer(b, a) are never both true.
constexpr bool sequence_newer(uint16_t a, uint16_t b) {
  const uint16_t d = static_cast<uint16_t>(a - b);
  if (d == 0x8000) return a > b;
  return d != 0 && d < 0x8000;
}

// Signed distance a - b on the 32-bit RTP timestamp circle.
constexpr int64_t timestamp_diff(uint32_t a, uint32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a - b));
}

// Extends 16-bit sequence numbers to 64 bits by counting wraps (RFC 3550 section A.1 keeps the
// same "cycles" count). Each number is placed on the side of the last unwrapped value it is
// nearest to, so reordering of up to 32767 packets either way is unwrapped correctly. The first
// number maps to itself plus kOrigin (2^32, i.e. 65536 wraps) so that packets older than
// the first one still get positive values.
class SequenceUnwrapper {
 public:
  static constexpr uint64_t kOrigin = uint64_t{1} << 32;

  uint64_t unwrap(uint16_t sequence) {
    if (!started_) {
      started_ = true;
      last_ = kOrigin + sequence;
      return last_;
    }
    const auto last16 = static_cast<uint16_t>(last_);
    last_ = static_cast<uint64_t>(static_cast<int64_t>(last_) + sequence_diff(sequence, last16));
    return last_;
  }
  // The value unwrap() would return, without moving the reference point.
  uint64_t peek(uint16_t sequence) const {
    if (!started_) return kOrigin + sequence;
    const auto last16 = static_cast<uint16_t>(last_);
    return static_cast<uint64_t>(static_cast<int64_t>(last_) + sequence_diff(sequence, last16));
  }
  bool started() const { return started_; }
  void reset() { started_ = false; }

 private:
  uint64_t last_ = 0;
  bool started_ = false;
};

// Extends 32-bit RTP timestamps to 64 bits the same way (at 90 kHz a wrap is every 13.25 h; a
// jump of more than 2^31 ticks, 6.6 h, is read as going backwards). kOrigin (2^40, 256 wraps)
// keeps values for timestamps before the first one positive.
class TimestampUnwrapper {
 public:
  static constexpr uint64_t kOrigin = uint64_t{1} << 40;

  uint64_t unwrap(uint32_t timestamp) {
    if (!started_) {
      started_ = true;
      last_ = kOrigin + timestamp;
      return last_;
    }
    const auto last32 = static_cast<uint32_t>(last_);
    last_ = static_cast<uint64_t>(static_cast<int64_t>(last_) + timestamp_diff(timestamp, last32));
    return last_;
  }
  bool started() const { return started_; }
  void reset() { started_ = false; }

 private:
  uint64_t last_ = 0;
  bool started_ = false;
};

}  // namespace syncd::rtp
