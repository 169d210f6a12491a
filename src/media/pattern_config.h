// The built-in pattern source's settings (--source pattern:...), plain data (pattern_source.h).
//
// Any thread.
#pragma once

#include <cstdint>
#include <string>

namespace syncd::media {

struct PatternConfig {
  uint32_t width = 1920;
  uint32_t height = 1080;
  double fps = 60.0;
  std::string stream_name = "pattern";
};

}  // namespace syncd::media
