#include "media/publishers/camera/v4l2_backend.h"

#include <fcntl.h>
#include <linux/videodev2.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace syncd::media {

namespace {

uint32_t v4l2_pixel_format(CameraFormat format) {
  switch (format) {
    case CameraFormat::kYuy2:
      return V4L2_PIX_FMT_YUYV;
    case CameraFormat::kI420:
      return V4L2_PIX_FMT_YUV420;
    case CameraFormat::kNv12:
      return V4L2_PIX_FMT_NV12;
  }
  return 0;
}

std::string errno_sentence(const char* what, int err) {
  return std::string(what) + ": " + std::strerror(err);
}

}  // namespace

V4l2LoopbackBackend::V4l2LoopbackBackend(std::string device_path) : path_(std::move(device_path)) {}

V4l2LoopbackBackend::~V4l2LoopbackBackend() {
  close();
}

bool V4l2LoopbackBackend::open(std::string& error) {
  close();
  // No O_CREAT: a mistyped path is an error, not a new file.
  fd_ = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
  if (fd_ < 0) {
    error = errno_sentence(("cannot open " + path_).c_str(), errno);
    return false;
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    error = errno_sentence(("cannot stat " + path_).c_str(), errno);
    close();
    return false;
  }
  is_device_ = S_ISCHR(st.st_mode);
  if (!is_device_) {
    if (!S_ISREG(st.st_mode)) {
      error = path_ + " is neither a video device nor a regular file";
      close();
      return false;
    }
    return true;  // a stand-in file: nothing to ask it
  }
  v4l2_capability cap{};
  if (::ioctl(fd_, VIDIOC_QUERYCAP, &cap) != 0) {
    error = errno_sentence((path_ + ": VIDIOC_QUERYCAP").c_str(), errno);
    close();
    return false;
  }
  card_.assign(reinterpret_cast<const char*>(cap.card),
               strnlen(reinterpret_cast<const char*>(cap.card), sizeof cap.card));
  const uint32_t caps =
      (cap.capabilities & V4L2_CAP_DEVICE_CAPS) ? cap.device_caps : cap.capabilities;
  if (!(caps & V4L2_CAP_VIDEO_OUTPUT)) {
    error = path_ + " (" + card_ +
            ") takes no video output: not a v4l2loopback device, or another writer holds it "
            "(docs/camera.md)";
    close();
    return false;
  }
  if (!(caps & V4L2_CAP_READWRITE)) {
    error = path_ + " (" + card_ + ") does not accept write()";
    close();
    return false;
  }
  return true;
}

bool V4l2LoopbackBackend::configure(uint32_t width, uint32_t height, CameraFormat format,
                                    std::string& error) {
  if (fd_ < 0) {
    error = path_ + " is not open";
    return false;
  }
  const size_t bytes = camera_frame_bytes(format, width, height);
  if (bytes == 0) {
    error = "a camera frame needs an even width and height, not " + std::to_string(width) + "x" +
            std::to_string(height);
    return false;
  }
  if (is_device_) {
    v4l2_format fmt{};
    fmt.type = V4L2_BUF_TYPE_VIDEO_OUTPUT;
    fmt.fmt.pix.width = width;
    fmt.fmt.pix.height = height;
    fmt.fmt.pix.pixelformat = v4l2_pixel_format(format);
    fmt.fmt.pix.field = V4L2_FIELD_NONE;
    fmt.fmt.pix.bytesperline = format == CameraFormat::kYuy2 ? width * 2 : width;
    fmt.fmt.pix.sizeimage = uint32_t(bytes);
    // BT.601 limited range: what libyuv's RGB conversions produce.
    fmt.fmt.pix.colorspace = V4L2_COLORSPACE_SMPTE170M;
    if (::ioctl(fd_, VIDIOC_S_FMT, &fmt) != 0) {
      error =
          errno_sentence((path_ + ": VIDIOC_S_FMT " + camera_format_name(format)).c_str(), errno);
      return false;
    }
    // The driver may adjust what it was asked; a frame written in another layout would be
    // garbage to every consumer, so anything but what was asked is a refusal.
    if (fmt.fmt.pix.width != width || fmt.fmt.pix.height != height ||
        fmt.fmt.pix.pixelformat != v4l2_pixel_format(format) || fmt.fmt.pix.sizeimage < bytes) {
      error = path_ + " refused " + camera_format_name(format) + " " + std::to_string(width) + "x" +
              std::to_string(height) + " (it offered " + std::to_string(fmt.fmt.pix.width) + "x" +
              std::to_string(fmt.fmt.pix.height) + ", " + std::to_string(fmt.fmt.pix.sizeimage) +
              " bytes)";
      return false;
    }
  }
  if (bytes > buffer_capacity_) {
    buffer_ = std::make_unique<uint8_t[]>(bytes);
    buffer_capacity_ = bytes;
  }
  frame_bytes_ = bytes;
  return true;
}

std::span<uint8_t> V4l2LoopbackBackend::dequeue() {
  // One buffer, written whole by queue() before the next dequeue(): always free.
  if (fd_ < 0 || frame_bytes_ == 0) return {};
  return {buffer_.get(), frame_bytes_};
}

bool V4l2LoopbackBackend::queue(uint64_t accept_ns, uint64_t sequence) {
  // write() carries no time: v4l2loopback stamps each buffer as it is written.
  (void)accept_ns;
  (void)sequence;
  if (fd_ < 0 || frame_bytes_ == 0) return false;
  size_t done = 0;
  while (done < frame_bytes_) {
    const ssize_t n = ::write(fd_, buffer_.get() + done, frame_bytes_ - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) return false;
    done += size_t(n);
  }
  return true;
}

void V4l2LoopbackBackend::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  frame_bytes_ = 0;
}

}  // namespace syncd::media
