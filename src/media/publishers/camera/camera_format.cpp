#include "media/publishers/camera/camera_format.h"

#include <libyuv/convert.h>
#include <libyuv/convert_from.h>
#include <libyuv/planar_functions.h>

#include <algorithm>
#include <cstring>

#include "media/publishers/camera/rgb_to_yuv.h"

namespace syncd::media {

const char* camera_format_name(CameraFormat format) {
  switch (format) {
    case CameraFormat::kYuy2:
      return "yuy2";
    case CameraFormat::kI420:
      return "i420";
    case CameraFormat::kNv12:
      return "nv12";
  }
  return "?";
}

bool parse_camera_format(std::string_view name, CameraFormat& out) {
  for (CameraFormat f : {CameraFormat::kYuy2, CameraFormat::kI420, CameraFormat::kNv12}) {
    if (name == camera_format_name(f)) {
      out = f;
      return true;
    }
  }
  return false;
}

size_t camera_frame_bytes(CameraFormat format, uint32_t width, uint32_t height) {
  if (width == 0 || height == 0 || width > kMaxFrameSide || height > kMaxFrameSide ||
      width % 2 != 0 || height % 2 != 0)
    return 0;
  const size_t luma = size_t{width} * height;
  return format == CameraFormat::kYuy2 ? luma * 2 : luma + luma / 2;
}

CameraFormat cheapest_camera_format(PixelFormat source) {
  switch (source) {
    case PixelFormat::kI420:
      return CameraFormat::kI420;  // a copy
    case PixelFormat::kNv12:
      return CameraFormat::kNv12;  // a copy
    case PixelFormat::kRgba8:      // one pass to planar YUV (camera_format.h says why I420)
    case PixelFormat::kBgra8:
    case PixelFormat::kH264:  // never shown; its decoded twin is I420
    case PixelFormat::kStreamDefault:
      break;
  }
  return CameraFormat::kI420;
}

bool FrameConverter::prepare(uint32_t width, uint32_t height) {
  if (camera_frame_bytes(CameraFormat::kI420, width, height) == 0) return false;
  width_ = width;
  height_ = height;
  return true;
}

namespace {

// An RGB frame is converted a band of two rows (one 4:2:0 chroma row) by kChunk columns at a
// time, straight into the camera's buffer.
//
// Before a chunk is converted, the source kPrefetchAhead pixels on (in the same band or the
// next) is asked for. At 1080p on this 2-core VM (docs/benchmarks.md, "System camera:
// conversion") the hardware prefetcher alone left the conversion waiting on the source: with
// whole rows a call, RGBA to I420 took 1.15x a memcpy of the RGBA frame with the rounded rows
// (0.74-0.88x with libyuv's); in 192-column chunks with the source asked for 768 pixels ahead,
// 0.86-0.88x (0.67x). Tried: chunks of 96 to 960 columns, 384 to 2048 pixels ahead; 192/768
// was best or tied for every conversion, with either rows.
constexpr int kChunk = 192;
constexpr int kPrefetchAhead = 768;
constexpr int kBandRows = 2;

// Calls convert(x, y, columns) for each chunk of each band of kBandRows rows, top to bottom,
// left to right, first asking for the source of the chunk kPrefetchAhead pixels further on.
template <typename Convert>
void by_chunks(const uint8_t* src, size_t stride, int width, int height, Convert&& convert) {
  constexpr int kBytesPerPixel = 4;  // the RGB sources
  for (int y = 0; y < height; y += kBandRows) {
    for (int x = 0; x < width; x += kChunk) {
      int ahead_x = x + kPrefetchAhead;
      int ahead_y = y;
      while (ahead_x >= width) {
        ahead_x -= width;
        ahead_y += kBandRows;
      }
      if (ahead_y < height) {
        const int bytes = std::min(kChunk, width - ahead_x) * kBytesPerPixel;
        for (int row = 0; row < kBandRows; ++row) {
          const uint8_t* p =
              src + size_t(ahead_y + row) * stride + size_t(ahead_x) * kBytesPerPixel;
          for (int b = 0; b < bytes; b += 64) __builtin_prefetch(p + b);
        }
      }
      convert(x, y, std::min(kChunk, width - x));
    }
  }
}

}  // namespace

bool FrameConverter::convert(const FrameLayout& source, const uint8_t* pixels, CameraFormat format,
                             uint8_t* out, size_t out_bytes) {
  const uint32_t w = source.width;
  const uint32_t h = source.height;
  if (width_ == 0 || w != width_ || h != height_ || source.bytes == 0) return false;
  const size_t need = camera_frame_bytes(format, w, h);
  if (need == 0 || out_bytes < need) return false;
  const int width = int(w);
  const int height = int(h);
  const int half = width / 2;
  // The camera's planes, tightly packed: Y, then U and V (I420) or UV (NV12).
  uint8_t* const dst_y = out;
  uint8_t* const dst_u = out + size_t(w) * h;
  uint8_t* const dst_v = dst_u + size_t(w) * h / 4;
  // libyuv (the planar sources) returns 0 on success; its arguments are checked above, so a
  // failure is a bug.
  int rc = -1;
  switch (source.format) {
    case PixelFormat::kRgba8:
    case PixelFormat::kBgra8: {
      // Rounded BT.601 rows of our own (rgb_to_yuv.h says why not libyuv's).
      const RgbOrder order =
          source.format == PixelFormat::kRgba8 ? RgbOrder::kRgba : RgbOrder::kBgra;
      const RgbToYuvRows& rows = rgb_to_yuv_rows();
      const size_t stride = source.planes[0].stride;
      auto src_at = [&](int x, int y) { return pixels + size_t(y) * stride + size_t(x) * 4; };
      switch (format) {
        case CameraFormat::kI420:
          by_chunks(pixels, stride, width, height, [&](int x, int y, int n) {
            uint8_t* yp = dst_y + size_t(y) * w + x;
            rows.i420(order, src_at(x, y), src_at(x, y + 1), n, yp, yp + w,
                      dst_u + size_t(y / 2) * half + x / 2, dst_v + size_t(y / 2) * half + x / 2);
          });
          break;
        case CameraFormat::kNv12:
          by_chunks(pixels, stride, width, height, [&](int x, int y, int n) {
            uint8_t* yp = dst_y + size_t(y) * w + x;
            rows.nv12(order, src_at(x, y), src_at(x, y + 1), n, yp, yp + w,
                      dst_u + size_t(y / 2) * w + x);  // x/2 U,V pairs of 2 bytes
          });
          break;
        case CameraFormat::kYuy2:
          // 4:2:2, as YUY2 is: each row its own chroma, of its pixel pairs.
          by_chunks(pixels, stride, width, height, [&](int x, int y, int n) {
            for (int row = y; row < y + kBandRows; ++row) {
              rows.yuy2(order, src_at(x, row), n, out + size_t(row) * w * 2 + size_t(x) * 2);
            }
          });
          break;
      }
      return true;
    }
    case PixelFormat::kI420: {
      const uint8_t* y = pixels + source.planes[0].offset;
      const uint8_t* u = pixels + source.planes[1].offset;
      const uint8_t* v = pixels + source.planes[2].offset;
      switch (format) {
        case CameraFormat::kI420:
          std::memcpy(out, pixels, need);  // already the camera's layout
          rc = 0;
          break;
        case CameraFormat::kNv12:
          rc = libyuv::I420ToNV12(y, width, u, half, v, half, dst_y, width, dst_u, width, width,
                                  height);
          break;
        case CameraFormat::kYuy2:
          rc = libyuv::I420ToYUY2(y, width, u, half, v, half, out, width * 2, width, height);
          break;
      }
      break;
    }
    case PixelFormat::kNv12: {
      const uint8_t* y = pixels + source.planes[0].offset;
      const uint8_t* uv = pixels + source.planes[1].offset;
      switch (format) {
        case CameraFormat::kNv12:
          std::memcpy(out, pixels, need);
          rc = 0;
          break;
        case CameraFormat::kI420:
          rc = libyuv::NV12ToI420(y, width, uv, width, dst_y, width, dst_u, half, dst_v, half,
                                  width, height);
          break;
        case CameraFormat::kYuy2:
          // YUY2 is Y0 U Y1 V: a luma row interleaved byte by byte with its chroma row, which in
          // NV12 is already U V U V. So each row pair is one MergeUVPlane of the two luma rows
          // with the same chroma row (stride 0): one pass, where splitting the chroma into I420
          // first (Debian 12's libyuv has no NV12ToYUY2) was two.
          rc = 0;
          for (int row = 0; row < height; row += 2) {
            libyuv::MergeUVPlane(y + size_t(row) * w, width, uv + size_t(row / 2) * w, 0,
                                 out + size_t(row) * w * 2, width * 2, width, 2);
          }
          break;
      }
      break;
    }
    case PixelFormat::kH264:  // not a picture: the camera never shows an encoded stream
    case PixelFormat::kStreamDefault:
      break;
  }
  return rc == 0;
}

}  // namespace syncd::media
