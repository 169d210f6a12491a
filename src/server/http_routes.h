// syncd's HTTP endpoints (docs/protocol.md, "Endpoints"), routed by a table of method and path:
// /ws (the WebSocket upgrade), /healthz, /stats, /metrics, /events/frames, /streams/NAME (a
// receiver's stream), /streams/NAME/credit, /whep/NAME (WebRTC playback), and the embedded web
// pages.
//
// Cross-site policy (docs/security.md, "Cross-site access"): browsers reach loopback from any
// site, so every request must name a loopback Host (or the bound address, or an --allow-host
// name) to stop DNS rebinding; a request that carries an Origin must name a loopback origin or
// one listed with --allow-origin; a POST without an Origin must carry Sync-Client.
//
// Thread: the loop thread. Control plane (allocates).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "net/http/request_parser.h"

namespace syncd::media {
class Stream;
class StreamRegistry;
}  // namespace syncd::media
namespace syncd::whep {
class WhepService;
}

namespace syncd::server {

class Connection;
class StreamReceivers;
class TicketStore;
struct ServerConfig;
struct ServerCounters;

// Whether an Origin header value is loopback or listed in `allowed` (http::origin_allowed).
// Pure; any thread.
// Whether `path` has the shape of a route's `pattern` ("*": any one non-empty segment).
bool path_matches(std::string_view pattern, std::string_view path);
bool origin_allowed(std::string_view origin, const std::vector<std::string>& allowed);

class HttpRoutes {
 public:
  struct Services {
    const ServerConfig& config;
    ServerCounters& counters;
    media::StreamRegistry& registry;
    TicketStore& tickets;
    StreamReceivers& receivers;
    std::function<std::string()> stats_json;
    std::function<std::string()> metrics_text;
    whep::WhepService* whep = nullptr;  // set once the loop runs (set_whep)
  };
  // Records per /events/frames response; the X-Events-Next header says where to go on.
  static constexpr size_t kEventsPage = 4096;

  explicit HttpRoutes(Services services);

  void set_whep(whep::WhepService* whep) { s_.whep = whep; }

  // A complete request head on connection c; `rest` is what followed it.
  void handle(Connection& c, const http::Request& request, char* rest, size_t rest_size);

 private:
  using Handler = void (HttpRoutes::*)(Connection&, const http::Request&, char*, size_t);
  struct Route {
    std::string_view method;
    // Segment by segment: "*" matches any one non-empty segment, anything else itself, so a
    // resource's Allow (405) names only the methods of that resource's shape.
    std::string_view path;
    Handler handler;
  };

  void websocket(Connection& c, const http::Request& r, char* rest, size_t rest_size);
  void healthz(Connection& c, const http::Request& r, char*, size_t);
  void stats(Connection& c, const http::Request& r, char*, size_t);
  void metrics(Connection& c, const http::Request& r, char*, size_t);
  void frame_events(Connection& c, const http::Request& r, char*, size_t);
  void stream_receive(Connection& c, const http::Request& r, char*, size_t);
  void stream_credit(Connection& c, const http::Request& r, char*, size_t);
  // WHEP (docs/whep.md): POST /whep/NAME with an SDP offer and a ticket as a bearer token;
  // DELETE /whep/NAME/SESSION.
  void whep_offer(Connection& c, const http::Request& r, char*, size_t);
  void whep_delete(Connection& c, const http::Request& r, char*, size_t);
  // Each answers the refusal itself and returns false (nullptr) when the request must go no
  // further. named_stream: the open stream named by the path after `prefix` (404 otherwise),
  // after the Origin check; redeem_ticket: spends one use of a ticket for that stream (403).
  media::Stream* named_stream(Connection& c, const http::Request& r, std::string_view prefix);
  bool redeem_ticket(Connection& c, const std::string& ticket, const media::Stream& stream);
  bool check_host(Connection& c, const http::Request& r);
  bool check_origin(Connection& c, const http::Request& r);
  // An OPTIONS request: a CORS preflight, approved for a CORS origin asking for a method and
  // headers syncd takes cross-origin, refused otherwise.
  void preflight(Connection& c, const http::Request& r);

  Services s_;
  std::vector<Route> routes_;
};

}  // namespace syncd::server
