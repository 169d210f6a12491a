// Unwrapping of RTP's 16-bit sequence numbers and 32-bit timestamps into 64-bit counters.
//
// Any thread; not thread-safe; one instance per stream (per SSRC).
#pragma once

#include <cstdint>
#include <type_traits>

namespace syncd::jitter {

// Extends a wrapping N-bit counter (RFC 3550 section 3: sequence numbers wrap at 2^16, timestamps
// at 2^32) to 64 bits, relative to the highest value seen: a new value is taken as the nearest
// one to it, forward or backward (RFC 3550 appendix A.1 does the same with its cycle count). The
// first value is placed at 2^Bits * 2^16 so that values before it stay positive.
template <typename Wrapping>
class Unwrapper {
 public:
  static constexpr int kBits = sizeof(Wrapping) * 8;

  uint64_t unwrap(Wrapping value) {
    if (!started_) {
      started_ = true;
      highest_ = (uint64_t{1} << (kBits + 16)) | value;
      return highest_;
    }
    using Signed = std::conditional_t<kBits == 16, int16_t, int32_t>;
    const auto delta =
        static_cast<Signed>(static_cast<Wrapping>(value - static_cast<Wrapping>(highest_)));
    const uint64_t extended = highest_ + static_cast<int64_t>(delta);
    if (delta > 0) highest_ = extended;
    return extended;
  }
  // What unwrap() would return, without moving the reference.
  uint64_t peek(Wrapping value) const {
    if (!started_) return (uint64_t{1} << (kBits + 16)) | value;
    using Signed = std::conditional_t<kBits == 16, int16_t, int32_t>;
    const auto delta =
        static_cast<Signed>(static_cast<Wrapping>(value - static_cast<Wrapping>(highest_)));
    return highest_ + static_cast<int64_t>(delta);
  }
  bool started() const { return started_; }
  uint64_t highest() const { return highest_; }

 private:
  uint64_t highest_ = 0;
  bool started_ = false;
};

using SequenceUnwrapper = Unwrapper<uint16_t>;
using TimestampUnwrapper = Unwrapper<uint32_t>;

}  // namespace syncd::jitter
