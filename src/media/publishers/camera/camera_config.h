// The system camera's settings (--camera-*), plain data (camera_publisher.h).
//
// Any thread.
#pragma once

#include <string>

#include "media/publishers/camera/camera_format.h"

namespace syncd::media {

// The command line's camera options.
struct CameraConfig {
  std::string device;  // --camera-device /dev/videoN: the v4l2loopback backend; none: PipeWire
  std::string name = "Sync Camera";           // --camera-name: what consumers list
  CameraFormat format = CameraFormat::kYuy2;  // --camera-format
  // Whether --camera-format was given. Without it a PipeWire node offers first the format
  // cheapest to make from the stream's pixels (cheapest_camera_format); with it, that one.
  bool format_given = false;
};

}  // namespace syncd::media
