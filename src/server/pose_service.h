// The `pose` topic: head-tracker samples from the HID reader thread, turned into orientation on
// the loop thread and sent to every subscribed connection as JSON events.
//
// The reader thread (headtrack::TrackerReader) owns the device and never touches the loop; it
// signals an eventfd that a uv_poll handle watches. syncd keeps running with no tracker, and a
// tracker that is unplugged is looked for again every 2 s by the reader.
//
// Thread: the loop thread, except where TrackerReader says otherwise.
#pragma once

#include <uv.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <unordered_set>

#include "headtrack/orientation.h"
#include "headtrack/tracker_reader.h"
#include "server/service.h"
#include "telemetry/prometheus.h"

namespace syncd::server {

class Connection;
class ControlRouter;

class PoseService final : public Service {
 public:
  // source: "auto", "/dev/hidrawN" or "replay:FILE".
  PoseService(uv_loop_t* loop, std::string source);
  ~PoseService() override;
  PoseService(const PoseService&) = delete;
  PoseService& operator=(const PoseService&) = delete;

  bool start(std::string& error);
  std::string_view name() const override { return "pose"; }
  // Stops the reader thread (the device is restored) and closes the poll handle.
  void stop() override;

  // Routes subscribe (topic "pose") and pose.recenter to this service.
  void register_control(ControlRouter& router) override;
  // subscribe and pose.recenter's refusals when syncd runs without --headtracker.
  static void register_absent(ControlRouter& router);
  // From the connection's close callback.
  void connection_closed(Connection& c) override { subscribers_.erase(&c); }

  void write_stats(nlohmann::json& out) const override;
  void write_metrics(telemetry::PrometheusText& out) const override;

 private:
  static void on_readable(uv_poll_t* handle, int status, int events);
  void drain();
  void broadcast(const std::string& text);
  std::string status_json() const;

  uv_loop_t* loop_;
  std::string source_;
  headtrack::TrackerReader reader_;
  headtrack::PosePipeline pipeline_;
  uv_poll_t poll_;
  bool polling_ = false;
  std::unordered_set<Connection*> subscribers_;
  uint64_t seq_ = 0;
  int64_t last_t_ns_ = 0;
  bool connected_ = false;
  std::string device_;
  std::string last_status_;
  uint64_t events_sent_ = 0;
  uint64_t events_dropped_ = 0;  // a subscriber's output limits refused the event
  std::string json_;             // reused event buffer
};

}  // namespace syncd::server
