// Raw pictures as the codec module sees them: planes in the caller's memory, with strides.
// Nothing here owns memory; the caller keeps the planes alive for the duration of a call.
#pragma once

#include <cstdint>

namespace syncd::video_codec {

enum class PixelFormat : uint8_t {
  kRgba8,  // one plane, bytes R G B A (libyuv calls it ABGR)
  kBgra8,  // one plane, bytes B G R A (libyuv calls it ARGB)
  kI420,   // three planes: Y, U, V at half size both ways
  kNv12,   // two planes: Y, interleaved UV at half size both ways
};

// A picture to read from (encoder input). Unused planes are ignored.
struct InputPicture {
  PixelFormat format = PixelFormat::kI420;
  uint32_t width = 0;
  uint32_t height = 0;
  const uint8_t* planes[3] = {nullptr, nullptr, nullptr};
  uint32_t strides[3] = {0, 0, 0};  // bytes per row of each plane
};

// A picture to write into (decoder output, e.g. a frame lease). Only kI420 and kNv12. width and
// height are the size the caller's buffer was laid out for.
struct OutputPicture {
  PixelFormat format = PixelFormat::kI420;
  uint32_t width = 0;
  uint32_t height = 0;
  uint8_t* planes[3] = {nullptr, nullptr, nullptr};
  uint32_t strides[3] = {0, 0, 0};
};

}  // namespace syncd::video_codec
