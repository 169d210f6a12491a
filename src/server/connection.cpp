#include "server/connection.h"

#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "control/control_message.h"
#include "core/clock.h"
#include "server/server_config.h"

namespace syncd::server {

namespace {

constexpr size_t kReadBufferBytes = 64 * 1024;

const char* status_text(int status) {
  switch (status) {
    case 101:
      return "Switching Protocols";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 421:
      return "Misdirected Request";
    case 426:
      return "Upgrade Required";
    case 413:
      return "Content Too Large";
    case 415:
      return "Unsupported Media Type";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
  }
  return "Error";
}

}  // namespace

Connection::Connection(ConnectionHost& host, uint64_t id)
    : host_(host),
      id_(id),
      read_buffer_(new uint8_t[kReadBufferBytes]),
      http_(http::RequestLimits{host.config().max_header_bytes, 64, kMaxRequestBodyBytes}),
      decoder_(ws::DecoderLimits{host.config().max_message_bytes}),
      ingest_(host.registry(), host.counters(), id) {
  tcp_.data = this;
  created_ns_ = core::monotonic_ns();
  last_receive_ns_ = created_ns_;
  writer_ =
      std::make_unique<SocketWriter>(reinterpret_cast<uv_stream_t*>(&tcp_), host.output_budget(),
                                     host.config().writer, static_cast<WriterListener&>(*this));
}

Connection::~Connection() = default;

void Connection::start() {
  uv_tcp_nodelay(&tcp_, 1);
  // Large kernel buffers let a 1080p frame (8.3 MB) flow in few, large reads.
  int size = 4 << 20;
  uv_recv_buffer_size(reinterpret_cast<uv_handle_t*>(&tcp_), &size);
  start_reading();
}

void Connection::start_reading() {
  if (reading_ || closing_) return;
  reading_ = true;
  uv_read_start(reinterpret_cast<uv_stream_t*>(&tcp_), &Connection::on_alloc, &Connection::on_read);
}

void Connection::stop_reading() {
  if (!reading_) return;
  reading_ = false;
  uv_read_stop(reinterpret_cast<uv_stream_t*>(&tcp_));
}

void Connection::destroy() {
  if (closing_) return;
  closing_ = true;
  phase_ = Phase::kClosing;
  writer_->close();
  ingest_.abandon();
  uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), &Connection::on_closed);
}

void Connection::on_closed(uv_handle_t* handle) {
  auto* self = static_cast<Connection*>(handle->data);
  // Every write callback has run by now (libuv cancels pending writes before the close
  // callback), so every frame the writer pinned is released.
  self->host_.connection_closed(*self);
  delete self;
}

void Connection::check_timeouts(uint64_t now_ns) {
  if (closing_) return;
  const ServerConfig& cfg = host_.config();
  if (writer_->stalled(now_ns)) {
    // The peer has not taken a byte for write_timeout_ms: whatever it holds is released.
    ++host_.counters().write_timeouts;
    destroy();
    return;
  }
  if (phase_ == Phase::kHttp) {
    // A socket that has sent nothing at all is closed sooner, without a reply: it costs a
    // descriptor and asks for nothing (an idle pre-connect, or a flood of them).
    if (last_receive_ns_ == created_ns_ &&
        now_ns - created_ns_ > uint64_t(cfg.silent_timeout_ms) * 1'000'000) {
      ++host_.counters().silent_closes;
      destroy();
      return;
    }
    if (now_ns - created_ns_ > uint64_t(cfg.handshake_timeout_ms) * 1'000'000) {
      ++host_.counters().handshake_timeouts;
      send_http(408, "text/plain", "request head not received in time\n");
    }
    return;
  }
  if (phase_ != Phase::kWebSocket) return;
  const uint64_t idle_ns = uint64_t(cfg.idle_timeout_ms) * 1'000'000;
  if (now_ns - last_receive_ns_ > idle_ns) {
    ++host_.counters().idle_timeouts;
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
    const uint64_t want = std::min<uint64_t>(remaining, self->host_.config().read_window_bytes);
    size_t n = 0;
    if (uint8_t* dst = self->ingest_.direct_window(want, self->host_.discard_buffer(), n)) {
      self->direct_read_ = dst;
      *buf = uv_buf_init(reinterpret_cast<char*>(dst), unsigned(n));
      return;
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
  if (phase_ == Phase::kWebSocket && !closing_ && remaining > 0 && ingest_.receiving_payload()) {
    bytes = size_t(std::min<uint64_t>(remaining, host_.config().receive_low_water_bytes));
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
      // Bytes the kernel put straight into the slot: the ingest unmasks them in place (hashing
      // them in the same pass when it verifies, timed apart as the hash stage).
      const uint64_t t0 = self->last_receive_ns_;
      const uint64_t hashed_before = self->ingest_.hash_ns();
      self->feed_websocket(data, size_t(nread));
      self->ingest_.add_decode_ns(core::monotonic_ns() - t0 -
                                  (self->ingest_.hash_ns() - hashed_before));
    } else {
      self->feed_websocket(data, size_t(nread));
    }
    self->update_receive_low_water();
    self->end_read_turn(stream, size_t(nread));
  }
}

// libuv reads a readable socket up to 32 times per callback: 8 MB of frame in one turn of the
// loop, while an audio read or a pose waits. After a turn's budget the connection yields if
// anyone else is waiting; the server resumes it after the loop has polled everyone else
// (uv_check). With nobody waiting it reads on.
void Connection::end_read_turn(uv_stream_t* stream, size_t nread) {
  turn_bytes_ += nread;
  if (turn_bytes_ < host_.config().read_turn_bytes || closing_ || phase_ != Phase::kWebSocket ||
      !reading_)
    return;
  turn_bytes_ = 0;
  uv_os_fd_t fd = -1;
  uv_fileno(reinterpret_cast<uv_handle_t*>(stream), &fd);
  if (host_.others_waiting(fd)) {
    ++host_.counters().read_turns_yielded;
    stop_reading();
    paused_for_turn_ = true;
    host_.resume_after_poll(*this);
  } else {
    ++host_.counters().read_turns_continued;
  }
}

void Connection::resume_reading() {
  turn_bytes_ = 0;
  paused_for_turn_ = false;
  if (closing_ || phase_ != Phase::kWebSocket || paused_for_output_) return;
  start_reading();
}

void Connection::feed_websocket(uint8_t* data, size_t size) {
  const size_t used = decoder_.consume(data, size, *this);
  if (used < size && paused_for_output_ && !closing_ && !decoder_.failed() && !decoder_.closed()) {
    held_ = data + used;
    held_size_ = size - used;
  }
}

void Connection::handle_http_bytes(char* data, size_t size) {
  switch (http_.feed(data, size)) {
    case http::ParseStatus::kIncomplete:
      return;
    case http::ParseStatus::kComplete: {
      const size_t used = http_.consumed();
      host_.on_http_request(*this, http_.request(), data + used, size - std::min(size, used));
      return;
    }
    case http::ParseStatus::kHeadersTooLarge:
      ++host_.counters().http_headers_too_large;
      send_http(431, "text/plain", std::string(http_.error_reason()) + "\n");
      return;
    case http::ParseStatus::kBadRequest:
      ++host_.counters().http_bad_requests;
      send_http(400, "text/plain", std::string(http_.error_reason()) + "\n");
      return;
    case http::ParseStatus::kBodyTooLarge:
      ++host_.counters().http_body_too_large;
      send_http(413, "text/plain", std::string(http_.error_reason()) + "\n");
      return;
    case http::ParseStatus::kBodyNotAllowed:
    case http::ParseStatus::kAmbiguousFraming:
      ++host_.counters().http_framing_refused;
      send_http(400, "text/plain", std::string(http_.error_reason()) + "\n");
      return;
  }
}

// ---------------------------------------------------------------------------------------------
// Writing

void Connection::send_http(int status, std::string_view content_type, std::string_view body,
                           std::string_view extra_headers) {
  if (closing_ || phase_ != Phase::kHttp) return;
  if (status / 100 < 6) ++host_.counters().http_responses[status / 100];
  char head[256];
  const int n = std::snprintf(head, sizeof head,
                              "HTTP/1.1 %d %s\r\nContent-Type: %.*s\r\nContent-Length: %zu\r\n"
                              "Cache-Control: no-store\r\nConnection: close\r\n",
                              status, status_text(status), int(content_type.size()),
                              content_type.data(), body.size());
  phase_ = Phase::kClosing;
  if (writer_->send_copy({std::string_view(head, size_t(std::max(n, 0))), response_headers_,
                          extra_headers, "\r\n", body}) != SendStatus::kQueued) {
    ++host_.counters().slow_consumer_closes;
    destroy();
    return;
  }
  close_after_written();
}

void Connection::close_after_written() {
  // Nothing more will be read: stop, so a peer cannot keep us busy while the reply drains.
  stop_reading();
  close_when_written_ = true;
  if (writer_->writes_in_flight() == 0) destroy();
}

void Connection::upgrade_to_websocket(std::string_view response, char* rest, size_t rest_size) {
  if (closing_ || phase_ != Phase::kHttp) return;
  ++host_.counters().http_responses[1];
  if (writer_->send_copy({response}) != SendStatus::kQueued) {
    destroy();
    return;
  }
  phase_ = Phase::kWebSocket;
  if (rest_size > 0) feed_websocket(reinterpret_cast<uint8_t*>(rest), rest_size);
}

void Connection::start_streaming(std::string_view response_head) {
  if (closing_ || phase_ != Phase::kHttp) return;
  ++host_.counters().http_responses[2];
  if (writer_->send_copy({response_head, response_headers_, "\r\n"}) != SendStatus::kQueued) {
    destroy();
    return;
  }
  phase_ = Phase::kStreaming;
}

bool Connection::send_ws(ws::Opcode opcode, std::string_view payload, bool close_if_refused) {
  if (!is_websocket()) return false;
  uint8_t header[ws::kMaxServerHeaderBytes];
  const size_t h = ws::encode_server_header(header, opcode, payload.size());
  const SendStatus s =
      writer_->send_copy({std::string_view(reinterpret_cast<char*>(header), h), payload});
  if (s == SendStatus::kQueued) return true;
  if (!close_if_refused) return false;
  // Replies are only produced for requests read, and reading stops while replies go unread
  // (on_write_complete), so only a peer that reads nothing for long gets here.
  ++host_.counters().slow_consumer_closes;
  destroy();
  return false;
}

bool Connection::send_text(std::string_view json) {
  const bool queued = send_ws(ws::Opcode::kText, json);
  // Stop decoding this peer's requests while its replies go unread: past half the byte cap,
  // reading pauses until the writer drains below a quarter (issue: cheap requests must not buy
  // unbounded loop time or memory).
  if (queued && !paused_for_output_ &&
      writer_->queued_bytes() > host_.config().writer.max_queued_bytes / 2) {
    paused_for_output_ = true;
    ++host_.counters().reads_paused_for_output;
    stop_reading();
    decoder_.request_pause();  // the rest of this read waits in held_
  }
  return queued;
}

bool Connection::send_event(std::string_view json) {
  return send_ws(ws::Opcode::kText, json, false);
}

void Connection::send_error(const char* code, std::string_view message, std::string_view extra) {
  ++host_.counters().control_errors;
  send_text(control::error_json(code, message, extra));
}

void Connection::close_websocket(uint16_t code, std::string_view reason) {
  if (!is_websocket()) return;
  ingest_.abandon();
  const std::string payload = ws::close_payload(code, reason);
  if (!send_ws(ws::Opcode::kClose, payload)) return;
  phase_ = Phase::kClosing;
  close_after_written();
}

void Connection::on_write_complete(int status) {
  if (closing_) return;
  if (status < 0) {
    destroy();
    return;
  }
  if (close_when_written_) {
    if (writer_->writes_in_flight() == 0) destroy();
    return;
  }
  if (paused_for_output_ && writer_->queued_bytes() <= host_.config().writer.max_queued_bytes / 4) {
    paused_for_output_ = false;
    if (held_size_ > 0) {
      uint8_t* data = held_;
      const size_t size = held_size_;
      held_size_ = 0;
      feed_websocket(data, size);  // may pause again
    }
    if (!paused_for_output_ && !paused_for_turn_ && !closing_) start_reading();
  }
}

// ---------------------------------------------------------------------------------------------
// WebSocket events

void Connection::on_message_begin(ws::Opcode opcode, uint64_t first_frame_bytes,
                                  bool single_frame) {
  message_opcode_ = opcode;
  if (opcode == ws::Opcode::kText) {
    text_.clear();
    if (first_frame_bytes > host_.config().max_text_bytes) {
      ++host_.counters().ws_close_1009;
      ++host_.counters().ws_protocol_errors;
      close_websocket(ws::close_code::kMessageTooBig, "control message too large");
    }
    return;
  }
  ingest_.begin_message(first_frame_bytes, single_frame, last_receive_ns_);
}

void Connection::on_message_data(uint8_t* data, size_t size) {
  // Only text reaches here: binary payload comes masked (on_masked_message_data).
  if (!is_websocket()) return;
  if (text_.size() + size > host_.config().max_text_bytes) {
    ++host_.counters().ws_close_1009;
    ++host_.counters().ws_protocol_errors;
    close_websocket(ws::close_code::kMessageTooBig, "control message too large");
    return;
  }
  text_.append(reinterpret_cast<const char*>(data), size);
}

// A frame's bytes are unmasked by the ingest, in its slot, in the same pass as its hash.
void Connection::on_masked_message_data(uint8_t* data, size_t size, uint32_t mask_key,
                                        uint64_t phase) {
  if (!is_websocket()) return;
  if (auto error = ingest_.data(data, size, mask_key, phase)) {
    send_error(error->code, error->message,
               "{\"stream\":" + std::to_string(error->stream) +
                   ",\"sequence\":" + std::to_string(error->sequence) + "}");
  }
}

void Connection::on_message_end() {
  if (!is_websocket()) return;
  if (message_opcode_ == ws::Opcode::kText) {
    host_.on_control_message(*this, text_);
    text_.clear();
    return;
  }
  if (auto error = ingest_.end_message(core::monotonic_ns())) {
    send_error(error->code, error->message,
               "{\"stream\":" + std::to_string(error->stream) +
                   ",\"sequence\":" + std::to_string(error->sequence) + "}");
  }
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
  ++host_.counters().ws_protocol_errors;
  if (close_code == ws::close_code::kProtocolError) ++host_.counters().ws_close_1002;
  if (close_code == ws::close_code::kInvalidPayload) ++host_.counters().ws_close_1007;
  if (close_code == ws::close_code::kMessageTooBig) ++host_.counters().ws_close_1009;
  close_websocket(close_code, reason);
}

}  // namespace syncd::server
