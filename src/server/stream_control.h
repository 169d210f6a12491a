// The control messages of the session and of streams: hello (the welcome), stream.open,
// stream.close, ticket.create, stats and ping (docs/protocol.md, "Control messages").
//
// Thread: the loop thread. Control plane (allocates).
#pragma once

#include <functional>
#include <string>

namespace syncd::media {
class StreamRegistry;
}

namespace syncd::server {

class ControlRouter;
class TicketStore;
struct ServerConfig;

class StreamControl {
 public:
  StreamControl(const ServerConfig& config, media::StreamRegistry& registry, TicketStore& tickets,
                const ControlRouter& router, std::function<std::string()> stats_json)
      : config_(config),
        registry_(registry),
        tickets_(tickets),
        router_(router),
        stats_json_(std::move(stats_json)) {}

  void register_control(ControlRouter& router);

  // A stats reply over the WebSocket is at most this old: building the document costs the loop
  // ~0.1-0.5 ms, and a client that pipelines requests must not buy that per request.
  static constexpr uint64_t kStatsCacheNs = 100'000'000;

 private:
  const ServerConfig& config_;
  media::StreamRegistry& registry_;
  TicketStore& tickets_;
  const ControlRouter& router_;  // for the capabilities in the welcome
  std::function<std::string()> stats_json_;
  std::string stats_reply_;  // {"type":"stats","stats":...}, built at stats_built_ns_
  uint64_t stats_built_ns_ = 0;
};

}  // namespace syncd::server
