// libFuzzer target: the binary frame header parser (media::parse_frame_header) and, for headers
// that parse, the layout of the frame they describe (media::frame_layout): planes must lie inside
// the frame, add up to its size and never overflow. Parsed headers must survive a write/parse
// round trip unchanged.
#include "media/frame_header.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "media/pixel_format.h"

using namespace syncd::media;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The parser reads exactly kFrameHeaderBytes; shorter inputs are zero-padded, as the ingest
  // never calls it before it has them all.
  uint8_t header[kFrameHeaderBytes] = {};
  std::memcpy(header, data, size < kFrameHeaderBytes ? size : kFrameHeaderBytes);
  FrameHeader h;
  if (parse_frame_header(header, h) != FrameHeaderError::kNone) return 0;
  if (h.format > kPixelFormatMax) __builtin_trap();  // a parsed header names a known format

  uint8_t written[kFrameHeaderBytes];
  write_frame_header(h, written);
  FrameHeader again;
  if (parse_frame_header(written, again) != FrameHeaderError::kNone) __builtin_trap();
  if (std::memcmp(&again, &h, sizeof h) != 0) __builtin_trap();

  FrameLayout layout;
  if (!frame_layout(PixelFormat(h.format), h.width, h.height, layout)) return 0;
  size_t sum = 0;
  for (uint32_t i = 0; i < layout.plane_count; ++i) {
    const PlaneLayout& p = layout.planes[i];
    const size_t plane_bytes = size_t(p.stride) * p.rows;
    if (p.offset != sum) __builtin_trap();  // packed, in order
    if (p.offset > layout.bytes || plane_bytes > layout.bytes - p.offset) __builtin_trap();
    sum += plane_bytes;
  }
  if (sum != layout.bytes || layout.plane_count == 0 || layout.plane_count > 3) __builtin_trap();
  return 0;
}
