// The PipeWire backend (`--publisher camera` without `--camera-device`): a pw_stream node with
// media.class Video/Source and media.role Camera, named by --camera-name, that offers I420, NV12
// and YUY2 at the stream's size and rate and takes the one its consumer negotiates. The recipe
// (properties, params, fill outside `process` then trigger) is pw_camera_source.c's; see
// docs/camera.md, "The PipeWire backend".
//
// Threads. PipeWire runs on its own pw_thread_loop. The camera's worker dequeues, fills and
// queues PipeWire's own buffers itself, holding pw_thread_loop_lock from a dequeue() that
// returns a buffer to its queue() (or release_unfilled()): PipeWire's thread unmaps a stream's
// buffers when a consumer leaves or renegotiates, so it must not run while one is being filled.
// The loop never waits on PipeWire: open() and close() as CameraBackend (no frame in flight);
// end_stream() on the loop thread, never blocking (it posts to PipeWire's thread).
//
// The node exists from the first configure() of a stream shown (its first frame) until
// end_stream() or close().
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "media/publishers/camera/camera_backend.h"

struct pw_thread_loop;
struct pw_context;
struct pw_core;
struct pw_stream;
struct pw_buffer;
struct spa_pod;

namespace syncd::media {

class PipeWireBackend final : public CameraBackend {
 public:
  // node_name: node.name and node.description (what consumers list).
  explicit PipeWireBackend(std::string node_name);
  ~PipeWireBackend() override;

  std::string_view kind() const override { return "pipewire"; }
  std::string_view target() const override { return name_; }
  // Connects to the session's PipeWire (PIPEWIRE_REMOTE or $XDG_RUNTIME_DIR/pipewire-0). Fails
  // at once, saying so, when there is none.
  bool open(std::string& error) override;
  bool configure(uint32_t width, uint32_t height, CameraFormat format, std::string& error) override;
  void set_frame_rate(double fps) override;
  // Empty while no consumer has negotiated a format, or when the consumer holds every buffer.
  std::span<uint8_t> dequeue() override;
  bool has_consumer() const override { return streaming_.load(std::memory_order_relaxed); }
  void release_unfilled() override;
  std::optional<CameraFormat> buffer_format() const override { return buffer_format_; }
  bool queue(uint64_t accept_ns, uint64_t sequence) override;
  void end_stream() override;
  void close() override;

  // PipeWire's callbacks (its thread, with the thread loop's lock held).
  void on_param_changed(uint32_t id, const spa_pod* param);
  void on_state_changed(int state, const char* error);
  void end_on_pipewire_thread();

 private:
  void destroy_stream_locked();
  bool create_stream_locked(std::string& error);

  std::string name_;
  pw_thread_loop* loop_ = nullptr;
  pw_context* context_ = nullptr;
  pw_core* core_ = nullptr;
  pw_stream* stream_ = nullptr;
  struct Listener;
  Listener* listener_ = nullptr;
  // Under the thread loop's lock:
  uint32_t width_ = 0, height_ = 0;
  uint32_t fps_num_ = 60, fps_den_ = 1;
  CameraFormat preferred_ = CameraFormat::kI420;
  bool negotiated_ = false;  // a consumer chose a format
  // Written on PipeWire's thread, read by has_consumer() on the camera's worker without the lock.
  std::atomic<bool> streaming_{false};
  CameraFormat negotiated_format_ = CameraFormat::kI420;
  size_t frame_bytes_ = 0;
  uint32_t stride_ = 0;
  pw_buffer* in_flight_ = nullptr;  // dequeued by the worker, not yet queued (lock held)
  // The worker's:
  std::optional<CameraFormat> buffer_format_;
};

}  // namespace syncd::media
