// The BT.601 limited-range matrix in the fixed point both versions of rgb_to_yuv.h's rows use.
// Only <cstdint>: rgb_to_yuv_avx2.cpp includes it and is compiled for AVX2, so it must not
// instantiate any inline function another file also uses.
//
// Pure, any thread.
#pragma once

#include <cstdint>

namespace syncd::media::rgb_to_yuv_fixed {

// Y = 16 + 219/255 (0.299 R + 0.587 G + 0.114 B), per pixel, in units of 2^-15. Rounded from
// 8414.44, 16519.31, 3208.18, with G rounded up so that the three sum to 219/255 of 2^15
// (28141.93) and white lands on 235.
constexpr int kYr = 8414, kYg = 16520, kYb = 3208;
constexpr int kLumaShift = 15;
constexpr int32_t kLumaBias = (16 << kLumaShift) + (1 << (kLumaShift - 1));  // offset and rounding

// U = 128 + 224/255 (B - Y) / 1.772 and V = 128 + 224/255 (R - Y) / 1.402, in units of 2^-15
// of a pixel, applied to the sum of a 2x2 block's four pixels (hence the shift of 17). Each
// row's G is minus the sum of the other two, so grey has U = V = 128 exactly. Exact: U -4856.97,
// -9535.25, 14392.22; V 14392.22, -12051.69, -2340.53.
constexpr int kUr = -4857, kUb = 14392, kUg = -(kUr + kUb);
constexpr int kVr = 14392, kVb = -2340, kVg = -(kVr + kVb);
constexpr int kChromaShift = 17;
constexpr int32_t kChromaBias = (128 << kChromaShift) + (1 << (kChromaShift - 1));
// The same for the sum of a pixel pair (4:2:2), shifted by one less.
constexpr int kPairChromaShift = kChromaShift - 1;
constexpr int32_t kPairChromaBias = (128 << kPairChromaShift) + (1 << (kPairChromaShift - 1));

}  // namespace syncd::media::rgb_to_yuv_fixed
