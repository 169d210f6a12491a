// Shared by the video codec tests: the NAL unit types of an Annex B access unit.
#pragma once

#include <cstdint>
#include <vector>

namespace syncd::video_codec::testing {

inline std::vector<uint8_t> nal_types(const uint8_t* data, size_t size) {
  std::vector<uint8_t> types;
  for (size_t i = 0; i + 3 < size; ++i) {
    if (data[i] == 0 && data[i + 1] == 0 && data[i + 2] == 1) {
      types.push_back(data[i + 3] & 0x1f);
      i += 2;
    }
  }
  return types;
}

}  // namespace syncd::video_codec::testing
