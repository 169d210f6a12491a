// The AVX2 version of rgb_to_yuv.h's rows: 16 pixels of a row (two rows for 4:2:0) a step, the
// last width % 16 pixels by the portable rows. This file alone is compiled with -mavx2, and
// rgb_to_yuv_rows() calls into it only on a CPU that has AVX2. It includes no header with
// inline functions that other files also use: an AVX2 copy of one could be the copy the linker
// keeps for everyone.
//
// A 32-bit pixel is split into 16-bit lanes of its bytes 0 and 2 (mask) and 1 and 3 (shift),
// so that one pmaddwd per pair weighs two channels with 15-bit coefficients; the alpha byte
// gets weight 0. Chroma sums the 2x2 block first (rows, then pixel pairs), in 16 bits, and
// weighs sixteen pixels' eight blocks in one register.
#include <immintrin.h>

#include "media/publishers/camera/rgb_to_yuv.h"
#include "media/publishers/camera/rgb_to_yuv_fixed.h"

namespace syncd::media {

namespace {

using namespace rgb_to_yuv_fixed;

// Two 16-bit weights in every 32-bit lane: lo for the lane's low half, hi for its high half.
__m256i weight_pair(int lo, int hi) {
  return _mm256_set1_epi32(int32_t(uint32_t(uint16_t(lo)) | (uint32_t(uint16_t(hi)) << 16)));
}

struct Weights {
  __m256i bytes02, bytes13;  // for a pixel's bytes 0 and 2, and 1 and 3 (alpha, weight 0)
  Weights(RgbOrder order, int r, int g, int b)
      : bytes02(order == RgbOrder::kRgba ? weight_pair(r, b) : weight_pair(b, r)),
        bytes13(weight_pair(g, 0)) {}
};

struct Matrix {
  Weights y, u, v;
  explicit Matrix(RgbOrder order)
      : y(order, kYr, kYg, kYb), u(order, kUr, kUg, kUb), v(order, kVr, kVg, kVb) {}
};

// Eight pixels' bytes 0 and 2, and 1 and 3, as 16-bit lanes of each pixel's 32-bit lane; or
// the same lanes summed over pixels.
struct Split {
  __m256i bytes02, bytes13;
};
Split split(const uint8_t* pixels) {
  const __m256i p = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pixels));
  return {_mm256_and_si256(p, _mm256_set1_epi32(0x00ff00ff)), _mm256_srli_epi16(p, 8)};
}

__m256i weigh(const Split& s, const Weights& w) {
  return _mm256_add_epi32(_mm256_madd_epi16(s.bytes02, w.bytes02),
                          _mm256_madd_epi16(s.bytes13, w.bytes13));
}

// Eight pixels' Y as 32-bit lanes.
__m256i luma(const Split& s, const Weights& w) {
  return _mm256_srli_epi32(_mm256_add_epi32(weigh(s, w), _mm256_set1_epi32(kLumaBias)), kLumaShift);
}

// Sixteen pixels' Y bytes in order from their 32-bit lanes (a: pixels 0-7, b: 8-15). After
// packus_epi32 and packus_epi16 the 32-bit lanes hold a0-3, b0-3, (again), a4-7, b4-7, (again).
__m128i luma_bytes(__m256i a, __m256i b) {
  const __m256i words = _mm256_packus_epi32(a, b);
  return _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(
      _mm256_packus_epi16(words, words), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

// Sixteen pixels' chroma sums, a pixel pair (of a 2x2 block's row sums, or of one row for
// 4:2:2) per 32-bit lane, in the lane order blocks 0, 4, 1, 5 | 2, 6, 3, 7: pixels 0-7 (a)
// summed into the even lanes, pixels 8-15 (b) into the odd ones.
Split pair_sums(const Split& a, const Split& b) {
  auto sums = [](__m256i a, __m256i b) {
    return _mm256_blend_epi32(_mm256_add_epi16(a, _mm256_srli_epi64(a, 32)),
                              _mm256_add_epi16(b, _mm256_slli_epi64(b, 32)), 0xaa);
  };
  return {sums(a.bytes02, b.bytes02), sums(a.bytes13, b.bytes13)};
}

// The layouts chroma() gives sixteen pixels' eight U and eight V in: planar (U0-7, then V0-7)
// or interleaved (U0 V0 U1 V1 ...). Each picks from the 16 bytes that chroma() gathers,
// U0 U4 U1 U5 V0 V4 V1 V5 U2 U6 U3 U7 V2 V6 V3 V7.
__m128i planar_uv() {
  return _mm_setr_epi8(0, 2, 8, 10, 1, 3, 9, 11, 4, 6, 12, 14, 5, 7, 13, 15);
}
__m128i interleaved_uv() {
  return _mm_setr_epi8(0, 4, 2, 6, 8, 12, 10, 14, 1, 5, 3, 7, 9, 13, 11, 15);
}

// Eight U and eight V from pair_sums(), in the given layout. bias and shift scale the sums of
// four pixels (4:2:0) or of two (4:2:2).
template <int32_t kBias, int kShift>
__m128i chroma(const Split& sums, const Matrix& m, __m128i layout) {
  auto scaled = [&](const Weights& w) {
    return _mm256_srli_epi32(_mm256_add_epi32(weigh(sums, w), _mm256_set1_epi32(kBias)), kShift);
  };
  const __m256i words = _mm256_packus_epi32(scaled(m.u), scaled(m.v));
  const __m256i bytes = _mm256_permute4x64_epi64(_mm256_packus_epi16(words, words), 0x08);
  return _mm_shuffle_epi8(_mm256_castsi256_si128(bytes), layout);
}

// Sixteen pixels of two rows: each row's Y, and the 2x2 blocks' chroma in the given layout.
struct TwoRows {
  __m128i y0, y1, uv;
};
TwoRows two_rows(const uint8_t* row0, const uint8_t* row1, const Matrix& m, __m128i layout) {
  const Split a0 = split(row0), b0 = split(row0 + 32);
  const Split a1 = split(row1), b1 = split(row1 + 32);
  auto add = [](const Split& p, const Split& q) {
    return Split{_mm256_add_epi16(p.bytes02, q.bytes02), _mm256_add_epi16(p.bytes13, q.bytes13)};
  };
  return {luma_bytes(luma(a0, m.y), luma(b0, m.y)), luma_bytes(luma(a1, m.y), luma(b1, m.y)),
          chroma<kChromaBias, kChromaShift>(pair_sums(add(a0, a1), add(b0, b1)), m, layout)};
}

void store16(uint8_t* to, __m128i bytes) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(to), bytes);
}

void i420_avx2(RgbOrder order, const uint8_t* row0, const uint8_t* row1, int width, uint8_t* y0,
               uint8_t* y1, uint8_t* u, uint8_t* v) {
  const Matrix m(order);
  int x = 0;
  for (; x + 16 <= width; x += 16) {
    const TwoRows s = two_rows(row0 + 4 * x, row1 + 4 * x, m, planar_uv());
    store16(y0 + x, s.y0);
    store16(y1 + x, s.y1);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(u + x / 2), s.uv);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(v + x / 2), _mm_unpackhi_epi64(s.uv, s.uv));
  }
  if (x < width) {
    rgb_to_yuv_rows_portable().i420(order, row0 + 4 * x, row1 + 4 * x, width - x, y0 + x, y1 + x,
                                    u + x / 2, v + x / 2);
  }
}

void nv12_avx2(RgbOrder order, const uint8_t* row0, const uint8_t* row1, int width, uint8_t* y0,
               uint8_t* y1, uint8_t* uv) {
  const Matrix m(order);
  int x = 0;
  for (; x + 16 <= width; x += 16) {
    const TwoRows s = two_rows(row0 + 4 * x, row1 + 4 * x, m, interleaved_uv());
    store16(y0 + x, s.y0);
    store16(y1 + x, s.y1);
    store16(uv + x, s.uv);
  }
  if (x < width) {
    rgb_to_yuv_rows_portable().nv12(order, row0 + 4 * x, row1 + 4 * x, width - x, y0 + x, y1 + x,
                                    uv + x);
  }
}

void yuy2_avx2(RgbOrder order, const uint8_t* row, int width, uint8_t* yuy2) {
  const Matrix m(order);
  int x = 0;
  for (; x + 16 <= width; x += 16) {
    const Split a = split(row + 4 * x), b = split(row + 4 * x + 32);
    const __m128i y = luma_bytes(luma(a, m.y), luma(b, m.y));
    // 4:2:2: the chroma of a row's pixel pairs.
    const __m128i uv =
        chroma<kPairChromaBias, kPairChromaShift>(pair_sums(a, b), m, interleaved_uv());
    store16(yuy2 + 2 * x, _mm_unpacklo_epi8(y, uv));       // Y0 U0 Y1 V0 ... Y7 V3
    store16(yuy2 + 2 * x + 16, _mm_unpackhi_epi8(y, uv));  // Y8 U4 Y9 V4 ... Y15 V7
  }
  if (x < width) rgb_to_yuv_rows_portable().yuy2(order, row + 4 * x, width - x, yuy2 + 2 * x);
}

}  // namespace

extern const RgbToYuvRows kRgbToYuvRowsAvx2;
const RgbToYuvRows kRgbToYuvRowsAvx2{i420_avx2, nv12_avx2, yuy2_avx2};

}  // namespace syncd::media
