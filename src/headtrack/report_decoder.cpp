#include "headtrack/report_decoder.h"

#include <bit>
#include <cmath>
#include <cstring>

namespace syncd::headtrack {
namespace {

static_assert(std::endian::native == std::endian::little,
              "extract_bits loads HID's little-endian payload with memcpy; add a byte swap for "
              "big-endian hosts");

// 10^e for the exponents a HID descriptor can carry, filled with the same std::pow call the
// reference uses so that the cached factor is bit-identical to computing it per value.
struct Pow10Table {
  double v[256];
  Pow10Table() {
    for (int e = -128; e < 128; ++e) v[e + 128] = std::pow(10.0, e);
  }
};
const Pow10Table& pow10_table() {
  static const Pow10Table table;
  return table;
}

int64_t sign_extend(uint32_t raw, uint32_t bits) {
  if (bits >= 32) return int32_t(raw);
  const uint32_t sign = 1u << (bits - 1);
  return int64_t(int32_t((raw ^ sign) - sign));
}

}  // namespace

const char* to_string(DecodeStatus status) {
  switch (status) {
    case DecodeStatus::kOk:
      return "ok";
    case DecodeStatus::kOtherReport:
      return "other report id";
    case DecodeStatus::kTooShort:
      return "report too short";
    case DecodeStatus::kOutOfRange:
      return "value out of logical range";
  }
  return "unknown";
}

uint32_t extract_bits(const uint8_t* data, size_t size, uint32_t bit_offset, uint32_t bit_size) {
  const size_t byte = bit_offset / 8;
  uint64_t word = 0;
  if (byte + 8 <= size) {
    std::memcpy(&word, data + byte, 8);
  } else if (byte < size) {
    std::memcpy(&word, data + byte, size - byte);
  }
  const uint64_t mask = bit_size >= 32 ? 0xffffffffull : ((1ull << bit_size) - 1);
  return uint32_t((word >> (bit_offset % 8)) & mask);
}

double scale_value(const ValueLocation& v, int64_t logical) {
  const double pow10 = pow10_table().v[v.unit_exponent + 128];
  const double lrange = double(int64_t(v.logical_max) - v.logical_min);
  const double prange = double(int64_t(v.physical_max) - v.physical_min);
  if (lrange == 0) return double(v.physical_min) * pow10;
  return (double(v.physical_min) + double(logical - v.logical_min) * prange / lrange) * pow10;
}

ReportDecoder::Slot ReportDecoder::make_slot(const ValueLocation& v) {
  Slot s;
  s.byte_offset = v.bit_offset / 8;
  s.shift = uint8_t(v.bit_offset % 8);
  s.bits = v.bit_size;
  s.is_signed = v.is_signed();
  s.mask = v.bit_size >= 32 ? 0xffffffffu : ((1u << v.bit_size) - 1);
  s.logical_min = v.logical_min;
  s.logical_max = v.logical_max;
  s.physical_min = double(v.physical_min);
  s.physical_range = double(int64_t(v.physical_max) - v.physical_min);
  s.logical_range = double(int64_t(v.logical_max) - v.logical_min);
  s.pow10 = pow10_table().v[v.unit_exponent + 128];
  return s;
}

ReportDecoder::ReportDecoder(const TrackerLayout& layout) {
  uses_report_ids_ = layout.uses_report_ids;
  report_id_ = layout.input_report_id;
  report_bytes_ = layout.input_report_bytes;
  for (int k = 0; k < 3; ++k) slots_[k] = make_slot(layout.rotation[k]);
  has_gyro_ = layout.has_angular_velocity;
  if (has_gyro_) {
    for (int k = 0; k < 3; ++k) slots_[3 + k] = make_slot(layout.angular_velocity[k]);
  }
  has_counter_ = layout.has_counter;
  if (has_counter_) slots_[6] = make_slot(layout.counter);
  valid_ = layout.rotation[0].bit_size != 0;
}

inline bool ReportDecoder::read_slot(const Slot& s, const uint8_t* payload, size_t size,
                                     int64_t* logical) const {
  uint64_t word = 0;
  if (s.byte_offset + 8 <= size) {
    std::memcpy(&word, payload + s.byte_offset, 8);
  } else if (s.byte_offset < size) {
    std::memcpy(&word, payload + s.byte_offset, size - s.byte_offset);
  }
  const uint32_t raw = uint32_t(word >> s.shift) & s.mask;
  const int64_t v = s.is_signed ? sign_extend(raw, s.bits) : int64_t(raw);
  *logical = v;
  return v >= s.logical_min && v <= s.logical_max;
}

inline double ReportDecoder::scale(const Slot& s, int64_t logical) {
  if (s.logical_range == 0) return s.physical_min * s.pow10;
  return (s.physical_min + double(logical - s.logical_min) * s.physical_range / s.logical_range) *
         s.pow10;
}

DecodeStatus ReportDecoder::decode(std::span<const uint8_t> report, TrackerSample& out) {
  if (!valid_ || report.empty()) {
    ++counters_.too_short;
    return DecodeStatus::kTooShort;
  }
  const uint8_t* payload = report.data();
  size_t size = report.size();
  if (uses_report_ids_) {
    if (report[0] != report_id_) {
      ++counters_.other_report;
      return DecodeStatus::kOtherReport;
    }
    ++payload;
    --size;
  }
  if (report.size() < report_bytes_) {
    ++counters_.too_short;
    return DecodeStatus::kTooShort;
  }
  int64_t logical[7];
  bool in_range = true;
  const int n = has_counter_ ? 7 : (has_gyro_ ? 6 : 3);
  for (int k = 0; k < n; ++k) {
    if (k >= 3 && k < 6 && !has_gyro_) continue;
    in_range &= read_slot(slots_[k], payload, size, &logical[k]);
  }
  if (!in_range) {
    ++counters_.out_of_range;
    return DecodeStatus::kOutOfRange;
  }
  for (int k = 0; k < 3; ++k) out.rotation[k] = scale(slots_[k], logical[k]);
  out.has_angular_velocity = has_gyro_;
  for (int k = 0; k < 3; ++k) {
    out.angular_velocity[k] = has_gyro_ ? scale(slots_[3 + k], logical[3 + k]) : 0.0;
  }
  out.has_counter = has_counter_;
  out.counter = has_counter_ ? uint32_t(logical[6]) : 0;
  ++counters_.ok;
  return DecodeStatus::kOk;
}

}  // namespace syncd::headtrack
