// Pixel formats of a stream and the layout of one frame in memory: which planes, where each
// starts, its row stride and its row count (docs/protocol.md, "Pixel formats").
//
// A stream may also carry encoded media (h264): then each frame is one access unit of any size
// from 1 byte up to the layout's bytes, which is sized as an I420 frame of the stream's width
// and height (an access unit larger than the raw picture it codes is no use to anyone). The
// WAN relay carries such streams between syncd (docs/wan.md).
//
// Every format is tightly packed, planes back to back in the order given, with no row padding:
// that is what a browser's VideoFrame.copyTo() and a canvas readback produce, so a producer's
// buffer goes on the wire as it is. Pure; thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace syncd::media {

// Values are the wire values of the frame header's format field and of the shared-memory ring.
enum class PixelFormat : uint32_t {
  kStreamDefault = 0,  // in a frame header: "as set up for the stream"
  kRgba8 = 1,          // one plane, 4 bytes a pixel, R G B A
  kBgra8 = 2,          // one plane, 4 bytes a pixel, B G R A
  kNv12 = 3,           // Y plane, then interleaved U V at half width and half height
  kI420 = 4,           // Y plane, then U, then V, each at half width and half height
  kH264 = 5,           // one H.264 access unit, Annex B byte stream (start codes), per frame
};
inline constexpr uint32_t kPixelFormatMax = 5;

// Whether frames of this format are encoded access units of variable size.
constexpr bool is_encoded(PixelFormat format) {
  return format == PixelFormat::kH264;
}

struct PlaneLayout {
  size_t offset = 0;    // from the start of the frame
  uint32_t stride = 0;  // bytes from one row to the next
  uint32_t rows = 0;
};

struct FrameLayout {
  PixelFormat format = PixelFormat::kRgba8;
  uint32_t width = 0;
  uint32_t height = 0;
  uint32_t plane_count = 0;
  std::array<PlaneLayout, 3> planes{};
  size_t bytes = 0;  // the whole frame
};

// Largest side of any frame: bounds every size computed here far from overflow (the registry's
// own limits, --max-width/height 8192, are lower still).
inline constexpr uint32_t kMaxFrameSide = 65536;

// The layout of a width x height frame, or false when the format is unknown or the size does
// not suit it (zero, over kMaxFrameSide, or odd for the 4:2:0 formats, whose chroma covers 2x2
// pixels). An encoded format has one plane of one row: the access unit's bytes.
bool frame_layout(PixelFormat format, uint32_t width, uint32_t height, FrameLayout& out);

// "rgba8", "bgra8", "nv12", "i420", "h264"; "?" for anything else.
const char* pixel_format_name(PixelFormat format);
bool parse_pixel_format(std::string_view name, PixelFormat& out);

}  // namespace syncd::media
