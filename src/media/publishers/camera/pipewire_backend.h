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
// end_stream() or close(), whenever PipeWire is there.
//
// PipeWire may go away under a running stream (an update, a crash, a log-out) or not be there
// yet when syncd starts. The backend then says so once on stderr, shows it in health(), and
// tries to connect again on PipeWire's thread: after 100 ms, doubling to once a second. Once
// connected it re-creates the node of the stream shown, at the size last configured. Meanwhile
// frames are dropped as backend_down.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "media/publishers/camera/camera_backend.h"

struct pw_thread_loop;
struct pw_context;
struct pw_core;
struct pw_stream;
struct pw_buffer;
struct spa_pod;
struct spa_source;

namespace syncd::media {

class PipeWireBackend final : public CameraBackend {
 public:
  // node_name: node.name and node.description (what consumers list).
  explicit PipeWireBackend(std::string node_name);
  ~PipeWireBackend() override;

  std::string_view kind() const override { return "pipewire"; }
  std::string_view target() const override { return name_; }
  // Starts PipeWire's thread and connects to the session's PipeWire (PIPEWIRE_REMOTE or
  // $XDG_RUNTIME_DIR/pipewire-0). When there is none yet it says so on stderr and keeps trying
  // (see above); false only when the thread cannot start.
  bool open(std::string& error) override;
  bool configure(uint32_t width, uint32_t height, CameraFormat format, std::string& error) override;
  void set_frame_rate(double fps) override;
  // Empty while no consumer has negotiated a format, or when the consumer holds every buffer.
  std::span<uint8_t> dequeue() override;
  bool has_consumer() const override { return streaming_.load(std::memory_order_relaxed); }
  void release_unfilled() override;
  std::optional<CameraFormat> buffer_format() const override { return buffer_format_; }
  bool queue(uint64_t accept_ns, uint64_t sequence) override;
  bool connected() const override { return connected_.load(std::memory_order_relaxed); }
  CameraBackendHealth health() const override;
  std::optional<CameraDelivery> delivery() const override;
  void end_stream() override;
  void close() override;

  // PipeWire's callbacks (its thread, with the thread loop's lock held).
  void on_param_changed(uint32_t id, const spa_pod* param);
  void on_state_changed(int state, const char* error);
  void on_remove_buffer(pw_buffer* buffer);
  void on_core_error(uint32_t id, int res, const char* message);
  void on_reconnect_timer();
  void end_on_pipewire_thread();

 private:
  void destroy_stream_locked();
  bool create_stream_locked(std::string& error);
  // Takes every buffer the stream has free into spare_, counting those back from the consumer.
  void take_returned_locked();
  // Connects the core and, when a stream is shown, re-creates its node. False, with the reason
  // in error, when PipeWire is not there.
  bool connect_locked(std::string& error);
  void disconnect_locked();
  void schedule_reconnect_locked();
  void set_health(const char* state, std::string error);

  std::string name_;
  pw_thread_loop* loop_ = nullptr;
  pw_context* context_ = nullptr;
  pw_core* core_ = nullptr;
  pw_stream* stream_ = nullptr;
  struct Listener;
  Listener* listener_ = nullptr;
  Listener* core_listener_ = nullptr;
  spa_source* reconnect_timer_ = nullptr;
  // Under the thread loop's lock:
  bool shown_ = false;  // a stream is shown: its node should exist whenever PipeWire does
  uint32_t reconnect_delay_ms_ = 0;
  bool loss_said_ = false;  // the current outage is on stderr already
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
  // Buffers dequeued ahead, empty: every buffer back from the consumer is taken (and counted)
  // at each dequeue(), so consumed_ trails by at most one frame interval, not by the buffer
  // count, and a buffer the consumer gave back is not counted abandoned when it leaves.
  std::array<pw_buffer*, 64> spare_{};  // pw_stream's own maximum
  size_t spare_count_ = 0;
  // Written under the lock, read by any thread.
  std::atomic<bool> connected_{false};
  std::atomic<uint64_t> consumed_{0};
  std::atomic<uint64_t> abandoned_{0};
  // health(): written on PipeWire's thread (or in open()), read on the loop's; a short lock of
  // its own, never PipeWire's, so /stats never waits on a conversion.
  mutable std::mutex health_mutex_;
  CameraBackendHealth health_;
  // The worker's:
  std::optional<CameraFormat> buffer_format_;
};

}  // namespace syncd::media
