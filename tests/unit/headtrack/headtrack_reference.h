// Straightforward reference implementations for the equivalence gates: a per-bit extractor, a
// decoder that computes everything per value (std::pow included) with no caching, and a
// snprintf-based JSON serializer. Used by the unit tests, the fuzzers and the benchmark; never by
// production code.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <span>
#include <string>

#include "headtrack/head_tracker.h"
#include "headtrack/output.h"
#include "headtrack/report_decoder.h"

namespace syncd::headtrack::reference {

inline uint32_t extract_bits_per_bit(const uint8_t* data, size_t size, uint32_t offset,
                                     uint32_t bits) {
  uint32_t v = 0;
  for (uint32_t i = 0; i < bits; ++i) {
    const uint32_t bit = offset + i;
    const uint32_t byte = bit / 8;
    const uint32_t b = byte < size ? (data[byte] >> (bit % 8)) & 1u : 0u;
    v |= b << i;
  }
  return v;
}

inline int64_t logical_of(const ValueLocation& v, const uint8_t* payload, size_t size) {
  const uint32_t raw = extract_bits_per_bit(payload, size, v.bit_offset, v.bit_size);
  if (v.is_signed() && v.bit_size < 32 && (raw >> (v.bit_size - 1)) & 1u) {
    return int64_t(raw) - (int64_t(1) << v.bit_size);
  }
  if (v.is_signed() && v.bit_size == 32) return int32_t(raw);
  return raw;
}

inline double scale(const ValueLocation& v, int64_t logical) {
  const double pow10 = std::pow(10.0, v.unit_exponent);
  const double lrange = double(int64_t(v.logical_max) - v.logical_min);
  const double prange = double(int64_t(v.physical_max) - v.physical_min);
  if (lrange == 0) return double(v.physical_min) * pow10;
  return (double(v.physical_min) + double(logical - v.logical_min) * prange / lrange) * pow10;
}

inline DecodeStatus decode(const TrackerLayout& l, std::span<const uint8_t> report,
                           TrackerSample& out) {
  if (report.empty()) return DecodeStatus::kTooShort;
  const uint8_t* payload = report.data();
  size_t size = report.size();
  if (l.uses_report_ids) {
    if (report[0] != l.input_report_id) return DecodeStatus::kOtherReport;
    ++payload;
    --size;
  }
  if (report.size() < l.input_report_bytes) return DecodeStatus::kTooShort;
  int64_t rot[3], gyro[3] = {}, counter = 0;
  auto in_range = [](const ValueLocation& v, int64_t x) {
    return x >= v.logical_min && x <= v.logical_max;
  };
  bool ok = true;
  for (int k = 0; k < 3; ++k) {
    rot[k] = logical_of(l.rotation[k], payload, size);
    ok = ok && in_range(l.rotation[k], rot[k]);
  }
  if (l.has_angular_velocity) {
    for (int k = 0; k < 3; ++k) {
      gyro[k] = logical_of(l.angular_velocity[k], payload, size);
      ok = ok && in_range(l.angular_velocity[k], gyro[k]);
    }
  }
  if (l.has_counter) {
    counter = logical_of(l.counter, payload, size);
    ok = ok && in_range(l.counter, counter);
  }
  if (!ok) return DecodeStatus::kOutOfRange;
  for (int k = 0; k < 3; ++k) out.rotation[k] = scale(l.rotation[k], rot[k]);
  out.has_angular_velocity = l.has_angular_velocity;
  for (int k = 0; k < 3; ++k) {
    out.angular_velocity[k] = l.has_angular_velocity ? scale(l.angular_velocity[k], gyro[k]) : 0;
  }
  out.has_counter = l.has_counter;
  out.counter = uint32_t(counter);
  return DecodeStatus::kOk;
}

// A random but well-formed layout: values anywhere in a report of up to 24 payload bytes.
template <typename Rng>
ValueLocation random_value(Rng& rng, uint32_t payload_bits) {
  ValueLocation v;
  v.bit_size = uint8_t(1 + rng() % 32);
  v.bit_offset = uint32_t(rng() % (payload_bits - v.bit_size + 1));
  const bool is_signed = v.bit_size > 1 && rng() % 2;
  const int64_t span = v.bit_size >= 31 ? INT32_MAX : (int64_t(1) << (v.bit_size - 1)) - 1;
  if (is_signed) {
    v.logical_min = -int32_t(1 + rng() % uint64_t(span));
    v.logical_max = int32_t(rng() % uint64_t(span + 1));
  } else {
    const int64_t umax = v.bit_size >= 31 ? INT32_MAX : (int64_t(1) << v.bit_size) - 1;
    v.logical_min = int32_t(rng() % uint64_t(umax / 2 + 1));
    v.logical_max = int32_t(v.logical_min + int64_t(rng() % uint64_t(umax - v.logical_min + 1)));
  }
  v.physical_min = int32_t(rng());
  v.physical_max = int32_t(rng());
  v.unit_exponent = int8_t(int(rng() % 16) - 8);
  return v;
}

template <typename Rng>
TrackerLayout random_layout(Rng& rng) {
  TrackerLayout l;
  l.uses_report_ids = true;
  l.input_report_id = uint8_t(1 + rng() % 255);
  const uint32_t payload_bytes = 4 + rng() % 21;
  l.input_report_bytes = payload_bytes + 1;
  for (auto& v : l.rotation) v = random_value(rng, payload_bytes * 8);
  l.has_angular_velocity = rng() % 2;
  if (l.has_angular_velocity) {
    for (auto& v : l.angular_velocity) v = random_value(rng, payload_bytes * 8);
  }
  l.has_counter = rng() % 2;
  if (l.has_counter) l.counter = random_value(rng, payload_bytes * 8);
  return l;
}

// printf-based serializer: the byte-for-byte reference for TelemetryJson.
inline std::string json(const TelemetrySample& s) {
  std::string out;
  char buf[160];
  auto g9 = [&](double v) {
    if (!std::isfinite(v)) {
      out += "null";
      return;
    }
    std::snprintf(buf, sizeof(buf), "%.9g", v);
    out += buf;
  };
  auto vec = [&](const double* v, int n) {
    out += '[';
    for (int i = 0; i < n; ++i) {
      if (i) out += ',';
      g9(v[i]);
    }
    out += ']';
  };
  out += "{\"version\":2,\"device\":";
  if (s.device.empty()) {
    out += "null";
  } else {
    out += '"';
    std::string_view d = s.device;
    if (d.size() > TelemetryJson::kMaxDeviceBytes) {
      size_t n = TelemetryJson::kMaxDeviceBytes;
      while (n > 0 && (uint8_t(d[n]) & 0xC0) == 0x80) --n;
      d = d.substr(0, n);
    }
    for (unsigned char c : d) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += char(c);
      } else if (c < 0x20) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", c);
        out += buf;
      } else {
        out += char(c);
      }
    }
    out += '"';
  }
  out += ",\"rotationVector\":";
  vec(s.rotation_vector, 3);
  out += ",\"quaternion\":";
  const double q[4] = {s.quaternion.w, s.quaternion.x, s.quaternion.y, s.quaternion.z};
  vec(q, 4);
  out += ",\"yprDegrees\":";
  vec(s.ypr_deg, 3);
  out += ",\"gyroscope\":";
  if (s.gyroscope)
    vec(s.gyroscope, 3);
  else
    out += "null";
  std::snprintf(buf, sizeof(buf), ",\"resetCounter\":%u", s.reset_counter);
  out += buf;
  out += ",\"packetsPerSecond\":";
  if (std::isfinite(s.packets_per_second)) {
    std::snprintf(buf, sizeof(buf), "%.3f", s.packets_per_second);
    out += buf;
  } else {
    out += "null";
  }
  std::snprintf(buf, sizeof(buf), ",\"discontinuityCount\":%llu,\"seq\":%llu,\"timestampNs\":%llu}",
                (unsigned long long)s.discontinuity_count, (unsigned long long)s.seq,
                (unsigned long long)s.timestamp_ns);
  out += buf;
  return out;
}

}  // namespace syncd::headtrack::reference
