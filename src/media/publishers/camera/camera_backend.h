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
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "media/publishers/camera/camera_format.h"

namespace syncd::media {

// What became of the frames a backend queued, as far as its consumer tells it. A PipeWire buffer
// comes back to its producer once the consumer has dequeued and released it, so
// queued == consumed + abandoned + the frames the consumer still holds (or has given back and
// the producer has not seen yet: a buffer is seen back when it is next dequeued, so the figures
// trail by at most the stream's buffer count).
struct CameraDelivery {
  uint64_t consumed = 0;   // buffers the consumer took and gave back
  uint64_t abandoned = 0;  // buffers queued that were taken away unreturned (the consumer left)
};

// The backend's link to its server, for /stats: "open" (a device file: nothing to lose),
// "connected", "connecting" (not yet, or again after a loss; retried with back-off).
struct CameraBackendHealth {
  const char* state = "open";
  std::string error;  // why the last connection failed or was lost; empty once it is back
  uint64_t reconnects = 0;
};

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
  // The stream's nominal rate, before configure(); a sink that announces a rate offers it.
  virtual void set_frame_rate(double fps) { (void)fps; }
  // A buffer of camera_frame_bytes() for the configured frame, or an empty span when none is
  // free now (the frame is dropped as backend_busy, or as no_consumer: has_consumer()).
  virtual std::span<uint8_t> dequeue() = 0;
  // Whether some consumer takes frames now. A PipeWire node nobody streams from has no buffers
  // to give; its frames are dropped as no_consumer, so backend_busy means only a consumer that
  // holds every buffer. Worker thread, like dequeue(); any thread may call it.
  virtual bool has_consumer() const { return true; }
  // Gives back the buffer last dequeued, unfilled (its conversion failed): it is not shown.
  virtual void release_unfilled() {}
  // The format the buffer last dequeued wants, when the sink's consumer chose it (PipeWire);
  // nullopt: the configured one.
  virtual std::optional<CameraFormat> buffer_format() const { return std::nullopt; }
  // Hands the buffer last dequeued, filled, to the consumers. accept_ns is the frame's accept
  // time (FrameInfo::accept_ns, CLOCK_MONOTONIC) and sequence its producer's sequence number
  // (a PipeWire buffer carries both in its header). False when the sink failed (backend_error).
  virtual bool queue(uint64_t accept_ns, uint64_t sequence) = 0;
  // Whether the sink's server is there now. False while a PipeWire backend has lost (or never
  // had) its session and is reconnecting: frames are dropped as backend_down. Any thread.
  virtual bool connected() const { return true; }
  // The link's state, for /stats. Loop thread; never waits on the sink.
  virtual CameraBackendHealth health() const { return {}; }
  // What the consumer did with the frames queued, since open(). Any thread; nullopt when the
  // sink cannot tell (a v4l2loopback write() is the last the producer hears of a frame).
  virtual std::optional<CameraDelivery> delivery() const { return std::nullopt; }
  // The stream shown has ended: a sink whose consumers see a device per stream (a PipeWire node)
  // removes it; the next configure() brings it back. Loop thread; never blocks.
  virtual void end_stream() {}
  // Releases the sink. Idempotent.
  virtual void close() = 0;
};

}  // namespace syncd::media
