#include "relay/relay_publisher.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/clock.h"

namespace syncd::relay {

const char* relay_drop_name(RelayDrop reason) {
  switch (reason) {
    case RelayDrop::kConsumerSlow:
      return "consumer_slow";
    case RelayDrop::kPinRefused:
      return "pin_refused";
    case RelayDrop::kQueueFull:
      return "queue_full";
    case RelayDrop::kNotSent:
      return "not_sent";
    case RelayDrop::kCount:
      break;
  }
  return "?";
}

RelayPublisher::RelayPublisher(RelayThread& thread, std::string stream_name)
    : thread_(thread), stream_name_(std::move(stream_name)) {}

void RelayPublisher::on_stream_open(const media::Stream& stream) {
  const media::StreamConfig& c = stream.config();
  if (relayed_stream_id_ != 0 || !media::is_encoded(c.format)) return;
  if (!stream_name_.empty() && c.name != stream_name_) return;
  ToRelay m;
  m.kind = ToRelay::Kind::kStreamOpened;
  m.stream_id = stream.id();
  StreamDescription& d = m.description;
  d.format = uint8_t(c.format);
  d.width = c.width;
  d.height = c.height;
  d.fps_millihertz = uint32_t(std::lround(std::clamp(c.fps, 0.001, 1000.0) * 1000.0));
  // A longer name is cut at 64 bytes: the peer's stream is named by what fits.
  d.name_bytes = uint8_t(std::min(c.name.size(), kMaxStreamNameBytes));
  std::memcpy(d.name, c.name.data(), d.name_bytes);
  if (!thread_.send_to_relay(m)) return;  // the relay is stopping; the next open may take it
  relayed_stream_id_ = stream.id();
  streams_[stream.id()] = RelayPublisherCounters{};
}

void RelayPublisher::on_stream_close(const media::Stream& stream) {
  if (stream.id() != relayed_stream_id_) return;
  ToRelay m;
  m.kind = ToRelay::Kind::kStreamClosed;
  m.stream_id = stream.id();
  thread_.send_to_relay(m);
  relayed_stream_id_ = 0;
}

void RelayPublisher::on_stream_forget(uint32_t stream_id) {
  streams_.erase(stream_id);
}

void RelayPublisher::on_frame(const media::Stream& stream, media::FrameSlot& slot) {
  if (stream.id() != relayed_stream_id_) return;
  RelayPublisherCounters& c = streams_[stream.id()];
  ++c.offered;
  if (c.in_flight >= kMaxInFlight) {
    ++c.dropped[size_t(RelayDrop::kConsumerSlow)];
    return;
  }
  if (!media::FramePool::try_pin(&slot)) {
    ++c.dropped[size_t(RelayDrop::kPinRefused)];
    return;
  }
  ToRelay m;
  m.kind = ToRelay::Kind::kFrame;
  m.slot = &slot;
  m.stream_id = stream.id();
  m.submitted_ns = core::monotonic_ns();
  if (!thread_.send_to_relay(m)) {
    media::FramePool::unpin(&slot);
    ++c.dropped[size_t(RelayDrop::kQueueFull)];
    return;
  }
  ++c.in_flight;
}

void RelayPublisher::on_frame_done(const FromRelay& message) {
  media::FramePool::unpin(message.slot);
  auto it = streams_.find(message.stream_id);
  if (it == streams_.end()) return;
  RelayPublisherCounters& c = it->second;
  --c.in_flight;
  if (message.sent)
    ++c.sent;
  else
    ++c.dropped[size_t(RelayDrop::kNotSent)];
}

void RelayPublisher::on_keyframe_request() {
  ++keyframe_requests_;
}

const RelayPublisherCounters* RelayPublisher::counters(uint32_t stream_id) const {
  auto it = streams_.find(stream_id);
  return it == streams_.end() ? nullptr : &it->second;
}

void RelayPublisher::write_stream_stats(uint32_t stream_id, nlohmann::json& out) const {
  const RelayPublisherCounters* c = counters(stream_id);
  if (!c) return;
  nlohmann::json dropped = nlohmann::json::object();
  for (size_t r = 0; r < size_t(RelayDrop::kCount); ++r)
    dropped[relay_drop_name(RelayDrop(r))] = c->dropped[r];
  out = {{"relayed", stream_id == relayed_stream_id_},
         {"offered", c->offered},
         {"sent", c->sent},
         {"in_flight", c->in_flight},
         {"dropped", dropped}};
}

void RelayPublisher::write_metrics(telemetry::PrometheusText& out,
                                   const std::vector<const media::Stream*>& streams) const {
  auto label = [](const media::Stream* s) {
    return "stream=\"" + telemetry::prometheus_label_value(s->config().name) + "\"";
  };
  out.family("syncd_relay_frames_sent_total", "counter",
             "Access units the WAN relay packetized and sent.");
  for (const media::Stream* s : streams)
    if (const RelayPublisherCounters* c = counters(s->id()))
      out.sample("syncd_relay_frames_sent_total", label(s), c->sent);
  out.family("syncd_relay_frames_dropped_total", "counter",
             "Access units offered to the WAN relay that it did not send, by reason.");
  for (const media::Stream* s : streams)
    if (const RelayPublisherCounters* c = counters(s->id()))
      for (size_t r = 0; r < size_t(RelayDrop::kCount); ++r)
        out.sample("syncd_relay_frames_dropped_total",
                   label(s) + ",reason=\"" + relay_drop_name(RelayDrop(r)) + "\"", c->dropped[r]);
}

}  // namespace syncd::relay
