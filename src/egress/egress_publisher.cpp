#include "egress/egress_publisher.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "rtp/h264_packetizer.h"
#include "telemetry/stage_json.h"

namespace syncd::egress {

const char* egress_drop_name(EgressDrop reason) {
  switch (reason) {
    case EgressDrop::kConsumerSlow:
      return "consumer_slow";
    case EgressDrop::kPinRefused:
      return "pin_refused";
    case EgressDrop::kQueueFull:
      return "queue_full";
    case EgressDrop::kNotSent:
      return "not_sent";
    case EgressDrop::kEncodeFailed:
      return "encode_failed";
    case EgressDrop::kAwaitingKeyframe:
      return "awaiting_keyframe";
    case EgressDrop::kCount:
      break;
  }
  return "?";
}

EgressPublisher::EgressPublisher(transport::TransportThread& thread, std::string stream_name,
                                 uv_loop_t* loop, EncodeSettings encode, std::string name)
    : thread_(thread),
      stream_name_(std::move(stream_name)),
      name_(std::move(name)),
      loop_(loop),
      encode_settings_(encode),
      target_bps_(uint64_t(encode.bitrate_kbps) * 1000) {}

EgressPublisher::~EgressPublisher() {
  stop_encoder();
}

void EgressPublisher::stop() {
  stop_encoder();
}

void EgressPublisher::stop_encoder() {
  // The worker finishes what it holds; those access units go to the relay thread (or are
  // dropped) through on_encoded, and the stage keeps its slots until the relay gives them back.
  if (encoder_) encoder_->stop();
}

void EgressPublisher::retire_encoder() {
  if (!encoder_) return;
  encoder_->stop();
  if (auto it = streams_.find(relayed_stream_id_); it != streams_.end())
    it->second.encoder = encoder_->counters();
  // The relay may still hold some of its access units: the stage stays until they come back.
  if (encoder_->in_use()) retired_encoders_.push_back(std::move(encoder_));
  encoder_.reset();
}

void EgressPublisher::on_stream_open(const media::Stream& stream) {
  const media::StreamConfig& c = stream.config();
  if (relayed_stream_id_ != 0) return;
  if (!stream_name_.empty() && c.name != stream_name_) return;
  const bool encode = !media::is_encoded(c.format);
  if (encode) {
    if (!loop_ || !EncodeStage::can_encode(c.format)) return;
    retire_encoder();
    encoder_ = std::make_unique<EncodeStage>(c, stream.id(), encode_settings_, &on_encoded, this);
    if (!encoder_->start(loop_)) {
      encoder_.reset();
      return;
    }
  }
  transport::ToTransport m;
  m.kind = transport::ToTransport::Kind::kStreamOpened;
  m.stream_id = stream.id();
  transport::StreamDescription& d = m.description;
  d.format = uint8_t(media::PixelFormat::kH264);
  d.source_format = encode ? uint8_t(c.format) : 0;
  d.width = c.width;
  d.height = c.height;
  d.fps_millihertz = uint32_t(std::lround(std::clamp(c.fps, 0.001, 1000.0) * 1000.0));
  // A longer name is cut at 64 bytes: the peer's stream is named by what fits.
  d.name_bytes = uint8_t(std::min(c.name.size(), transport::kMaxStreamNameBytes));
  std::memcpy(d.name, c.name.data(), d.name_bytes);
  if (!thread_.send_to_relay(m)) {  // the relay is stopping; the next open may take it
    retire_encoder();
    return;
  }
  relayed_stream_id_ = stream.id();
  streams_[stream.id()] = EgressPublisherCounters{};
  awaiting_idr_ = false;
  forward_target();  // the start rate, before any estimate
}

void EgressPublisher::on_stream_close(const media::Stream& stream) {
  if (stream.id() == relayed_stream_id_) close_relayed();
}

void EgressPublisher::close_relayed() {
  retire_encoder();  // its last frames go out before the close does
  transport::ToTransport m;
  m.kind = transport::ToTransport::Kind::kStreamClosed;
  m.stream_id = relayed_stream_id_;
  thread_.send_to_relay(m);
  relayed_stream_id_ = 0;
}

void EgressPublisher::retarget(std::string stream_name, const media::Stream* open) {
  if (relayed_stream_id_ != 0) close_relayed();
  stream_name_ = std::move(stream_name);
  if (open) on_stream_open(*open);
}

void EgressPublisher::on_stream_forget(uint32_t stream_id) {
  streams_.erase(stream_id);
}

void EgressPublisher::on_frame(const media::Stream& stream, media::FrameSlot& slot) {
  if (stream.id() != relayed_stream_id_ || !active_) return;
  EgressPublisherCounters& c = streams_[stream.id()];
  ++c.offered;
  if (!encoder_ && awaiting_idr_) {
    if (!rtp::access_unit_has_idr({slot.pixels, slot.info.bytes})) {
      count_drop(c, EgressDrop::kAwaitingKeyframe);
      return;
    }
    awaiting_idr_ = false;
  }
  if (c.in_flight >= kMaxInFlight) {
    count_drop(c, EgressDrop::kConsumerSlow);
    return;
  }
  if (!media::FramePool::try_pin(&slot)) {
    count_drop(c, EgressDrop::kPinRefused);
    return;
  }
  if (encoder_ && !media::is_encoded(stream.config().format)) {
    if (!encoder_->submit(slot, core::monotonic_ns())) {
      media::FramePool::unpin(&slot);
      ++c.dropped[size_t(EgressDrop::kConsumerSlow)];
      return;
    }
    ++c.in_flight;
    return;
  }
  ++c.in_flight;
  send(slot, c);
}

void EgressPublisher::send(media::FrameSlot& slot, EgressPublisherCounters& c) {
  transport::ToTransport m;
  m.kind = transport::ToTransport::Kind::kFrame;
  m.slot = &slot;
  m.stream_id = slot.info.stream_id;
  m.submitted_ns = core::monotonic_ns();
  if (!thread_.send_to_relay(m)) {
    if (!release_access_unit(&slot)) media::FramePool::unpin(&slot);
    --c.in_flight;
    count_drop(c, EgressDrop::kQueueFull);
  }
}

void EgressPublisher::on_encoded(const EncodedFrame& frame, void* context) {
  auto* self = static_cast<EgressPublisher*>(context);
  const uint32_t stream_id = frame.raw->info.stream_id;
  media::FramePool::unpin(frame.raw);
  auto it = self->streams_.find(stream_id);
  if (it == self->streams_.end()) {  // cannot happen: forget comes after the pool is let go
    if (frame.access_unit) self->encoder_->release(frame.access_unit);
    return;
  }
  EgressPublisherCounters& c = it->second;
  if (!frame.access_unit) {
    --c.in_flight;
    ++c.dropped[size_t(EgressDrop::kEncodeFailed)];
    return;
  }
  self->send(*frame.access_unit, c);
}

void EgressPublisher::on_frame_done(const transport::FromTransport& message) {
  if (!release_access_unit(message.slot)) media::FramePool::unpin(message.slot);
  auto it = streams_.find(message.stream_id);
  if (it == streams_.end()) return;
  EgressPublisherCounters& c = it->second;
  --c.in_flight;
  if (message.sent)
    ++c.sent;
  else
    count_drop(c, EgressDrop::kNotSent);
}

void EgressPublisher::count_drop(EgressPublisherCounters& c, EgressDrop reason) {
  ++c.dropped[size_t(reason)];
  // A raw stream's encoder starts its chain again itself (a drop comes before the encoder).
  if (encoder_ || reason == EgressDrop::kAwaitingKeyframe) return;
  // Asked once per break, and only once a frame ever reached a peer: with no peer yet (frames
  // not sent), its decoder asks for an IDR when it comes, and asking here would make the source
  // send an IDR for every one this drops.
  if (!awaiting_idr_ && c.sent > 0 && registry_ && relayed_stream_id_ != 0)
    registry_->request_keyframe(relayed_stream_id_, feedback_reason_, core::monotonic_ns());
  awaiting_idr_ = true;
}

bool EgressPublisher::release_access_unit(media::FrameSlot* slot) {
  if (encoder_ && encoder_->owns(slot)) {
    encoder_->release(slot);
    return true;
  }
  for (auto it = retired_encoders_.begin(); it != retired_encoders_.end(); ++it) {
    if (!(*it)->owns(slot)) continue;
    (*it)->release(slot);
    if (!(*it)->in_use()) retired_encoders_.erase(it);  // control plane: once per stream
    return true;
  }
  return false;
}

void EgressPublisher::on_target_rate(uint64_t bits_per_second, uint64_t media_bps) {
  target_bps_ = bits_per_second;
  media_bps_ = media_bps;
  if (encoder_)
    encoder_->on_estimate(core::monotonic_ns(), bits_per_second, media_bps);
  else
    forward_target();
}

void EgressPublisher::forward_target() {
  // Only for a stream relayed as it comes (no encoder here), while frames are taken.
  if (registry_ && relayed_stream_id_ != 0 && active_ && !encoder_ && target_bps_ != 0)
    registry_->set_target_bitrate(relayed_stream_id_, reinterpret_cast<uintptr_t>(this),
                                  media_bps_ != 0 ? media_bps_ : target_bps_);
}

void EgressPublisher::on_keyframe_request() {
  ++keyframe_requests_;
  if (encoder_)
    encoder_->request_keyframe(core::monotonic_ns());
  else if (registry_ && relayed_stream_id_ != 0)
    registry_->request_keyframe(relayed_stream_id_, feedback_reason_, core::monotonic_ns());
}

void EgressPublisher::set_active(bool active) {
  if (!active && active_ && registry_ && relayed_stream_id_ != 0)
    registry_->set_target_bitrate(relayed_stream_id_, reinterpret_cast<uintptr_t>(this), 0);
  const bool starting = active && !active_;
  active_ = active;
  if (starting) forward_target();
}

const EncodeStageCounters* EgressPublisher::encoder_counters(uint32_t stream_id) const {
  if (encoder_ && stream_id == relayed_stream_id_) return &encoder_->counters();
  const EgressPublisherCounters* c = counters(stream_id);
  return c && c->encoder ? &*c->encoder : nullptr;
}

const EgressPublisherCounters* EgressPublisher::counters(uint32_t stream_id) const {
  auto it = streams_.find(stream_id);
  return it == streams_.end() ? nullptr : &it->second;
}

void EgressPublisher::write_stream_stats(uint32_t stream_id, nlohmann::json& out) const {
  const EgressPublisherCounters* c = counters(stream_id);
  if (!c) return;
  nlohmann::json dropped = nlohmann::json::object();
  for (size_t r = 0; r < size_t(EgressDrop::kCount); ++r)
    dropped[egress_drop_name(EgressDrop(r))] = c->dropped[r];
  out = {{"relayed", stream_id == relayed_stream_id_},
         {"offered", c->offered},
         {"sent", c->sent},
         {"in_flight", c->in_flight},
         {"dropped", dropped},
         {"keyframe_requests", keyframe_requests_}};
  if (const EncodeStageCounters* counters = encoder_counters(stream_id)) {
    const EncodeStageCounters& e = *counters;
    out["encoder"] = {{"submitted", e.submitted},
                      {"encoded", e.encoded},
                      {"keyframes", e.keyframes},
                      {"keyframes_forced", e.keyframes_forced},
                      {"keyframe_requests", e.keyframe_requests},
                      {"failed", e.failed},
                      {"last_failure", video_codec::encode_status_name(e.last_failure)},
                      {"bytes", e.bytes},
                      {"bitrate_kbps", e.bitrate_kbps},
                      {"width", e.width},
                      {"height", e.height},
                      {"resizes", e.resizes},
                      {"resize_failures", e.resize_failures},
                      {"steps_down", e.steps_down},
                      {"steps_up", e.steps_up},
                      {"load_steps_down", e.load_steps_down},
                      {"load_steps_up", e.load_steps_up},
                      {"load", e.load_permille / 1000.0},
                      {"encode", telemetry::stage_json(e.encode)}};
  }
}

void EgressPublisher::write_metrics(telemetry::PrometheusText& out,
                                    const std::vector<const media::Stream*>& streams) const {
  auto label = [](const media::Stream* s) {
    return "stream=\"" + telemetry::prometheus_label_value(s->config().name) + "\"";
  };
  // Families named after the publisher: a stream relayed and watched over WHEP has both.
  const std::string sent = "syncd_" + name_ + "_frames_sent_total";
  const std::string dropped = "syncd_" + name_ + "_frames_dropped_total";
  out.family(sent, "counter", "Access units this relay thread's handler packetized and sent.");
  for (const media::Stream* s : streams)
    if (const EgressPublisherCounters* c = counters(s->id())) out.sample(sent, label(s), c->sent);
  out.family(dropped, "counter",
             "Access units offered to this relay thread's handler and not sent, by reason.");
  for (const media::Stream* s : streams)
    if (const EgressPublisherCounters* c = counters(s->id()))
      for (size_t r = 0; r < size_t(EgressDrop::kCount); ++r)
        out.sample(dropped, label(s) + ",reason=\"" + egress_drop_name(EgressDrop(r)) + "\"",
                   c->dropped[r]);
}

}  // namespace syncd::egress
