// RGB to the camera's BT.601 limited-range YUV, rounded to nearest (docs/camera.md, "Colour").
//
// Written here rather than taken from libyuv, because libyuv's SIMD rows truncate where they
// should round and weigh with 7- and 8-bit coefficients: pure blue comes out with U 239 where
// BT.601 gives 240, and a consumer's own conversion back to RGB then lands 4 levels off
// (Chromium). These rows weigh with 15-bit coefficients and round, so every Y, U and V is within
// 0.51 of the exact matrix, and the chroma of a 2x2 block is that of the block's exact mean.
//
// Hot path: the camera converts every frame of an RGB stream through these (1080p60 is 124
// Mpixel/s). Each set of rows has a portable version and, on x86-64 CPUs that have it, an AVX2
// one that gives the same bytes.
//
// Pure, any thread.
#pragma once

#include <cstdint>

namespace syncd::media {

// The byte order of a 32-bit pixel in memory. The fourth byte (alpha) is ignored.
enum class RgbOrder : uint8_t { kRgba, kBgra };

// Rows of one RGB source into one camera format. width is even and at least 2; nothing is read
// or written past width pixels.
struct RgbToYuvRows {
  // Two rows into two rows of Y and one row of 4:2:0 chroma, planar (I420: width/2 U, width/2 V)
  // or interleaved (NV12: width bytes of U,V pairs). Each chroma sample is of its 2x2 block.
  void (*i420)(RgbOrder order, const uint8_t* row0, const uint8_t* row1, int width, uint8_t* y0,
               uint8_t* y1, uint8_t* u, uint8_t* v);
  void (*nv12)(RgbOrder order, const uint8_t* row0, const uint8_t* row1, int width, uint8_t* y0,
               uint8_t* y1, uint8_t* uv);
  // One row into one YUY2 row (Y0 U Y1 V, 2 bytes a pixel): 4:2:2, each row its own chroma, of
  // its pixel pairs.
  void (*yuy2)(RgbOrder order, const uint8_t* row, int width, uint8_t* yuy2);
};

// The fastest rows this CPU runs, chosen once.
const RgbToYuvRows& rgb_to_yuv_rows();
// The portable rows, and the AVX2 ones (nullptr where the CPU or the build has none): for tests
// and the benchmark, which check that both give the same bytes.
const RgbToYuvRows& rgb_to_yuv_rows_portable();
const RgbToYuvRows* rgb_to_yuv_rows_avx2();

}  // namespace syncd::media
