// The camera's column marker (tests/integration/camera_marker.py, tools/producer/frame_source.h):
// a frame's sequence as kMarkerBits columns kMarkerColumn pixels wide down the whole frame, bit i
// in column i (white 1, black 0), then one black guard column. Coarse enough to survive H.264 at
// a few Mbit/s, so the relay's receiver can check it after decoding.
//
// Pure; any thread.
#pragma once

#include <cstdint>
#include <optional>

namespace syncd::video_codec {

inline constexpr uint32_t kMarkerBits = 16;
inline constexpr uint32_t kMarkerColumn = 8;
inline constexpr uint32_t kMarkerWidth = (kMarkerBits + 1) * kMarkerColumn;  // with the guard

// The sequence's low 16 bits read from a luma plane, or nothing when the frame is too small, or a
// column is neither clearly black nor clearly white, or the guard column is not black (not a
// marker frame, or damaged). Reads the centre 4 pixels of each column on 3 rows (a quarter, half
// and three quarters down) and averages them, so one damaged block does not flip a bit.
std::optional<uint16_t> read_column_marker(const uint8_t* luma, uint32_t stride, uint32_t width,
                                           uint32_t height);

// Draws the marker into a luma plane (BT.601 limited range: 16 black, 235 white), all rows. The
// chroma under it is the caller's (neutral 128 keeps it grey).
void draw_column_marker(uint8_t* luma, uint32_t stride, uint32_t width, uint32_t height,
                        uint16_t sequence);

}  // namespace syncd::video_codec
