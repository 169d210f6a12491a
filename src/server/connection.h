// One client connection, as a transport: bytes in, protocol events out, and one writer out.
//
// It reads an HTTP/1.1 request head and hands it to the host (the HTTP routes); after an
// Upgrade on /ws it decodes WebSocket frames and hands text messages to the host (the control
// router) and binary messages to its FrameIngest, which leases pool slots through the media
// ingest API. Everything it sends goes through its SocketWriter.
//
// The frame path: when a binary message's payload is due, on_alloc() hands libuv the rest of the
// frame's pool slot, one window at a time, so the kernel copies socket bytes straight into the
// slot and the decoder unmasks them there (FrameIngest::direct_window).
//
// Thread: the loop thread. Memory: created by the server; deleted in the handle's close callback
// after the host has been told (ConnectionHost::connection_closed).
#pragma once

#include <uv.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "net/http/request_parser.h"
#include "net/ws/frame_decoder.h"
#include "net/ws/frame_encoder.h"
#include "server/frame_ingest.h"
#include "server/socket_writer.h"

namespace syncd::server {

class Connection;
struct ServerConfig;
struct ServerCounters;

// What a connection needs from the rest of syncd; the server implements it. Loop thread.
class ConnectionHost {
 public:
  virtual ~ConnectionHost() = default;
  virtual const ServerConfig& config() const = 0;
  virtual ServerCounters& counters() = 0;
  virtual OutputBudget& output_budget() = 0;
  virtual media::StreamRegistry& registry() = 0;
  // A complete request head; `rest` is what followed it in the same read.
  virtual void on_http_request(Connection& c, const http::Request& request, char* rest,
                               size_t rest_size) = 0;
  // A complete text message of an open WebSocket.
  virtual void on_control_message(Connection& c, std::string_view text) = 0;
  // From the close callback, before the connection is deleted: forget every pointer to it.
  virtual void connection_closed(Connection& c) = 0;
  // Read turns (see Connection::on_read): whether anyone besides own_fd wants the loop, and
  // resuming a connection after the loop has polled.
  virtual bool others_waiting(int own_fd) = 0;
  virtual void resume_after_poll(Connection& c) = 0;
  // Where refused frame bytes are read to (content never looked at).
  virtual std::span<uint8_t> discard_buffer() = 0;
};

// A POST body's limit: the one endpoint that takes a body is WHEP's SDP offer (a browser's is
// 4-8 KiB; webrtc::kMaxSdpBytes refuses what is larger anyway).
inline constexpr size_t kMaxRequestBodyBytes = 64 * 1024;

class Connection final : public ws::DecoderSink, private WriterListener {
 public:
  Connection(ConnectionHost& host, uint64_t id);
  ~Connection() override;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Starts reading from an accepted socket (the handle was initialised by the caller).
  void start();
  uv_tcp_t* handle() { return &tcp_; }
  uint64_t id() const { return id_; }

  // Called by the server's sweep timer: handshake, idle and write timeouts.
  void check_timeouts(uint64_t now_ns);
  // Orderly shutdown: WebSocket peers get a Close 1001, others are closed.
  void shutdown_for_exit();
  // Closes the socket now; the object is deleted from the close callback.
  void destroy();
  bool closing() const { return closing_; }

  bool is_websocket() const { return phase_ == Phase::kWebSocket && !closing_; }
  // Still reading its first request head (or has sent nothing yet).
  bool awaiting_request() const { return phase_ == Phase::kHttp && !closing_; }
  SocketWriter& writer() { return *writer_; }
  // Reading was paused after a turn's budget of bytes (see on_read); picks it up again.
  void resume_reading();

  // HTTP: a complete response, then the connection closes once it is written (no keep-alive:
  // syncd's HTTP endpoints are polled at human or Prometheus rates; the WebSocket is the
  // long-lived path).
  void send_http(int status, std::string_view content_type, std::string_view body,
                 std::string_view extra_headers = {});
  // HTTP: header lines ("Name: value\r\n" each) every response of this connection carries
  // (its CORS headers, set once the request's Origin is known).
  void set_response_headers(std::string headers) { response_headers_ = std::move(headers); }
  // HTTP: the 101 response has been built; the connection speaks WebSocket from here on. `rest`
  // is what the client sent after its request head.
  void upgrade_to_websocket(std::string_view response, char* rest, size_t rest_size);
  // HTTP: a response head of an endless body that services write with writer(); the client's
  // bytes are read and ignored so that its EOF is seen. `response_head` is the status line and
  // header lines, without the blank line that ends the head (added here, after
  // set_response_headers' lines).
  void start_streaming(std::string_view response_head);

  // WebSocket: control messages. Dropped unless this is an open WebSocket. A reply that does
  // not fit the connection's output limits closes the connection (slow consumer). Returns
  // whether it was queued.
  bool send_text(std::string_view json);
  // WebSocket: an event the peer did not ask for (a pose sample). Dropped, not closing the
  // connection, when it does not fit the output limits. Returns whether it was queued.
  bool send_event(std::string_view json);
  // An `error` control message with a stable code; counted.
  void send_error(const char* code, std::string_view message, std::string_view extra = {});
  // Sends a Close and closes the socket once it is written.
  void close_websocket(uint16_t code, std::string_view reason);
  // Control-protocol session state.
  bool hello_done() const { return hello_done_; }
  void set_hello_done() { hello_done_ = true; }
  // The WebSocket came from a page syncd served (its Origin is syncd's own origin) or from a
  // native client (no Origin): such a connection may ticket the streams syncd itself sources
  // (docs/security.md, "Tickets"). Set at the upgrade.
  bool own_page_or_native() const { return own_page_or_native_; }
  void set_own_page_or_native(bool v) { own_page_or_native_ = v; }
  // A page whose Origin the operator listed with --allow-origin (docs/security.md).
  bool listed_origin() const { return listed_origin_; }
  void set_listed_origin(bool v) { listed_origin_ = v; }

 private:
  enum class Phase { kHttp, kWebSocket, kStreaming, kClosing };

  static void on_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
  static void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void on_closed(uv_handle_t* handle);

  void handle_http_bytes(char* data, size_t size);
  void feed_websocket(uint8_t* data, size_t size);
  void end_read_turn(uv_stream_t* stream, size_t nread);
  void update_receive_low_water();
  bool send_ws(ws::Opcode opcode, std::string_view payload, bool close_if_refused = true);
  void close_after_written();
  void start_reading();
  void stop_reading();

  // WriterListener
  void on_write_complete(int status) override;

  // ws::DecoderSink
  void on_message_begin(ws::Opcode opcode, uint64_t first_frame_bytes, bool single_frame) override;
  void on_message_data(uint8_t* data, size_t size) override;
  void on_masked_message_data(uint8_t* data, size_t size, uint32_t mask_key,
                              uint64_t phase) override;
  void on_message_end() override;
  void on_ping(std::span<const uint8_t> payload) override;
  void on_pong(std::span<const uint8_t> payload) override;
  void on_close(uint16_t code, std::string_view reason) override;
  void on_protocol_error(uint16_t close_code, const char* reason) override;

  ConnectionHost& host_;
  uint64_t id_;
  uv_tcp_t tcp_;
  Phase phase_ = Phase::kHttp;
  bool closing_ = false;
  bool close_when_written_ = false;
  bool reading_ = false;
  // Reading stopped because this connection's replies go unread (see on_write_complete).
  bool paused_for_output_ = false;
  bool paused_for_turn_ = false;
  bool hello_done_ = false;
  bool own_page_or_native_ = false;
  bool listed_origin_ = false;
  uint64_t created_ns_ = 0;
  uint64_t last_receive_ns_ = 0;
  uint64_t last_ping_ns_ = 0;
  size_t turn_bytes_ = 0;  // bytes read since reading last (re)started

  std::unique_ptr<uint8_t[]> read_buffer_;
  http::RequestParser http_;
  ws::FrameDecoder decoder_;
  ws::Opcode message_opcode_ = ws::Opcode::kContinuation;
  std::string text_;              // text message being assembled (control plane)
  std::string response_headers_;  // set_response_headers
  FrameIngest ingest_;
  std::unique_ptr<SocketWriter> writer_;
  uint8_t* direct_read_ = nullptr;  // where on_alloc pointed the last read, if into a slot
  // Bytes read but not yet decoded because decoding paused for output (in read_buffer_, which
  // no read reuses while reading is stopped).
  uint8_t* held_ = nullptr;
  size_t held_size_ = 0;
  size_t receive_low_water_ = 1;  // the socket's SO_RCVLOWAT, as last set
};

}  // namespace syncd::server
