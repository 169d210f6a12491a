#include "server/http_routes.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "core/clock.h"
#include "core/text.h"
#include "media/stream_registry.h"
#include "net/http/authority.h"
#include "net/ws/frame_encoder.h"
#include "server/connection.h"
#include "server/server_config.h"
#include "server/stream_receivers.h"
#include "server/ticket_store.h"
#include "server/web_assets.h"
#include "whep/whep_service.h"

namespace syncd::server {

namespace {

using core::trim;
constexpr auto ieq = core::equals_ignore_case;

// True when a comma-separated header value holds token (case-insensitive).
bool has_token(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    if (ieq(trim(value.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

// A Sec-WebSocket-Key must be base64 of 16 bytes: 24 characters ending in "==".
bool valid_websocket_key(std::string_view key) {
  if (key.size() != 24 || key[22] != '=' || key[23] != '=') return false;
  for (size_t i = 0; i < 22; ++i) {
    const char c = key[i];
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/')) return false;
  }
  return true;
}

// Value of a query parameter in a request target, or empty.
std::string_view query_param(std::string_view target, std::string_view name) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return {};
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name && eq != std::string_view::npos) return pair.substr(eq + 1);
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return {};
}

bool parse_uint(std::string_view text, uint64_t& out) {
  if (text.empty()) return false;
  auto r = std::from_chars(text.data(), text.data() + text.size(), out);
  return r.ec == std::errc{} && r.ptr == text.data() + text.size();
}

}  // namespace

bool path_matches(std::string_view pattern, std::string_view path) {
  for (;;) {
    const size_t p = pattern.find('/'), q = path.find('/');
    const std::string_view want = pattern.substr(0, p), have = path.substr(0, q);
    if (want == "*" ? have.empty() : want != have) return false;
    if (p == std::string_view::npos || q == std::string_view::npos)
      return p == std::string_view::npos && q == std::string_view::npos;
    pattern.remove_prefix(p + 1);
    path.remove_prefix(q + 1);
  }
}

bool origin_allowed(std::string_view origin, const std::vector<std::string>& allowed) {
  return http::origin_allowed(origin, allowed);
}

HttpRoutes::HttpRoutes(Services services) : s_(std::move(services)) {
  routes_ = {
      {"GET", "/ws", &HttpRoutes::websocket},
      {"GET", "/healthz", &HttpRoutes::healthz},
      {"GET", "/stats", &HttpRoutes::stats},
      {"GET", "/metrics", &HttpRoutes::metrics},
      {"GET", "/events/frames", &HttpRoutes::frame_events},
      {"POST", "/streams/*/credit", &HttpRoutes::stream_credit},
      {"GET", "/streams/*", &HttpRoutes::stream_receive},
      {"POST", "/whep/*", &HttpRoutes::whep_offer},
      {"DELETE", "/whep/*/*", &HttpRoutes::whep_delete},
  };
}

void HttpRoutes::handle(Connection& c, const http::Request& request, char* rest, size_t rest_size) {
  if (!check_host(c, request)) return;
  // CORS (docs/security.md): responses to a page of a CORS origin may be read by it. Other
  // origins still act where origin_allowed says so, but cannot read what comes back.
  if (request.has_header("origin") &&
      http::cors_origin_allowed(request.header("origin"), s_.config.allowed_origins,
                                s_.config.cors_loopback))
    c.set_response_headers("Access-Control-Allow-Origin: " + std::string(request.header("origin")) +
                           "\r\nVary: Origin\r\n");
  if (request.method == "OPTIONS") {
    preflight(c, request);
    return;
  }
  const std::string_view path = request.path();
  std::string allow;
  for (const Route& route : routes_) {
    if (!path_matches(route.path, path)) continue;
    if (request.method == route.method) {
      (this->*route.handler)(c, request, rest, rest_size);
      return;
    }
    if (!allow.empty()) allow += ", ";
    allow += route.method;
  }
  if (request.method == "GET") {
    if (const WebAsset* asset = find_web_asset(path)) {
      c.send_http(200, asset->content_type,
                  std::string_view(reinterpret_cast<const char*>(asset->data), asset->size));
      return;
    }
  }
  if (!allow.empty()) {
    ++s_.counters.http_method_not_allowed;
    c.send_http(405, "text/plain", "method not allowed\n", "Allow: " + allow + "\r\n");
    return;
  }
  ++s_.counters.http_not_found;
  c.send_http(404, "text/plain", "not found\n");
}

bool HttpRoutes::check_host(Connection& c, const http::Request& r) {
  size_t hosts = 0;
  for (const auto& [name, value] : r.headers) hosts += name == "host";
  if (hosts == 0 && r.http_major == 1 && r.http_minor == 0) return true;  // HTTP/1.0 may omit it
  const auto authority = hosts == 1 ? http::parse_host_header(r.header("host")) : std::nullopt;
  if (!authority) {
    // RFC 9112 section 3.2: a missing, repeated or malformed Host is a 400.
    ++s_.counters.http_host_invalid;
    c.send_http(400, "text/plain", "missing, repeated or malformed Host\n");
    return false;
  }
  if (!http::host_allowed(*authority, s_.config.host, s_.config.allowed_hosts)) {
    // A DNS-rebinding name that resolves to loopback: the browser thinks it talks to that site.
    ++s_.counters.http_host_refused;
    c.send_http(421, "text/plain", "Host not served here\n");
    return false;
  }
  return true;
}

bool HttpRoutes::check_origin(Connection& c, const http::Request& r) {
  if (!r.has_header("origin") || origin_allowed(r.header("origin"), s_.config.allowed_origins))
    return true;
  ++s_.counters.origin_refused;
  c.send_http(403, "text/plain", "origin not allowed\n");
  return false;
}

void HttpRoutes::preflight(Connection& c, const http::Request& r) {
  // The methods and request headers a page may use cross-origin: reading (GET), granting
  // credit and WHEP offers (POST, Content-Type), ending a session (DELETE), and a bearer
  // ticket (Authorization). Sync-Client stays out: it is how a native client without an Origin
  // proves it is not a page, so no page may send it.
  const std::string_view method = r.header("access-control-request-method");
  bool headers_ok = true;
  std::string_view asked = r.header("access-control-request-headers");
  while (!asked.empty()) {
    const size_t comma = asked.find(',');
    const std::string_view name = trim(asked.substr(0, comma));
    asked = comma == std::string_view::npos ? std::string_view() : asked.substr(comma + 1);
    if (!name.empty() && !ieq(name, "content-type") && !ieq(name, "authorization"))
      headers_ok = false;
  }
  const bool cors = r.has_header("origin") &&
                    http::cors_origin_allowed(r.header("origin"), s_.config.allowed_origins,
                                              s_.config.cors_loopback);
  if (!cors || !(method == "GET" || method == "POST" || method == "DELETE") || !headers_ok) {
    // A refusal approves nothing: no Access-Control-Allow-* at all (docs/security.md).
    c.set_response_headers({});
    ++s_.counters.cors_preflight_refused;
    c.send_http(403, "text/plain", "cross-origin request not allowed\n");
    return;
  }
  ++s_.counters.cors_preflights;
  c.send_http(204, "text/plain", "",
              "Access-Control-Allow-Methods: GET, POST, DELETE\r\n"
              "Access-Control-Allow-Headers: Authorization, Content-Type\r\n"
              "Access-Control-Max-Age: 600\r\n");
}

void HttpRoutes::healthz(Connection& c, const http::Request&, char*, size_t) {
  c.send_http(200, "text/plain", "ok");
}

void HttpRoutes::stats(Connection& c, const http::Request&, char*, size_t) {
  c.send_http(200, "application/json", s_.stats_json());
}

void HttpRoutes::metrics(Connection& c, const http::Request&, char*, size_t) {
  c.send_http(200, "text/plain; version=0.0.4; charset=utf-8", s_.metrics_text());
}

void HttpRoutes::frame_events(Connection& c, const http::Request& r, char*, size_t) {
  uint64_t since = 0;
  if (const auto v = query_param(r.target, "since"); !v.empty() && !parse_uint(v, since)) {
    ++s_.counters.http_bad_requests;
    c.send_http(400, "text/plain", "expected ?since=INDEX\n");
    return;
  }
  uint64_t lost = 0, next = 0;
  const std::string body = s_.registry.frame_events().csv_since(since, kEventsPage, lost, next);
  c.send_http(200, "text/csv", body,
              "X-Events-Next: " + std::to_string(next) +
                  "\r\nX-Events-Lost: " + std::to_string(lost) + "\r\n");
}

media::Stream* HttpRoutes::named_stream(Connection& c, const http::Request& r,
                                        std::string_view prefix) {
  const std::string_view name = r.path().substr(prefix.size());
  if (name.empty() || name.find('/') != std::string_view::npos) {
    ++s_.counters.http_not_found;
    c.send_http(404, "text/plain", "not found\n");
    return nullptr;
  }
  if (!check_origin(c, r)) return nullptr;
  media::Stream* stream = s_.registry.find(std::string(name));
  if (!stream) {
    ++s_.counters.http_not_found;
    c.send_http(404, "text/plain", "no such stream\n");
  }
  return stream;
}

bool HttpRoutes::redeem_ticket(Connection& c, const std::string& ticket,
                               const media::Stream& stream) {
  if (s_.tickets.redeem(ticket, stream.id(), core::monotonic_ns()) == TicketCheck::kValid)
    return true;
  ++s_.counters.tickets_refused;
  c.send_http(403, "text/plain", "missing, unknown, expired or spent ticket\n");
  return false;
}

void HttpRoutes::stream_receive(Connection& c, const http::Request& r, char*, size_t) {
  media::Stream* stream = named_stream(c, r, "/streams/");
  if (!stream) return;
  uint64_t credit = 2;
  const auto credit_text = query_param(r.target, "credit");
  const bool credit_ok = credit_text.empty() || parse_uint(credit_text, credit);
  // Validated before the ticket is spent: a malformed request costs the receiver nothing.
  if (!credit_ok) {
    ++s_.counters.http_bad_requests;
    c.send_http(400, "text/plain", "bad credit\n");
    return;
  }
  if (!redeem_ticket(c, std::string(query_param(r.target, "ticket")), *stream)) return;
  credit = std::clamp<uint64_t>(credit, 1, 16);
  const uint64_t receiver = s_.receivers.add(c, *stream, uint32_t(credit));
  // A receiver of an encoded stream decodes from an IDR: ask the source for one now rather than
  // leave the receiver waiting for the next periodic key frame.
  if (media::is_encoded(stream->config().format))
    s_.registry.request_keyframe(stream->id(), media::KeyframeReason::kConsumer,
                                 core::monotonic_ns());
  c.start_streaming(
      "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.sync.frames\r\n"
      "Cache-Control: no-store\r\nConnection: close\r\nX-Sync-Receiver: " +
      std::to_string(receiver) + "\r\nAccess-Control-Expose-Headers: X-Sync-Receiver\r\n");
}

void HttpRoutes::stream_credit(Connection& c, const http::Request& r, char*, size_t) {
  // A state change needs a request a foreign page cannot make without a CORS preflight, which
  // syncd never approves: an allowed Origin (browsers send one on every POST), or, from a
  // native client that sends no Origin, the non-safelisted header Sync-Client.
  if (r.has_header("origin")) {
    if (!check_origin(c, r)) return;
  } else if (!r.has_header("sync-client")) {
    ++s_.counters.origin_missing_refused;
    c.send_http(403, "text/plain", "POST needs an allowed Origin or a Sync-Client header\n");
    return;
  }
  uint64_t receiver = 0, frames = 1;
  const auto f = query_param(r.target, "frames");
  if (!parse_uint(query_param(r.target, "receiver"), receiver) ||
      (!f.empty() && (!parse_uint(f, frames) || frames == 0 || frames > 64))) {
    ++s_.counters.http_bad_requests;
    c.send_http(400, "text/plain", "expected ?receiver=ID&frames=N\n");
    return;
  }
  if (!s_.receivers.grant(receiver, uint32_t(frames), core::monotonic_ns())) {
    ++s_.counters.http_not_found;
    c.send_http(404, "text/plain", "no such receiver\n");
    return;
  }
  c.send_http(204, "text/plain", "");
}

void HttpRoutes::whep_offer(Connection& c, const http::Request& r, char*, size_t) {
  if (!s_.whep) {
    ++s_.counters.http_not_found;
    c.send_http(404, "text/plain", "not found\n");
    return;
  }
  // Like a stream receive: an allowed Origin when there is one, and a ticket for the stream,
  // here as WHEP's bearer token (RFC 9725 4.3). The ticket is the authority, so a native player
  // (no Origin) needs no Sync-Client header: a page that could forge the request lacks it.
  media::Stream* stream = named_stream(c, r, "/whep/");
  if (!stream) return;
  constexpr std::string_view kBearer = "Bearer ";
  const std::string_view auth = r.header("authorization");
  const std::string_view bearer =
      auth.substr(0, kBearer.size()) == kBearer ? auth.substr(kBearer.size()) : std::string_view();
  if (!redeem_ticket(c, std::string(bearer), *stream)) return;
  const whep::WhepService::Response a =
      s_.whep->offer(stream->config().name, r.header("content-type"), r.body);
  c.send_http(a.status, a.content_type, a.body,
              a.headers + "Access-Control-Expose-Headers: Location\r\n");
}

void HttpRoutes::whep_delete(Connection& c, const http::Request& r, char*, size_t) {
  const std::string_view rest = r.path().substr(sizeof("/whep/") - 1);
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos || !s_.whep) {
    ++s_.counters.http_not_found;
    c.send_http(404, "text/plain", "not found\n");
    return;
  }
  // The session's resource path is its capability (64 random bits); an Origin, when sent, must
  // still be allowed.
  if (!check_origin(c, r)) return;
  const whep::WhepService::Response a =
      s_.whep->remove(rest.substr(0, slash), rest.substr(slash + 1));
  c.send_http(a.status, a.content_type, a.body, a.headers);
}

void HttpRoutes::websocket(Connection& c, const http::Request& request, char* rest,
                           size_t rest_size) {
  if (!request.upgrade || !ieq(request.header("upgrade"), "websocket") ||
      !has_token(request.header("connection"), "upgrade") || request.http_major != 1 ||
      request.http_minor < 1) {
    ++s_.counters.http_bad_requests;
    c.send_http(400, "text/plain", "expected a WebSocket upgrade (RFC 6455)\n");
    return;
  }
  if (request.header("sec-websocket-version") != "13") {
    ++s_.counters.version_refused;
    c.send_http(426, "text/plain", "unsupported WebSocket version\n",
                "Sec-WebSocket-Version: 13\r\n");
    return;
  }
  const std::string_view key = trim(request.header("sec-websocket-key"));
  if (!valid_websocket_key(key)) {
    ++s_.counters.http_bad_requests;
    c.send_http(400, "text/plain", "missing or malformed Sec-WebSocket-Key\n");
    return;
  }
  // Browsers always send Origin; native tools usually do not. A page from a foreign site must
  // not drive a local daemon.
  if (!check_origin(c, request)) return;
  // Same origin: "http://" + the Host the page used (the Host check has passed). Origin values
  // are lower-case by serialization; Host may not be.
  const std::string_view origin = request.header("origin");
  const std::string_view host = request.header("host");
  const std::string_view scheme = "http://";
  c.set_own_page_or_native(!request.has_header("origin") ||
                           (origin.size() == scheme.size() + host.size() &&
                            origin.substr(0, scheme.size()) == scheme &&
                            ieq(origin.substr(scheme.size()), host)));
  const auto& listed = s_.config.allowed_origins;
  c.set_listed_origin(request.has_header("origin") &&
                      std::find(listed.begin(), listed.end(), origin) != listed.end());
  const std::string accept = ws::accept_key(key);
  if (accept.empty()) {  // SHA-1 refused by the crypto provider configuration
    c.send_http(500, "text/plain", "cannot compute Sec-WebSocket-Accept\n");
    return;
  }
  c.upgrade_to_websocket(
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Accept: " +
          accept + "\r\n\r\n",
      rest, rest_size);
}

}  // namespace syncd::server
