// The v4l2loopback backend (`--camera-device /dev/videoN`): the device's output side, as OBS
// drives it. open() checks VIDIOC_QUERYCAP for video output; configure() sets YUYV, I420 or
// NV12 at the stream's size with VIDIOC_S_FMT; each frame is one write() of the whole image
// (v4l2loopback's read/write I/O, which needs no buffer mapping). The module options that suit
// browsers and call apps are in docs/camera.md.
//
// A regular file stands in for the device in tests: the ioctls are skipped when the path is not
// a character device (they would fail with ENOTTY), and each frame is appended to the file.
//
// Threads: as CameraBackend.
#pragma once

#include <memory>
#include <string>

#include "media/publishers/camera/camera_backend.h"

namespace syncd::media {

class V4l2LoopbackBackend final : public CameraBackend {
 public:
  explicit V4l2LoopbackBackend(std::string device_path);
  ~V4l2LoopbackBackend() override;

  std::string_view kind() const override { return "v4l2loopback"; }
  std::string_view target() const override { return path_; }
  bool open(std::string& error) override;
  bool configure(uint32_t width, uint32_t height, CameraFormat format, std::string& error) override;
  std::span<uint8_t> dequeue() override;
  bool queue(uint64_t accept_ns, uint64_t sequence) override;
  void close() override;

  // Whether the path is a V4L2 device (false: a stand-in file, no ioctls).
  bool is_device() const { return is_device_; }
  // The card name VIDIOC_QUERYCAP reported ("" for a stand-in file).
  const std::string& card() const { return card_; }

 private:
  std::string path_;
  int fd_ = -1;
  bool is_device_ = false;
  std::string card_;
  size_t frame_bytes_ = 0;
  size_t buffer_capacity_ = 0;
  std::unique_ptr<uint8_t[]> buffer_;  // the one frame being filled, written whole
};

}  // namespace syncd::media
