#include "video_codec/column_marker.h"

#include <cstring>

namespace syncd::video_codec {
namespace {

constexpr uint32_t kBlackLuma = 16;
constexpr uint32_t kWhiteLuma = 235;
// A column's mean is trusted within this distance of black or white. H.264 at 2 Mbit/s blurs the
// edges of an 8-pixel column but keeps its centre within a few tens of levels.
constexpr uint32_t kTolerance = 60;

}  // namespace

std::optional<uint16_t> read_column_marker(const uint8_t* luma, uint32_t stride, uint32_t width,
                                           uint32_t height) {
  if (luma == nullptr || width < kMarkerWidth || height < 4 || stride < width) return std::nullopt;
  const uint32_t rows[3] = {height / 4, height / 2, height * 3 / 4};
  uint32_t sequence = 0;
  for (uint32_t bit = 0; bit <= kMarkerBits; ++bit) {
    uint32_t sum = 0;
    const uint32_t x0 = bit * kMarkerColumn + kMarkerColumn / 2 - 2;
    for (uint32_t y : rows) {
      const uint8_t* row = luma + static_cast<size_t>(y) * stride;
      for (uint32_t x = x0; x < x0 + 4; ++x) sum += row[x];
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

}  // namespace syncd::video_codec
