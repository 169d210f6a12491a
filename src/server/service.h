// A feature the server runs beside its streams, optional by configuration: the head tracker's
// pose topic, audio capture, the WAN relay, WHEP playback and the WHIP push. The server starts
// the ones the configuration asks for, in the order of the table in services.cpp (a later one
// may use an earlier one: the relay and WHEP take audio from the audio service), then asks each
// in turn for its control messages, its HTTP routes, its share of /stats and /metrics, and to
// forget a closing connection; at shutdown it stops them in the reverse order.
//
// Adding a feature is its own module, a Service for it (here, when its module cannot depend on
// the server's), and one line of the table.
//
// Thread: the loop thread, every member.
#pragma once

#include <uv.h>

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "media/stream_registry.h"
#include "server/server_config.h"
#include "telemetry/prometheus.h"

namespace syncd::server {

class Connection;
class ControlRouter;
class HttpRoutes;

class Service {
 public:
  virtual ~Service() = default;
  // Its name in messages ("audio", "relay").
  virtual std::string_view name() const = 0;
  // The control messages it handles (before the first connection).
  virtual void register_control(ControlRouter& router) { (void)router; }
  // The HTTP routes it serves.
  virtual void register_routes(HttpRoutes& routes) { (void)routes; }
  // After the server's first stdout line (the TCP port, which tools read first): anything a
  // tool reads next (the relay's UDP port).
  virtual void announce() {}
  // A connection is closing: forget what it held.
  virtual void connection_closed(Connection& c) { (void)c; }
  // Its part of /stats (a key of the top-level object) and of /metrics.
  virtual void write_stats(nlohmann::json& stats) const { (void)stats; }
  virtual void write_metrics(telemetry::PrometheusText& out) const { (void)out; }
  // Ends its threads and handles. Never blocks the loop on the network: a request still out
  // finishes on libuv's pool, and the loop's run ends once it has.
  virtual void stop() = 0;
};

// What a service may use to start: the loop, the registry, the configuration, and the services
// started before it.
struct ServiceContext {
  uv_loop_t* loop = nullptr;
  media::StreamRegistry* registry = nullptr;
  const ServerConfig* config = nullptr;
  const std::vector<std::unique_ptr<Service>>* started = nullptr;

  // The started service of type T, or nullptr.
  template <typename T>
  T* find() const {
    for (const auto& s : *started)
      if (auto* t = dynamic_cast<T*>(s.get())) return t;
    return nullptr;
  }
};

// One row of the table: how to start a service, and what its control messages answer when it
// does not run.
struct ServiceEntry {
  const char* name;
  // nullptr when the configuration does not ask for it, or when it could not start but syncd
  // serves on without it (it said why on stderr); nullptr with a sentence in `fatal` when
  // syncd must not start without it (the operator asked for it by name).
  std::unique_ptr<Service> (*start)(const ServiceContext& context, std::string& fatal);
  // Its control messages' refusals while it does not run; may be null.
  void (*register_absent)(ControlRouter& router);
};

// The table, in start order (services.cpp).
const std::vector<ServiceEntry>& service_table();

}  // namespace syncd::server
