#include "media/publishers/camera/rgb_to_yuv.h"

#include "media/publishers/camera/rgb_to_yuv_fixed.h"

namespace syncd::media {

#if defined(SYNC_RGB_TO_YUV_AVX2)
extern const RgbToYuvRows kRgbToYuvRowsAvx2;  // rgb_to_yuv_avx2.cpp
#endif

namespace {

using namespace rgb_to_yuv_fixed;

// A row of the matrix as weights of a pixel's bytes 0, 1 and 2 in memory.
struct Weights {
  int byte0, byte1, byte2;
};
constexpr Weights weights(RgbOrder order, int r, int g, int b) {
  return order == RgbOrder::kRgba ? Weights{r, g, b} : Weights{b, g, r};
}

struct Matrix {
  Weights y, u, v;
  explicit constexpr Matrix(RgbOrder order)
      : y(weights(order, kYr, kYg, kYb)),
        u(weights(order, kUr, kUg, kUb)),
        v(weights(order, kVr, kVg, kVb)) {}
};

uint8_t luma(const uint8_t* p, const Weights& w) {
  return uint8_t((p[0] * w.byte0 + p[1] * w.byte1 + p[2] * w.byte2 + kLumaBias) >> kLumaShift);
}

// A 2x2 block: pixels a, a+4 above b, b+4. For 4:2:2, b is a: the pair counts twice.
struct Block {
  uint8_t y00, y01, y10, y11, u, v;
};
Block block(const uint8_t* a, const uint8_t* b, const Matrix& m) {
  const int s0 = a[0] + a[4] + b[0] + b[4];
  const int s1 = a[1] + a[5] + b[1] + b[5];
  const int s2 = a[2] + a[6] + b[2] + b[6];
  auto chroma = [&](const Weights& w) {
    return uint8_t((s0 * w.byte0 + s1 * w.byte1 + s2 * w.byte2 + kChromaBias) >> kChromaShift);
  };
  return {luma(a, m.y), luma(a + 4, m.y), luma(b, m.y), luma(b + 4, m.y), chroma(m.u), chroma(m.v)};
}

void i420_portable(RgbOrder order, const uint8_t* row0, const uint8_t* row1, int width, uint8_t* y0,
                   uint8_t* y1, uint8_t* u, uint8_t* v) {
  const Matrix m(order);
  for (int x = 0; x < width; x += 2) {
    const Block k = block(row0 + 4 * x, row1 + 4 * x, m);
    y0[x] = k.y00, y0[x + 1] = k.y01, y1[x] = k.y10, y1[x + 1] = k.y11;
    u[x / 2] = k.u, v[x / 2] = k.v;
  }
}

void nv12_portable(RgbOrder order, const uint8_t* row0, const uint8_t* row1, int width, uint8_t* y0,
                   uint8_t* y1, uint8_t* uv) {
  const Matrix m(order);
  for (int x = 0; x < width; x += 2) {
    const Block k = block(row0 + 4 * x, row1 + 4 * x, m);
    y0[x] = k.y00, y0[x + 1] = k.y01, y1[x] = k.y10, y1[x + 1] = k.y11;
    uv[x] = k.u, uv[x + 1] = k.v;
  }
}

void yuy2_portable(RgbOrder order, const uint8_t* row, int width, uint8_t* yuy2) {
  const Matrix m(order);
  for (int x = 0; x < width; x += 2) {
    const Block k = block(row + 4 * x, row + 4 * x, m);
    uint8_t* out = yuy2 + 2 * x;
    out[0] = k.y00, out[1] = k.u, out[2] = k.y01, out[3] = k.v;
  }
}

constexpr RgbToYuvRows kPortableRows{i420_portable, nv12_portable, yuy2_portable};

}  // namespace

const RgbToYuvRows& rgb_to_yuv_rows_portable() {
  return kPortableRows;
}

const RgbToYuvRows* rgb_to_yuv_rows_avx2() {
#if defined(SYNC_RGB_TO_YUV_AVX2)
  static const bool has_avx2 = __builtin_cpu_supports("avx2");
  return has_avx2 ? &kRgbToYuvRowsAvx2 : nullptr;
#else
  return nullptr;
#endif
}

const RgbToYuvRows& rgb_to_yuv_rows() {
  static const RgbToYuvRows& best =
      rgb_to_yuv_rows_avx2() ? *rgb_to_yuv_rows_avx2() : rgb_to_yuv_rows_portable();
  return best;
}

}  // namespace syncd::media
