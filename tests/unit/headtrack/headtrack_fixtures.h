// Reference descriptors for the head-tracker tests, built from the byte listing of the Android
// head-tracker HID protocol (v1: AOSP appendix layout; v2: the same plus the transport property,
// as in AOSP's Bluetooth stack). Shared by the unit tests, the fuzzers' seeds and the benchmark.
#pragma once

#include <cstdint>
#include <vector>

// One HID item per line, as in the spec's listing.
// clang-format off
namespace syncd::headtrack::testing {

inline std::vector<uint8_t> v1_descriptor() {
  return {
      0x05, 0x20,        // Usage Page (Sensors)
      0x09, 0xE1,        // Usage (Other: Custom)
      0xA1, 0x01,        // Collection (Application)
      0x85, 0x02,        //   Report ID (2)
      0x0A, 0x08, 0x03,  //   Usage (Sensor Description)
      0x15, 0x00, 0x25, 0xFF, 0x75, 0x08, 0x95, 0x17,  // 0..255, 8 bits x 23
      0xB1, 0x03,        //   Feature (Const, Var, Abs)
      0x0A, 0x02, 0x03,  //   Usage (Persistent Unique ID)
      0x15, 0x00, 0x25, 0xFF, 0x75, 0x08, 0x95, 0x10,  // 0..255, 8 bits x 16
      0xB1, 0x03,        //   Feature (Const, Var, Abs)
      0x85, 0x01,        //   Report ID (1)
      0x0A, 0x16, 0x03,  //   Usage (Reporting State)
      0x15, 0x00, 0x25, 0x01, 0x75, 0x01, 0x95, 0x01,
      0xA1, 0x02,        //   Collection (Logical)
      0x0A, 0x40, 0x08,  //     Usage (No Events)
      0x0A, 0x41, 0x08,  //     Usage (All Events)
      0xB1, 0x00,        //     Feature (Data, Array, Abs)
      0xC0,              //   End Collection
      0x0A, 0x19, 0x03,  //   Usage (Power State)
      0x15, 0x00, 0x25, 0x01, 0x75, 0x01, 0x95, 0x01,
      0xA1, 0x02,        //   Collection (Logical)
      0x0A, 0x55, 0x08,  //     Usage (Power Off)
      0x0A, 0x51, 0x08,  //     Usage (Full Power)
      0xB1, 0x00,        //     Feature (Data, Array, Abs)
      0xC0,              //   End Collection
      0x0A, 0x0E, 0x03,  //   Usage (Report Interval)
      0x15, 0x00, 0x25, 0x3F, 0x35, 0x0A, 0x45, 0x64,  // 0..63 -> 10..100
      0x75, 0x06, 0x95, 0x01,
      0x66, 0x01, 0x10,  //   Unit (seconds)
      0x55, 0x0D,        //   Unit Exponent (-3, nibble)
      0xB1, 0x02,        //   Feature (Data, Var, Abs)
      0x0A, 0x44, 0x05,  //   Usage (Rotation Vector)
      0x16, 0x01, 0x80, 0x26, 0xFF, 0x7F,              // -32767..32767
      0x37, 0x60, 0x4F, 0x46, 0xED,                    // Physical Minimum (-314159264)
      0x47, 0xA1, 0xB0, 0xB9, 0x12,                    // Physical Maximum (314159265)
      0x55, 0x08,        //   Unit Exponent (-8, nibble)
      0x75, 0x10, 0x95, 0x03,
      0x81, 0x02,        //   Input (Data, Var, Abs)
      0x0A, 0x45, 0x05,  //   Usage (Angular Velocity)
      0x16, 0x01, 0x80, 0x26, 0xFF, 0x7F, 0x35, 0xE0, 0x45, 0x20,  // -> -32..32
      0x55, 0x00, 0x75, 0x10, 0x95, 0x03,
      0x81, 0x02,        //   Input (Data, Var, Abs)
      0x0A, 0x46, 0x05,  //   Usage (Discontinuity Counter)
      0x15, 0x00, 0x25, 0xFF, 0x35, 0x00, 0x45, 0xFF,
      0x55, 0x00, 0x75, 0x08, 0x95, 0x01,
      0x81, 0x02,        //   Input (Data, Var, Abs)
      0xC0,              // End Collection
  };
}

inline std::vector<uint8_t> v2_descriptor() {
  std::vector<uint8_t> d = v1_descriptor();
  d[18] = 0x19;  // description: 25 characters ("#AndroidHeadTracker#2.0#1")
  // After the interval's Feature item (0xB1 0x02) and before the rotation vector: the transport
  // property, then the extra 1-bit Feature item found in the AOSP listing (kept: edge case).
  const uint8_t transport[] = {
      0x0A, 0x10, 0xF4,  // Usage (Transport)
      0x15, 0x00, 0x25, 0x01, 0x75, 0x01, 0x95, 0x01,
      0xA1, 0x02,        // Collection (Logical)
      0x0A, 0x00, 0xF8,  //   Usage (ACL)
      0x0A, 0x01, 0xF8,  //   Usage (ISO)
      0xB1, 0x00,        //   Feature (Data, Array, Abs)
      0xC0,              // End Collection
      0xB1, 0x02,        // Feature (Data, Var, Abs): 1 bit, no usage
  };
  for (size_t i = 0; i + 4 < d.size(); ++i) {
    if (d[i] == 0x55 && d[i + 1] == 0x0D && d[i + 2] == 0xB1 && d[i + 3] == 0x02) {
      d.insert(d.begin() + long(i + 4), std::begin(transport), std::end(transport));
      break;
    }
  }
  return d;
}

}  // namespace syncd::headtrack::testing
// clang-format on
