#include "media/pixel_format.h"

namespace syncd::media {

bool frame_layout(PixelFormat format, uint32_t width, uint32_t height, FrameLayout& out) {
  if (width == 0 || height == 0 || width > kMaxFrameSide || height > kMaxFrameSide) return false;
  out = FrameLayout{};
  out.format = format;
  out.width = width;
  out.height = height;
  const size_t luma = size_t(width) * height;
  switch (format) {
    case PixelFormat::kRgba8:
    case PixelFormat::kBgra8:
      out.plane_count = 1;
      out.planes[0] = {0, width * 4, height};
      out.bytes = luma * 4;
      return true;
    case PixelFormat::kNv12:
      if (width % 2 || height % 2) return false;
      out.plane_count = 2;
      out.planes[0] = {0, width, height};
      out.planes[1] = {luma, width, height / 2};
      out.bytes = luma + luma / 2;
      return true;
    case PixelFormat::kI420:
      if (width % 2 || height % 2) return false;
      out.plane_count = 3;
      out.planes[0] = {0, width, height};
      out.planes[1] = {luma, width / 2, height / 2};
      out.planes[2] = {luma + luma / 4, width / 2, height / 2};
      out.bytes = luma + luma / 2;
      return true;
    case PixelFormat::kH264:
      // The largest access unit a frame holds: an I420 frame's bytes (rounded up for odd sizes).
      out.plane_count = 1;
      out.bytes = luma + 2 * (size_t((width + 1) / 2) * ((height + 1) / 2));
      // One row of the whole access unit: its stride must fit 32 bits (found by
      // fuzz/frame_header.cpp; the shared-memory reader holds the same bound).
      if (out.bytes > UINT32_MAX) return false;
      out.planes[0] = {0, uint32_t(out.bytes), 1};
      return true;
    case PixelFormat::kStreamDefault:
      break;
  }
  return false;
}

const char* pixel_format_name(PixelFormat format) {
  switch (format) {
    case PixelFormat::kRgba8:
      return "rgba8";
    case PixelFormat::kBgra8:
      return "bgra8";
    case PixelFormat::kNv12:
      return "nv12";
    case PixelFormat::kI420:
      return "i420";
    case PixelFormat::kH264:
      return "h264";
    case PixelFormat::kStreamDefault:
      break;
  }
  return "?";
}

bool parse_pixel_format(std::string_view name, PixelFormat& out) {
  for (uint32_t v = 1; v <= kPixelFormatMax; ++v) {
    if (name == pixel_format_name(PixelFormat(v))) {
      out = PixelFormat(v);
      return true;
    }
  }
  return false;
}

}  // namespace syncd::media
