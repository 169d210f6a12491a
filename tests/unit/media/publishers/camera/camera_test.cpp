// The camera publisher's core (src/media/publishers/camera): colour conversion with known
// pixels and against the exact BT.601 matrix, the AVX2 rows against the portable ones, NV12/I420
// pass-through, the one-pass conversions of planar frames against libyuv's whole-frame ones
// (byte for byte), the PipeWire node's EnumFormat params and their colour properties, the
// v4l2loopback backend with a regular file standing in for the device, and the publisher's hand-off
// and drop accounting with a backend that can be made slow, busy or failing. The last test writes
// to a real v4l2loopback device and is opt-in: it skips when none exists.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <libyuv/convert.h>
#include <libyuv/convert_from.h>
#include <libyuv/convert_from_argb.h>
#include <libyuv/planar_functions.h>
#include <sched.h>
#include <spa/param/format-utils.h>
#include <spa/param/video/format-utils.h>
#include <spa/pod/builder.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "media/frame_header.h"
#include "media/publishers/camera/camera_publisher.h"
#include "media/publishers/camera/pipewire_format.h"
#include "media/publishers/camera/rgb_to_yuv.h"
#include "media/publishers/camera/v4l2_backend.h"
#include "media/stream.h"

#pragma GCC diagnostic ignored "-Wpedantic"  // spa's pod builders are GNU statement expressions

namespace {

using namespace syncd::media;

// SMPTE colour bars, and their BT.601 limited-range Y, U, V (rounded from the matrix): what
// the RGB conversions must produce, exactly.
struct Bar {
  uint8_t r, g, b;
  int y, u, v;
};
constexpr Bar kBars[] = {
    {255, 255, 255, 235, 128, 128},  // white
    {255, 255, 0, 210, 16, 146},     // yellow
    {0, 255, 255, 170, 166, 16},     // cyan
    {0, 255, 0, 145, 54, 34},        // green
    {255, 0, 255, 106, 202, 222},    // magenta
    {255, 0, 0, 81, 90, 240},        // red
    {0, 0, 255, 41, 240, 110},       // blue
    {0, 0, 0, 16, 128, 128},         // black
};
constexpr uint32_t kBarWidth = 16;  // a multiple of 2: no 2x2 chroma block straddles two bars
constexpr uint32_t kBarsW = kBarWidth * std::size(kBars);
constexpr uint32_t kBarsH = 8;

FrameLayout layout_of(PixelFormat format, uint32_t w, uint32_t h) {
  FrameLayout layout;
  EXPECT_TRUE(frame_layout(format, w, h, layout));
  return layout;
}

// Colour bars in RGBA (R,G,B,A in memory) or BGRA (B,G,R,A).
std::vector<uint8_t> bars_rgb(bool rgba) {
  std::vector<uint8_t> out(size_t{kBarsW} * kBarsH * 4);
  for (uint32_t y = 0; y < kBarsH; ++y) {
    for (uint32_t x = 0; x < kBarsW; ++x) {
      const Bar& bar = kBars[x / kBarWidth];
      uint8_t* p = &out[(size_t{y} * kBarsW + x) * 4];
      p[0] = rgba ? bar.r : bar.b;
      p[1] = bar.g;
      p[2] = rgba ? bar.b : bar.r;
      p[3] = 255;
    }
  }
  return out;
}

// Y, U and V of pixel (x, y) of a camera frame.
struct Yuv {
  int y, u, v;
};
Yuv sample(CameraFormat format, const std::vector<uint8_t>& f, uint32_t w, uint32_t h, uint32_t x,
           uint32_t y) {
  const size_t luma = size_t{w} * h;
  switch (format) {
    case CameraFormat::kYuy2: {
      const uint8_t* pair = &f[(size_t{y} * w + (x & ~1u)) * 2];  // Y0 U Y1 V
      return {pair[(x & 1) ? 2 : 0], pair[1], pair[3]};
    }
    case CameraFormat::kI420: {
      const size_t c = size_t{y / 2} * (w / 2) + x / 2;
      return {f[size_t{y} * w + x], f[luma + c], f[luma + luma / 4 + c]};
    }
    case CameraFormat::kNv12: {
      const size_t c = luma + size_t{y / 2} * w + (x & ~1u);
      return {f[size_t{y} * w + x], f[c], f[c + 1]};
    }
  }
  return {};
}

const CameraFormat kAllFormats[] = {CameraFormat::kYuy2, CameraFormat::kI420, CameraFormat::kNv12};

void check_bars(PixelFormat source_format) {
  const std::vector<uint8_t> src = bars_rgb(source_format == PixelFormat::kRgba8);
  const FrameLayout layout = layout_of(source_format, kBarsW, kBarsH);
  FrameConverter converter;
  ASSERT_TRUE(converter.prepare(kBarsW, kBarsH));
  for (CameraFormat format : kAllFormats) {
    SCOPED_TRACE(camera_format_name(format));
    std::vector<uint8_t> out(camera_frame_bytes(format, kBarsW, kBarsH));
    ASSERT_TRUE(converter.convert(layout, src.data(), format, out.data(), out.size()));
    for (size_t b = 0; b < std::size(kBars); ++b) {
      for (uint32_t y = 0; y < kBarsH; ++y) {
        for (uint32_t x = uint32_t(b) * kBarWidth; x < (b + 1) * kBarWidth; ++x) {
          const Yuv got = sample(format, out, kBarsW, kBarsH, x, y);
          ASSERT_EQ(got.y, kBars[b].y) << "bar " << b << " x " << x << " y " << y;
          ASSERT_EQ(got.u, kBars[b].u) << "bar " << b << " x " << x << " y " << y;
          ASSERT_EQ(got.v, kBars[b].v) << "bar " << b << " x " << x << " y " << y;
        }
      }
    }
  }
}

TEST(CameraConvert, RgbaColourBarsToEveryFormat) {
  check_bars(PixelFormat::kRgba8);
}
TEST(CameraConvert, BgraColourBarsToEveryFormat) {
  check_bars(PixelFormat::kBgra8);
}

// A 4:2:0 frame with every byte distinct enough to catch a plane or chroma order mix-up.
std::vector<uint8_t> planar_420(PixelFormat format, uint32_t w, uint32_t h) {
  const FrameLayout layout = layout_of(format, w, h);
  std::vector<uint8_t> f(layout.bytes);
  for (size_t i = 0; i < size_t{w} * h; ++i) f[i] = uint8_t(16 + i % 200);
  const size_t chroma = size_t{w / 2} * (h / 2);
  for (size_t c = 0; c < chroma; ++c) {
    const uint8_t u = uint8_t(c * 7), v = uint8_t(255 - c * 3);
    if (format == PixelFormat::kI420) {
      f[layout.planes[1].offset + c] = u;
      f[layout.planes[2].offset + c] = v;
    } else {
      f[layout.planes[1].offset + 2 * c] = u;
      f[layout.planes[1].offset + 2 * c + 1] = v;
    }
  }
  return f;
}

TEST(CameraConvert, PlanarSourcesPassThroughExactly) {
  constexpr uint32_t w = 64, h = 16;
  FrameConverter converter;
  ASSERT_TRUE(converter.prepare(w, h));
  for (PixelFormat source : {PixelFormat::kI420, PixelFormat::kNv12}) {
    const std::vector<uint8_t> src = planar_420(source, w, h);
    const FrameLayout layout = layout_of(source, w, h);
    // The source's own Y, U, V at each pixel: the camera's must be the same bytes.
    auto source_sample = [&](uint32_t x, uint32_t y) -> Yuv {
      const size_t c = size_t{y / 2} * (w / 2) + x / 2;
      const uint8_t luma = src[size_t{y} * w + x];
      if (source == PixelFormat::kI420)
        return {luma, src[layout.planes[1].offset + c], src[layout.planes[2].offset + c]};
      return {luma, src[layout.planes[1].offset + 2 * c], src[layout.planes[1].offset + 2 * c + 1]};
    };
    for (CameraFormat format : kAllFormats) {
      SCOPED_TRACE(std::string(pixel_format_name(source)) + " to " + camera_format_name(format));
      std::vector<uint8_t> out(camera_frame_bytes(format, w, h));
      ASSERT_TRUE(converter.convert(layout, src.data(), format, out.data(), out.size()));
      if ((source == PixelFormat::kI420 && format == CameraFormat::kI420) ||
          (source == PixelFormat::kNv12 && format == CameraFormat::kNv12)) {
        EXPECT_EQ(out, src);
      }
      for (uint32_t y = 0; y < h; ++y) {
        for (uint32_t x = 0; x < w; ++x) {
          const Yuv want = source_sample(x, y);
          const Yuv got = sample(format, out, w, h, x, y);
          ASSERT_EQ(got.y, want.y) << x << "," << y;
          // YUY2 is 4:2:2: libyuv gives both rows of a 4:2:0 block the block's chroma.
          ASSERT_EQ(got.u, want.u) << x << "," << y;
          ASSERT_EQ(got.v, want.v) << x << "," << y;
        }
      }
    }
  }
}

TEST(CameraConvert, RefusesWhatDoesNotFit) {
  FrameConverter converter;
  {
    // Nothing prepared yet: every size differs from the prepared one.
    const FrameLayout layout = layout_of(PixelFormat::kRgba8, 64, 16);
    std::vector<uint8_t> src(layout.bytes), out(64 * 16 * 2);
    EXPECT_FALSE(
        converter.convert(layout, src.data(), CameraFormat::kI420, out.data(), out.size()));
  }
  EXPECT_FALSE(converter.prepare(63, 16));  // odd width
  EXPECT_FALSE(converter.prepare(64, 0));
  EXPECT_EQ(camera_frame_bytes(CameraFormat::kYuy2, 64, 15), 0u);
  EXPECT_EQ(camera_frame_bytes(CameraFormat::kYuy2, 64, 16), 64u * 16 * 2);
  EXPECT_EQ(camera_frame_bytes(CameraFormat::kI420, 64, 16), 64u * 16 * 3 / 2);
  EXPECT_EQ(camera_frame_bytes(CameraFormat::kNv12, 1920, 1080), 1920u * 1080 * 3 / 2);
  ASSERT_TRUE(converter.prepare(64, 16));
  const FrameLayout other = layout_of(PixelFormat::kRgba8, 32, 16);
  std::vector<uint8_t> src(other.bytes), out(64 * 16 * 2, 0xee);
  EXPECT_FALSE(converter.convert(other, src.data(), CameraFormat::kYuy2, out.data(), out.size()));
  const FrameLayout right = layout_of(PixelFormat::kRgba8, 64, 16);
  src.resize(right.bytes);
  EXPECT_FALSE(
      converter.convert(right, src.data(), CameraFormat::kYuy2, out.data(), out.size() - 1));
  EXPECT_EQ(out, std::vector<uint8_t>(64 * 16 * 2, 0xee));  // untouched
  CameraFormat f;
  EXPECT_TRUE(parse_camera_format("nv12", f));
  EXPECT_EQ(f, CameraFormat::kNv12);
  EXPECT_FALSE(parse_camera_format("bgrx", f));
}

// What the conversions of planar frames produced before they went one pass at a time: libyuv
// over the whole frame, NV12 to YUY2 in two passes through an I420 frame. The one-pass
// conversions must give the same bytes.
void whole_frame_reference(PixelFormat source, const uint8_t* p, CameraFormat format, uint8_t* out,
                           int w, int h) {
  const int half = w / 2;
  uint8_t* y = out;
  uint8_t* u = out + size_t(w) * h;
  uint8_t* v = u + size_t(w) * h / 4;
  std::vector<uint8_t> i420(size_t(w) * h * 3 / 2);
  uint8_t* tu = i420.data() + size_t(w) * h;
  uint8_t* tv = tu + size_t(w) * h / 4;
  switch (source) {
    case PixelFormat::kI420: {
      const uint8_t* su = p + size_t(w) * h;
      const uint8_t* sv = su + size_t(w) * h / 4;
      if (format == CameraFormat::kI420) std::memcpy(out, p, i420.size());
      if (format == CameraFormat::kNv12)
        libyuv::I420ToNV12(p, w, su, half, sv, half, y, w, u, w, w, h);
      if (format == CameraFormat::kYuy2)
        libyuv::I420ToYUY2(p, w, su, half, sv, half, out, w * 2, w, h);
      break;
    }
    case PixelFormat::kNv12: {
      const uint8_t* uv = p + size_t(w) * h;
      if (format == CameraFormat::kNv12) std::memcpy(out, p, i420.size());
      if (format == CameraFormat::kI420)
        libyuv::NV12ToI420(p, w, uv, w, y, w, u, half, v, half, w, h);
      if (format == CameraFormat::kYuy2) {
        libyuv::SplitUVPlane(uv, w, tu, half, tv, half, half, h / 2);
        libyuv::I420ToYUY2(p, w, tu, half, tv, half, out, w * 2, w, h);
      }
      break;
    }
    default:
      FAIL() << "no reference for " << pixel_format_name(source);
  }
}

TEST(CameraConvert, OnePassPlanarMatchesTheWholeFrameConversionsByteForByte) {
  // Random pixels, so every chunk differs; sizes whose width is a multiple of the converter's
  // 192-column chunk, one with a narrow last chunk (1282 = 6 * 192 + 130), one narrower than a
  // chunk, the smallest frame, and a tall one (bands go on into the last rows).
  std::mt19937 rng(31);
  for (const auto& [w, h] : {std::pair{1920u, 8u}, std::pair{1282u, 6u}, std::pair{34u, 4u},
                             std::pair{2u, 2u}, std::pair{384u, 96u}}) {
    FrameConverter converter;
    ASSERT_TRUE(converter.prepare(w, h));
    for (PixelFormat source : {PixelFormat::kI420, PixelFormat::kNv12}) {
      const FrameLayout layout = layout_of(source, w, h);
      std::vector<uint8_t> src(layout.bytes);
      for (uint8_t& b : src) b = uint8_t(rng());
      for (CameraFormat format : kAllFormats) {
        SCOPED_TRACE(std::to_string(w) + "x" + std::to_string(h) + " " + pixel_format_name(source) +
                     " to " + camera_format_name(format));
        const size_t bytes = camera_frame_bytes(format, w, h);
        std::vector<uint8_t> want(bytes), got(bytes + 16, 0xa5);
        whole_frame_reference(source, src.data(), format, want.data(), int(w), int(h));
        ASSERT_TRUE(converter.convert(layout, src.data(), format, got.data(), got.size()));
        ASSERT_TRUE(std::equal(want.begin(), want.end(), got.begin()));
        // Nothing written past the frame.
        EXPECT_EQ(std::vector<uint8_t>(got.begin() + long(bytes), got.end()),
                  std::vector<uint8_t>(16, 0xa5));
      }
    }
  }
}

// The exact BT.601 limited-range Y of a pixel, and U and V of the mean of pixels, from full-range
// R, G, B.
double exact_y(double r, double g, double b) {
  return 16 + 219.0 / 255 * (0.299 * r + 0.587 * g + 0.114 * b);
}
double exact_u(double r, double g, double b) {
  return 128 + 224.0 / 255 * (b - (0.299 * r + 0.587 * g + 0.114 * b)) / 1.772;
}
double exact_v(double r, double g, double b) {
  return 128 + 224.0 / 255 * (r - (0.299 * r + 0.587 * g + 0.114 * b)) / 1.402;
}

TEST(CameraConvert, RgbIsWithinHalfALevelOfTheExactMatrix) {
  // Random pixels into every format: each Y within 0.51 of its pixel's exact Y, each U and V
  // within 0.51 of the exact chroma of the mean of its 2x2 block (I420, NV12) or its row's pixel
  // pair (YUY2, 4:2:2). The 0.01 is the fixed-point coefficients' own error.
  std::mt19937 rng(7);
  for (const auto& [w, h] : {std::pair{1920u, 4u}, std::pair{1282u, 2u}, std::pair{34u, 6u}}) {
    FrameConverter converter;
    ASSERT_TRUE(converter.prepare(w, h));
    for (PixelFormat source : {PixelFormat::kRgba8, PixelFormat::kBgra8}) {
      const bool rgba = source == PixelFormat::kRgba8;
      std::vector<uint8_t> src(size_t{w} * h * 4);
      for (uint8_t& b : src) b = uint8_t(rng());
      auto rgb = [&](uint32_t x, uint32_t y, int c) {  // c: 0 R, 1 G, 2 B
        const uint8_t* p = &src[(size_t{y} * w + x) * 4];
        return double(c == 1 ? p[1] : (c == 0) == rgba ? p[0] : p[2]);
      };
      for (CameraFormat format : kAllFormats) {
        SCOPED_TRACE(std::to_string(w) + "x" + std::to_string(h) + " " + pixel_format_name(source) +
                     " to " + camera_format_name(format));
        std::vector<uint8_t> out(camera_frame_bytes(format, w, h));
        ASSERT_TRUE(
            converter.convert(layout_of(source, w, h), src.data(), format, out.data(), out.size()));
        double worst = 0;
        for (uint32_t y = 0; y < h; ++y) {
          for (uint32_t x = 0; x < w; ++x) {
            const Yuv got = sample(format, out, w, h, x, y);
            // The pixels whose mean the chroma is of.
            const uint32_t x0 = x & ~1u;
            const uint32_t y0 = format == CameraFormat::kYuy2 ? y : (y & ~1u);
            const uint32_t rows = format == CameraFormat::kYuy2 ? 1 : 2;
            double mean[3] = {0, 0, 0};
            for (int c = 0; c < 3; ++c) {
              for (uint32_t dy = 0; dy < rows; ++dy) {
                mean[c] += rgb(x0, y0 + dy, c) + rgb(x0 + 1, y0 + dy, c);
              }
              mean[c] /= 2.0 * rows;
            }
            worst = std::max({worst,
                              std::abs(got.y - exact_y(rgb(x, y, 0), rgb(x, y, 1), rgb(x, y, 2))),
                              std::abs(got.u - exact_u(mean[0], mean[1], mean[2])),
                              std::abs(got.v - exact_v(mean[0], mean[1], mean[2]))});
            ASSERT_LE(worst, 0.51) << x << "," << y;
          }
        }
      }
    }
  }
}

TEST(CameraConvert, Avx2RowsGiveThePortableBytes) {
  const RgbToYuvRows* avx2 = rgb_to_yuv_rows_avx2();
  if (avx2 == nullptr) GTEST_SKIP() << "no AVX2 on this CPU or in this build";
  const RgbToYuvRows& portable = rgb_to_yuv_rows_portable();
  std::mt19937 rng(16);
  // Widths under one step of 16, at a step, with a tail of 2 and 14, and long.
  for (int width : {2, 14, 16, 18, 30, 46, 192, 1282}) {
    for (RgbOrder order : {RgbOrder::kRgba, RgbOrder::kBgra}) {
      SCOPED_TRACE(std::to_string(width) + (order == RgbOrder::kRgba ? " rgba" : " bgra"));
      std::vector<uint8_t> row0(size_t(width) * 4), row1(size_t(width) * 4);
      for (uint8_t& b : row0) b = uint8_t(rng());
      for (uint8_t& b : row1) b = uint8_t(rng());
      // One byte more than each output needs, to see nothing is written past it.
      auto i420 = [&](const RgbToYuvRows& rows) {
        std::vector<uint8_t> y(size_t(width) * 2 + 1, 0xa5), u(size_t(width) / 2 + 1, 0xa5),
            v(size_t(width) / 2 + 1, 0xa5);
        rows.i420(order, row0.data(), row1.data(), width, y.data(), y.data() + width, u.data(),
                  v.data());
        y.insert(y.end(), u.begin(), u.end());
        y.insert(y.end(), v.begin(), v.end());
        return y;
      };
      auto nv12 = [&](const RgbToYuvRows& rows) {
        std::vector<uint8_t> y(size_t(width) * 2 + 1, 0xa5), uv(size_t(width) + 1, 0xa5);
        rows.nv12(order, row0.data(), row1.data(), width, y.data(), y.data() + width, uv.data());
        y.insert(y.end(), uv.begin(), uv.end());
        return y;
      };
      auto yuy2 = [&](const RgbToYuvRows& rows) {
        std::vector<uint8_t> out(size_t(width) * 2 + 1, 0xa5);
        rows.yuy2(order, row0.data(), width, out.data());
        return out;
      };
      EXPECT_EQ(i420(*avx2), i420(portable));
      EXPECT_EQ(nv12(*avx2), nv12(portable));
      EXPECT_EQ(yuy2(*avx2), yuy2(portable));
      EXPECT_EQ(i420(portable)[size_t(width) * 2], 0xa5);
    }
  }
}

TEST(CameraConvert, Yuy2GivesEachRowItsOwnChroma) {
  // YUY2 is 4:2:2: red over blue keeps each row's chroma, where I420 has their mean.
  constexpr uint32_t w = 4, h = 2;
  FrameConverter converter;
  ASSERT_TRUE(converter.prepare(w, h));
  for (PixelFormat source : {PixelFormat::kRgba8, PixelFormat::kBgra8}) {
    const bool rgba = source == PixelFormat::kRgba8;
    std::vector<uint8_t> src(w * h * 4);
    for (uint32_t i = 0; i < w * h; ++i) {
      const bool red = i < w;  // row 0 red, row 1 blue
      src[i * 4 + (rgba ? 0 : 2)] = red ? 255 : 0;
      src[i * 4 + 1] = 0;
      src[i * 4 + (rgba ? 2 : 0)] = red ? 0 : 255;
      src[i * 4 + 3] = 255;
    }
    for (CameraFormat format : {CameraFormat::kYuy2, CameraFormat::kI420}) {
      std::vector<uint8_t> out(camera_frame_bytes(format, w, h));
      ASSERT_TRUE(
          converter.convert(layout_of(source, w, h), src.data(), format, out.data(), out.size()));
      const Yuv top = sample(format, out, w, h, 0, 0);
      const Yuv bottom = sample(format, out, w, h, 0, 1);
      EXPECT_EQ(top.y, 81);     // red
      EXPECT_EQ(bottom.y, 41);  // blue
      if (format == CameraFormat::kYuy2) {
        EXPECT_EQ(top.u, 90);
        EXPECT_EQ(top.v, 240);
        EXPECT_EQ(bottom.u, 240);
        EXPECT_EQ(bottom.v, 110);
      } else {
        EXPECT_EQ(top.u, 165);  // of the mean of red and blue, (127.5, 0, 127.5)
        EXPECT_EQ(top.v, 175);
        EXPECT_EQ(bottom.u, top.u);
      }
    }
  }
}

TEST(CameraFormat, CheapestIsACopyForYuvAndI420ForRgb) {
  EXPECT_EQ(cheapest_camera_format(PixelFormat::kI420), CameraFormat::kI420);
  EXPECT_EQ(cheapest_camera_format(PixelFormat::kNv12), CameraFormat::kNv12);
  EXPECT_EQ(cheapest_camera_format(PixelFormat::kRgba8), CameraFormat::kI420);
  EXPECT_EQ(cheapest_camera_format(PixelFormat::kBgra8), CameraFormat::kI420);
  // A decoded twin (what the camera shows of an h264 stream) is I420.
  EXPECT_EQ(cheapest_camera_format(PixelFormat::kH264), CameraFormat::kI420);
}

TEST(PipeWireFormat, EnumFormatCarriesFormatSizeRateAndColour) {
  alignas(8) uint8_t storage[1024];
  spa_pod_builder builder = SPA_POD_BUILDER_INIT(storage, sizeof storage);
  const spa_pod* params[3];
  const CameraFormat formats[3] = {CameraFormat::kNv12, CameraFormat::kI420, CameraFormat::kYuy2};
  // Three in one builder, as the backend builds them (its storage is 1024 bytes).
  for (int i = 0; i < 3; ++i) {
    params[i] = build_camera_enum_format(builder, formats[i], 1280, 720, 30000, 1001);
    ASSERT_NE(params[i], nullptr);
  }
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(camera_format_name(formats[i]));
    EXPECT_TRUE(spa_pod_is_object_type(params[i], SPA_TYPE_OBJECT_Format));
    EXPECT_EQ(SPA_POD_OBJECT_ID(reinterpret_cast<const spa_pod_object*>(params[i])),
              uint32_t(SPA_PARAM_EnumFormat));
    // Read back with spa's own parser, as consumers (Chromium's ParseFormat, pipewiresrc) do.
    spa_video_info_raw info{};
    ASSERT_GE(spa_format_video_raw_parse(params[i], &info), 0);
    EXPECT_EQ(info.format, spa_video_format_of(formats[i]));
    EXPECT_EQ(info.size.width, 1280u);
    EXPECT_EQ(info.size.height, 720u);
    EXPECT_EQ(info.framerate.num, 30000u);
    EXPECT_EQ(info.framerate.denom, 1001u);
    EXPECT_EQ(info.color_range, SPA_VIDEO_COLOR_RANGE_16_235);
    EXPECT_EQ(info.color_matrix, SPA_VIDEO_COLOR_MATRIX_BT601);
    EXPECT_EQ(info.transfer_function, SPA_VIDEO_TRANSFER_SRGB);
    EXPECT_EQ(info.color_primaries, SPA_VIDEO_COLOR_PRIMARIES_BT709);
    // Every value fixed: Chromium reads only SPA_CHOICE_None values.
    const spa_pod_prop* prop;
    SPA_POD_OBJECT_FOREACH(reinterpret_cast<const spa_pod_object*>(params[i]), prop) {
      uint32_t n_values = 0, choice = 0;
      spa_pod_get_values(&prop->value, &n_values, &choice);
      EXPECT_EQ(choice, uint32_t(SPA_CHOICE_None)) << "key " << prop->key;
      EXPECT_EQ(prop->flags, 0u) << "key " << prop->key;  // none mandatory
    }
    CameraFormatParam parsed;
    ASSERT_TRUE(parse_camera_format_param(params[i], parsed));
    EXPECT_EQ(parsed.format, formats[i]);
    EXPECT_EQ(parsed.width, 1280u);
    EXPECT_EQ(parsed.height, 720u);
    EXPECT_EQ(parsed.fps_num, 30000u);
    EXPECT_EQ(parsed.fps_den, 1001u);
    EXPECT_EQ(parsed.colorimetry, camera_colorimetry());
  }
  // What the converter makes, in GStreamer's numbers: colorimetry "2:4:7:1".
  const CameraColorimetry c = camera_colorimetry();
  EXPECT_EQ(std::to_string(c.range) + ":" + std::to_string(c.matrix) + ":" +
                std::to_string(c.transfer) + ":" + std::to_string(c.primaries),
            "2:4:7:1");
}

TEST(PipeWireFormat, BuilderOutOfRoomAndForeignParams) {
  // Too small a builder: nullptr, never a truncated param.
  alignas(8) uint8_t small[64];
  spa_pod_builder tight = SPA_POD_BUILDER_INIT(small, sizeof small);
  EXPECT_EQ(build_camera_enum_format(tight, CameraFormat::kI420, 640, 360, 30, 1), nullptr);

  alignas(8) uint8_t storage[512];
  spa_pod_builder builder = SPA_POD_BUILDER_INIT(storage, sizeof storage);
  CameraFormatParam parsed;
  EXPECT_FALSE(parse_camera_format_param(nullptr, parsed));
  // A format the camera does not make (what a consumer asking for BGRx would hold).
  spa_rectangle size{640, 360};
  const auto* bgrx = static_cast<const spa_pod*>(spa_pod_builder_add_object(
      &builder, SPA_TYPE_OBJECT_Format, SPA_PARAM_Format, SPA_FORMAT_mediaType,
      SPA_POD_Id(SPA_MEDIA_TYPE_video), SPA_FORMAT_mediaSubtype, SPA_POD_Id(SPA_MEDIA_SUBTYPE_raw),
      SPA_FORMAT_VIDEO_format, SPA_POD_Id(SPA_VIDEO_FORMAT_BGRx), SPA_FORMAT_VIDEO_size,
      SPA_POD_Rectangle(&size)));
  EXPECT_FALSE(parse_camera_format_param(bgrx, parsed));
  // Not video.
  const auto* audio = static_cast<const spa_pod*>(
      spa_pod_builder_add_object(&builder, SPA_TYPE_OBJECT_Format, SPA_PARAM_Format,
                                 SPA_FORMAT_mediaType, SPA_POD_Id(SPA_MEDIA_TYPE_audio),
                                 SPA_FORMAT_mediaSubtype, SPA_POD_Id(SPA_MEDIA_SUBTYPE_raw)));
  EXPECT_FALSE(parse_camera_format_param(audio, parsed));
  // A consumer's Format without colour (pipewiresrc's, for one): zeros, the format still read.
  const auto* plain = static_cast<const spa_pod*>(spa_pod_builder_add_object(
      &builder, SPA_TYPE_OBJECT_Format, SPA_PARAM_Format, SPA_FORMAT_mediaType,
      SPA_POD_Id(SPA_MEDIA_TYPE_video), SPA_FORMAT_mediaSubtype, SPA_POD_Id(SPA_MEDIA_SUBTYPE_raw),
      SPA_FORMAT_VIDEO_format, SPA_POD_Id(SPA_VIDEO_FORMAT_YUY2), SPA_FORMAT_VIDEO_size,
      SPA_POD_Rectangle(&size)));
  ASSERT_TRUE(parse_camera_format_param(plain, parsed));
  EXPECT_EQ(parsed.format, CameraFormat::kYuy2);
  EXPECT_EQ(parsed.width, 640u);
  EXPECT_EQ(parsed.fps_den, 0u);
  EXPECT_EQ(parsed.colorimetry, CameraColorimetry{});
  CameraFormat f;
  EXPECT_FALSE(camera_format_of_spa(SPA_VIDEO_FORMAT_BGRx, f));
  for (CameraFormat format : kAllFormats) {
    ASSERT_TRUE(camera_format_of_spa(spa_video_format_of(format), f));
    EXPECT_EQ(f, format);
  }
}

// A regular file in the test's temporary directory, removed at the end.
struct TempFile {
  std::string path;
  explicit TempFile(const char* name) {
    path = (std::filesystem::temp_directory_path() /
            (std::string("sync-camera-") + std::to_string(::getpid()) + "-" + name))
               .string();
    std::ofstream(path, std::ios::trunc);
  }
  ~TempFile() { std::remove(path.c_str()); }
  std::vector<uint8_t> bytes() const {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
};

TEST(V4l2Backend, FileStandsInForTheDevice) {
  TempFile file("backend");
  V4l2LoopbackBackend backend(file.path);
  std::string error;
  ASSERT_TRUE(backend.open(error)) << error;
  EXPECT_FALSE(backend.is_device());
  EXPECT_TRUE(backend.dequeue().empty());  // nothing configured yet
  EXPECT_FALSE(backend.configure(63, 32, CameraFormat::kYuy2, error));
  EXPECT_NE(error.find("even"), std::string::npos) << error;

  ASSERT_TRUE(backend.configure(64, 32, CameraFormat::kYuy2, error)) << error;
  std::vector<uint8_t> expected;
  for (int frame = 0; frame < 3; ++frame) {
    std::span<uint8_t> buffer = backend.dequeue();
    ASSERT_EQ(buffer.size(), 64u * 32 * 2);
    for (size_t i = 0; i < buffer.size(); ++i) buffer[i] = uint8_t(frame * 31 + i);
    expected.insert(expected.end(), buffer.begin(), buffer.end());
    ASSERT_TRUE(backend.queue(1000 + frame, frame));
  }
  // A new format takes effect from the next frame: I420 is 1.5 bytes a pixel.
  ASSERT_TRUE(backend.configure(64, 32, CameraFormat::kI420, error)) << error;
  std::span<uint8_t> buffer = backend.dequeue();
  ASSERT_EQ(buffer.size(), 64u * 32 * 3 / 2);
  std::fill(buffer.begin(), buffer.end(), 0x5a);
  expected.insert(expected.end(), buffer.begin(), buffer.end());
  ASSERT_TRUE(backend.queue(2000, 3));
  EXPECT_EQ(file.bytes(), expected);
  backend.close();
  EXPECT_FALSE(backend.queue(3000, 4));
}

TEST(V4l2Backend, SaysWhyItCannotOpen) {
  std::string error;
  V4l2LoopbackBackend missing("/nonexistent/video99");
  EXPECT_FALSE(missing.open(error));
  EXPECT_NE(error.find("/nonexistent/video99"), std::string::npos) << error;
  // A character device that is no V4L2 device: the capability query is refused.
  V4l2LoopbackBackend not_video("/dev/null");
  EXPECT_FALSE(not_video.open(error));
  EXPECT_NE(error.find("VIDIOC_QUERYCAP"), std::string::npos) << error;
}

// A backend under the test's control: it records frames, and can be made slow (queue() waits
// until released), busy (no buffer) or failing (configure refuses).
class FakeBackend final : public CameraBackend {
 public:
  std::atomic<bool> hold{false};
  std::atomic<bool> held{false};  // queue() is waiting on hold
  std::atomic<bool> busy{false};
  std::atomic<bool> up{true};  // connected(): false plays a PipeWire that went away
  std::atomic<uint64_t> consumed{0};
  bool refuse_configure = false;
  std::atomic<int> configures{0};
  std::atomic<int> queued{0};
  std::atomic<int> queue_policy{-1};         // the scheduling policy of the thread that queued
  std::vector<std::vector<uint8_t>> frames;  // worker writes; read after the worker stopped
  uint32_t width = 0, height = 0;

  std::string_view kind() const override { return "fake"; }
  std::string_view target() const override { return "memory"; }
  bool open(std::string&) override { return true; }
  bool configure(uint32_t w, uint32_t h, CameraFormat f, std::string& error) override {
    ++configures;
    if (refuse_configure) {
      error = "refused by the test";
      return false;
    }
    width = w;
    height = h;
    buffer_.assign(camera_frame_bytes(f, w, h), 0);
    return true;
  }
  std::span<uint8_t> dequeue() override {
    if (busy || !up) return {};
    return buffer_;
  }
  bool connected() const override { return up; }
  std::optional<CameraDelivery> delivery() const override {
    return CameraDelivery{.consumed = consumed, .abandoned = 0};
  }
  bool queue(uint64_t, uint64_t) override {
    queue_policy = sched_getscheduler(0);
    held = true;
    while (hold) std::this_thread::yield();
    held = false;
    frames.push_back(buffer_);
    ++queued;
    return true;
  }
  void close() override {}

 private:
  std::vector<uint8_t> buffer_;
};

// A luma marker the way a consumer reads it back from the Y plane: the sequence's 16 low bits,
// one 4-pixel-wide, full-height column each, black (0) or white (1).
void draw_marker_rgba(uint8_t* pixels, uint32_t w, uint32_t h, uint64_t sequence) {
  for (uint32_t y = 0; y < h; ++y)
    for (uint32_t x = 0; x < w; ++x) {
      const bool bit = x / 4 < 16 && ((sequence >> (x / 4)) & 1);
      uint8_t* p = pixels + (size_t{y} * w + x) * 4;
      p[0] = p[1] = p[2] = bit ? 255 : 0;
      p[3] = 255;
    }
}
uint64_t read_marker_yuy2(const std::vector<uint8_t>& f, uint32_t w, uint32_t row) {
  uint64_t s = 0;
  for (uint32_t bit = 0; bit < 16; ++bit)
    if (f[(size_t{row} * w + bit * 4 + 2) * 2] > 128) s |= uint64_t{1} << bit;
  return s;
}

// A stream on its own pool, offered frames the way the registry offers them: the writer's
// reference is dropped right after on_frame().
struct TestStream {
  uint32_t w, h;
  Stream stream;
  TestStream(uint32_t id, uint32_t w_, uint32_t h_, uint32_t slots)
      : w(w_),
        h(h_),
        stream(id,
               StreamConfig{"cam" + std::to_string(id), w_, h_, PixelFormat::kRgba8, 60.0, slots},
               layout_of(PixelFormat::kRgba8, w_, h_), 1,
               FramePool::create(size_t{w_} * h_ * 4, slots)) {}
  // False when the pool had no free slot.
  bool offer(Publisher& p, uint64_t sequence) {
    FrameSlot* slot = stream.pool()->acquire();
    if (!slot) return false;
    slot->info.sequence = sequence;
    slot->info.bytes = stream.frame_bytes();
    slot->info.capture_time_us = sequence * 16'667;
    draw_marker_rgba(slot->pixels, w, h, sequence);
    p.on_frame(stream, *slot);
    FramePool::release(slot);
    return true;
  }
};

struct Loop {
  uv_loop_t loop;
  Loop() { uv_loop_init(&loop); }
  ~Loop() {
    uv_run(&loop, UV_RUN_DEFAULT);  // the hand-off's async handle closes
    uv_loop_close(&loop);
  }
  template <typename Pred>
  bool run_until(Pred pred) {
    for (int i = 0; i < 20000 && !pred(); ++i) {
      uv_run(&loop, UV_RUN_NOWAIT);
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return pred();
  }
};

void expect_accounted(const CameraCounters& c) {
  EXPECT_EQ(c.offered, c.delivered + c.converting + c.dropped_total());
}

TEST(CameraPublisher, ConvertsOnItsWorkerAndAccountsEveryFrame) {
  Loop loop;
  auto backend = std::make_unique<FakeBackend>();
  FakeBackend* fake = backend.get();
  CameraPublisher camera(&loop.loop, CameraConfig{}, std::move(backend));
  TestStream s(7, 128, 32, 4);
  TestStream other(8, 128, 32, 4);
  camera.on_stream_open(s.stream);
  camera.on_stream_open(other.stream);  // one camera, one stream: the first is shown
  EXPECT_EQ(camera.shown_stream(), 7u);
  for (uint64_t seq = 1; seq <= 5; ++seq) {
    ASSERT_TRUE(s.offer(camera, seq));
    ASSERT_TRUE(other.offer(camera, seq));
    ASSERT_TRUE(loop.run_until([&] { return camera.counters(7)->converting == 0; }));
  }
  camera.stop();
  const CameraCounters& c = *camera.counters(7);
  EXPECT_EQ(c.offered, 5u);
  EXPECT_EQ(c.delivered, 5u);
  expect_accounted(c);
  EXPECT_EQ(camera.counters(8), nullptr);
  EXPECT_EQ(fake->configures, 1);  // once per geometry, not per frame
  ASSERT_EQ(fake->frames.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    ASSERT_EQ(fake->frames[i].size(), 128u * 32 * 2);
    EXPECT_EQ(read_marker_yuy2(fake->frames[i], 128, 0), i + 1);
    EXPECT_EQ(read_marker_yuy2(fake->frames[i], 128, 31), i + 1);
  }
  EXPECT_EQ(c.convert.count(), 5u);
  EXPECT_EQ(c.loop.count(), 5u);
  // The worker is a batch thread, so that waking it does not preempt the loop.
  EXPECT_EQ(fake->queue_policy, SCHED_BATCH);
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);  // the loop's own policy is left alone

  // The shown stream closes: the next stream opened takes the camera.
  camera.on_stream_close(s.stream);
  TestStream next(9, 64, 16, 4);
  camera.on_stream_open(next.stream);
  EXPECT_EQ(camera.shown_stream(), 9u);
}

TEST(CameraPublisher, SlowBackendDropsAtTheHandoffNotOnTheLoop) {
  Loop loop;
  auto backend = std::make_unique<FakeBackend>();
  FakeBackend* fake = backend.get();
  fake->hold = true;
  CameraPublisher camera(&loop.loop, CameraConfig{}, std::move(backend));
  TestStream s(1, 64, 16, 8);
  camera.on_stream_open(s.stream);
  ASSERT_TRUE(s.offer(camera, 1));
  ASSERT_TRUE(loop.run_until([&] { return fake->held.load(); }));  // the worker is stuck
  for (uint64_t seq = 2; seq <= 6; ++seq) ASSERT_TRUE(s.offer(camera, seq));
  {
    const CameraCounters& c = *camera.counters(1);
    EXPECT_EQ(c.converting, CameraPublisher::kQueueDepth);
    EXPECT_EQ(c.dropped[size_t(CameraDrop::kConsumerSlow)], 6 - CameraPublisher::kQueueDepth);
    expect_accounted(c);
  }
  fake->hold = false;
  ASSERT_TRUE(loop.run_until([&] { return camera.counters(1)->converting == 0; }));
  camera.stop();
  const CameraCounters& c = *camera.counters(1);
  EXPECT_EQ(c.delivered, CameraPublisher::kQueueDepth);
  expect_accounted(c);
  EXPECT_EQ(s.stream.pool()->slots_in_use(), 0u);  // every pin given back

  nlohmann::json stats = nlohmann::json::object();
  camera.write_stream_stats(1, stats);
  EXPECT_EQ(stats["offered"], 6);
  EXPECT_EQ(stats["dropped"]["consumer_slow"], 6 - CameraPublisher::kQueueDepth);
  syncd::telemetry::PrometheusText metrics;
  camera.write_metrics(metrics, {&s.stream});
  EXPECT_NE(metrics.text().find("syncd_camera_frames_dropped_total{stream=\"cam1\",reason="
                                "\"consumer_slow\"} 4"),
            std::string::npos)
      << metrics.text();
}

TEST(CameraPublisher, PinRefusedWhenThePoolHasNoSlotToSpare) {
  Loop loop;
  auto backend = std::make_unique<FakeBackend>();
  FakeBackend* fake = backend.get();
  fake->hold = true;
  CameraPublisher camera(&loop.loop, CameraConfig{}, std::move(backend));
  TestStream s(1, 64, 16, 2);  // pin cap: 1 slot
  camera.on_stream_open(s.stream);
  ASSERT_TRUE(s.offer(camera, 1));
  ASSERT_TRUE(loop.run_until([&] { return fake->held.load(); }));
  ASSERT_TRUE(s.offer(camera, 2));  // the other slot: free, but pinning it would reach the cap
  EXPECT_EQ(camera.counters(1)->dropped[size_t(CameraDrop::kPinRefused)], 1u);
  fake->hold = false;
  ASSERT_TRUE(loop.run_until([&] { return camera.counters(1)->converting == 0; }));
  camera.stop();
  EXPECT_EQ(camera.counters(1)->delivered, 1u);
  expect_accounted(*camera.counters(1));
}

TEST(CameraPublisher, BusyFailingAndMissingBackendsAreCountedByReason) {
  {
    Loop loop;
    auto backend = std::make_unique<FakeBackend>();
    backend->busy = true;
    CameraPublisher camera(&loop.loop, CameraConfig{}, std::move(backend));
    TestStream s(1, 64, 16, 4);
    camera.on_stream_open(s.stream);
    ASSERT_TRUE(s.offer(camera, 1));
    ASSERT_TRUE(loop.run_until([&] { return camera.counters(1)->converting == 0; }));
    camera.stop();
    EXPECT_EQ(camera.counters(1)->dropped[size_t(CameraDrop::kBackendBusy)], 1u);
    expect_accounted(*camera.counters(1));
  }
  {
    Loop loop;
    auto backend = std::make_unique<FakeBackend>();
    backend->refuse_configure = true;
    FakeBackend* fake = backend.get();
    CameraPublisher camera(&loop.loop, CameraConfig{}, std::move(backend));
    TestStream s(1, 64, 16, 4);
    camera.on_stream_open(s.stream);
    for (uint64_t seq = 1; seq <= 3; ++seq) {
      ASSERT_TRUE(s.offer(camera, seq));
      ASSERT_TRUE(loop.run_until([&] { return camera.counters(1)->converting == 0; }));
    }
    camera.stop();
    EXPECT_EQ(camera.counters(1)->dropped[size_t(CameraDrop::kBackendError)], 3u);
    EXPECT_EQ(fake->configures, 1);  // a refused geometry is not asked again
    expect_accounted(*camera.counters(1));
  }
  {
    CameraPublisher camera(nullptr, CameraConfig{}, nullptr, "no device");
    TestStream s(1, 64, 16, 4);
    camera.on_stream_open(s.stream);
    ASSERT_TRUE(s.offer(camera, 1));
    EXPECT_EQ(camera.counters(1)->dropped[size_t(CameraDrop::kNoBackend)], 1u);
    expect_accounted(*camera.counters(1));
    nlohmann::json stats = nlohmann::json::object();
    camera.write_stream_stats(1, stats);
    EXPECT_EQ(stats["backend"], "none");
    EXPECT_EQ(stats["error"], "no device");
  }
  {
    CameraPublisher camera(nullptr, CameraConfig{}, std::make_unique<FakeBackend>());
    TestStream s(1, 62, 15, 4);  // odd height: no camera format carries it
    camera.on_stream_open(s.stream);
    ASSERT_TRUE(s.offer(camera, 1));
    EXPECT_EQ(camera.counters(1)->dropped[size_t(CameraDrop::kUnsupportedSize)], 1u);
    expect_accounted(*camera.counters(1));
  }
}

TEST(CameraPublisher, StartsWithAFileStandingInForTheDevice) {
  TempFile file("publisher");
  CameraConfig config;
  config.device = file.path;
  config.format = CameraFormat::kI420;
  auto camera = CameraPublisher::create(nullptr, config);
  TestStream s(1, 64, 16, 4);
  camera->on_stream_open(s.stream);
  for (uint64_t seq = 1; seq <= 3; ++seq) ASSERT_TRUE(s.offer(*camera, seq));
  camera->stop();
  EXPECT_EQ(camera->counters(1)->delivered, 3u);
  const std::vector<uint8_t> bytes = file.bytes();
  ASSERT_EQ(bytes.size(), 3u * 64 * 16 * 3 / 2);
  // Marker bit 0 of frame 1 is white: Y 235 in the first column; black (16) after it.
  EXPECT_EQ(bytes[0], 235);
  EXPECT_EQ(bytes[4], 16);

  config.device = "/nonexistent/video99";
  auto without = CameraPublisher::create(nullptr, config);
  nlohmann::json stats = nlohmann::json::object();
  without->on_stream_open(s.stream);
  without->write_stream_stats(1, stats);
  EXPECT_NE(stats["error"].get<std::string>().find("/nonexistent/video99"), std::string::npos);
}

// Opt-in: needs a v4l2loopback device (modprobe v4l2loopback devices=1 video_nr=10
// exclusive_caps=1 card_label="Sync Camera"; docs/camera.md). SYNC_CAMERA_DEVICE names one;
// otherwise the first /dev/video* that takes output is used.
TEST(V4l2Backend, OptInWritesToARealLoopbackDevice) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("SYNC_CAMERA_DEVICE")) candidates.push_back(env);
  for (int n = 0; n < 64; ++n) candidates.push_back("/dev/video" + std::to_string(n));
  std::unique_ptr<V4l2LoopbackBackend> backend;
  std::string error, errors;
  for (const std::string& path : candidates) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) continue;
    auto b = std::make_unique<V4l2LoopbackBackend>(path);
    if (b->open(error)) {
      backend = std::move(b);
      break;
    }
    errors += error + "; ";
  }
  if (!backend)
    GTEST_SKIP() << "opt-in: no v4l2loopback device (see docs/camera.md to load one)"
                 << (errors.empty() ? "" : ": " + errors);
  std::printf("v4l2loopback device %s, card \"%s\"\n", std::string(backend->target()).c_str(),
              backend->card().c_str());
  for (CameraFormat format : {CameraFormat::kYuy2, CameraFormat::kI420}) {
    ASSERT_TRUE(backend->configure(640, 480, format, error)) << error;
    for (int i = 0; i < 3; ++i) {
      std::span<uint8_t> buffer = backend->dequeue();
      ASSERT_EQ(buffer.size(), camera_frame_bytes(format, 640, 480));
      std::fill(buffer.begin(), buffer.end(), uint8_t(0x80));
      ASSERT_TRUE(backend->queue(0, uint64_t(i)));
    }
  }
}

TEST(CameraPublisher, FramesWhileTheBackendIsDownAreCountedAsSuchAndDeliveryIsPerStream) {
  Loop loop;
  auto backend = std::make_unique<FakeBackend>();
  FakeBackend* fake = backend.get();
  CameraPublisher camera(&loop.loop, CameraConfig{}, std::move(backend));
  TestStream first(1, 64, 16, 4);
  camera.on_stream_open(first.stream);
  auto offer = [&](TestStream& s, uint64_t seq) {
    ASSERT_TRUE(s.offer(camera, seq));
    ASSERT_TRUE(loop.run_until([&] { return camera.counters(s.stream.id())->converting == 0; }));
  };
  offer(first, 1);
  fake->consumed = 1;
  fake->up = false;  // PipeWire went away
  offer(first, 2);
  offer(first, 3);
  fake->up = true;
  offer(first, 4);
  fake->consumed = 2;
  const CameraCounters& c = *camera.counters(1);
  EXPECT_EQ(c.delivered, 2u);
  EXPECT_EQ(c.dropped[size_t(CameraDrop::kBackendDown)], 2u);
  EXPECT_EQ(c.dropped[size_t(CameraDrop::kNoConsumer)], 0u);
  expect_accounted(c);
  nlohmann::json stats;
  camera.write_stream_stats(1, stats);
  EXPECT_EQ(stats["dropped"]["backend_down"], 2);
  EXPECT_EQ(stats["consumed"], 2);
  EXPECT_EQ(stats["with_consumer"], 0);
  // The first stream closes and a second is shown: what comes back between counts for the
  // first; the second starts from there.
  camera.on_stream_close(first.stream);
  TestStream second(2, 64, 16, 4);
  camera.on_stream_open(second.stream);
  offer(second, 1);
  fake->consumed = 3;
  camera.write_stream_stats(1, stats);
  EXPECT_EQ(stats["consumed"], 2);
  camera.write_stream_stats(2, stats);
  EXPECT_EQ(stats["consumed"], 1);
  EXPECT_EQ(stats["delivered"], 1);
  camera.stop();
}

}  // namespace
