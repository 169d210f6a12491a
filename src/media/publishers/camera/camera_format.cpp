#include "media/publishers/camera/camera_format.h"

#include <libyuv/convert.h>
#include <libyuv/convert_from.h>
#include <libyuv/convert_from_argb.h>
#include <libyuv/planar_functions.h>

#include <algorithm>
#include <cstring>

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
    case PixelFormat::kRgba8:      // one libyuv pass to planar YUV (camera_format.h says why I420)
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
// time: 3 KiB of RGBA in and, for YUY2, 1.1 KiB through the planar buffer and 1.5 KiB out, all
// in the first-level cache while the chunk is converted.
//
// Before a chunk is converted, the source kPrefetchAhead pixels on (in the same band or the
// next) is asked for. At 1080p on this 2-core VM (docs/benchmarks.md, "System camera:
// conversion") the hardware prefetcher alone left libyuv waiting on the source: with whole rows
// a call, RGBA to I420 took 0.74-0.88x a memcpy of the RGBA frame; in 192-column chunks with the
// source asked for 768 pixels ahead, 0.67-0.68x, about what reading 8.3 MB and writing 3.1 MB
// costs at the memcpy's own bandwidth (a pass that only reads the frame takes 0.50x). Tried:
// chunks of 128 to 512 columns, 512 to 2048 pixels ahead; 192/768 was best or tied for every
// conversion. Narrower chunks pay more of libyuv's setup per call (about 15 ns); widths that
// are not a multiple of 64 sent part of each chunk through libyuv's slower remainder path (seen
// at 160 and 224 columns); reaching further ahead was slower.
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
  // libyuv returns 0 on success; its arguments are checked above, so a failure is a bug. Every
  // chunk's result is or-ed in, so one failure fails the frame.
  int rc = -1;
  switch (source.format) {
    case PixelFormat::kRgba8:
    case PixelFormat::kBgra8: {
      // R,G,B,A in memory is libyuv "ABGR"; B,G,R,A is libyuv "ARGB".
      const bool rgba = source.format == PixelFormat::kRgba8;
      const size_t stride = source.planes[0].stride;
      auto src_at = [&](int x, int y) { return pixels + size_t(y) * stride + size_t(x) * 4; };
      const int s = int(stride);
      rc = 0;
      switch (format) {
        case CameraFormat::kI420:
          by_chunks(pixels, stride, width, height, [&](int x, int y, int n) {
            uint8_t* yp = dst_y + size_t(y) * w + x;
            uint8_t* up = dst_u + size_t(y / 2) * half + x / 2;
            uint8_t* vp = dst_v + size_t(y / 2) * half + x / 2;
            rc |= rgba ? libyuv::ABGRToI420(src_at(x, y), s, yp, width, up, half, vp, half, n,
                                            kBandRows)
                       : libyuv::ARGBToI420(src_at(x, y), s, yp, width, up, half, vp, half, n,
                                            kBandRows);
          });
          break;
        case CameraFormat::kNv12: {
          // libyuv's ABGRToNV12 allocates a row of chroma on the heap each call; here the chunk's
          // U and V go to the stack and are interleaved into the camera's UV row.
          alignas(64) uint8_t u_row[kChunk / 2];
          alignas(64) uint8_t v_row[kChunk / 2];
          by_chunks(pixels, stride, width, height, [&](int x, int y, int n) {
            uint8_t* yp = dst_y + size_t(y) * w + x;
            uint8_t* uvp = dst_u + size_t(y / 2) * w + x;  // x/2 U,V pairs of 2 bytes
            rc |= rgba ? libyuv::ABGRToI420(src_at(x, y), s, yp, width, u_row, kChunk / 2, v_row,
                                            kChunk / 2, n, kBandRows)
                       : libyuv::ARGBToI420(src_at(x, y), s, yp, width, u_row, kChunk / 2, v_row,
                                            kChunk / 2, n, kBandRows);
            libyuv::MergeUVPlane(u_row, kChunk / 2, v_row, kChunk / 2, uvp, width, n / 2, 1);
          });
          break;
        }
        case CameraFormat::kYuy2: {
          // libyuv has no one-call RGBA to YUY2 (and its ARGBToYUY2 was 1.8x a memcpy here): each
          // chunk goes to planar YUV in a cache-resident buffer, then is packed into the camera's
          // rows. RGBA through 4:2:0, as the two-pass version did (I420, then I420ToYUY2):
          // both rows of a band share their 2x2 blocks' chroma, the same bytes as before. BGRA
          // through 4:2:2, each row its own chroma: the bytes of libyuv's ARGBToYUY2, which it
          // used before.
          alignas(64) uint8_t y_rows[kBandRows * kChunk];
          alignas(64) uint8_t u_rows[kBandRows * kChunk / 2];
          alignas(64) uint8_t v_rows[kBandRows * kChunk / 2];
          by_chunks(pixels, stride, width, height, [&](int x, int y, int n) {
            uint8_t* yuy2 = out + size_t(y) * w * 2 + size_t(x) * 2;
            if (rgba) {
              rc |= libyuv::ABGRToI420(src_at(x, y), s, y_rows, kChunk, u_rows, kChunk / 2, v_rows,
                                       kChunk / 2, n, kBandRows);
              rc |= libyuv::I420ToYUY2(y_rows, kChunk, u_rows, kChunk / 2, v_rows, kChunk / 2, yuy2,
                                       width * 2, n, kBandRows);
            } else {
              rc |= libyuv::ARGBToI422(src_at(x, y), s, y_rows, kChunk, u_rows, kChunk / 2, v_rows,
                                       kChunk / 2, n, kBandRows);
              rc |= libyuv::I422ToYUY2(y_rows, kChunk, u_rows, kChunk / 2, v_rows, kChunk / 2, yuy2,
                                       width * 2, n, kBandRows);
            }
          });
          break;
        }
      }
      break;
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
