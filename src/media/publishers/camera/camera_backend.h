// One sink of the camera's converted frames: a v4l2loopback device now, a PipeWire stream node
// later. The shape follows PipeWire's buffers: take a buffer (dequeue), fill it, give it back
// with the frame's time (queue); a backend with no free buffer says so and the frame is dropped.
//
// Threads: open() and close() on the loop thread, while no frame is in flight (before the
// camera's worker starts, after it stops). configure(), dequeue() and queue() on the camera's
// worker thread only; they may block on the sink (the loop never waits on them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "media/publishers/camera/camera_format.h"

namespace syncd::media {

class CameraBackend {
 public:
  virtual ~CameraBackend() = default;
  // "v4l2loopback", "pipewire": for /stats and messages.
  virtual std::string_view kind() const = 0;
  // Where the frames go (a device path, a node name).
  virtual std::string_view target() const = 0;
  // Checks and opens the sink. False, with a sentence in error, when it cannot serve.
  virtual bool open(std::string& error) = 0;
  // Sets the size and format of the frames to come; called before the first frame and again
  // whenever they change. False, with a sentence in error, when the sink refuses them.
  virtual bool configure(uint32_t width, uint32_t height, CameraFormat format,
                         std::string& error) = 0;
  // A buffer of camera_frame_bytes() for the configured frame, or an empty span when none is
  // free now (the frame is dropped as backend_busy).
  virtual std::span<uint8_t> dequeue() = 0;
  // Hands the buffer last dequeued, filled, to the consumers. timestamp_us is the frame's
  // capture time on the producer's clock. False when the sink failed (backend_error).
  virtual bool queue(uint64_t timestamp_us) = 0;
  // Releases the sink. Idempotent.
  virtual void close() = 0;
};

}  // namespace syncd::media
