#include "media/publishers/camera/pipewire_backend.h"

#include <pipewire/pipewire.h>
#include <spa/param/video/format-utils.h>
#include <spa/pod/builder.h>
#include <spa/utils/result.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "media/publishers/camera/pipewire_format.h"

#pragma GCC diagnostic ignored "-Wpedantic"  // spa's pod builders are GNU statement expressions

namespace syncd::media {

struct PipeWireBackend::Listener {
  spa_hook hook{};
};

namespace {

void param_changed_cb(void* data, uint32_t id, const spa_pod* param) {
  static_cast<PipeWireBackend*>(data)->on_param_changed(id, param);
}

void state_changed_cb(void* data, pw_stream_state, pw_stream_state state, const char* error) {
  static_cast<PipeWireBackend*>(data)->on_state_changed(int(state), error);
}

void remove_buffer_cb(void* data, pw_buffer* buffer) {
  static_cast<PipeWireBackend*>(data)->on_remove_buffer(buffer);
}

void core_error_cb(void* data, uint32_t id, int, int res, const char* message) {
  static_cast<PipeWireBackend*>(data)->on_core_error(id, res, message);
}

void reconnect_timer_cb(void* data, uint64_t) {
  static_cast<PipeWireBackend*>(data)->on_reconnect_timer();
}

// A buffer's user_data while it carries a frame to the consumer (queued, not yet seen back).
char with_consumer_tag;
void* const kWithConsumer = &with_consumer_tag;

// Back-off of the reconnection attempts: cheap (a unix socket's connect), so soon and often
// enough that a restarted PipeWire has its camera back within a second of being up.
constexpr uint32_t kFirstReconnectMs = 100;
constexpr uint32_t kMaxReconnectMs = 1000;

// Buffers are queued by the camera's worker, outside the cycle; the cycle has nothing to do.
void process_cb(void*) {}

const pw_stream_events kStreamEvents = {
    .version = PW_VERSION_STREAM_EVENTS,
    .state_changed = state_changed_cb,
    .param_changed = param_changed_cb,
    .remove_buffer = remove_buffer_cb,
    .process = process_cb,
};

const pw_core_events kCoreEvents = {
    .version = PW_VERSION_CORE_EVENTS,
    .error = core_error_cb,
};

std::string no_session_error(int connect_errno) {
  const char* runtime = std::getenv("PIPEWIRE_RUNTIME_DIR");
  if (!runtime) runtime = std::getenv("XDG_RUNTIME_DIR");
  return std::string("no PipeWire session (connecting to ") +
         (runtime ? std::string(runtime) + "/pipewire-0" : "pipewire-0, no runtime dir set") +
         ": " + std::strerror(connect_errno) + ")";
}

int end_stream_cb(spa_loop*, bool, uint32_t, const void*, size_t, void* data) {
  static_cast<PipeWireBackend*>(data)->end_on_pipewire_thread();
  return 0;
}

}  // namespace

PipeWireBackend::PipeWireBackend(std::string node_name) : name_(std::move(node_name)) {}

PipeWireBackend::~PipeWireBackend() {
  close();
}

bool PipeWireBackend::open(std::string& error) {
  pw_init(nullptr, nullptr);
  loop_ = pw_thread_loop_new("syncd-camera", nullptr);
  if (!loop_) {
    error = std::string("cannot create PipeWire's thread loop: ") + std::strerror(errno);
    return false;
  }
  context_ = pw_context_new(pw_thread_loop_get_loop(loop_), nullptr, 0);
  if (!context_) {
    error = std::string("cannot create a PipeWire context: ") + std::strerror(errno);
    close();
    return false;
  }
  reconnect_timer_ = pw_loop_add_timer(pw_thread_loop_get_loop(loop_), reconnect_timer_cb, this);
  if (!reconnect_timer_ || pw_thread_loop_start(loop_) != 0) {
    error = "cannot start PipeWire's thread";
    close();
    return false;
  }
  pw_thread_loop_lock(loop_);
  std::string why;
  if (!connect_locked(why)) {
    // Not fatal: PipeWire may start after syncd (a session coming up). The camera is there
    // once it does.
    std::fprintf(stderr,
                 "syncd: camera \"%s\": %s; trying again in the background, serving everything "
                 "else\n",
                 name_.c_str(), why.c_str());
    loss_said_ = true;
    schedule_reconnect_locked();
  }
  pw_thread_loop_unlock(loop_);
  return true;
}

bool PipeWireBackend::connect_locked(std::string& error) {
  core_ = pw_context_connect(context_, nullptr, 0);
  if (!core_) {
    error = no_session_error(errno);
    set_health("connecting", error);
    return false;
  }
  core_listener_ = new Listener;
  pw_core_add_listener(core_, &core_listener_->hook, &kCoreEvents, this);
  connected_ = true;
  set_health("connected", {});
  if (shown_ && !create_stream_locked(error)) {
    std::fprintf(stderr, "syncd: camera \"%s\": %s\n", name_.c_str(), error.c_str());
    set_health("connected", error);
  }
  return true;
}

void PipeWireBackend::disconnect_locked() {
  destroy_stream_locked();
  if (core_listener_) spa_hook_remove(&core_listener_->hook);
  delete core_listener_;
  core_listener_ = nullptr;
  if (core_) pw_core_disconnect(core_);
  core_ = nullptr;
  connected_ = false;
}

void PipeWireBackend::schedule_reconnect_locked() {
  reconnect_delay_ms_ = reconnect_delay_ms_ == 0
                            ? kFirstReconnectMs
                            : std::min(reconnect_delay_ms_ * 2, kMaxReconnectMs);
  timespec value{.tv_sec = time_t(reconnect_delay_ms_ / 1000),
                 .tv_nsec = long(reconnect_delay_ms_ % 1000) * 1000000L};
  pw_loop_update_timer(pw_thread_loop_get_loop(loop_), reconnect_timer_, &value, nullptr, false);
}

void PipeWireBackend::on_core_error(uint32_t id, int res, const char* message) {
  if (id != PW_ID_CORE || res != -EPIPE) {
    // An error about one object (the node refused, say): the stream's state says the rest.
    std::fprintf(stderr, "syncd: camera \"%s\": PipeWire: %s\n", name_.c_str(),
                 message ? message : spa_strerror(res));
    return;
  }
  // The connection is gone: PipeWire stopped or restarted. Everything of the old core is dead;
  // it is torn down on the timer, outside this callback of its own.
  connected_ = false;
  streaming_ = false;
  negotiated_ = false;
  const std::string why =
      std::string("PipeWire connection lost") + (message ? std::string(": ") + message : "");
  set_health("connecting", why);
  if (!loss_said_) {
    std::fprintf(stderr, "syncd: camera \"%s\": %s; reconnecting\n", name_.c_str(), why.c_str());
    loss_said_ = true;
  }
  reconnect_delay_ms_ = 0;
  schedule_reconnect_locked();
}

void PipeWireBackend::on_reconnect_timer() {
  if (connected_) return;
  disconnect_locked();
  std::string error;
  if (!connect_locked(error)) {
    schedule_reconnect_locked();
    return;
  }
  reconnect_delay_ms_ = 0;
  loss_said_ = false;
  {
    std::lock_guard lock(health_mutex_);
    ++health_.reconnects;
  }
  std::fprintf(stderr, "syncd: camera \"%s\": PipeWire connected again%s\n", name_.c_str(),
               shown_ ? "; the node is back" : "");
}

void PipeWireBackend::set_health(const char* state, std::string error) {
  std::lock_guard lock(health_mutex_);
  health_.state = state;
  health_.error = std::move(error);
}

CameraBackendHealth PipeWireBackend::health() const {
  std::lock_guard lock(health_mutex_);
  return health_;
}

std::optional<CameraDelivery> PipeWireBackend::delivery() const {
  return CameraDelivery{.consumed = consumed_.load(std::memory_order_relaxed),
                        .abandoned = abandoned_.load(std::memory_order_relaxed)};
}

void PipeWireBackend::set_frame_rate(double fps) {
  // As a fraction PipeWire can carry: whole rates exactly, others to a thousandth.
  uint32_t num = 60, den = 1;
  if (fps > 0 && fps < 1000) {
    if (std::abs(fps - std::round(fps)) < 1e-6) {
      num = uint32_t(std::lround(fps));
    } else {
      num = uint32_t(std::lround(fps * 1000));
      den = 1000;
    }
  }
  if (!loop_) return;
  pw_thread_loop_lock(loop_);
  fps_num_ = num;
  fps_den_ = den;
  pw_thread_loop_unlock(loop_);
}

bool PipeWireBackend::configure(uint32_t width, uint32_t height, CameraFormat format,
                                std::string& error) {
  if (!loop_) {
    error = "PipeWire's thread is not running";
    return false;
  }
  if (camera_frame_bytes(format, width, height) == 0) {
    error = "a camera frame needs an even width and height, not " + std::to_string(width) + "x" +
            std::to_string(height);
    return false;
  }
  pw_thread_loop_lock(loop_);
  // A new stream or a new size: a new node, offering the new size.
  destroy_stream_locked();
  width_ = width;
  height_ = height;
  preferred_ = format;
  shown_ = true;
  // Without PipeWire now, the node is made when it is back (connect_locked).
  const bool ok = !connected_ || create_stream_locked(error);
  pw_thread_loop_unlock(loop_);
  return ok;
}

bool PipeWireBackend::create_stream_locked(std::string& error) {
  // What makes the node a camera to wireplumber, Chromium and OBS (docs/camera.md).
  pw_properties* props = pw_properties_new(
      PW_KEY_MEDIA_CLASS, "Video/Source", PW_KEY_MEDIA_TYPE, "Video", PW_KEY_MEDIA_CATEGORY,
      "Capture", PW_KEY_MEDIA_ROLE, "Camera", PW_KEY_NODE_NAME, name_.c_str(),
      PW_KEY_NODE_DESCRIPTION, name_.c_str(), nullptr);
  stream_ = pw_stream_new(core_, name_.c_str(), props);
  if (!stream_) {
    error = std::string("pw_stream_new: ") + std::strerror(errno);
    return false;
  }
  listener_ = new Listener;
  pw_stream_add_listener(stream_, &listener_->hook, &kStreamEvents, this);

  uint8_t storage[1024];
  spa_pod_builder builder = SPA_POD_BUILDER_INIT(storage, sizeof storage);
  // One EnumFormat per format, each with a fixed format, size and rate, the preferred one first
  // (pipewire_format.h, which also says what the YUV means). Not one param with a choice of
  // formats: Chromium's PipeWire capture (WebRTC's pipewire_session.cc, ParseFormat) takes only a
  // fixed video format per EnumFormat, ignores a param with SPA_CHOICE_Enum, and drops a camera
  // with no format it could parse (seen: "Found Camera: Sync Camera", then getUserMedia's
  // NotFoundError). GStreamer's pipewiresrc takes both.
  const CameraFormat formats[3] = {CameraFormat::kI420, CameraFormat::kNv12, CameraFormat::kYuy2};
  const spa_pod* params[3];
  uint32_t n_params = 0;
  params[n_params++] =
      build_camera_enum_format(builder, preferred_, width_, height_, fps_num_, fps_den_);
  for (CameraFormat format : formats)
    if (format != preferred_)
      params[n_params++] =
          build_camera_enum_format(builder, format, width_, height_, fps_num_, fps_den_);
  // The worker drives the graph: a frame queued is followed by pw_stream_trigger_process().
  const int rc = pw_stream_connect(
      stream_, PW_DIRECTION_OUTPUT, PW_ID_ANY,
      static_cast<pw_stream_flags>(PW_STREAM_FLAG_DRIVER | PW_STREAM_FLAG_MAP_BUFFERS), params,
      n_params);
  if (rc < 0) {
    error = std::string("pw_stream_connect: ") + spa_strerror(rc);
    destroy_stream_locked();
    return false;
  }
  return true;
}

void PipeWireBackend::destroy_stream_locked() {
  if (stream_) {
    if (in_flight_) pw_stream_queue_buffer(stream_, in_flight_);
    // What the consumer gave back is consumed; what it still holds goes with the node.
    if (connected_) take_returned_locked();
    pw_stream_destroy(stream_);  // the node leaves the graph
  }
  spare_count_ = 0;
  stream_ = nullptr;
  delete listener_;
  listener_ = nullptr;
  in_flight_ = nullptr;
  negotiated_ = false;
  streaming_ = false;
  frame_bytes_ = 0;
}

void PipeWireBackend::on_param_changed(uint32_t id, const spa_pod* param) {
  if (id != SPA_PARAM_Format) return;
  if (param == nullptr) {  // the consumer left: no format until the next one negotiates
    negotiated_ = false;
    return;
  }
  spa_video_info_raw info{};
  CameraFormat format;
  if (spa_format_video_raw_parse(param, &info) < 0 || !camera_format_of_spa(info.format, format) ||
      info.size.width != width_ || info.size.height != height_) {
    negotiated_ = false;
    return;
  }
  negotiated_format_ = format;
  frame_bytes_ = camera_frame_bytes(format, width_, height_);
  stride_ = format == CameraFormat::kYuy2 ? width_ * 2 : width_;
  negotiated_ = true;

  uint8_t storage[1024];
  spa_pod_builder builder = SPA_POD_BUILDER_INIT(storage, sizeof storage);
  const spa_pod* params[2];
  params[0] = static_cast<const spa_pod*>(spa_pod_builder_add_object(
      &builder, SPA_TYPE_OBJECT_ParamBuffers, SPA_PARAM_Buffers, SPA_PARAM_BUFFERS_buffers,
      SPA_POD_CHOICE_RANGE_Int(4, 2, 16), SPA_PARAM_BUFFERS_blocks, SPA_POD_Int(1),
      SPA_PARAM_BUFFERS_size, SPA_POD_Int(int32_t(frame_bytes_)), SPA_PARAM_BUFFERS_stride,
      SPA_POD_Int(int32_t(stride_)), SPA_PARAM_BUFFERS_dataType,
      SPA_POD_CHOICE_FLAGS_Int((1 << SPA_DATA_MemFd) | (1 << SPA_DATA_MemPtr))));
  params[1] = static_cast<const spa_pod*>(spa_pod_builder_add_object(
      &builder, SPA_TYPE_OBJECT_ParamMeta, SPA_PARAM_Meta, SPA_PARAM_META_type,
      SPA_POD_Id(SPA_META_Header), SPA_PARAM_META_size, SPA_POD_Int(sizeof(spa_meta_header))));
  pw_stream_update_params(stream_, params, 2);
}

void PipeWireBackend::on_state_changed(int state, const char* error) {
  streaming_ = state == PW_STREAM_STATE_STREAMING;
  // A lost connection is said once, by on_core_error; its stream's "connection error" would
  // say it twice.
  if (error && connected_)
    std::fprintf(stderr, "syncd: camera \"%s\": PipeWire: %s\n", name_.c_str(), error);
}

void PipeWireBackend::on_remove_buffer(pw_buffer* buffer) {
  // A consumer leaving or renegotiating takes the stream's buffers away, frames and all.
  if (buffer->user_data == kWithConsumer) abandoned_.fetch_add(1, std::memory_order_relaxed);
  buffer->user_data = nullptr;
  auto* end = spare_.begin() + spare_count_;
  if (auto* it = std::find(spare_.begin(), end, buffer); it != end) {
    std::copy(it + 1, end, it);
    --spare_count_;
  }
}

std::span<uint8_t> PipeWireBackend::dequeue() {
  buffer_format_.reset();
  if (!loop_) return {};
  pw_thread_loop_lock(loop_);
  std::span<uint8_t> out;
  if (stream_ && streaming_ && negotiated_ && !in_flight_) {
    take_returned_locked();
    if (spare_count_ > 0) {
      // The one back longest, as pw_stream_dequeue_buffer() would give it. Not the newest:
      // filled newest-first, every other frame went missing at pipewiresrc (0.3.65), which
      // still reads the buffer it gave back last.
      pw_buffer* b = spare_[0];
      std::copy(spare_.begin() + 1, spare_.begin() + spare_count_, spare_.begin());
      --spare_count_;
      spa_data& d = b->buffer->datas[0];
      if (d.data && d.maxsize >= frame_bytes_) {
        in_flight_ = b;
        buffer_format_ = negotiated_format_;
        // The lock stays held until queue() or release_unfilled(): while it is, PipeWire's
        // thread cannot clear the stream's buffers (a consumer leaving or renegotiating), which
        // unmaps them under a conversion writing into one.
        return {static_cast<uint8_t*>(d.data), frame_bytes_};
      }
      d.chunk->size = 0;  // too small for this format: back, empty, as release_unfilled()
      pw_stream_queue_buffer(stream_, b);
    }
  }
  pw_thread_loop_unlock(loop_);
  return out;
}

void PipeWireBackend::take_returned_locked() {
  while (spare_count_ < spare_.size()) {
    pw_buffer* b = pw_stream_dequeue_buffer(stream_);
    if (!b) break;
    // A buffer queued with a frame comes back once the consumer has taken it and let it go.
    if (b->user_data == kWithConsumer) consumed_.fetch_add(1, std::memory_order_relaxed);
    b->user_data = nullptr;
    spare_[spare_count_++] = b;
  }
}

void PipeWireBackend::release_unfilled() {
  if (!loop_ || !in_flight_) return;
  // Locked since dequeue(). Queued back with no data: consumers skip an empty chunk.
  spa_data& d = in_flight_->buffer->datas[0];
  d.chunk->offset = 0;
  d.chunk->size = 0;
  pw_stream_queue_buffer(stream_, in_flight_);
  in_flight_ = nullptr;
  pw_thread_loop_unlock(loop_);
}

bool PipeWireBackend::queue(uint64_t accept_ns, uint64_t sequence) {
  // Locked since a dequeue() that returned a buffer; without one there is nothing to queue.
  if (!loop_ || !in_flight_) return false;
  bool ok = false;
  if (stream_) {
    spa_buffer* buf = in_flight_->buffer;
    spa_data& d = buf->datas[0];
    if (auto* h = static_cast<spa_meta_header*>(
            spa_buffer_find_meta_data(buf, SPA_META_Header, sizeof(spa_meta_header)))) {
      // pipewiresrc makes pts the buffer's PTS (PipeWire's clock is CLOCK_MONOTONIC) and seq its
      // offset: a consumer sees the frame's age and the producer's gaps.
      h->pts = int64_t(accept_ns);
      h->flags = 0;
      h->seq = sequence;
      h->dts_offset = 0;
    }
    d.chunk->offset = 0;
    d.chunk->size = uint32_t(frame_bytes_);
    d.chunk->stride = int32_t(stride_);
    in_flight_->user_data = kWithConsumer;
    pw_stream_queue_buffer(stream_, in_flight_);
    in_flight_ = nullptr;
    // Queued outside the cycle, then triggered: the buffer waits in the stream's queue for the
    // next cycle, so a trigger that merges with a running cycle delays the frame, never loses it.
    pw_stream_trigger_process(stream_);
    ok = true;
  }
  pw_thread_loop_unlock(loop_);
  return ok;
}

void PipeWireBackend::end_stream() {
  if (!loop_) return;
  // Not under the lock: the loop thread must not wait on PipeWire's thread.
  pw_loop_invoke(pw_thread_loop_get_loop(loop_), end_stream_cb, 0, nullptr, 0, false, this);
}

void PipeWireBackend::end_on_pipewire_thread() {
  // Runs with the lock held, so no buffer is with the worker now.
  shown_ = false;
  destroy_stream_locked();
}

void PipeWireBackend::close() {
  if (!loop_) return;
  pw_thread_loop_lock(loop_);
  disconnect_locked();
  if (reconnect_timer_) pw_loop_destroy_source(pw_thread_loop_get_loop(loop_), reconnect_timer_);
  reconnect_timer_ = nullptr;
  pw_thread_loop_unlock(loop_);
  pw_thread_loop_stop(loop_);
  if (context_) pw_context_destroy(context_);
  context_ = nullptr;
  pw_thread_loop_destroy(loop_);
  loop_ = nullptr;
}

}  // namespace syncd::media
