#include "decode/decode_publisher.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "media/frame_header.h"

namespace syncd::decode {

const char* twin_drop_name(TwinDrop drop) {
  switch (drop) {
    case TwinDrop::kNoConsumer:
      return "no_consumer";
    case TwinDrop::kTwinUnavailable:
      return "twin_unavailable";
    case TwinDrop::kCount:
      break;
  }
  return "?";
}

DecodePublisher::DecodePublisher(uv_loop_t* loop, media::StreamRegistry& registry,
                                 DecodePublisherConfig config, PixelDemand demand)
    : loop_(loop), registry_(registry), config_(config), demand_(std::move(demand)) {}

DecodePublisher::~DecodePublisher() {
  stop();
}

void DecodePublisher::stop() {
  if (stopped_) return;
  stopped_ = true;
  // Each stage finishes what its worker holds (its leases committed or aborted, its buffers given
  // back) and joins the worker.
  for (auto& [id, t] : twins_)
    if (t->stage) t->stage->stop();
}

void DecodePublisher::on_stream_open(const media::Stream& stream) {
  if (!media::is_encoded(stream.config().format)) return;
  auto t = std::make_unique<Twin>();
  t->self = this;
  t->source_id = stream.id();
  t->source_name = stream.config().name;
  t->registry_dropped = stream.counters().dropped_total();
  twins_[stream.id()] = std::move(t);
}

void DecodePublisher::on_stream_close(const media::Stream& stream) {
  auto it = twins_.find(stream.id());
  if (it == twins_.end()) return;
  Twin& t = *it->second;
  t.source_open = false;
  t.decoding = false;
  // The stage gives back every buffer it holds (waiting for at most 8 decodes: a stream's
  // close is control plane) and joins its worker; then the twin closes, so its consumers see it
  // end with its source. The registry's close is re-entered for the twin: its maps are
  // node-based and the source's entry is not touched, and the twin is another stream.
  if (t.stage) t.stage->stop();
  if (t.twin_id != 0)
    if (media::Stream* twin = registry_.find(t.twin_id)) registry_.close(twin);
}

void DecodePublisher::on_stream_forget(uint32_t stream_id) {
  twins_.erase(stream_id);
}

void DecodePublisher::open_twin(Twin& t, const media::Stream& stream) {
  t.open_tried = true;
  const media::StreamConfig& c = stream.config();
  media::StreamConfig twin;
  twin.name = c.name + std::string(kTwinSuffix);
  twin.width = c.width;
  twin.height = c.height;
  twin.format = media::PixelFormat::kI420;
  twin.fps = c.fps;
  twin.slots = config_.twin_slots;
  media::OpenError error = media::OpenError::kNone;
  // Opened from within the source's frame fan-out: every publisher hears of the twin before
  // the fan-out goes on, and the registry's node-based maps keep the source stream in place.
  // Its pages are not faulted in here (12 I420 slots: 37 MB at 1080p, tens of ms on the loop):
  // each is faulted by the decoder's worker as it first writes a picture there.
  media::Stream* s = registry_.open(twin, media::kSyncdOwnerBase + t.source_id, error,
                                    media::FramePool::Prefault::kDeferred);
  if (!s) {
    t.twin_error = media::open_error_code(error);
    return;
  }
  t.twin_id = s->id();
}

bool DecodePublisher::wants_pixels(const Twin& t) const {
  return config_.pixel_publishers || (demand_ && demand_(t.twin_id));
}

void DecodePublisher::start_decoding(Twin& t) {
  media::Stream* twin = registry_.find(t.twin_id);
  if (!twin) return;
  std::string error;
  if (!t.stage) {
    t.stage = std::make_unique<DecodeStage>(
        registry_,
        DecodeStageHooks{&DecodePublisher::buffer_done, &DecodePublisher::keyframe_wanted, &t,
                         &DecodePublisher::undecodable},
        config_.stage);
    if (!t.stage->start(loop_, error)) {
      t.twin_error = error;
      t.stage.reset();
      return;
    }
  }
  // open() restarts the decoder, which then waits for an IDR: ask the source for one now rather
  // than wait for its periodic key frame.
  if (!t.stage->open(*twin, media::kSyncdOwnerBase + t.source_id, error)) {
    t.twin_error = error;
    return;
  }
  t.decoding = true;
  ++t.counters.consumer_starts;
  registry_.request_keyframe(t.source_id, media::KeyframeReason::kConsumer, core::monotonic_ns());
}

void DecodePublisher::drop(Twin& t, TwinDrop reason) {
  ++t.counters.dropped[size_t(reason)];
  t.loss_pending = true;
}

void DecodePublisher::on_frame(const media::Stream& stream, media::FrameSlot& slot) {
  if (stopped_) return;
  auto it = twins_.find(stream.id());
  if (it == twins_.end()) return;
  Twin& t = *it->second;
  ++t.counters.offered;
  // A frame the registry refused (pool_full, size_mismatch, disconnected) never reached here:
  // the decoder's references are broken until the next IDR.
  const uint64_t registry_dropped = stream.counters().dropped_total();
  if (registry_dropped != t.registry_dropped) {
    t.registry_dropped = registry_dropped;
    ++t.counters.losses;
    t.loss_pending = true;
  }
  // The source lost an access unit before this one (a relayed stream's).
  if (slot.info.flags & media::frame_flag::kDiscontinuity) {
    ++t.counters.losses;
    t.loss_pending = true;
  }
  if (!t.open_tried) open_twin(t, stream);
  if (t.twin_id == 0) {
    drop(t, TwinDrop::kTwinUnavailable);
    return;
  }
  if (!wants_pixels(t)) {
    t.decoding = false;  // the stage stays open and idle; it restarts at an IDR when wanted
    drop(t, TwinDrop::kNoConsumer);
    return;
  }
  if (!t.decoding) {
    start_decoding(t);
    if (!t.decoding) {
      drop(t, TwinDrop::kTwinUnavailable);
      return;
    }
  }
  size_t index = 0;
  while (t.lent[index]) ++index;  // one is free (see Twin::lent)
  std::vector<uint8_t>& buffer = t.buffers[index];
  const media::FrameInfo& info = slot.info;
  if (buffer.size() < info.bytes) {
    buffer.resize(info.bytes);
    ++t.counters.buffer_growths;
  }
  std::memcpy(buffer.data(), slot.pixels, info.bytes);
  t.lent[index] = true;
  AccessUnitIn au;
  au.data = buffer.data();
  au.bytes = info.bytes;
  au.buffer = uint32_t(index);
  au.sequence = info.sequence;
  au.capture_time_us = info.capture_time_us;
  au.flags = info.flags & ~media::frame_flag::kDiscontinuity;
  // The twin's receive stage runs from the encoded frame's first byte to its picture's commit.
  au.start_ns = info.receive_start_ns;
  au.loss_before = t.loss_pending;
  t.loss_pending = false;
  ++t.counters.submitted;
  t.stage->submit(au, core::monotonic_ns());
}

void DecodePublisher::buffer_done(uint32_t buffer, void* twin) {
  auto* t = static_cast<Twin*>(twin);
  if (buffer < t->lent.size()) t->lent[buffer] = false;
}

void DecodePublisher::keyframe_wanted(void* twin) {
  auto* t = static_cast<Twin*>(twin);
  t->self->registry_.request_keyframe(t->source_id, media::KeyframeReason::kDecoder,
                                      core::monotonic_ns());
}

void DecodePublisher::undecodable(uint64_t sequence, const char* why, void* twin) {
  auto* t = static_cast<Twin*>(twin);
  t->self->registry_.report_undecodable(t->source_id, sequence, why, core::monotonic_ns());
}

uint32_t DecodePublisher::twin_of(uint32_t stream_id) const {
  auto it = twins_.find(stream_id);
  return it == twins_.end() ? 0 : it->second->twin_id;
}

const TwinCounters* DecodePublisher::counters(uint32_t stream_id) const {
  auto it = twins_.find(stream_id);
  return it == twins_.end() ? nullptr : &it->second->counters;
}

const DecodeStage* DecodePublisher::stage(uint32_t stream_id) const {
  auto it = twins_.find(stream_id);
  return it == twins_.end() ? nullptr : it->second->stage.get();
}

void DecodePublisher::write_stream_stats(uint32_t stream_id, nlohmann::json& out) const {
  auto it = twins_.find(stream_id);
  if (it == twins_.end()) return;
  const Twin& t = *it->second;
  const TwinCounters& c = t.counters;
  nlohmann::json dropped = nlohmann::json::object();
  for (size_t i = 0; i < size_t(TwinDrop::kCount); ++i)
    dropped[twin_drop_name(TwinDrop(i))] = c.dropped[i];
  const char* state = t.decoding                       ? "decoding"
                      : !t.source_open                 ? "closed"
                      : t.open_tried && t.twin_id == 0 ? "unavailable"
                                                       : "idle";
  out = {{"twin", t.source_name + std::string(kTwinSuffix)},
         {"twin_stream", t.twin_id},
         {"state", state},
         {"offered", c.offered},
         {"submitted", c.submitted},
         {"dropped", std::move(dropped)},
         {"dropped_total", c.dropped_total()},
         {"losses", c.losses},
         {"consumer_starts", c.consumer_starts},
         {"buffer_growths", c.buffer_growths}};
  if (!t.twin_error.empty()) out["error"] = t.twin_error;
  if (t.stage) t.stage->write_stats(out["decoder"]);
}

void DecodePublisher::write_metrics(telemetry::PrometheusText& out,
                                    const std::vector<const media::Stream*>& streams) const {
  out.family("syncd_decode_twin_frames_total", "counter",
             "Frames of encoded streams offered to their decoded twin: submitted to the decoder, "
             "or dropped before it by reason.");
  for (const media::Stream* s : streams) {
    const TwinCounters* c = counters(s->id());
    if (!c) continue;
    const std::string label =
        "stream=\"" + telemetry::prometheus_label_value(s->config().name) + "\"";
    out.sample("syncd_decode_twin_frames_total", label + ",outcome=\"submitted\"", c->submitted);
    for (size_t i = 0; i < size_t(TwinDrop::kCount); ++i)
      out.sample("syncd_decode_twin_frames_total",
                 label + ",outcome=\"" + twin_drop_name(TwinDrop(i)) + "\"", c->dropped[i]);
  }
  std::vector<DecodeStage::Labelled> stages;
  for (const media::Stream* s : streams)
    if (const DecodeStage* st = stage(s->id()))
      stages.push_back(
          {"stream=\"" + telemetry::prometheus_label_value(s->config().name) + "\"", st});
  DecodeStage::write_metrics(out, "syncd_decoder", stages);
}

}  // namespace syncd::decode
