// The camera's formats as PipeWire names them: the EnumFormat param the PipeWire node offers for
// each camera format, with the colour properties that say what its YUV means, and the parse of
// the Format param a consumer chooses (docs/camera.md, "Colour").
//
// What the camera's YUV is: BT.601 matrix, limited range (Y 16-235, chroma 16-240), from sRGB
// pixels (BT.709 primaries, sRGB transfer): camera_format.h. Said in every EnumFormat as
// SPA_FORMAT_VIDEO_colorMatrix, colorRange, colorPrimaries and transferFunction, each a fixed Id
// and not mandatory: a consumer that names none negotiates as before, one that asks for another
// matrix or range gets no format (the camera cannot make it).
//
// Who reads them (measured, docs/camera.md "Colour"): neither PipeWire 0.3.65's GStreamer source
// (pipewiresrc builds its caps from format, size and rate only, so videoconvert assumes BT.709
// above 576 rows and BT.601 below) nor Chromium 156 (WebRTC's PipeWire capture passes no colour
// space; Chromium takes BT.601 at every size). They are said anyway: they are true, they cost
// nothing, and a consumer that honours them gets every size right.
//
// Pure: any thread, as long as the builder is the caller's.
#pragma once

#include <cstdint>

#include "media/publishers/camera/camera_format.h"

struct spa_pod;
struct spa_pod_builder;

namespace syncd::media {

// A frame's colour as SPA's enums (spa/param/video/color.h) number it; 0 is "unknown". The
// numbers are GStreamer's too (a caps "colorimetry" of range:matrix:transfer:primaries).
struct CameraColorimetry {
  uint32_t range = 0;      // spa_video_color_range
  uint32_t matrix = 0;     // spa_video_color_matrix
  uint32_t transfer = 0;   // spa_video_transfer_function
  uint32_t primaries = 0;  // spa_video_color_primaries

  bool operator==(const CameraColorimetry&) const = default;
};

// What every camera frame is: BT.601 limited range, BT.709 primaries, sRGB transfer (GStreamer
// "2:4:7:1"). Any thread.
CameraColorimetry camera_colorimetry();

// SPA_VIDEO_FORMAT_YUY2, _I420 or _NV12 for a camera format, and back (false for any other
// video format). Any thread.
uint32_t spa_video_format_of(CameraFormat format);
bool camera_format_of_spa(uint32_t spa_video_format, CameraFormat& out);

// Builds one EnumFormat param into builder: raw video in `format`, width x height at
// fps_num/fps_den, each fixed (Chromium's PipeWire capture reads only fixed values, and skips a
// param whose format is a choice), and camera_colorimetry() as the four colour properties.
// Returns the param, which lives in the builder's memory, or nullptr when the builder ran out of
// room (one param takes 232 bytes). Call it once per format, the preferred one first. The
// builder's thread (PipeWire's, under the thread loop's lock, in the backend).
const spa_pod* build_camera_enum_format(spa_pod_builder& builder, CameraFormat format,
                                        uint32_t width, uint32_t height, uint32_t fps_num,
                                        uint32_t fps_den);

// What a Format param (the consumer's choice, in param_changed) holds.
struct CameraFormatParam {
  CameraFormat format = CameraFormat::kI420;
  uint32_t width = 0;
  uint32_t height = 0;
  uint32_t fps_num = 0;  // 0/0 when the param has no rate
  uint32_t fps_den = 0;
  CameraColorimetry colorimetry;  // zeros where the param says nothing
};

// Reads a Format (or EnumFormat) param. False when it is not raw video in a camera format.
// Any thread.
bool parse_camera_format_param(const spa_pod* param, CameraFormatParam& out);

}  // namespace syncd::media
