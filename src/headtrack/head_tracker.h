// Android head-tracker HID sensor (source.android.com, "Head tracker HID protocol"): finding the
// sensor in a parsed descriptor, reading its description string, and building the feature
// reports that switch it on and off.
//
// Pure code: no I/O. Every offset, size, report ID and scale comes from the device's own
// descriptor; nothing here hard-codes the reference layout. Functions are thread-safe (they only
// touch their arguments); a TrackerLayout is a plain value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "headtrack/hid_descriptor.h"

namespace syncd::headtrack {

// Usages on the Sensors page (0x20) that the protocol uses (see docs/headtracker.md).
namespace ht_usage {
inline constexpr uint16_t kSensorsPage = 0x20;
inline constexpr uint32_t kOtherCustom = usage(0x20, 0x00E1);
inline constexpr uint32_t kRotationVector = usage(0x20, 0x0544);
inline constexpr uint32_t kAngularVelocity = usage(0x20, 0x0545);
inline constexpr uint32_t kDiscontinuityCounter = usage(0x20, 0x0546);
inline constexpr uint32_t kSensorDescription = usage(0x20, 0x0308);
inline constexpr uint32_t kPersistentUniqueId = usage(0x20, 0x0302);
inline constexpr uint32_t kReportingState = usage(0x20, 0x0316);
inline constexpr uint32_t kReportingNoEvents = usage(0x20, 0x0840);
inline constexpr uint32_t kReportingAllEvents = usage(0x20, 0x0841);
inline constexpr uint32_t kPowerState = usage(0x20, 0x0319);
inline constexpr uint32_t kPowerFull = usage(0x20, 0x0851);
inline constexpr uint32_t kPowerOff = usage(0x20, 0x0855);
inline constexpr uint32_t kReportInterval = usage(0x20, 0x030E);
inline constexpr uint32_t kTransport = usage(0x20, 0xF410);
inline constexpr uint32_t kTransportAcl = usage(0x20, 0xF800);
inline constexpr uint32_t kTransportIso = usage(0x20, 0xF801);
}  // namespace ht_usage

// Where one scalar lives in its report and how to scale it:
// v = (pmin + (raw - lmin) * (pmax - pmin) / (lmax - lmin)) * 10^exp.
struct ValueLocation {
  uint8_t report_id = 0;
  uint32_t bit_offset = 0;  // within the payload (after the report ID byte, if any)
  uint8_t bit_size = 0;     // 1..32
  int32_t logical_min = 0;
  int32_t logical_max = 0;
  int32_t physical_min = 0;
  int32_t physical_max = 0;
  int8_t unit_exponent = 0;
  bool is_signed() const { return logical_min < 0; }
};

// An array (selector) property such as the power state: the value written is
// logical_min + index of the wanted selector in `selectors`.
struct SelectorLocation {
  bool present = false;
  ValueLocation value;
  std::vector<uint32_t> selectors;
  // logical value selecting `selector_usage`, or -1 when the list lacks it.
  int64_t value_for(uint32_t selector_usage) const;
};

struct ByteRange {
  bool present = false;
  uint8_t report_id = 0;
  uint32_t byte_offset = 0;  // within the payload
  uint32_t length = 0;
};

struct TrackerLayout {
  bool uses_report_ids = false;
  uint8_t input_report_id = 0;
  size_t input_report_bytes = 0;  // including the ID byte when uses_report_ids
  ValueLocation rotation[3];
  bool has_angular_velocity = false;
  ValueLocation angular_velocity[3];
  bool has_counter = false;
  ValueLocation counter;

  ByteRange description;  // Sensor Description string (feature)
  ByteRange unique_id;    // Persistent Unique ID (feature, optional)
  SelectorLocation reporting_state;
  SelectorLocation power_state;
  SelectorLocation transport;  // v2 only
  bool has_interval = false;
  ValueLocation interval;
  // Feature report sizes by ID (including the ID byte when uses_report_ids), for HIDIOCGFEATURE.
  size_t feature_report_bytes[256] = {};

  // Distinct feature report IDs holding reporting/power/interval/transport, ascending.
  std::vector<uint8_t> control_report_ids() const;
  // 1 or 2 from the description field's length (23 or 25 bytes); 0 when it says nothing.
  int version_hint() const;
};

// Finds the head tracker in `parsed`: an Application collection with usage Sensors/Other:Custom
// holding a 3-value rotation-vector input. On failure returns false and sets *why to a static
// sentence naming what was missing.
bool recognize_head_tracker(const ParsedDescriptor& parsed, TrackerLayout& out, const char** why);

struct SensorDescription {
  int major = 0;  // 1 or 2
  int minor = 0;
  // v2 "#x" suffix: 1 ACL, 2 ISO, 3 both; 0 when absent (v1 means ACL).
  int transports = 0;
};

// Accepts "#AndroidHeadTracker#1.<minor>" and "#AndroidHeadTracker#2.<minor>[#x]", ignoring
// trailing NULs. False for anything else (other custom sensors).
bool parse_sensor_description(std::span<const uint8_t> text, SensorDescription& out);

// Extracts the description bytes from a feature report read with HIDIOCGFEATURE (byte 0 = ID).
std::span<const uint8_t> description_bytes(const TrackerLayout& layout,
                                           std::span<const uint8_t> feature_report);

// Raw interval value for `seconds`:
// raw = round((seconds / 10^exp - pmin) * (lmax - lmin) / (pmax - pmin) + lmin), clamped.
int64_t interval_to_raw(const ValueLocation& interval, double seconds);

// Read-modify-write builders. `report` is the current content of one control feature report as
// read from the device (byte 0 = report ID when the layout uses IDs); the fields of that report
// are updated in place and every other bit is preserved. They return false when the report is too
// short or holds none of the controls.
//   enable:  transport = ACL (v2), power = full, reporting = all events, interval = interval_s.
//   disable: reporting = no events, power = off (interval and transport kept as they were).
bool apply_enable(const TrackerLayout& layout, std::span<uint8_t> report, double interval_s);
bool apply_disable(const TrackerLayout& layout, std::span<uint8_t> report);

// Bit helpers on a little-endian HID payload (HID 1.11 section 5.8). insert_bits writes the low
// bit_size bits of value; bits beyond `payload` are dropped.
void insert_bits(std::span<uint8_t> payload, uint32_t bit_offset, uint32_t bit_size,
                 uint64_t value);

}  // namespace syncd::headtrack
