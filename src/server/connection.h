// One client connection: HTTP/1.1 request, then (after an Upgrade on /ws) a WebSocket carrying
// control protocol v1 and binary video frames.
//
// The frame path: when a binary message's payload is due, on_alloc() hands libuv the rest of the
// frame's pool slot, one window at a time, so the kernel copies socket bytes straight into the
// slot and the decoder unmasks them there. Only the first bytes of a message, which arrive in the
// same read as its WebSocket header, are copied from the connection's small read buffer.
//
// Thread: the loop thread. Memory: owned by the Server; freed in the handle's close callback.
#pragma once

#include <uv.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/content_hash.h"
#include "media/frame_header.h"
#include "media/frame_pool.h"
#include "net/http/request_parser.h"
#include "net/ws/frame_decoder.h"

namespace syncd::server {

class Server;

class Connection final : public ws::DecoderSink {
 public:
  Connection(Server& server, uint64_t id);
  ~Connection() override;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Starts reading from an accepted socket (the handle was initialised by the caller).
  void start();
  uv_tcp_t* handle() { return &tcp_; }
  uint64_t id() const { return id_; }

  // Called by the server's sweep timer.
  void check_timeouts(uint64_t now_ns);
  // Orderly shutdown: WebSocket peers get a Close 1001, others are closed.
  void shutdown_for_exit();
  // Closes the socket now; the object is deleted from the close callback.
  void destroy();

  bool is_websocket() const { return phase_ == Phase::kWebSocket; }
  // The socket, for publishers that write to it directly (HTTP stream receivers).
  uv_stream_t* stream() { return reinterpret_cast<uv_stream_t*>(&tcp_); }
  // Reading was paused after a turn's budget of bytes (see on_read); picks it up again.
  void resume_reading();
  // A control-protocol text message (dropped unless this is an open WebSocket).
  void send_text(std::string_view json) { send_ws(ws::Opcode::kText, json); }

 private:
  // kStreaming: the connection carries an HTTP stream to a receiver; the server only writes.
  enum class Phase { kHttp, kWebSocket, kStreaming, kClosing };

  // Ingest state of the binary message being received.
  struct Ingest {
    bool active = false;
    bool discarding = false;  // refused: remaining payload is read and thrown away
    bool single_frame = false;
    uint64_t message_bytes = 0;  // from the header when single_frame
    uint8_t header[media::kFrameHeaderBytes] = {};
    size_t header_have = 0;
    media::FrameSlot* slot = nullptr;
    uint32_t stream_id = 0;
    size_t filled = 0;  // pixel bytes written into the slot
    uint64_t start_ns = 0;
    uint64_t unmask_ns = 0;
    bool hashing = false;  // the frame carries a content hash and a publisher verifies it
    uint64_t hash_ns = 0;
  };

  static void on_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
  static void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void on_closed(uv_handle_t* handle);

  void handle_http_bytes(char* data, size_t size);
  void handle_request(const http::Request& request, char* rest, size_t rest_size);
  void accept_websocket(const http::Request& request, char* rest, size_t rest_size);
  void accept_receiver(const http::Request& request, std::string_view stream_name);
  void grant_credit_http(const http::Request& request);
  bool serve_web_asset(std::string_view path);
  bool origin_allowed(std::string_view origin) const;
  void feed_websocket(uint8_t* data, size_t size);

  // HTTP replies close the connection after the write (no keep-alive: syncd's HTTP endpoints
  // are polled at human or Prometheus rates; the WebSocket is the long-lived path).
  void send_http(int status, std::string_view content_type, std::string_view body,
                 std::string_view extra_headers = {});
  void send_ws(ws::Opcode opcode, std::string_view payload);
  void send_control_json(std::string json) { send_ws(ws::Opcode::kText, json); }
  void send_error(const char* code, std::string_view message, std::string_view extra = {});
  // Sends a Close and closes the socket once it is written.
  void close_websocket(uint16_t code, std::string_view reason);
  void write_raw(std::string bytes, bool close_after);
  static void on_write(uv_write_t* req, int status);

  // ws::DecoderSink
  void on_message_begin(ws::Opcode opcode, uint64_t first_frame_bytes, bool single_frame) override;
  void on_message_data(uint8_t* data, size_t size) override;
  void on_message_end() override;
  void on_ping(std::span<const uint8_t> payload) override;
  void on_pong(std::span<const uint8_t> payload) override;
  void on_close(uint16_t code, std::string_view reason) override;
  void on_protocol_error(uint16_t close_code, const char* reason) override;

  void handle_control(std::string_view text);
  void begin_frame();  // the frame header is complete: admit or refuse
  void refuse_frame(const char* code, std::string message);
  void abandon_frame();  // connection lost mid-frame

  Server& server_;
  uint64_t id_;
  uv_tcp_t tcp_;
  Phase phase_ = Phase::kHttp;
  bool closing_ = false;
  bool hello_done_ = false;
  bool pose_subscribed_ = false;
  uint64_t created_ns_ = 0;
  uint64_t last_receive_ns_ = 0;
  uint64_t last_ping_ns_ = 0;
  size_t pending_write_bytes_ = 0;
  size_t turn_bytes_ = 0;  // bytes read since reading last (re)started

  std::unique_ptr<uint8_t[]> read_buffer_;
  http::RequestParser http_;
  ws::FrameDecoder decoder_;
  ws::Opcode message_opcode_ = ws::Opcode::kContinuation;
  std::string text_;  // text message being assembled (control plane)
  Ingest ingest_;
  // Hashes the frame in ingest_ window by window as it lands (Ingest::hashing). Outside Ingest
  // so that starting a frame resets 576 bytes of state only when the frame is hashed.
  core::ContentHasher frame_hasher_;
  uint8_t* direct_read_ = nullptr;  // where on_alloc pointed the last read, if into a slot
  size_t receive_low_water_ = 1;    // the socket's SO_RCVLOWAT, as last set
  void update_receive_low_water();
};

}  // namespace syncd::server
