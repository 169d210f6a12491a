#include "server/connection.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <nlohmann/json.hpp>

#include "control/control_message.h"
#include "core/clock.h"
#include "net/ws/frame_encoder.h"
#include "server/audio_service.h"
#include "server/server.h"
#include "server/stream_receivers.h"
#include "server/web_assets.h"

namespace syncd::server {

namespace {

constexpr size_t kReadBufferBytes = 64 * 1024;

const char* status_text(int status) {
  switch (status) {
    case 101: return "Switching Protocols";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 426: return "Upgrade Required";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
  }
  return "Error";
}

bool ieq(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

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

bool loopback_host(std::string_view host) {
  if (host == "localhost" || host == "[::1]") return true;
  // 127.0.0.0/8 in dotted form.
  if (host.substr(0, 4) != "127.") return false;
  int dots = 0;
  for (char c : host) {
    if (c == '.') {
      ++dots;
    } else if (!std::isdigit(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return dots == 3;
}

}  // namespace

Connection::Connection(Server& server, uint64_t id)
    : server_(server),
      id_(id),
      read_buffer_(new uint8_t[kReadBufferBytes]),
      http_(http::RequestLimits{server.config().max_header_bytes, 64}),
      decoder_(ws::DecoderLimits{server.config().max_message_bytes}) {
  tcp_.data = this;
  created_ns_ = core::monotonic_ns();
  last_receive_ns_ = created_ns_;
}

Connection::~Connection() = default;

void Connection::start() {
  uv_tcp_nodelay(&tcp_, 1);
  // Large kernel buffers let a 1080p frame (8.3 MB) flow in few, large reads.
  int size = 4 << 20;
  uv_recv_buffer_size(reinterpret_cast<uv_handle_t*>(&tcp_), &size);
  uv_read_start(reinterpret_cast<uv_stream_t*>(&tcp_), &Connection::on_alloc,
                &Connection::on_read);
}

void Connection::destroy() {
  if (closing_) return;
  closing_ = true;
  phase_ = Phase::kClosing;
  abandon_frame();
  if (pose_subscribed_ && server_.pose()) server_.pose()->unsubscribe(this);
  server_.registry().close_owned_by(id_);
  uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), &Connection::on_closed);
}

void Connection::on_closed(uv_handle_t* handle) {
  auto* self = static_cast<Connection*>(handle->data);
  // Every write callback has run by now (libuv cancels pending writes before the close
  // callback), so the receiver's frames are all released.
  self->server_.receivers().remove(self);
  if (AudioService* audio = self->server_.audio()) audio->connection_closed(self->id_);
  self->server_.forget(self);
  delete self;
}

void Connection::check_timeouts(uint64_t now_ns) {
  if (closing_) return;
  const ServerConfig& cfg = server_.config();
  if (phase_ == Phase::kHttp) {
    if (now_ns - created_ns_ > uint64_t(cfg.handshake_timeout_ms) * 1'000'000) {
      ++server_.counters().handshake_timeouts;
      send_http(408, "text/plain", "request head not received in time\n");
    }
    return;
  }
  if (phase_ != Phase::kWebSocket) return;
  const uint64_t idle_ns = uint64_t(cfg.idle_timeout_ms) * 1'000'000;
  if (now_ns - last_receive_ns_ > idle_ns) {
    ++server_.counters().idle_timeouts;
    close_websocket(ws::close_code::kGoingAway, "idle timeout");
  } else if (now_ns - last_receive_ns_ > idle_ns / 2 && now_ns - last_ping_ns_ > idle_ns / 4) {
    // Give a quiet but live peer the chance to prove it: browsers answer pings automatically.
    last_ping_ns_ = now_ns;
    send_ws(ws::Opcode::kPing, "");
  }
}

void Connection::shutdown_for_exit() {
  if (closing_) return;
  if (phase_ == Phase::kWebSocket) {
    close_websocket(ws::close_code::kGoingAway, "server shutting down");
  } else {
    destroy();  // HTTP stream receivers see their response end
  }
}

// ---------------------------------------------------------------------------------------------
// Reading

void Connection::on_alloc(uv_handle_t* handle, size_t /*suggested*/, uv_buf_t* buf) {
  auto* self = static_cast<Connection*>(handle->data);
  self->direct_read_ = nullptr;
  if (self->phase_ == Phase::kWebSocket) {
    const uint64_t remaining = self->decoder_.data_payload_remaining();
    Ingest& in = self->ingest_;
    if (remaining > 0 && in.active && in.header_have == media::kFrameHeaderBytes) {
      const size_t window = self->server_.config().read_window_bytes;
      if (in.slot) {
        const size_t room = in.slot->pool->slot_bytes() - in.filled;
        // A frame that carries more bytes than its slot holds is refused at message end; the
        // excess is read into the discard buffer so it never lands past the slot.
        if (room > 0) {
          const size_t n = std::min<uint64_t>({window, remaining, room});
          uint8_t* dst = in.slot->pixels + in.filled;
          self->direct_read_ = dst;
          *buf = uv_buf_init(reinterpret_cast<char*>(dst), unsigned(n));
          return;
        }
      }
      if (in.discarding || in.slot) {
        const size_t n = std::min<uint64_t>(self->server_.discard_buffer_bytes(), remaining);
        *buf = uv_buf_init(reinterpret_cast<char*>(self->server_.discard_buffer()), unsigned(n));
        return;
      }
    }
  }
  *buf = uv_buf_init(reinterpret_cast<char*>(self->read_buffer_.get()), kReadBufferBytes);
}

// While a frame's payload streams in, the socket wakes the loop only once this many of its bytes
// are queued, and never more than the payload still owed, so the last bytes (and a control
// message after them) are not held back. At 1080p it took the loop's wake-ups from ~15 to ~6 a
// frame, and with them the producer's cross-core wake-ups: CPU per frame 1.12x -> 0.90-1.00x the
// raw TCP sink's (paired, docs/benchmarks.md). Set after every read, so the value epoll waits on
// is never stale; everything but frame payload reads with the default of 1 byte. One setsockopt
// per change: about four a frame.
void Connection::update_receive_low_water() {
  size_t bytes = 1;
  const uint64_t remaining = decoder_.data_payload_remaining();
  if (phase_ == Phase::kWebSocket && !closing_ && remaining > 0 && ingest_.active &&
      ingest_.header_have == media::kFrameHeaderBytes) {
    bytes = size_t(std::min<uint64_t>(remaining, server_.config().receive_low_water_bytes));
  }
  if (bytes == receive_low_water_) return;
  uv_os_fd_t fd = -1;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(&tcp_), &fd) != 0) return;
  const int value = int(bytes);
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &value, sizeof value) == 0) {
    receive_low_water_ = bytes;
  }
}

void Connection::on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  auto* self = static_cast<Connection*>(stream->data);
  if (nread == 0) return;  // EAGAIN
  if (nread < 0) {
    self->destroy();  // EOF or reset: a frame in progress is dropped as "disconnected"
    return;
  }
  if (self->closing_) return;
  self->last_receive_ns_ = core::monotonic_ns();
  if (self->phase_ == Phase::kHttp) {
    self->handle_http_bytes(buf->base, size_t(nread));
  } else if (self->phase_ == Phase::kStreaming) {
    // A receiver has nothing to say on this socket; what it sends is read and ignored so that
    // its end of the connection (EOF) is still noticed.
  } else if (self->phase_ == Phase::kWebSocket) {
    uint8_t* data = reinterpret_cast<uint8_t*>(buf->base);
    if (data == self->direct_read_) {
      // Bytes the kernel put straight into the slot: the decoder only unmasks them in place
      // (and the ingest hashes them, timed apart).
      const uint64_t t0 = self->last_receive_ns_;
      const uint64_t hashed_before = self->ingest_.hash_ns;
      self->feed_websocket(data, size_t(nread));
      self->ingest_.unmask_ns +=
          core::monotonic_ns() - t0 - (self->ingest_.hash_ns - hashed_before);
    } else {
      self->feed_websocket(data, size_t(nread));
    }
    self->update_receive_low_water();
    // libuv reads a readable socket up to 32 times per callback: 8 MB of frame in one turn of
    // the loop, while an audio read or a pose waits. After a turn's budget the connection
    // yields if anyone else is waiting; the server resumes it after the loop has polled
    // everyone else (uv_check). With nobody waiting it reads on.
    self->turn_bytes_ += size_t(nread);
    if (self->turn_bytes_ >= self->server_.config().read_turn_bytes && !self->closing_ &&
        self->phase_ == Phase::kWebSocket) {
      self->turn_bytes_ = 0;
      uv_os_fd_t fd = -1;
      uv_fileno(reinterpret_cast<uv_handle_t*>(stream), &fd);
      if (self->server_.others_waiting(fd)) {
        ++self->server_.counters().read_turns_yielded;
        uv_read_stop(stream);
        self->server_.resume_after_poll(self);
      } else {
        ++self->server_.counters().read_turns_continued;
      }
    }
  }
}

void Connection::resume_reading() {
  turn_bytes_ = 0;
  if (closing_ || phase_ != Phase::kWebSocket) return;
  uv_read_start(reinterpret_cast<uv_stream_t*>(&tcp_), &Connection::on_alloc,
                &Connection::on_read);
}

void Connection::feed_websocket(uint8_t* data, size_t size) {
  decoder_.consume(data, size, *this);
}

// ---------------------------------------------------------------------------------------------
// HTTP

void Connection::handle_http_bytes(char* data, size_t size) {
  switch (http_.feed(data, size)) {
    case http::ParseStatus::kIncomplete:
      return;
    case http::ParseStatus::kComplete: {
      const size_t used = http_.consumed();
      handle_request(http_.request(), data + used, size - std::min(size, used));
      return;
    }
    case http::ParseStatus::kHeadersTooLarge:
      ++server_.counters().http_headers_too_large;
      send_http(431, "text/plain", std::string(http_.error_reason()) + "\n");
      return;
    case http::ParseStatus::kBadRequest:
    case http::ParseStatus::kBodyNotAllowed:
      ++server_.counters().http_bad_requests;
      send_http(400, "text/plain", std::string(http_.error_reason()) + "\n");
      return;
  }
}

void Connection::handle_request(const http::Request& request, char* rest, size_t rest_size) {
  const std::string_view path = request.path();
  constexpr std::string_view kStreams = "/streams/";
  if (path.substr(0, kStreams.size()) == kStreams) {
    std::string_view rest = path.substr(kStreams.size());
    constexpr std::string_view kCredit = "/credit";
    if (request.method == "POST" && rest.size() > kCredit.size() &&
        rest.substr(rest.size() - kCredit.size()) == kCredit) {
      grant_credit_http(request);
    } else if (request.method == "GET" && !rest.empty() && rest.find('/') == std::string_view::npos) {
      accept_receiver(request, rest);
    } else {
      send_http(405, "text/plain", "method not allowed\n", "Allow: GET, POST\r\n");
    }
    return;
  }
  if (request.method == "GET" && serve_web_asset(path)) return;
  if (request.method != "GET") {
    if (path == "/healthz" || path == "/stats" || path == "/metrics" || path == "/ws" ||
        path == "/events/frames") {
      send_http(405, "text/plain", "method not allowed\n", "Allow: GET\r\n");
    } else {
      ++server_.counters().http_not_found;
      send_http(404, "text/plain", "not found\n");
    }
    return;
  }
  if (path == "/ws") {
    accept_websocket(request, rest, rest_size);
  } else if (path == "/healthz") {
    send_http(200, "text/plain", "ok");
  } else if (path == "/stats") {
    send_http(200, "application/json", server_.stats_json());
  } else if (path == "/events/frames") {
    uint64_t since = 0;
    const std::string_view target = request.target;
    if (const size_t q = target.find("since="); q != std::string_view::npos)
      std::from_chars(target.data() + q + 6, target.data() + target.size(), since);
    uint64_t lost = 0;
    const telemetry::FrameEventLog& log = server_.registry().frame_events();
    std::string body = log.csv_since(since, lost);
    send_http(200, "text/csv", body,
              "X-Events-Next: " + std::to_string(log.next_index()) + "\r\nX-Events-Lost: " +
                  std::to_string(lost) + "\r\n");
  } else if (path == "/metrics") {
    send_http(200, "text/plain; version=0.0.4; charset=utf-8", server_.metrics_text());
  } else {
    ++server_.counters().http_not_found;
    send_http(404, "text/plain", "not found\n");
  }
}

namespace {
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

void Connection::accept_receiver(const http::Request& request, std::string_view stream_name) {
  if (request.has_header("origin") && !origin_allowed(request.header("origin"))) {
    ++server_.counters().origin_refused;
    send_http(403, "text/plain", "origin not allowed\n");
    return;
  }
  media::Stream* stream = server_.registry().find(std::string(stream_name));
  if (!stream) {
    ++server_.counters().http_not_found;
    send_http(404, "text/plain", "no such stream\n");
    return;
  }
  const std::string ticket(query_param(request.target, "ticket"));
  if (server_.tickets().redeem(ticket, stream->id(), core::monotonic_ns()) != TicketCheck::kValid) {
    ++server_.counters().tickets_refused;
    send_http(403, "text/plain", "missing, unknown, expired or spent ticket\n");
    return;
  }
  uint64_t credit = 2;
  if (const auto c = query_param(request.target, "credit"); !c.empty() && !parse_uint(c, credit)) {
    ++server_.counters().http_bad_requests;
    send_http(400, "text/plain", "bad credit\n");
    return;
  }
  credit = std::clamp<uint64_t>(credit, 1, 16);
  const uint64_t receiver = server_.receivers().add(this, *stream, uint32_t(credit));
  std::string head =
      "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.sync.frames\r\n"
      "Cache-Control: no-store\r\nConnection: close\r\nX-Sync-Receiver: " +
      std::to_string(receiver) + "\r\nAccess-Control-Expose-Headers: X-Sync-Receiver\r\n\r\n";
  ++server_.counters().http_responses[2];
  phase_ = Phase::kStreaming;
  write_raw(std::move(head), false);
}

void Connection::grant_credit_http(const http::Request& request) {
  uint64_t receiver = 0, frames = 1;
  const auto f = query_param(request.target, "frames");
  if (!parse_uint(query_param(request.target, "receiver"), receiver) ||
      (!f.empty() && (!parse_uint(f, frames) || frames == 0 || frames > 64))) {
    ++server_.counters().http_bad_requests;
    send_http(400, "text/plain", "expected ?receiver=ID&frames=N\n");
    return;
  }
  if (!server_.receivers().grant(receiver, uint32_t(frames), core::monotonic_ns())) {
    ++server_.counters().http_not_found;
    send_http(404, "text/plain", "no such receiver\n");
    return;
  }
  send_http(204, "text/plain", "");
}

bool Connection::serve_web_asset(std::string_view path) {
  const WebAsset* asset = find_web_asset(path);
  if (!asset) return false;
  send_http(200, asset->content_type,
            std::string_view(reinterpret_cast<const char*>(asset->data), asset->size));
  return true;
}

bool Connection::origin_allowed(std::string_view origin) const {
  for (const std::string& allowed : server_.config().allowed_origins)
    if (origin == allowed) return true;
  // scheme "://" host [":" port]
  const size_t scheme_end = origin.find("://");
  if (scheme_end == std::string_view::npos) return false;
  const std::string_view scheme = origin.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") return false;
  std::string_view host = origin.substr(scheme_end + 3);
  if (host.empty() || host.find('/') != std::string_view::npos) return false;
  if (host.front() == '[') {
    const size_t close = host.find(']');
    if (close == std::string_view::npos) return false;
    host = host.substr(0, close + 1);
  } else if (const size_t colon = host.find(':'); colon != std::string_view::npos) {
    host = host.substr(0, colon);
  }
  return loopback_host(host);
}

void Connection::accept_websocket(const http::Request& request, char* rest, size_t rest_size) {
  if (!request.upgrade || !ieq(request.header("upgrade"), "websocket") ||
      !has_token(request.header("connection"), "upgrade") || request.http_major != 1 ||
      request.http_minor < 1) {
    ++server_.counters().http_bad_requests;
    send_http(400, "text/plain", "expected a WebSocket upgrade (RFC 6455)\n");
    return;
  }
  if (request.header("sec-websocket-version") != "13") {
    ++server_.counters().version_refused;
    send_http(426, "text/plain", "unsupported WebSocket version\n",
              "Sec-WebSocket-Version: 13\r\n");
    return;
  }
  const std::string_view key = trim(request.header("sec-websocket-key"));
  if (!valid_websocket_key(key)) {
    ++server_.counters().http_bad_requests;
    send_http(400, "text/plain", "missing or malformed Sec-WebSocket-Key\n");
    return;
  }
  // Browsers always send Origin; native tools usually do not. A page from a foreign site must
  // not drive a local daemon (DESIGN.md, "Security").
  if (request.has_header("origin") && !origin_allowed(request.header("origin"))) {
    ++server_.counters().origin_refused;
    send_http(403, "text/plain", "origin not allowed\n");
    return;
  }
  const std::string accept = ws::accept_key(key);
  if (accept.empty()) {  // SHA-1 refused by the crypto provider configuration
    send_http(500, "text/plain", "cannot compute Sec-WebSocket-Accept\n");
    return;
  }
  std::string response =
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Accept: " +
      accept + "\r\n\r\n";
  ++server_.counters().http_responses[1];
  write_raw(std::move(response), false);
  phase_ = Phase::kWebSocket;
  if (rest_size > 0) feed_websocket(reinterpret_cast<uint8_t*>(rest), rest_size);
}

void Connection::send_http(int status, std::string_view content_type, std::string_view body,
                           std::string_view extra_headers) {
  if (status / 100 < 6) ++server_.counters().http_responses[status / 100];
  std::string out;
  out.reserve(160 + body.size());
  out.append("HTTP/1.1 ").append(std::to_string(status)).append(" ").append(status_text(status));
  out.append("\r\nContent-Type: ").append(content_type);
  out.append("\r\nContent-Length: ").append(std::to_string(body.size()));
  out.append("\r\nCache-Control: no-store\r\nConnection: close\r\n");
  out.append(extra_headers).append("\r\n").append(body);
  phase_ = Phase::kClosing;
  write_raw(std::move(out), true);
}

// ---------------------------------------------------------------------------------------------
// Writing

namespace {
struct WriteRequest {
  uv_write_t req;
  std::string bytes;
  Connection* connection;
  bool close_after;
};
}  // namespace

void Connection::write_raw(std::string bytes, bool close_after) {
  if (closing_) return;
  if (pending_write_bytes_ + bytes.size() > server_.config().max_pending_write_bytes) {
    ++server_.counters().slow_consumer_closes;
    destroy();
    return;
  }
  auto* w = new WriteRequest{{}, std::move(bytes), this, close_after};
  w->req.data = w;
  pending_write_bytes_ += w->bytes.size();
  uv_buf_t buf = uv_buf_init(w->bytes.data(), unsigned(w->bytes.size()));
  const int rc = uv_write(&w->req, reinterpret_cast<uv_stream_t*>(&tcp_), &buf, 1,
                          &Connection::on_write);
  if (rc < 0) {
    pending_write_bytes_ -= w->bytes.size();
    delete w;
    destroy();
    return;
  }
  if (close_after) {
    // Nothing more will be read: stop, so a peer cannot keep us busy while the reply drains.
    uv_read_stop(reinterpret_cast<uv_stream_t*>(&tcp_));
    phase_ = Phase::kClosing;
  }
}

void Connection::on_write(uv_write_t* req, int status) {
  auto* w = static_cast<WriteRequest*>(req->data);
  Connection* self = w->connection;
  const bool close_after = w->close_after;
  const size_t n = w->bytes.size();
  delete w;
  // A write still pending when the handle closes completes with UV_ECANCELED before the close
  // callback, so self is alive here.
  self->pending_write_bytes_ -= n;
  if (status < 0 || close_after) self->destroy();
}

void Connection::send_ws(ws::Opcode opcode, std::string_view payload) {
  if (phase_ != Phase::kWebSocket) return;
  uint8_t header[ws::kMaxServerHeaderBytes];
  const size_t h = ws::encode_server_header(header, opcode, payload.size());
  std::string frame;
  frame.reserve(h + payload.size());
  frame.append(reinterpret_cast<const char*>(header), h).append(payload);
  write_raw(std::move(frame), false);
}

void Connection::send_error(const char* code, std::string_view message, std::string_view extra) {
  ++server_.counters().control_errors;
  send_control_json(control::error_json(code, message, extra));
}

void Connection::close_websocket(uint16_t code, std::string_view reason) {
  if (phase_ != Phase::kWebSocket) return;
  const std::string payload = ws::close_payload(code, reason);
  uint8_t header[ws::kMaxServerHeaderBytes];
  const size_t h = ws::encode_server_header(header, ws::Opcode::kClose, payload.size());
  std::string frame(reinterpret_cast<const char*>(header), h);
  frame.append(payload);
  abandon_frame();
  write_raw(std::move(frame), true);
}

// ---------------------------------------------------------------------------------------------
// WebSocket events

void Connection::on_message_begin(ws::Opcode opcode, uint64_t first_frame_bytes,
                                  bool single_frame) {
  message_opcode_ = opcode;
  if (opcode == ws::Opcode::kText) {
    text_.clear();
    if (first_frame_bytes > server_.config().max_text_bytes) {
      ++server_.counters().ws_close_1009;
      ++server_.counters().ws_protocol_errors;
      close_websocket(ws::close_code::kMessageTooBig, "control message too large");
    }
    return;
  }
  ingest_ = Ingest{};
  ingest_.active = true;
  ingest_.single_frame = single_frame;
  ingest_.message_bytes = first_frame_bytes;
  ingest_.start_ns = last_receive_ns_;
}

void Connection::on_message_data(uint8_t* data, size_t size) {
  if (phase_ != Phase::kWebSocket) return;
  if (message_opcode_ == ws::Opcode::kText) {
    if (text_.size() + size > server_.config().max_text_bytes) {
      ++server_.counters().ws_close_1009;
      ++server_.counters().ws_protocol_errors;
      close_websocket(ws::close_code::kMessageTooBig, "control message too large");
      return;
    }
    text_.append(reinterpret_cast<const char*>(data), size);
    return;
  }
  Ingest& in = ingest_;
  if (in.header_have < media::kFrameHeaderBytes) {
    const size_t take = std::min(size, media::kFrameHeaderBytes - in.header_have);
    std::memcpy(in.header + in.header_have, data, take);
    in.header_have += take;
    data += take;
    size -= take;
    if (in.header_have == media::kFrameHeaderBytes) begin_frame();
  }
  if (size == 0 || in.discarding || !in.slot) return;
  const size_t capacity = in.slot->info.bytes;
  if (in.filled + size > capacity) {
    // More pixels than the stream's frame holds (only possible for fragmented messages, whose
    // total is not known from the first header).
    media::Stream* stream = server_.registry().find(in.stream_id);
    if (stream) stream->count_dropped(media::DropReason::kSizeMismatch);
    refuse_frame(control::error_code::kFrameSizeMismatch,
                 "frame carries more bytes than its stream's frame size");
    return;
  }
  uint8_t* dst = in.slot->pixels + in.filled;
  // Payload that arrived in the read buffer (the first bytes after the header) is copied;
  // payload read straight into the slot is already in place.
  if (data != dst) std::memcpy(dst, data, size);
  // Hashed from the slot, at the slot's own offset, while the window is still in cache: the
  // digest covers what the slot holds, so a window placed at the wrong offset fails to verify.
  if (in.hashing) {
    const uint64_t t0 = core::monotonic_ns();
    frame_hasher_.update(dst, size);
    in.hash_ns += core::monotonic_ns() - t0;
  }
  in.filled += size;
}

void Connection::begin_frame() {
  Ingest& in = ingest_;
  media::FrameHeader h;
  const media::FrameHeaderError err = media::parse_frame_header(in.header, h);
  if (err != media::FrameHeaderError::kNone) {
    ++server_.counters().frames_rejected_bad_header;
    refuse_frame(control::error_code::kBadFrameHeader, media::frame_header_error_name(err));
    return;
  }
  media::Stream* stream = server_.registry().find(h.stream_id);
  if (!stream) {
    ++server_.counters().frames_rejected_unknown_stream;
    refuse_frame(control::error_code::kUnknownStream,
                 "no open stream " + std::to_string(h.stream_id));
    return;
  }
  if (stream->owner() != id_) {
    ++server_.counters().frames_rejected_unknown_stream;
    refuse_frame(control::error_code::kNotStreamOwner,
                 "stream " + std::to_string(h.stream_id) + " belongs to another connection");
    return;
  }
  in.stream_id = h.stream_id;
  stream->count_offered();
  const media::StreamConfig& sc = stream->config();
  if ((h.width != 0 && h.width != sc.width) || (h.height != 0 && h.height != sc.height) ||
      (h.format != 0 && media::PixelFormat(h.format) != sc.format)) {
    stream->count_dropped(media::DropReason::kGeometryMismatch);
    refuse_frame(control::error_code::kGeometryMismatch,
                 "frame geometry differs from the stream's");
    return;
  }
  // Decided from the WebSocket header, before any pixel is read.
  if (in.single_frame && in.message_bytes != media::kFrameHeaderBytes + stream->frame_bytes()) {
    stream->count_dropped(media::DropReason::kSizeMismatch);
    refuse_frame(control::error_code::kFrameSizeMismatch,
                 "frame payload is " + std::to_string(in.message_bytes) + " bytes, stream needs " +
                     std::to_string(media::kFrameHeaderBytes + stream->frame_bytes()));
    return;
  }
  media::FrameSlot* slot = stream->pool()->acquire();
  if (!slot) {
    // Newest frame refused at admission; counted, no reply (the stats carry it).
    stream->count_dropped(media::DropReason::kPoolFull);
    in.discarding = true;
    return;
  }
  media::FrameInfo& info = slot->info;
  info.stream_id = h.stream_id;
  info.flags = h.flags;
  info.sequence = h.sequence;
  info.capture_time_us = h.capture_time_us;
  info.content_hash = h.content_hash;
  info.receive_start_ns = in.start_ns;
  info.width = sc.width;
  info.height = sc.height;
  info.format = sc.format;
  info.bytes = stream->frame_bytes();
  in.slot = slot;
  in.hashing =
      (h.flags & media::frame_flag::kHasContentHash) && server_.registry().verifies_content();
  if (in.hashing) frame_hasher_.reset();
}

void Connection::refuse_frame(const char* code, std::string message) {
  media::FrameHeader h;
  media::parse_frame_header(ingest_.header, h);
  if (ingest_.slot) {
    media::FramePool::release(ingest_.slot);
    ingest_.slot = nullptr;
  }
  ingest_.discarding = true;
  send_error(code, message,
             "{\"stream\":" + std::to_string(h.stream_id) +
                 ",\"sequence\":" + std::to_string(h.sequence) + "}");
}

void Connection::abandon_frame() {
  if (!ingest_.active) return;
  if (ingest_.slot) {
    if (media::Stream* s = server_.registry().find(ingest_.stream_id))
      s->count_dropped(media::DropReason::kDisconnected);
    media::FramePool::release(ingest_.slot);
    ingest_.slot = nullptr;
  }
  ingest_.active = false;
}

void Connection::on_message_end() {
  if (phase_ != Phase::kWebSocket) return;
  if (message_opcode_ == ws::Opcode::kText) {
    handle_control(text_);
    text_.clear();
    return;
  }
  Ingest& in = ingest_;
  in.active = false;
  if (in.header_have < media::kFrameHeaderBytes) {
    ++server_.counters().frames_rejected_bad_header;
    refuse_frame(control::error_code::kBadFrameHeader, "binary message shorter than a frame header");
    return;
  }
  if (!in.slot) return;  // refused earlier and already counted
  media::Stream* stream = server_.registry().find(in.stream_id);
  media::FrameSlot* slot = in.slot;
  in.slot = nullptr;
  if (!stream) {  // cannot happen while we own the stream; keep the slot accounting exact
    media::FramePool::release(slot);
    return;
  }
  if (in.filled != slot->info.bytes) {
    stream->count_dropped(media::DropReason::kSizeMismatch);
    media::FramePool::release(slot);
    send_error(control::error_code::kFrameSizeMismatch, "frame ended short of its stream's frame size");
    return;
  }
  stream->stages().unmask.record(in.unmask_ns);
  if (in.hashing) {
    slot->info.received_hash = frame_hasher_.digest();
    slot->info.received_hash_valid = true;
    stream->stages().hash.record(in.hash_ns);
  }
  server_.registry().admit(*stream, slot, core::monotonic_ns());
}

void Connection::on_ping(std::span<const uint8_t> payload) {
  send_ws(ws::Opcode::kPong,
          std::string_view(reinterpret_cast<const char*>(payload.data()), payload.size()));
}

void Connection::on_pong(std::span<const uint8_t>) {}

void Connection::on_close(uint16_t code, std::string_view) {
  // Echo the peer's code (RFC 6455 section 5.5.1); 1005 means it sent none.
  close_websocket(code == ws::close_code::kNoStatus ? ws::close_code::kNormal : code, "");
}

void Connection::on_protocol_error(uint16_t close_code, const char* reason) {
  ++server_.counters().ws_protocol_errors;
  if (close_code == ws::close_code::kProtocolError) ++server_.counters().ws_close_1002;
  if (close_code == ws::close_code::kInvalidPayload) ++server_.counters().ws_close_1007;
  if (close_code == ws::close_code::kMessageTooBig) ++server_.counters().ws_close_1009;
  close_websocket(close_code, reason);
}

// ---------------------------------------------------------------------------------------------
// Control protocol v1

void Connection::handle_control(std::string_view text) {
  control::ParseResult parsed = control::parse_control_message(text);
  if (auto* e = std::get_if<control::ControlError>(&parsed)) {
    send_error(e->code, e->message);
    return;
  }
  const control::ControlMessage& m = std::get<control::ControlMessage>(parsed);
  if (auto* hello = std::get_if<control::Hello>(&m)) {
    if (hello->protocol != control::kProtocolVersion) {
      send_error(control::error_code::kProtocolUnsupported,
                 "this server speaks protocol 1", "{\"supported\":[1]}");
      return;
    }
    hello_done_ = true;
    nlohmann::json welcome = {
        {"type", "welcome"},
        {"protocol", control::kProtocolVersion},
        {"server", "syncd/" SYNC_VERSION},
        {"capabilities", server_.pose()
                             ? nlohmann::json{"video.ingest", "video.receive", "tickets", "stats",
                                              "ping", "pose"}
                             : nlohmann::json{"video.ingest", "video.receive", "tickets", "stats",
                                              "ping"}},
        {"publishers", server_.config().publishers},
        {"limits",
         {{"max_message_bytes", server_.config().max_message_bytes},
          {"max_text_bytes", server_.config().max_text_bytes}}},
        {"frame_header_bytes", media::kFrameHeaderBytes},
    };
    send_control_json(welcome.dump());
    return;
  }
  if (!hello_done_) {
    send_error(control::error_code::kHelloRequired, "send hello first");
    return;
  }
  if (auto* open = std::get_if<control::StreamOpen>(&m)) {
    media::OpenError err;
    media::Stream* s = server_.registry().open(open->config, id_, err);
    if (!s) {
      send_error(media::open_error_code(err), "stream not opened",
                 nlohmann::json({{"name", open->config.name}}).dump());
      return;
    }
    nlohmann::json reply = {{"type", "stream.opened"},
                            {"stream", s->id()},
                            {"name", s->config().name},
                            {"width", s->config().width},
                            {"height", s->config().height},
                            {"format", media::pixel_format_name(s->config().format)},
                            {"fps", s->config().fps},
                            {"slots", s->config().slots},
                            {"frame_bytes", s->frame_bytes()},
                            {"header_bytes", media::kFrameHeaderBytes}};
    send_control_json(reply.dump());
    return;
  }
  if (auto* close = std::get_if<control::StreamClose>(&m)) {
    media::Stream* s = server_.registry().find(close->stream);
    if (!s) {
      send_error(control::error_code::kUnknownStream, "no open stream with that id");
      return;
    }
    if (s->owner() != id_) {
      send_error(control::error_code::kNotStreamOwner, "stream belongs to another connection");
      return;
    }
    server_.registry().close(s);
    send_control_json(nlohmann::json({{"type", "stream.closed"}, {"stream", close->stream}}).dump());
    return;
  }
  if (std::holds_alternative<control::StatsRequest>(m)) {
    send_control_json("{\"type\":\"stats\",\"stats\":" + server_.stats_json() + "}");
    return;
  }
  if (auto* t = std::get_if<control::TicketCreate>(&m)) {
    media::Stream* s = server_.registry().find(t->stream);
    if (!s) {
      send_error(control::error_code::kUnknownStream, "no open stream with that id");
      return;
    }
    if (s->owner() != id_) {
      send_error(control::error_code::kNotStreamOwner, "only the stream's source hands out tickets");
      return;
    }
    const std::string token = server_.tickets().create(s->id(), t->uses, t->ttl_s,
                                                       core::monotonic_ns());
    if (token.empty()) {
      send_error(control::error_code::kTicketUnavailable, "no ticket could be made now");
      return;
    }
    send_control_json(nlohmann::json({{"type", "ticket"},
                                      {"stream", s->id()},
                                      {"name", s->config().name},
                                      {"ticket", token},
                                      {"uses", t->uses},
                                      {"expires_in_s", t->ttl_s}})
                          .dump());
    return;
  }
  if (auto* c = std::get_if<control::Credit>(&m)) {
    if (!server_.receivers().grant(c->receiver, c->frames, core::monotonic_ns()))
      send_error(control::error_code::kUnknownReceiver, "no such receiver");
    return;
  }
  if (auto* sub = std::get_if<control::Subscribe>(&m)) {
    if (sub->topic != "pose") {
      send_error(control::error_code::kUnknownTopic, "the only topic is \"pose\"");
      return;
    }
    if (!server_.pose()) {
      send_error(control::error_code::kTopicUnavailable, "syncd runs without --headtracker");
      return;
    }
    send_control_json(nlohmann::json({{"type", sub->subscribe ? "subscribed" : "unsubscribed"},
                                      {"topic", "pose"}})
                          .dump());
    if (sub->subscribe && !pose_subscribed_) server_.pose()->subscribe(this);
    if (!sub->subscribe && pose_subscribed_) server_.pose()->unsubscribe(this);
    pose_subscribed_ = sub->subscribe;
    return;
  }
  if (std::holds_alternative<control::PoseRecenter>(m)) {
    if (!server_.pose()) {
      send_error(control::error_code::kTopicUnavailable, "syncd runs without --headtracker");
      return;
    }
    server_.pose()->request_recenter();
    return;
  }
  if (auto* read = std::get_if<control::AudioRead>(&m)) {
    std::string why = "syncd runs without --audio-source";
    AudioService* audio = server_.audio();
    const char* code = audio ? audio->read(*this, *read, why) : control::error_code::kAudioUnavailable;
    if (code) send_error(code, why);
    return;
  }
  if (std::holds_alternative<control::AudioInfo>(m)) {
    if (AudioService* audio = server_.audio()) send_control_json(audio->info_json());
    else send_error(control::error_code::kAudioUnavailable, "syncd runs without --audio-source");
    return;
  }
  if (auto* ping = std::get_if<control::Ping>(&m)) {
    send_control_json("{\"type\":\"pong\",\"id\":" +
                      (ping->id_json.empty() ? std::string("null") : ping->id_json) + "}");
    return;
  }
}

}  // namespace syncd::server
