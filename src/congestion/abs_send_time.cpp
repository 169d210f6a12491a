#include "congestion/abs_send_time.h"

namespace syncd::congestion {

int64_t AbsSendTimeUnwrapper::unwrap_ns(uint32_t abs_send_time) {
  const uint32_t value = abs_send_time & kAbsSendTimeMask;
  if (!started_) {
    started_ = true;
    last_ = value;
    unwrapped_units_ = value;
    return abs_send_time_units_to_ns(unwrapped_units_);
  }
  // The step modulo 2^24, read as a signed 24-bit number: the nearest of the candidates.
  int64_t step = static_cast<int64_t>((value - last_) & kAbsSendTimeMask);
  if (step >= (int64_t{1} << 23)) step -= int64_t{1} << 24;
  unwrapped_units_ += step;
  last_ = value;
  return abs_send_time_units_to_ns(unwrapped_units_);
}

}  // namespace syncd::congestion
