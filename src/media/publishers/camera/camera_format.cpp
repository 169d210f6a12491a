#include "media/publishers/camera/camera_format.h"

#include <libyuv/convert.h>
#include <libyuv/convert_from.h>
#include <libyuv/convert_from_argb.h>
#include <libyuv/planar_functions.h>

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

bool FrameConverter::prepare(uint32_t width, uint32_t height) {
  const size_t bytes = camera_frame_bytes(CameraFormat::kI420, width, height);
  if (bytes == 0) return false;
  if (width != width_ || height != height_) {
    scratch_ = std::make_unique<uint8_t[]>(bytes);
    width_ = width;
    height_ = height;
  }
  return true;
}

namespace {

// Where the planes of a tightly packed 4:2:0 frame start.
struct Planar {
  uint8_t* y;
  uint8_t* u;  // NV12: the interleaved UV plane
  uint8_t* v;  // NV12: unused
  int width;
  int half;  // chroma width (and the Y stride is width)
};

Planar planar(uint8_t* base, uint32_t width, uint32_t height) {
  const size_t luma = size_t{width} * height;
  return {base, base + luma, base + luma + luma / 4, int(width), int(width / 2)};
}

}  // namespace

bool FrameConverter::convert(const FrameLayout& source, const uint8_t* pixels, CameraFormat format,
                             uint8_t* out, size_t out_bytes) {
  const uint32_t w = source.width;
  const uint32_t h = source.height;
  if (w != width_ || h != height_ || !scratch_ || source.bytes == 0) return false;
  const size_t need = camera_frame_bytes(format, w, h);
  if (need == 0 || out_bytes < need) return false;
  const int width = int(w);
  const int height = int(h);
  const Planar dst = planar(out, w, h);
  const Planar tmp = planar(scratch_.get(), w, h);
  // libyuv returns 0 on success; its arguments are checked above, so a failure is a bug.
  int rc = -1;
  switch (source.format) {
    case PixelFormat::kRgba8:
    case PixelFormat::kBgra8: {
      // R,G,B,A in memory is libyuv "ABGR"; B,G,R,A is libyuv "ARGB".
      const bool rgba = source.format == PixelFormat::kRgba8;
      const int stride = int(source.planes[0].stride);
      switch (format) {
        case CameraFormat::kI420:
          rc = rgba ? libyuv::ABGRToI420(pixels, stride, dst.y, width, dst.u, dst.half, dst.v,
                                         dst.half, width, height)
                    : libyuv::ARGBToI420(pixels, stride, dst.y, width, dst.u, dst.half, dst.v,
                                         dst.half, width, height);
          break;
        case CameraFormat::kNv12:
          rc = rgba ? libyuv::ABGRToNV12(pixels, stride, dst.y, width, dst.u, width, width, height)
                    : libyuv::ARGBToNV12(pixels, stride, dst.y, width, dst.u, width, width, height);
          break;
        case CameraFormat::kYuy2:
          if (rgba) {
            // libyuv has no ABGRToYUY2: through I420, which shares YUY2's horizontal chroma
            // siting and takes each 2x2 block's chroma once for both rows.
            rc = libyuv::ABGRToI420(pixels, stride, tmp.y, width, tmp.u, tmp.half, tmp.v, tmp.half,
                                    width, height);
            if (rc == 0)
              rc = libyuv::I420ToYUY2(tmp.y, width, tmp.u, tmp.half, tmp.v, tmp.half, out,
                                      width * 2, width, height);
          } else {
            rc = libyuv::ARGBToYUY2(pixels, stride, out, width * 2, width, height);
          }
          break;
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
          rc = libyuv::I420ToNV12(y, width, u, width / 2, v, width / 2, dst.y, width, dst.u, width,
                                  width, height);
          break;
        case CameraFormat::kYuy2:
          rc = libyuv::I420ToYUY2(y, width, u, width / 2, v, width / 2, out, width * 2, width,
                                  height);
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
          rc = libyuv::NV12ToI420(y, width, uv, width, dst.y, width, dst.u, dst.half, dst.v,
                                  dst.half, width, height);
          break;
        case CameraFormat::kYuy2:
          // No NV12ToYUY2 in Debian 12's libyuv: the chroma is split into I420 first (a copy
          // of a quarter of the frame), the luma is read once, from the source.
          libyuv::SplitUVPlane(uv, width, tmp.u, tmp.half, tmp.v, tmp.half, width / 2, height / 2);
          rc = libyuv::I420ToYUY2(y, width, tmp.u, tmp.half, tmp.v, tmp.half, out, width * 2, width,
                                  height);
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
