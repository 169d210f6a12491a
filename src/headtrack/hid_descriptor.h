// HID report descriptor parser (HID 1.11 section 6.2.2): bytes in, a flat list of fields out.
//
// Pure code: no I/O, clocks or logs. It allocates while parsing (a descriptor is parsed once per
// device connection, never per report). Any thread may call parse_hid_descriptor(); the result is
// a plain value that may be shared read-only between threads.
//
// What it understands: every short item (main, global, local), long items (skipped), global state
// with push/pop, usage pages and extended 4-byte usages, usage minimum/maximum ranges, report IDs
// (inherited by later main items until changed), signed logical and physical ranges, and the unit
// exponent given either as a 4-bit nibble (HID 1.11 table) or as a signed byte (what many
// firmwares emit, e.g. 0xF8 for 10^-8).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace syncd::headtrack {

enum class ReportKind : uint8_t { kInput = 0, kOutput = 1, kFeature = 2 };

// Main item data bits (HID 1.11 section 6.2.2.5).
namespace main_flag {
inline constexpr uint32_t kConstant = 1u << 0;  // else Data
inline constexpr uint32_t kVariable = 1u << 1;  // else Array
inline constexpr uint32_t kRelative = 1u << 2;  // else Absolute
}  // namespace main_flag

// A full 32-bit usage: page in the high 16 bits, id in the low 16 bits.
constexpr uint32_t usage(uint16_t page, uint16_t id) {
  return (uint32_t{page} << 16) | id;
}

struct HidCollection {
  uint32_t usage = 0;   // full usage (page << 16 | id); 0 when the collection had none
  uint8_t type = 0;     // 0 physical, 1 application, 2 logical, ...
  int32_t parent = -1;  // index into ParsedDescriptor::collections, -1 at the top level
};

// One Input/Output/Feature main item: report_count values of report_size bits each, starting at
// bit_offset within the report payload (the payload excludes the report ID byte, when the device
// uses report IDs).
struct HidField {
  ReportKind kind = ReportKind::kInput;
  uint8_t report_id = 0;  // 0 when the descriptor declares no report IDs
  uint32_t flags = 0;     // main_flag bits
  uint32_t bit_offset = 0;
  uint32_t report_size = 0;  // bits per value
  uint32_t report_count = 0;
  int32_t logical_min = 0;
  int32_t logical_max = 0;
  int32_t physical_min = 0;  // equal to the logical range when the descriptor gave none (0..0)
  int32_t physical_max = 0;
  int8_t unit_exponent = 0;  // decimal exponent, already sign-decoded
  uint32_t unit = 0;
  int32_t collection = -1;  // innermost enclosing collection
  // Variable fields: one usage per value (the last one repeats, HID 1.11 section 6.2.2.8).
  // Array fields: the selector list; a value v selects usages[v - logical_min].
  std::vector<uint32_t> usages;

  bool is_constant() const { return flags & main_flag::kConstant; }
  bool is_array() const { return !(flags & main_flag::kVariable); }
  bool is_signed() const { return logical_min < 0; }
  uint32_t usage_at(uint32_t index) const {
    if (usages.empty()) return 0;
    return index < usages.size() ? usages[index] : usages.back();
  }
};

struct ParsedDescriptor {
  std::vector<HidField> fields;
  std::vector<HidCollection> collections;
  bool uses_report_ids = false;
  // Payload size in bits of each (kind, report id); index [kind][id].
  uint32_t report_bits[3][256] = {};

  // Bytes of the whole report as read from / written to hidraw: payload rounded up, plus the
  // report ID byte when the descriptor uses report IDs.
  size_t report_bytes(ReportKind kind, uint8_t report_id) const {
    const size_t payload = (report_bits[size_t(kind)][report_id] + 7) / 8;
    return payload + (uses_report_ids ? 1 : 0);
  }
  // True when collection `index` is `ancestor` or nested inside it.
  bool within(int32_t index, int32_t ancestor) const;
};

enum class DescriptorError : uint8_t {
  kNone = 0,
  kTruncatedItem,    // an item's data runs past the end
  kPopUnderflow,     // Pop without a matching Push
  kPushOverflow,     // more than kMaxPushDepth nested Push items
  kCollectionDepth,  // End Collection without Collection, or nesting too deep
  kBadReportId,      // Report ID 0 (reserved)
  kBadReportSize,    // Report Size above 32 bits on a value field, or a report over 64 KiB
  kTooManyFields,    // runaway descriptor (limits memory the parser will use)
  kTooManyUsages,
};

const char* to_string(DescriptorError error);

struct ParseResult {
  DescriptorError error = DescriptorError::kNone;
  size_t error_offset = 0;  // byte offset of the offending item
  bool ok() const { return error == DescriptorError::kNone; }
};

// Parses `bytes` into `out` (cleared first). On error `out` holds what was parsed before it.
// Never throws; memory use is bounded by the limits below whatever the input.
ParseResult parse_hid_descriptor(std::span<const uint8_t> bytes, ParsedDescriptor& out);

inline constexpr size_t kMaxPushDepth = 16;
inline constexpr size_t kMaxCollectionDepth = 32;
inline constexpr size_t kMaxFields = 1024;
inline constexpr size_t kMaxUsagesPerField = 4096;

// Signed decimal exponent from a Unit Exponent item's raw data: a 1-byte value 0x0..0xF is the
// HID nibble encoding (0x8..0xF mean -8..-1); any other 1-byte value is read as a signed byte
// (0xF8 = -8); 2- and 4-byte values are read as signed integers and clamped to [-128, 127].
int8_t decode_unit_exponent(uint32_t raw, uint8_t size_bytes);

// "hidraw"-style hex dump helpers shared by the tools and the replay format.
std::string to_hex(std::span<const uint8_t> bytes, char separator = ' ');
// Parses hex digits, ignoring spaces, tabs, commas and "0x" prefixes. False on any other char
// or an odd digit count.
bool parse_hex(std::string_view text, std::vector<uint8_t>& out);

}  // namespace syncd::headtrack
