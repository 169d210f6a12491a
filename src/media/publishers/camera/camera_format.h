// What the system camera hands to its consumers: YUY2, I420 or NV12, tightly packed, BT.601
// limited range (what libyuv's RGB conversions produce and what V4L2's SMPTE170M names), and
// the conversion of a stream's frames into it (docs/camera.md).
//
// RGBA and BGRA frames are converted with libyuv; NV12 and I420 frames are copied or have their
// chroma planes repacked, never converted. Mind libyuv's names: they give the order of a 32-bit
// word's bytes from the most significant, so libyuv "ARGB" is B,G,R,A in memory (our BGRA) and
// "ABGR" is R,G,B,A in memory (our RGBA).
//
// Pure. A FrameConverter belongs to one thread at a time (the camera's worker).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "media/pixel_format.h"

namespace syncd::media {

enum class CameraFormat : uint8_t {
  kYuy2,  // one plane, 2 bytes a pixel: Y0 U Y1 V (V4L2 YUYV); the v4l2loopback default
  kI420,  // Y plane, then U, then V at half width and half height
  kNv12,  // Y plane, then interleaved U V at half width and half height
};

// "yuy2", "i420", "nv12".
const char* camera_format_name(CameraFormat format);
bool parse_camera_format(std::string_view name, CameraFormat& out);

// Bytes of one width x height frame in the format, tightly packed; 0 when the size does not
// suit a camera (zero, odd, or over kMaxFrameSide: every camera format shares chroma between
// two columns, and the 4:2:0 ones between two rows too).
size_t camera_frame_bytes(CameraFormat format, uint32_t width, uint32_t height);

class FrameConverter {
 public:
  // Makes room for a width x height frame: the scratch that two-step conversions go through
  // (RGBA or NV12 to YUY2 pass through I420). Control plane; false when the size does not suit.
  bool prepare(uint32_t width, uint32_t height);

  // Converts one frame of the source layout into out (camera_frame_bytes(format, ...) bytes).
  // False, with out untouched, when the source format is unknown, its size differs from the
  // prepared one, or out is too small. Never allocates.
  bool convert(const FrameLayout& source, const uint8_t* pixels, CameraFormat format, uint8_t* out,
               size_t out_bytes);

 private:
  uint32_t width_ = 0;
  uint32_t height_ = 0;
  std::unique_ptr<uint8_t[]> scratch_;  // one I420 frame
};

}  // namespace syncd::media
