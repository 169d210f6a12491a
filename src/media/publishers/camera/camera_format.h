// What the system camera hands to its consumers: YUY2, I420 or NV12, tightly packed, BT.601
// limited range (what V4L2's SMPTE170M names), and
// the conversion of a stream's frames into it (docs/camera.md). How a PipeWire node says so to
// its consumers: pipewire_format.h.
//
// RGBA and BGRA frames are converted by rgb_to_yuv.h's rounded rows; NV12 and I420 frames are
// copied or have their chroma planes repacked (with libyuv), never converted.
//
// Every conversion is one pass over the source: an RGB frame is converted a band of two rows by
// a few hundred columns at a time, through a buffer that stays in the first-level cache where a
// step needs one (RGBA to YUY2 goes through 4:2:0 chroma), never through a frame-sized scratch.
//
// Pure: any thread. A FrameConverter belongs to one thread at a time (the camera's worker).
#pragma once

#include <cstddef>
#include <cstdint>
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

// The camera format a frame of `source` costs least to convert into, by camera_convert_bench at
// 1920x1080 (docs/benchmarks.md, "System camera: conversion"; ratios to a memcpy of an RGBA
// frame): I420 and NV12 frames are copied as they are (0.36x, where repacking into another
// format is 0.36-0.43x). RGBA and BGRA go to I420: 0.86-0.88x, where NV12 is a near tie at
// 0.83-0.85x and YUY2 1.11-1.13x (a third more bytes written, and chroma for every row). I420
// wins the tie because it is what Chromium's capture passes on: it converts any other format to
// I420 itself. A PipeWire node offers this format first; a consumer may still negotiate any. Any
// thread.
CameraFormat cheapest_camera_format(PixelFormat source);

class FrameConverter {
 public:
  // Takes the size of the frames to come. Nothing is allocated: the conversions need no frame-
  // sized scratch. False when the size does not suit a camera. The converter's thread.
  bool prepare(uint32_t width, uint32_t height);

  // Converts one frame of the source layout into out (camera_frame_bytes(format, ...) bytes).
  // False, with out untouched, when the source format is unknown, its size differs from the
  // prepared one, or out is too small. Never allocates. The converter's thread.
  bool convert(const FrameLayout& source, const uint8_t* pixels, CameraFormat format, uint8_t* out,
               size_t out_bytes);

 private:
  uint32_t width_ = 0;  // 0 until prepare() succeeds
  uint32_t height_ = 0;
};

}  // namespace syncd::media
