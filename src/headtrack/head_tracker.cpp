#include "headtrack/head_tracker.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>

namespace syncd::headtrack {
namespace {

ValueLocation location_of(const HidField& f, uint32_t index) {
  ValueLocation v;
  v.report_id = f.report_id;
  v.bit_offset = f.bit_offset + index * f.report_size;
  v.bit_size = uint8_t(f.report_size);
  v.logical_min = f.logical_min;
  v.logical_max = f.logical_max;
  v.physical_min = f.physical_min;
  v.physical_max = f.physical_max;
  v.unit_exponent = f.unit_exponent;
  return v;
}

bool value_sized(const HidField& f) {
  return f.report_size >= 1 && f.report_size <= 32;
}

// Variable input with `u` as its usage for `count` consecutive values; returns the index of the
// first such value in the field, or -1.
int find_values(const HidField& f, uint32_t u, uint32_t count) {
  if (f.is_array() || !value_sized(f) || f.report_count < count) return -1;
  for (uint32_t i = 0; i + count <= f.report_count; ++i) {
    bool all = true;
    for (uint32_t k = 0; k < count && all; ++k) all = f.usage_at(i + k) == u;
    if (all) return int(i);
  }
  return -1;
}

}  // namespace

int64_t SelectorLocation::value_for(uint32_t selector_usage) const {
  for (size_t i = 0; i < selectors.size(); ++i) {
    if (selectors[i] == selector_usage) return int64_t(value.logical_min) + int64_t(i);
  }
  return -1;
}

std::vector<uint8_t> TrackerLayout::control_report_ids() const {
  std::vector<uint8_t> ids;
  auto add = [&](bool present, uint8_t id) {
    if (present && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  add(reporting_state.present, reporting_state.value.report_id);
  add(power_state.present, power_state.value.report_id);
  add(transport.present, transport.value.report_id);
  add(has_interval, interval.report_id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

int TrackerLayout::version_hint() const {
  if (!description.present) return 0;
  if (description.length == 23) return 1;
  if (description.length == 25) return 2;
  return 0;
}

bool recognize_head_tracker(const ParsedDescriptor& parsed, TrackerLayout& out, const char** why) {
  const char* unused;
  if (!why) why = &unused;
  out = TrackerLayout{};
  out.uses_report_ids = parsed.uses_report_ids;

  bool any_app = false;
  for (size_t c = 0; c < parsed.collections.size(); ++c) {
    const HidCollection& col = parsed.collections[c];
    if (col.type != 1 || col.usage != ht_usage::kOtherCustom) continue;
    any_app = true;
    const int32_t app = int32_t(c);

    // The rotation vector decides which input report is the tracker's.
    bool found_rotation = false;
    for (const HidField& f : parsed.fields) {
      if (f.kind != ReportKind::kInput || !parsed.within(f.collection, app)) continue;
      const int i = find_values(f, ht_usage::kRotationVector, 3);
      if (i < 0) continue;
      for (int k = 0; k < 3; ++k) out.rotation[k] = location_of(f, uint32_t(i + k));
      out.input_report_id = f.report_id;
      found_rotation = true;
      break;
    }
    if (!found_rotation) continue;
    out.input_report_bytes = parsed.report_bytes(ReportKind::kInput, out.input_report_id);

    for (const HidField& f : parsed.fields) {
      if (!parsed.within(f.collection, app)) continue;
      if (f.kind == ReportKind::kInput) {
        if (f.report_id != out.input_report_id) continue;
        if (!out.has_angular_velocity) {
          const int i = find_values(f, ht_usage::kAngularVelocity, 3);
          if (i >= 0) {
            for (int k = 0; k < 3; ++k) out.angular_velocity[k] = location_of(f, uint32_t(i + k));
            out.has_angular_velocity = true;
          }
        }
        if (!out.has_counter) {
          const int i = find_values(f, ht_usage::kDiscontinuityCounter, 1);
          if (i >= 0) {
            out.counter = location_of(f, uint32_t(i));
            out.has_counter = true;
          }
        }
        continue;
      }
      if (f.kind != ReportKind::kFeature) continue;
      if (!f.is_array()) {
        // Byte strings: one usage for the whole run of 8-bit values.
        if (f.report_size == 8 && f.bit_offset % 8 == 0) {
          ByteRange* target = nullptr;
          if (f.usage_at(0) == ht_usage::kSensorDescription) target = &out.description;
          if (f.usage_at(0) == ht_usage::kPersistentUniqueId) target = &out.unique_id;
          if (target && !target->present) {
            *target = ByteRange{true, f.report_id, f.bit_offset / 8, f.report_count};
            continue;
          }
        }
        const int i = find_values(f, ht_usage::kReportInterval, 1);
        if (i >= 0 && !out.has_interval) {
          out.interval = location_of(f, uint32_t(i));
          out.has_interval = true;
        }
        continue;
      }
      // Array properties: a collection (or the field itself) names the property; the field's
      // usages are its selectors.
      if (f.usages.empty() || !value_sized(f)) continue;
      // The first such field names the property; later ones are ignored. (By reference, not a
      // pointer that may be null: GCC 12's -Wstringop-overflow misread that form under TSan.)
      auto take = [&f](SelectorLocation& target) {
        if (target.present) return;
        target.present = true;
        target.value = location_of(f, 0);
        target.selectors = f.usages;
      };
      const uint32_t first = f.usages.front();
      if (first == ht_usage::kReportingNoEvents || first == ht_usage::kReportingAllEvents) {
        take(out.reporting_state);
      } else if (first == ht_usage::kPowerFull || first == ht_usage::kPowerOff) {
        take(out.power_state);
      } else if (first == ht_usage::kTransportAcl || first == ht_usage::kTransportIso) {
        take(out.transport);
      }
    }
    for (int id = 0; id < 256; ++id) {
      out.feature_report_bytes[id] = parsed.report_bits[size_t(ReportKind::kFeature)][id]
                                         ? parsed.report_bytes(ReportKind::kFeature, uint8_t(id))
                                         : 0;
    }
    *why = "ok";
    return true;
  }
  *why = any_app ? "sensor collection has no 3-value rotation vector input (usage 0x20:0544)"
                 : "no application collection with usage Sensors/Other:Custom (0x20:0xE1)";
  return false;
}

bool parse_sensor_description(std::span<const uint8_t> text, SensorDescription& out) {
  std::string_view s(reinterpret_cast<const char*>(text.data()), text.size());
  while (!s.empty() && s.back() == '\0') s.remove_suffix(1);
  constexpr std::string_view kPrefix = "#AndroidHeadTracker#";
  if (s.substr(0, kPrefix.size()) != kPrefix) return false;
  s.remove_prefix(kPrefix.size());
  if (s.size() < 2 || (s[0] != '1' && s[0] != '2') || s[1] != '.') return false;
  out = SensorDescription{};
  out.major = s[0] - '0';
  s.remove_prefix(2);
  while (!s.empty() && s[0] >= '0' && s[0] <= '9') {
    out.minor = std::min(out.minor * 10 + (s[0] - '0'), 1000);
    s.remove_prefix(1);
  }
  if (out.major == 2 && s.size() >= 2 && s[0] == '#' && s[1] >= '1' && s[1] <= '3') {
    out.transports = s[1] - '0';
  }
  return true;
}

std::span<const uint8_t> description_bytes(const TrackerLayout& layout,
                                           std::span<const uint8_t> feature_report) {
  if (!layout.description.present) return {};
  const size_t start = (layout.uses_report_ids ? 1 : 0) + layout.description.byte_offset;
  if (feature_report.size() < start) return {};
  const size_t n = std::min<size_t>(layout.description.length, feature_report.size() - start);
  return feature_report.subspan(start, n);
}

int64_t interval_to_raw(const ValueLocation& v, double seconds) {
  const double scale = std::pow(10.0, v.unit_exponent);
  const double prange = double(v.physical_max) - double(v.physical_min);
  const double lrange = double(v.logical_max) - double(v.logical_min);
  double raw = v.logical_min;
  if (prange != 0 && std::isfinite(seconds)) {
    raw = std::round((seconds / scale - v.physical_min) * lrange / prange + v.logical_min);
  }
  const double lo = std::min<double>(v.logical_min, v.logical_max);
  const double hi = std::max<double>(v.logical_min, v.logical_max);
  return int64_t(std::clamp(raw, lo, hi));
}

void insert_bits(std::span<uint8_t> payload, uint32_t bit_offset, uint32_t bit_size,
                 uint64_t value) {
  for (uint32_t done = 0; done < bit_size;) {
    const uint32_t bit = bit_offset + done;
    const size_t byte = bit / 8;
    if (byte >= payload.size()) return;
    const uint32_t shift = bit % 8;
    const uint32_t take = std::min(8 - shift, bit_size - done);
    const uint8_t mask = uint8_t(((1u << take) - 1) << shift);
    const uint8_t bits = uint8_t(((value >> done) << shift) & mask);
    payload[byte] = uint8_t((payload[byte] & ~mask) | bits);
    done += take;
  }
}

namespace {

std::span<uint8_t> payload_of(const TrackerLayout& layout, std::span<uint8_t> report, uint8_t* id) {
  if (layout.uses_report_ids) {
    if (report.empty()) return {};
    *id = report[0];
    return report.subspan(1);
  }
  *id = 0;
  return report;
}

bool set_selector(const SelectorLocation& s, uint8_t id, std::span<uint8_t> payload,
                  uint32_t wanted) {
  if (!s.present || s.value.report_id != id) return false;
  const int64_t v = s.value_for(wanted);
  if (v < 0) return false;
  if ((s.value.bit_offset + s.value.bit_size + 7) / 8 > payload.size()) return false;
  insert_bits(payload, s.value.bit_offset, s.value.bit_size, uint64_t(v));
  return true;
}

}  // namespace

bool apply_enable(const TrackerLayout& layout, std::span<uint8_t> report, double interval_s) {
  uint8_t id = 0;
  std::span<uint8_t> payload = payload_of(layout, report, &id);
  bool any = false;
  any |= set_selector(layout.transport, id, payload, ht_usage::kTransportAcl);
  any |= set_selector(layout.power_state, id, payload, ht_usage::kPowerFull);
  any |= set_selector(layout.reporting_state, id, payload, ht_usage::kReportingAllEvents);
  const ValueLocation& iv = layout.interval;
  if (layout.has_interval && iv.report_id == id &&
      (iv.bit_offset + iv.bit_size + 7) / 8 <= payload.size()) {
    insert_bits(payload, iv.bit_offset, iv.bit_size, uint64_t(interval_to_raw(iv, interval_s)));
    any = true;
  }
  return any;
}

bool apply_disable(const TrackerLayout& layout, std::span<uint8_t> report) {
  uint8_t id = 0;
  std::span<uint8_t> payload = payload_of(layout, report, &id);
  bool any = false;
  any |= set_selector(layout.reporting_state, id, payload, ht_usage::kReportingNoEvents);
  any |= set_selector(layout.power_state, id, payload, ht_usage::kPowerOff);
  return any;
}

}  // namespace syncd::headtrack
