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

 private:
  const ServerConfig& config_;
  media::StreamRegistry& registry_;
  TicketStore& tickets_;
  const ControlRouter& router_;  // for the capabilities in the welcome
  std::function<std::string()> stats_json_;
};

}  // namespace syncd::server
