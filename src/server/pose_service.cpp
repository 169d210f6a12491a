#include "server/pose_service.h"

#include <charconv>
#include <nlohmann/json.hpp>

#include "server/connection.h"
#include "server/control_router.h"

namespace syncd::server {

namespace {
void append_double(std::string& out, double v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}
void append_uint(std::string& out, uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}
headtrack::ReaderConfig reader_config(const std::string& source) {
  headtrack::ReaderConfig c;
  c.source = source;
  c.replay_loop = true;  // a replay stands in for a device, which keeps reporting
  return c;
}
}  // namespace

PoseService::PoseService(uv_loop_t* loop, std::string source)
    : loop_(loop), source_(std::move(source)), reader_(reader_config(source_)) {
  json_.reserve(512);
}

PoseService::~PoseService() {
  stop();
}

bool PoseService::start(std::string& error) {
  if (!reader_.start(&error)) return false;
  uv_poll_init(loop_, &poll_, reader_.wakeup_fd());
  poll_.data = this;
  uv_poll_start(&poll_, UV_READABLE, &PoseService::on_readable);
  polling_ = true;
  return true;
}

void PoseService::stop() {
  if (polling_) {
    uv_poll_stop(&poll_);
    uv_close(reinterpret_cast<uv_handle_t*>(&poll_), nullptr);
    polling_ = false;
  }
  reader_.stop();
  subscribers_.clear();
}

void PoseService::register_absent(ControlRouter& router) {
  router.add<control::Subscribe>("", [](Connection& c, const control::ControlMessage& m) {
    if (std::get<control::Subscribe>(m).topic == "pose") {
      c.send_error(control::error_code::kTopicUnavailable, "syncd runs without --headtracker");
    } else {
      c.send_error(control::error_code::kUnknownTopic, "the only topic is \"pose\"");
    }
  });
  router.refuse<control::PoseRecenter>(control::error_code::kTopicUnavailable,
                                       "syncd runs without --headtracker");
}

void PoseService::register_control(ControlRouter& router) {
  router.add<control::Subscribe>("pose", [this](Connection& c, const control::ControlMessage& m) {
    const auto& sub = std::get<control::Subscribe>(m);
    if (sub.topic != "pose") {
      c.send_error(control::error_code::kUnknownTopic, "the only topic is \"pose\"");
      return;
    }
    c.send_text(sub.subscribe ? R"({"type":"subscribed","topic":"pose"})"
                              : R"({"type":"unsubscribed","topic":"pose"})");
    if (sub.subscribe && subscribers_.insert(&c).second) {
      c.send_text(status_json());  // the new subscriber learns at once whether a tracker is there
    } else if (!sub.subscribe) {
      subscribers_.erase(&c);
    }
  });
  router.add<control::PoseRecenter>("pose", [this](Connection&, const control::ControlMessage&) {
    pipeline_.request_recenter();
  });
}

void PoseService::on_readable(uv_poll_t* handle, int status, int) {
  if (status < 0) return;
  static_cast<PoseService*>(handle->data)->drain();
}

std::string PoseService::status_json() const {
  return nlohmann::json({{"type", "pose.status"},
                         {"source", source_},
                         {"connected", connected_},
                         {"device", device_},
                         {"message", last_status_}})
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void PoseService::drain() {
  headtrack::TrackerEvent events[32];
  size_t n;
  while ((n = reader_.poll(events, 32)) > 0) {
    for (size_t i = 0; i < n; ++i) {
      const headtrack::TrackerEvent& e = events[i];
      using Kind = headtrack::TrackerEvent::Kind;
      if (e.kind != Kind::kSample) {
        if (e.kind == Kind::kConnected) {
          connected_ = true;
          device_ = e.text;
          pipeline_.reset();
          last_t_ns_ = 0;
        } else if (e.kind == Kind::kDisconnected) {
          connected_ = false;
        }
        last_status_ = e.text;
        broadcast(status_json());
        continue;
      }
      // dt from the reports' own timestamps: the filter never reads a clock.
      const double dt = last_t_ns_ ? double(e.sample.t_ns - last_t_ns_) / 1e9 : 0.0;
      last_t_ns_ = e.sample.t_ns;
      const headtrack::Pose& p = pipeline_.process(e.sample, dt > 0 ? dt : 0.0);
      ++seq_;
      if (subscribers_.empty()) continue;
      // Built with to_chars into one reused buffer: up to 100 events a second per subscriber.
      json_.assign("{\"type\":\"pose\",\"seq\":");
      append_uint(json_, seq_);
      json_.append(",\"t_ns\":");
      append_uint(json_, uint64_t(e.sample.t_ns));
      json_.append(",\"q\":[");
      append_double(json_, p.orientation.w);
      json_.push_back(',');
      append_double(json_, p.orientation.x);
      json_.push_back(',');
      append_double(json_, p.orientation.y);
      json_.push_back(',');
      append_double(json_, p.orientation.z);
      json_.append("],\"ypr\":[");
      append_double(json_, p.ypr_deg[0]);
      json_.push_back(',');
      append_double(json_, p.ypr_deg[1]);
      json_.push_back(',');
      append_double(json_, p.ypr_deg[2]);
      json_.append("],\"discontinuityCount\":");
      append_uint(json_, p.discontinuities);
      json_.push_back('}');
      broadcast(json_);
    }
  }
}

void PoseService::broadcast(const std::string& text) {
  for (Connection* c : subscribers_) {
    // A subscriber that reads too slowly loses events rather than its connection.
    if (c->send_event(text)) {
      ++events_sent_;
    } else {
      ++events_dropped_;
    }
  }
}

void PoseService::write_stats(nlohmann::json& out) const {
  const headtrack::ReaderStats s = reader_.stats();
  out["headtracker"] = {{"source", source_},
                        {"connected", connected_},
                        {"device", device_},
                        {"status", last_status_},
                        {"samples", seq_},
                        {"reports", s.reports},
                        {"ring_overruns", s.ring_overruns},
                        {"out_of_range", s.out_of_range},
                        {"other_report", s.other_report},
                        {"connects", s.connects},
                        {"disconnects", s.disconnects},
                        {"subscribers", subscribers_.size()},
                        {"events_sent", events_sent_},
                        {"events_dropped", events_dropped_}};
}

void PoseService::write_metrics(telemetry::PrometheusText& out) const {
  const headtrack::ReaderStats s = reader_.stats();
  out.family("syncd_headtracker_samples_total", "counter",
             "Head-tracker samples turned into poses.");
  out.sample("syncd_headtracker_samples_total", "", seq_);
  out.family("syncd_headtracker_reports_rejected_total", "counter",
             "Head-tracker reports rejected, by reason.");
  out.sample("syncd_headtracker_reports_rejected_total", "reason=\"out_of_range\"", s.out_of_range);
  out.sample("syncd_headtracker_reports_rejected_total", "reason=\"ring_overrun\"",
             s.ring_overruns);
  out.family("syncd_headtracker_connected", "gauge", "1 while a head tracker is in use.");
  out.sample("syncd_headtracker_connected", "", uint64_t(connected_));
}

}  // namespace syncd::server
