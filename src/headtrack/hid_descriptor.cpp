#include "headtrack/hid_descriptor.h"

#include <algorithm>

namespace syncd::headtrack {
namespace {

// Global items (HID 1.11 section 6.2.2.7). Maxima are kept raw because whether they are signed
// depends on the matching minimum, known only when the main item arrives.
struct GlobalState {
  uint16_t usage_page = 0;
  int32_t logical_min = 0;
  uint32_t logical_max_raw = 0;
  uint8_t logical_max_size = 0;
  int32_t physical_min = 0;
  uint32_t physical_max_raw = 0;
  uint8_t physical_max_size = 0;
  int8_t unit_exponent = 0;
  uint32_t unit = 0;
  uint32_t report_size = 0;
  uint32_t report_count = 0;
  uint8_t report_id = 0;
};

// A local usage item. Short (1/2-byte) usages take their page from the global Usage Page in
// effect when the main item is reached (what the Linux HID core does); 4-byte usages carry it.
struct LocalUsage {
  uint32_t value = 0;
  bool extended = false;
};

struct LocalState {
  std::vector<LocalUsage> usages;
  bool have_min = false;
  bool have_max = false;
  LocalUsage usage_min;
  LocalUsage usage_max;
  void clear() {
    usages.clear();
    have_min = have_max = false;
  }
};

int32_t signed_value(uint32_t raw, uint8_t size) {
  switch (size) {
    case 1:
      return int8_t(raw & 0xff);
    case 2:
      return int16_t(raw & 0xffff);
    case 4:
      return int32_t(raw);
    default:
      return 0;
  }
}

// Linux HID core rule (drivers/hid/hid-core.c): a maximum is signed when its minimum is negative,
// otherwise unsigned. This is what makes "Logical Minimum 0, Logical Maximum 0xFF" mean 255.
int32_t resolve_max(int32_t min, uint32_t raw, uint8_t size) {
  if (min < 0) return signed_value(raw, size);
  return int32_t(std::min<uint32_t>(raw, INT32_MAX));
}

uint32_t resolve_usage(const LocalUsage& u, uint16_t page) {
  return u.extended ? u.value : usage(page, uint16_t(u.value));
}

}  // namespace

const char* to_string(DescriptorError error) {
  switch (error) {
    case DescriptorError::kNone:
      return "ok";
    case DescriptorError::kTruncatedItem:
      return "item runs past the end of the descriptor";
    case DescriptorError::kPopUnderflow:
      return "Pop without Push";
    case DescriptorError::kPushOverflow:
      return "Push nested too deep";
    case DescriptorError::kCollectionDepth:
      return "unbalanced or too deeply nested collections";
    case DescriptorError::kBadReportId:
      return "Report ID 0 is reserved";
    case DescriptorError::kBadReportSize:
      return "report larger than 64 KiB";
    case DescriptorError::kTooManyFields:
      return "too many main items";
    case DescriptorError::kTooManyUsages:
      return "usage range too large";
  }
  return "unknown";
}

int8_t decode_unit_exponent(uint32_t raw, uint8_t size_bytes) {
  if (size_bytes == 1) {
    if (raw <= 0x7) return int8_t(raw);
    if (raw <= 0xF) return int8_t(int(raw) - 16);
    return int8_t(raw & 0xff);
  }
  const int32_t v = signed_value(raw, size_bytes);
  return int8_t(std::clamp(v, -128, 127));
}

bool ParsedDescriptor::within(int32_t index, int32_t ancestor) const {
  for (int guard = 0; index >= 0 && guard < int(kMaxCollectionDepth) + 1; ++guard) {
    if (index == ancestor) return true;
    if (size_t(index) >= collections.size()) return false;
    index = collections[size_t(index)].parent;
  }
  return false;
}

ParseResult parse_hid_descriptor(std::span<const uint8_t> bytes, ParsedDescriptor& out) {
  out.fields.clear();
  out.collections.clear();
  out.uses_report_ids = false;
  std::fill(&out.report_bits[0][0], &out.report_bits[0][0] + 3 * 256, 0u);

  GlobalState global;
  std::vector<GlobalState> stack;
  LocalState local;
  std::vector<int32_t> open;  // indices of the open collections, innermost last

  auto fail = [](DescriptorError e, size_t at) { return ParseResult{e, at}; };

  size_t pos = 0;
  while (pos < bytes.size()) {
    const size_t item_at = pos;
    const uint8_t prefix = bytes[pos++];
    if (prefix == 0xFE) {  // long item: bDataSize, bLongItemTag, data (HID 1.11 section 6.2.2.3)
      if (pos + 2 > bytes.size()) return fail(DescriptorError::kTruncatedItem, item_at);
      const size_t size = bytes[pos];
      pos += 2;
      if (pos + size > bytes.size()) return fail(DescriptorError::kTruncatedItem, item_at);
      pos += size;
      continue;
    }
    const uint8_t size = (prefix & 3) == 3 ? 4 : (prefix & 3);
    const uint8_t type = (prefix >> 2) & 3;
    const uint8_t tag = prefix >> 4;
    if (pos + size > bytes.size()) return fail(DescriptorError::kTruncatedItem, item_at);
    uint32_t raw = 0;
    for (uint8_t i = 0; i < size; ++i) raw |= uint32_t(bytes[pos + i]) << (8 * i);
    pos += size;

    if (type == 0) {  // main
      if (tag == 0x8 || tag == 0x9 || tag == 0xB) {
        if (out.fields.size() >= kMaxFields) return fail(DescriptorError::kTooManyFields, item_at);
        HidField f;
        f.kind = tag == 0x8 ? ReportKind::kInput
                            : (tag == 0x9 ? ReportKind::kOutput : ReportKind::kFeature);
        f.report_id = global.report_id;
        f.flags = raw;
        f.report_size = global.report_size;
        f.report_count = global.report_count;
        f.logical_min = global.logical_min;
        f.logical_max =
            resolve_max(global.logical_min, global.logical_max_raw, global.logical_max_size);
        f.physical_min = global.physical_min;
        f.physical_max =
            resolve_max(global.physical_min, global.physical_max_raw, global.physical_max_size);
        if (f.physical_min == 0 && f.physical_max == 0) {  // HID 1.11 section 6.2.2.7
          f.physical_min = f.logical_min;
          f.physical_max = f.logical_max;
        }
        f.unit_exponent = global.unit_exponent;
        f.unit = global.unit;
        f.collection = open.empty() ? -1 : open.back();
        for (const LocalUsage& u : local.usages) {
          f.usages.push_back(resolve_usage(u, global.usage_page));
        }
        if (local.have_min && local.have_max) {
          const uint32_t lo = resolve_usage(local.usage_min, global.usage_page);
          const uint32_t hi = resolve_usage(local.usage_max, global.usage_page);
          if (hi >= lo) {
            if (hi - lo >= kMaxUsagesPerField) {
              return fail(DescriptorError::kTooManyUsages, item_at);
            }
            for (uint32_t u = lo; u <= hi; ++u) f.usages.push_back(u);
          }
        }
        uint32_t& bits = out.report_bits[size_t(f.kind)][f.report_id];
        f.bit_offset = bits;
        const uint64_t total = uint64_t(bits) + uint64_t(f.report_size) * f.report_count;
        if (total > 65535u * 8u) return fail(DescriptorError::kBadReportSize, item_at);
        bits = uint32_t(total);
        out.fields.push_back(std::move(f));
        local.clear();
      } else if (tag == 0xA) {  // Collection
        if (open.size() >= kMaxCollectionDepth || out.collections.size() >= kMaxFields) {
          return fail(DescriptorError::kCollectionDepth, item_at);
        }
        HidCollection c;
        c.type = uint8_t(raw);
        c.parent = open.empty() ? -1 : open.back();
        if (!local.usages.empty())
          c.usage = resolve_usage(local.usages.front(), global.usage_page);
        else if (local.have_min)
          c.usage = resolve_usage(local.usage_min, global.usage_page);
        out.collections.push_back(c);
        open.push_back(int32_t(out.collections.size() - 1));
        local.clear();
      } else if (tag == 0xC) {  // End Collection
        if (open.empty()) return fail(DescriptorError::kCollectionDepth, item_at);
        open.pop_back();
        local.clear();
      }
      // Other main tags are reserved: ignored, like the Linux HID core does.
    } else if (type == 1) {  // global
      switch (tag) {
        case 0x0:
          global.usage_page = uint16_t(raw);
          break;
        case 0x1:
          global.logical_min = signed_value(raw, size);
          break;
        case 0x2:
          global.logical_max_raw = raw;
          global.logical_max_size = size;
          break;
        case 0x3:
          global.physical_min = signed_value(raw, size);
          break;
        case 0x4:
          global.physical_max_raw = raw;
          global.physical_max_size = size;
          break;
        case 0x5:
          global.unit_exponent = decode_unit_exponent(raw, size);
          break;
        case 0x6:
          global.unit = raw;
          break;
        case 0x7:
          global.report_size = raw;
          break;
        case 0x8:
          if (raw == 0 || raw > 255) return fail(DescriptorError::kBadReportId, item_at);
          global.report_id = uint8_t(raw);
          out.uses_report_ids = true;
          break;
        case 0x9:
          global.report_count = raw;
          break;
        case 0xA:
          if (stack.size() >= kMaxPushDepth) return fail(DescriptorError::kPushOverflow, item_at);
          stack.push_back(global);
          break;
        case 0xB:
          if (stack.empty()) return fail(DescriptorError::kPopUnderflow, item_at);
          global = stack.back();
          stack.pop_back();
          break;
        default:
          break;  // reserved
      }
    } else if (type == 2) {  // local
      const LocalUsage u{raw, size == 4};
      switch (tag) {
        case 0x0:
          if (local.usages.size() >= kMaxUsagesPerField) {
            return fail(DescriptorError::kTooManyUsages, item_at);
          }
          local.usages.push_back(u);
          break;
        case 0x1:
          local.usage_min = u;
          local.have_min = true;
          break;
        case 0x2:
          local.usage_max = u;
          local.have_max = true;
          break;
        default:
          break;  // designators, strings, delimiters: not needed here
      }
    }
    // type 3 (reserved) is skipped with its data.
  }
  return {};
}

std::string to_hex(std::span<const uint8_t> bytes, char separator) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 3);
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i && separator) s.push_back(separator);
    s.push_back(kDigits[bytes[i] >> 4]);
    s.push_back(kDigits[bytes[i] & 15]);
  }
  return s;
}

bool parse_hex(std::string_view text, std::vector<uint8_t>& out) {
  out.clear();
  int pending = -1;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == ',' || c == '\r' || c == '\n') continue;
    if (c == '0' && i + 1 < text.size() && (text[i + 1] == 'x' || text[i + 1] == 'X') &&
        pending < 0) {
      ++i;
      continue;
    }
    int d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      d = c - 'A' + 10;
    else
      return false;
    if (pending < 0) {
      pending = d;
    } else {
      out.push_back(uint8_t(pending << 4 | d));
      pending = -1;
    }
  }
  return pending < 0;
}

}  // namespace syncd::headtrack
