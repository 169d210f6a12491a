#include "media/publishers/camera/camera_publisher.h"

#include <sched.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "core/clock.h"
#include "media/publishers/camera/pipewire_backend.h"
#include "media/publishers/camera/v4l2_backend.h"
#include "telemetry/stage_json.h"

namespace syncd::media {

const char* camera_drop_name(CameraDrop reason) {
  switch (reason) {
    case CameraDrop::kConsumerSlow:
      return "consumer_slow";
    case CameraDrop::kPinRefused:
      return "pin_refused";
    case CameraDrop::kBackendBusy:
      return "backend_busy";
    case CameraDrop::kNoConsumer:
      return "no_consumer";
    case CameraDrop::kBackendDown:
      return "backend_down";
    case CameraDrop::kBackendError:
      return "backend_error";
    case CameraDrop::kNoBackend:
      return "no_backend";
    case CameraDrop::kUnsupportedSize:
      return "unsupported_size";
    case CameraDrop::kCount:
      break;
  }
  return "?";
}

CameraPublisher::CameraPublisher(uv_loop_t* loop, CameraConfig config,
                                 std::unique_ptr<CameraBackend> backend, std::string backend_error)
    : config_(std::move(config)),
      backend_(std::move(backend)),
      backend_error_(std::move(backend_error)) {
  if (!loop || !backend_) return;
  worker_ = std::make_unique<core::WorkerHandoff<ConvertJob, kQueueDepth>>(&convert_on_worker,
                                                                           &verdict_on_loop, this);
  if (const int rc = worker_->start(loop); rc != 0) {
    // Converting on the loop instead would hold it ~0.5 ms a 1080p frame: no camera rather.
    worker_.reset();
    backend_->close();
    backend_.reset();
    backend_error_ = std::string("cannot start the camera's worker: ") + uv_strerror(rc);
    std::fprintf(stderr, "syncd: camera \"%s\" unavailable: %s\n", config_.name.c_str(),
                 backend_error_.c_str());
  }
}

std::unique_ptr<CameraPublisher> CameraPublisher::create(uv_loop_t* loop,
                                                         const CameraConfig& config) {
  std::unique_ptr<CameraBackend> backend;
  std::string error;
  if (config.device.empty())
    backend = std::make_unique<PipeWireBackend>(config.name);
  else
    backend = std::make_unique<V4l2LoopbackBackend>(config.device);
  if (!backend->open(error)) backend.reset();
  if (backend) {
    std::fprintf(stderr, "syncd: camera \"%s\": %s %s, %s\n", config.name.c_str(),
                 std::string(backend->kind()).c_str(), std::string(backend->target()).c_str(),
                 camera_format_name(config.format));
  } else {
    // syncd goes on without a camera; its frames are counted as dropped (no_backend).
    std::fprintf(stderr, "syncd: camera \"%s\" unavailable: %s; serving everything else\n",
                 config.name.c_str(), error.c_str());
  }
  return std::make_unique<CameraPublisher>(loop, config, std::move(backend), std::move(error));
}

CameraPublisher::~CameraPublisher() {
  stop();
}

void CameraPublisher::stop() {
  if (worker_) worker_->stop();  // runs the last verdicts, unpinning their slots
  if (backend_) backend_->close();
}

void CameraPublisher::on_stream_open(const Stream& stream) {
  if (shown_stream_id_ != 0) return;  // one camera, one stream
  // Access units (a relayed h264 stream) are pictures only once decoded; the camera shows raw
  // streams and leaves those to other publishers.
  if (is_encoded(stream.config().format)) return;
  shown_stream_id_ = stream.id();
  CameraCounters& c = streams_[stream.id()] = CameraCounters{};
  if (!backend_) return;
  // What the backend heard back since the last stream was shown was that stream's: its node's
  // last buffers come back (or go) after it closed.
  c.delivery_base = backend_->delivery();
  if (auto last = streams_.find(last_shown_stream_id_); last != streams_.end())
    last->second.delivery_end = c.delivery_base;
  last_shown_stream_id_ = stream.id();
}

void CameraPublisher::on_stream_close(const Stream& stream) {
  // Frames already with the worker still reach the backend; the next stream opened is shown.
  if (stream.id() != shown_stream_id_) return;
  shown_stream_id_ = 0;
  if (backend_) backend_->end_stream();  // a PipeWire node goes; never blocks
}

void CameraPublisher::on_stream_forget(uint32_t stream_id) {
  streams_.erase(stream_id);
}

void CameraPublisher::on_frame(const Stream& stream, FrameSlot& slot) {
  if (stream.id() != shown_stream_id_) return;
  auto it = streams_.find(stream.id());
  if (it == streams_.end()) return;  // cannot happen: shown streams have counters
  CameraCounters& c = it->second;
  const uint64_t start_ns = core::monotonic_ns();
  ++c.offered;
  const FrameLayout& layout = stream.layout();
  if (!backend_) {
    ++c.dropped[size_t(CameraDrop::kNoBackend)];
  } else if (camera_frame_bytes(config_.format, layout.width, layout.height) == 0) {
    ++c.dropped[size_t(CameraDrop::kUnsupportedSize)];
  } else if (!worker_) {
    ConvertJob job = make_job(stream, slot, start_ns);
    job.verdict = convert(job);
    count_verdict(job);
  } else if (!FramePool::try_pin(&slot)) {
    ++c.dropped[size_t(CameraDrop::kPinRefused)];
  } else if (worker_->submit(make_job(stream, slot, start_ns))) {
    ++c.converting;
  } else {
    FramePool::unpin(&slot);
    ++c.dropped[size_t(CameraDrop::kConsumerSlow)];
  }
  c.loop.record(core::monotonic_ns() - start_ns);
}

CameraPublisher::ConvertJob CameraPublisher::make_job(const Stream& stream, FrameSlot& slot,
                                                      uint64_t start_ns) {
  return ConvertJob{.slot = &slot,
                    .stream_id = stream.id(),
                    .layout = stream.layout(),
                    .fps = stream.config().fps,
                    .submitted_ns = start_ns,
                    .convert_ns = 0,
                    .verdict = Verdict::kBackendError};
}

void CameraPublisher::convert_on_worker(ConvertJob& job, void* self) {
  // The worker is a batch thread: woken by the loop's hand-off, it does not preempt the loop.
  // As an ordinary thread it did, on a busy 2-core machine, and the loop's time per frame in
  // on_frame() went from ~35 us to ~450-700 us (docs/benchmarks.md, "System camera"). Lowering
  // one's own policy needs no privilege; should it fail, the camera works as before.
  static thread_local const bool batch = [] {
    sched_param param{};
    return sched_setscheduler(0, SCHED_BATCH, &param) == 0;
  }();
  (void)batch;
  job.verdict = static_cast<CameraPublisher*>(self)->convert(job);
}

CameraFormat CameraPublisher::preferred_format(PixelFormat source) const {
  // A v4l2loopback device has one format, the one configured: --camera-format's. A PipeWire
  // node offers all three and its consumer picks; the first offered is the one to pick when
  // the consumer has no preference.
  if (config_.format_given || !backend_ || backend_->kind() != "pipewire") return config_.format;
  return cheapest_camera_format(source);
}

CameraPublisher::Verdict CameraPublisher::convert(ConvertJob& job) {
  const uint64_t start_ns = core::monotonic_ns();
  WorkerState& w = worker_state_;
  const uint32_t width = job.layout.width;
  const uint32_t height = job.layout.height;
  Verdict verdict = Verdict::kBackendError;
  if (width != w.width || height != w.height || job.stream_id != w.stream_id) {
    // A new geometry or a new stream: set up once, not per frame.
    std::string error;
    w.width = width;
    w.height = height;
    w.stream_id = job.stream_id;
    backend_->set_frame_rate(job.fps);
    w.failed = !w.converter.prepare(width, height) ||
               !backend_->configure(width, height, preferred_format(job.layout.format), error);
    if (w.failed)
      std::fprintf(stderr, "syncd: camera \"%s\": %s\n", config_.name.c_str(), error.c_str());
  }
  if (!w.failed) {
    const std::span<uint8_t> buffer = backend_->dequeue();
    if (buffer.empty()) {
      verdict = !backend_->connected()     ? Verdict::kBackendDown
                : backend_->has_consumer() ? Verdict::kBackendBusy
                                           : Verdict::kNoConsumer;
    } else if (!w.converter.convert(job.layout, job.slot->pixels,
                                    backend_->buffer_format().value_or(config_.format),
                                    buffer.data(), buffer.size())) {
      backend_->release_unfilled();
    } else if (backend_->queue(job.slot->info.accept_ns, job.slot->info.sequence)) {
      verdict = Verdict::kDelivered;
    }
  }
  job.convert_ns = core::monotonic_ns() - start_ns;
  return verdict;
}

void CameraPublisher::verdict_on_loop(ConvertJob& job, void* context) {
  auto* self = static_cast<CameraPublisher*>(context);
  if (auto it = self->streams_.find(job.stream_id); it != self->streams_.end()) {
    --it->second.converting;
    self->count_verdict(job);
  }
  FramePool::unpin(job.slot);
}

void CameraPublisher::count_verdict(ConvertJob& job) {
  auto it = streams_.find(job.stream_id);
  if (it == streams_.end()) return;
  CameraCounters& c = it->second;
  switch (job.verdict) {
    case Verdict::kDelivered:
      ++c.delivered;
      break;
    case Verdict::kBackendBusy:
      ++c.dropped[size_t(CameraDrop::kBackendBusy)];
      break;
    case Verdict::kNoConsumer:
      ++c.dropped[size_t(CameraDrop::kNoConsumer)];
      break;
    case Verdict::kBackendDown:
      ++c.dropped[size_t(CameraDrop::kBackendDown)];
      break;
    case Verdict::kBackendError:
      ++c.dropped[size_t(CameraDrop::kBackendError)];
      break;
  }
  c.convert.record(job.convert_ns);
  c.handoff.record(core::monotonic_ns() - job.submitted_ns);
}

const CameraCounters* CameraPublisher::counters(uint32_t stream_id) const {
  auto it = streams_.find(stream_id);
  return it == streams_.end() ? nullptr : &it->second;
}

void CameraPublisher::write_stream_stats(uint32_t stream_id, nlohmann::json& out) const {
  const CameraCounters* c = counters(stream_id);
  if (!c) return;
  out["camera_name"] = config_.name;
  out["format"] = camera_format_name(config_.format);
  out["backend"] = backend_ ? std::string(backend_->kind()) : "none";
  if (backend_) {
    out["target"] = std::string(backend_->target());
    const CameraBackendHealth health = backend_->health();
    out["state"] = health.state;
    out["reconnects"] = health.reconnects;
    if (!health.error.empty()) out["error"] = health.error;
  } else {
    out["state"] = "none";
  }
  if (!backend_error_.empty()) out["error"] = backend_error_;
  out["shown"] = stream_id == shown_stream_id_;
  // offered == delivered + converting + sum(dropped)
  out["offered"] = c->offered;
  out["delivered"] = c->delivered;
  out["converting"] = c->converting;
  // delivered == consumed + abandoned + with_consumer, when the backend can tell.
  const std::optional<CameraDelivery> now =
      c->delivery_end ? c->delivery_end : (backend_ ? backend_->delivery() : std::nullopt);
  if (now && c->delivery_base) {
    const uint64_t consumed = now->consumed - c->delivery_base->consumed;
    const uint64_t abandoned = now->abandoned - c->delivery_base->abandoned;
    out["consumed"] = consumed;
    out["abandoned"] = abandoned;
    out["with_consumer"] =
        c->delivered >= consumed + abandoned ? c->delivered - consumed - abandoned : 0;
  }
  nlohmann::json dropped = nlohmann::json::object();
  for (size_t r = 0; r < size_t(CameraDrop::kCount); ++r)
    dropped[camera_drop_name(CameraDrop(r))] = c->dropped[r];
  out["dropped"] = std::move(dropped);
  out["stages"] = {{"loop", telemetry::stage_json(c->loop)},
                   {"convert", telemetry::stage_json(c->convert)},
                   {"handoff", telemetry::stage_json(c->handoff)}};
}

void CameraPublisher::write_metrics(telemetry::PrometheusText& out,
                                    const std::vector<const Stream*>& streams) const {
  auto label = [](const Stream* s) {
    return "stream=\"" + telemetry::prometheus_label_value(s->config().name) + "\"";
  };
  out.family("syncd_camera_frames_offered_total", "counter", "Frames offered to the camera.");
  for (const Stream* s : streams)
    if (const CameraCounters* c = counters(s->id()))
      out.sample("syncd_camera_frames_offered_total", label(s), c->offered);
  out.family("syncd_camera_frames_delivered_total", "counter", "Frames the camera's backend took.");
  for (const Stream* s : streams)
    if (const CameraCounters* c = counters(s->id()))
      out.sample("syncd_camera_frames_delivered_total", label(s), c->delivered);
  if (backend_) {
    const CameraBackendHealth health = backend_->health();
    out.family("syncd_camera_backend_connected", "gauge",
               "1 while the camera's backend has its server (PipeWire), 0 while it reconnects.");
    out.sample("syncd_camera_backend_connected", "", uint64_t{backend_->connected() ? 1u : 0u});
    out.family("syncd_camera_backend_reconnects_total", "counter",
               "Times the camera's backend connected again after losing its server.");
    out.sample("syncd_camera_backend_reconnects_total", "", health.reconnects);
  }
  out.family("syncd_camera_frames_dropped_total", "counter",
             "Frames offered to the camera that did not reach its backend, by reason.");
  for (const Stream* s : streams)
    if (const CameraCounters* c = counters(s->id()))
      for (size_t r = 0; r < size_t(CameraDrop::kCount); ++r)
        out.sample("syncd_camera_frames_dropped_total",
                   label(s) + ",reason=\"" + camera_drop_name(CameraDrop(r)) + "\"", c->dropped[r]);
  out.family("syncd_camera_stage_seconds", "histogram", "Per-frame time in the camera's stages.");
  for (const Stream* s : streams) {
    if (const CameraCounters* c = counters(s->id())) {
      out.histogram("syncd_camera_stage_seconds", label(s) + ",stage=\"loop\"", c->loop);
      out.histogram("syncd_camera_stage_seconds", label(s) + ",stage=\"convert\"", c->convert);
      out.histogram("syncd_camera_stage_seconds", label(s) + ",stage=\"handoff\"", c->handoff);
    }
  }
}

}  // namespace syncd::media
