#include "media/column_marker.h"

#include <cstring>

namespace syncd::media {
namespace {

constexpr uint32_t kBlackLuma = 16;
constexpr uint32_t kWhiteLuma = 235;
// A column's mean is trusted within this distance of black or white. H.264 at 2 Mbit/s blurs the
// edges of an 8-pixel column but keeps its centre within a few tens of levels.
constexpr uint32_t kTolerance = 60;

}  // namespace

std::optional<uint16_t> read_column_marker(const uint8_t* plane, uint32_t stride, uint32_t width,
                                           uint32_t height, uint32_t pixel_step) {
  if (plane == nullptr || pixel_step == 0 || width < kMarkerWidth || height < 4 ||
      stride < width * pixel_step)
    return std::nullopt;
  const uint32_t rows[3] = {height / 4, height / 2, height * 3 / 4};
  uint32_t sequence = 0;
  for (uint32_t bit = 0; bit <= kMarkerBits; ++bit) {
    uint32_t sum = 0;
    const uint32_t x0 = bit * kMarkerColumn + kMarkerColumn / 2 - 2;
    for (uint32_t y : rows) {
      const uint8_t* row = plane + static_cast<size_t>(y) * stride;
      for (uint32_t x = x0; x < x0 + 4; ++x) sum += row[size_t(x) * pixel_step];
    }
    const uint32_t mean = sum / 12;
    const bool black = mean <= kBlackLuma + kTolerance;
    const bool white = mean + kTolerance >= kWhiteLuma;
    if (black == white) return std::nullopt;
    if (bit == kMarkerBits) {
      if (!black) return std::nullopt;  // the guard column
    } else if (white) {
      sequence |= 1u << bit;
    }
  }
  return static_cast<uint16_t>(sequence);
}

std::optional<uint16_t> read_frame_column_marker(const uint8_t* pixels, size_t bytes,
                                                 PixelFormat format, uint32_t width,
                                                 uint32_t height) {
  FrameLayout layout;
  if (is_encoded(format) || !frame_layout(format, width, height, layout) || bytes < layout.bytes)
    return std::nullopt;
  const PlaneLayout& first = layout.planes[0];
  if (format == PixelFormat::kRgba8 || format == PixelFormat::kBgra8)
    return read_column_marker(pixels + first.offset + 1, first.stride, width, height, 4);  // green
  return read_column_marker(pixels + first.offset, first.stride, width, height, 1);        // luma
}

void draw_column_marker(uint8_t* luma, uint32_t stride, uint32_t width, uint32_t height,
                        uint16_t sequence) {
  if (luma == nullptr || width < kMarkerWidth) return;
  uint8_t row[kMarkerWidth];
  for (uint32_t bit = 0; bit <= kMarkerBits; ++bit) {
    const bool white = bit < kMarkerBits && ((sequence >> bit) & 1u) != 0;
    std::memset(row + bit * kMarkerColumn, white ? kWhiteLuma : kBlackLuma, kMarkerColumn);
  }
  for (uint32_t y = 0; y < height; ++y) {
    std::memcpy(luma + static_cast<size_t>(y) * stride, row, kMarkerWidth);
  }
}

}  // namespace syncd::media
