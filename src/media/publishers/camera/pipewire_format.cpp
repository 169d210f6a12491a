#include "media/publishers/camera/pipewire_format.h"

#include <spa/param/format-utils.h>
#include <spa/param/video/format-utils.h>
#include <spa/pod/builder.h>

#pragma GCC diagnostic ignored "-Wpedantic"  // spa's pod builders are GNU statement expressions

namespace syncd::media {

CameraColorimetry camera_colorimetry() {
  // libyuv's RGB to YUV is BT.601's matrix into limited range; the RGB it reads is what a page
  // draws, sRGB, whose primaries are BT.709's. NV12 and I420 streams are passed on as they came
  // and taken to be the same (camera_format.h).
  return {.range = SPA_VIDEO_COLOR_RANGE_16_235,
          .matrix = SPA_VIDEO_COLOR_MATRIX_BT601,
          .transfer = SPA_VIDEO_TRANSFER_SRGB,
          .primaries = SPA_VIDEO_COLOR_PRIMARIES_BT709};
}

uint32_t spa_video_format_of(CameraFormat format) {
  switch (format) {
    case CameraFormat::kYuy2:
      return SPA_VIDEO_FORMAT_YUY2;
    case CameraFormat::kNv12:
      return SPA_VIDEO_FORMAT_NV12;
    case CameraFormat::kI420:
      break;
  }
  return SPA_VIDEO_FORMAT_I420;
}

bool camera_format_of_spa(uint32_t spa_video_format, CameraFormat& out) {
  switch (spa_video_format) {
    case SPA_VIDEO_FORMAT_I420:
      out = CameraFormat::kI420;
      return true;
    case SPA_VIDEO_FORMAT_NV12:
      out = CameraFormat::kNv12;
      return true;
    case SPA_VIDEO_FORMAT_YUY2:
      out = CameraFormat::kYuy2;
      return true;
    default:
      return false;
  }
}

const spa_pod* build_camera_enum_format(spa_pod_builder& builder, CameraFormat format,
                                        uint32_t width, uint32_t height, uint32_t fps_num,
                                        uint32_t fps_den) {
  const spa_rectangle size{width, height};
  const spa_fraction rate{fps_num, fps_den};
  const CameraColorimetry colour = camera_colorimetry();
  // The shape of the backend's first builder (one fixed format, size and rate), plus the colour.
  // spa_pod_builder_add_object returns nullptr when the builder's storage is too small.
  return static_cast<const spa_pod*>(spa_pod_builder_add_object(
      &builder, SPA_TYPE_OBJECT_Format, SPA_PARAM_EnumFormat, SPA_FORMAT_mediaType,
      SPA_POD_Id(SPA_MEDIA_TYPE_video), SPA_FORMAT_mediaSubtype, SPA_POD_Id(SPA_MEDIA_SUBTYPE_raw),
      SPA_FORMAT_VIDEO_format, SPA_POD_Id(spa_video_format_of(format)), SPA_FORMAT_VIDEO_size,
      SPA_POD_Rectangle(&size), SPA_FORMAT_VIDEO_framerate, SPA_POD_Fraction(&rate),
      SPA_FORMAT_VIDEO_colorRange, SPA_POD_Id(colour.range), SPA_FORMAT_VIDEO_colorMatrix,
      SPA_POD_Id(colour.matrix), SPA_FORMAT_VIDEO_transferFunction, SPA_POD_Id(colour.transfer),
      SPA_FORMAT_VIDEO_colorPrimaries, SPA_POD_Id(colour.primaries)));
}

bool parse_camera_format_param(const spa_pod* param, CameraFormatParam& out) {
  if (param == nullptr) return false;
  uint32_t media_type = 0, media_subtype = 0;
  if (spa_format_parse(param, &media_type, &media_subtype) < 0 ||
      media_type != SPA_MEDIA_TYPE_video || media_subtype != SPA_MEDIA_SUBTYPE_raw)
    return false;
  spa_video_info_raw info{};
  CameraFormat format;
  if (spa_format_video_raw_parse(param, &info) < 0 || !camera_format_of_spa(info.format, format))
    return false;
  out.format = format;
  out.width = info.size.width;
  out.height = info.size.height;
  out.fps_num = info.framerate.num;
  out.fps_den = info.framerate.denom;
  out.colorimetry = {.range = info.color_range,
                     .matrix = info.color_matrix,
                     .transfer = info.transfer_function,
                     .primaries = info.color_primaries};
  return true;
}

}  // namespace syncd::media
