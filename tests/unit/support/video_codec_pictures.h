// Test pictures for the video codec tests and benchmark: moving content with the camera column
// marker, owned I420 buffers, and conversions to the other input formats with libyuv.
#pragma once

#include <libyuv.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "media/column_marker.h"
#include "video_codec/picture.h"

namespace syncd::video_codec::testing {
using media::draw_column_marker;
using media::kMarkerWidth;
using media::read_column_marker;

struct I420Frame {
  uint32_t width = 0;
  uint32_t height = 0;
  std::vector<uint8_t> y, u, v;

  I420Frame(uint32_t w, uint32_t h)
      : width(w),
        height(h),
        y(size_t{w} * h),
        u(size_t{w / 2} * (h / 2), 128),
        v(size_t{w / 2} * (h / 2), 128) {}

  InputPicture input() const {
    InputPicture in;
    in.format = PixelFormat::kI420;
    in.width = width;
    in.height = height;
    in.planes[0] = y.data();
    in.planes[1] = u.data();
    in.planes[2] = v.data();
    in.strides[0] = width;
    in.strides[1] = width / 2;
    in.strides[2] = width / 2;
    return in;
  }

  OutputPicture output() {
    OutputPicture out;
    out.format = PixelFormat::kI420;
    out.width = width;
    out.height = height;
    out.planes[0] = y.data();
    out.planes[1] = u.data();
    out.planes[2] = v.data();
    out.strides[0] = width;
    out.strides[1] = width / 2;
    out.strides[2] = width / 2;
    return out;
  }
};

// Moving content: a diagonal texture scrolled by 4 pixels a frame, with chroma bands, plus
// (noise_amplitude > 0) per-frame noise so the encoder has to spend bits on every frame. Rows
// are copied from a precomputed texture, so drawing a 1080p frame costs about a memcpy.
class MovingPicture {
 public:
  MovingPicture(uint32_t width, uint32_t height, uint32_t noise_amplitude = 0)
      : width_(width), height_(height), noise_(noise_amplitude), texture_(size_t{width} * 2 * 64) {
    for (uint32_t ty = 0; ty < 64; ++ty) {
      for (uint32_t x = 0; x < width * 2; ++x) {
        texture_[size_t{ty} * width * 2 + x] = static_cast<uint8_t>(
            40 + ((x / 3 + ty * 5) % 64) * 2 + ((x / 37) % 2) * 40 + ((x ^ (ty * 7)) & 15));
      }
    }
  }

  void draw(I420Frame& frame, uint32_t t, uint16_t marker) {
    const uint32_t shift = (t * 4) % width_;
    for (uint32_t y = 0; y < height_; ++y) {
      const uint8_t* src = &texture_[size_t{(y + t) % 64} * width_ * 2 + shift];
      std::copy(src, src + width_, &frame.y[size_t{y} * width_]);
    }
    if (noise_ != 0) {
      uint32_t state = 0x9e3779b9u * (t + 1);
      for (size_t i = 0; i < frame.y.size(); i += 1) {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        frame.y[i] = static_cast<uint8_t>(frame.y[i] + (state % (2 * noise_ + 1)) - noise_);
      }
    }
    for (uint32_t y = 0; y < height_ / 2; ++y) {
      for (uint32_t x = 0; x < width_ / 2; ++x) {
        const bool under_marker = x * 2 < kMarkerWidth;
        frame.u[size_t{y} * (width_ / 2) + x] =
            under_marker ? 128 : static_cast<uint8_t>(96 + ((x + t) / 16 % 4) * 16);
        frame.v[size_t{y} * (width_ / 2) + x] =
            under_marker ? 128 : static_cast<uint8_t>(96 + ((y + t) / 16 % 4) * 16);
      }
    }
    draw_column_marker(frame.y.data(), width_, width_, height_, marker);
  }

 private:
  uint32_t width_;
  uint32_t height_;
  uint32_t noise_;
  std::vector<uint8_t> texture_;
};

// The same frame in another input format (RGBA8, BGRA8, NV12), in buffers of its own.
struct ConvertedFrame {
  std::vector<uint8_t> plane0, plane1;
  InputPicture picture;

  ConvertedFrame(const I420Frame& f, PixelFormat format) {
    const int w = static_cast<int>(f.width);
    const int h = static_cast<int>(f.height);
    picture.format = format;
    picture.width = f.width;
    picture.height = f.height;
    if (format == PixelFormat::kNv12) {
      plane0.resize(size_t{f.width} * f.height);
      plane1.resize(size_t{f.width} * f.height / 2);
      libyuv::I420ToNV12(f.y.data(), w, f.u.data(), w / 2, f.v.data(), w / 2, plane0.data(), w,
                         plane1.data(), w, w, h);
      picture.planes[0] = plane0.data();
      picture.planes[1] = plane1.data();
      picture.strides[0] = f.width;
      picture.strides[1] = f.width;
      return;
    }
    plane0.resize(size_t{f.width} * f.height * 4);
    if (format == PixelFormat::kRgba8) {
      libyuv::I420ToABGR(f.y.data(), w, f.u.data(), w / 2, f.v.data(), w / 2, plane0.data(), w * 4,
                         w, h);
    } else {
      libyuv::I420ToARGB(f.y.data(), w, f.u.data(), w / 2, f.v.data(), w / 2, plane0.data(), w * 4,
                         w, h);
    }
    picture.planes[0] = plane0.data();
    picture.strides[0] = f.width * 4;
  }
};

inline double mean_abs_luma_difference(const I420Frame& a, const I420Frame& b) {
  uint64_t sum = 0;
  for (size_t i = 0; i < a.y.size(); ++i) sum += static_cast<uint64_t>(std::abs(a.y[i] - b.y[i]));
  return static_cast<double>(sum) / static_cast<double>(a.y.size());
}

}  // namespace syncd::video_codec::testing
