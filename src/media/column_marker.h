// The column marker (tests/integration/camera_marker.py, tools/producer/frame_source.h): a
// frame's sequence as kMarkerBits columns kMarkerColumn pixels wide down the whole frame, bit i in
// column i (white 1, black 0), then one black guard column. Coarse enough to survive a camera
// consumer's conversions and H.264 at a few Mbit/s, where the 16-byte sequence marker does not,
// so the test publisher checks frames that crossed the relay's encoder and decoder by it (a
// frame says it carries one with frame_flag::kColumnMarker).
//
// Pure; any thread.
#pragma once

#include <cstdint>
#include <optional>

#include "media/pixel_format.h"

namespace syncd::media {

inline constexpr uint32_t kMarkerBits = 16;
inline constexpr uint32_t kMarkerColumn = 8;
inline constexpr uint32_t kMarkerWidth = (kMarkerBits + 1) * kMarkerColumn;  // with the guard

// The sequence's low 16 bits read from a plane whose pixels are pixel_step bytes apart (1: a
// luma plane; 4: one channel of RGBA), or nothing when the frame is too small, or a column is
// neither clearly black nor clearly white, or the guard column is not black (not a marker
// frame, or damaged). Reads the centre 4 pixels of each column on 3 rows (a quarter, half and
// three quarters down) and averages them, so one damaged block does not flip a bit.
std::optional<uint16_t> read_column_marker(const uint8_t* plane, uint32_t stride, uint32_t width,
                                           uint32_t height, uint32_t pixel_step = 1);

// The marker of a whole frame of `format` (the luma plane of I420/NV12, the green channel of
// RGBA8/BGRA8), or nothing for an encoded format or a frame shorter than its geometry says.
std::optional<uint16_t> read_frame_column_marker(const uint8_t* pixels, size_t bytes,
                                                 PixelFormat format, uint32_t width,
                                                 uint32_t height);

// Draws the marker into a luma plane (BT.601 limited range: 16 black, 235 white), all rows. The
// chroma under it is the caller's (neutral 128 keeps it grey).
void draw_column_marker(uint8_t* luma, uint32_t stride, uint32_t width, uint32_t height,
                        uint16_t sequence);

}  // namespace syncd::media
