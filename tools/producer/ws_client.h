// Client side of RFC 6455 for sync-producer: the opening handshake, masked control messages, and
// a minimal reader for what the server sends back.
//
// Only what a producer needs: the server never fragments and never masks (RFC 6455 section 5.1),
// so each server frame is a whole message. Binary frames are framed and masked by the caller
// (FrameSource) and handed over as iovecs. Owned and used by the producer's single thread.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "net/ws/frame_decoder.h"
#include "stream_socket.h"

namespace syncd::producer {

class WsClient final : private ReadableListener {
 public:
  struct Url {
    std::string host;
    uint16_t port = 80;
    std::string path = "/";
  };
  // Parses ws://HOST[:PORT][/PATH] (HOST may be a bracketed IPv6 literal). Throws
  // ToolError(kExitUsage); wss:// is refused because syncd listens on plain loopback.
  static Url parse_url(std::string_view url);

  // Connects and performs the opening handshake (RFC 6455 section 4.1), checking the 101 status
  // and Sec-WebSocket-Accept. Throws ToolError: kExitRefused when the server answers with another
  // status, kExitIo for network and protocol failures.
  WsClient(const Url& url, int timeout_ms);
  WsClient(const WsClient&) = delete;
  WsClient& operator=(const WsClient&) = delete;

  // The masking key of every binary frame on this connection (loaded little-endian, as in
  // net/ws/unmask.h). One key per connection instead of one per frame lets FrameSource mask each
  // pixel buffer once at start-up; the masking only exists to defeat proxy cache poisoning by
  // browser scripts, which a native client talking to loopback is not exposed to.
  uint32_t data_mask_key() const { return data_mask_key_; }

  // --- Setup (control plane): throw ToolError on failure. ---
  void send_text(std::string_view text);
  // The next text message, answering pings meanwhile. Throws ToolError on timeout (kExitIo),
  // on a server Close (kExitRefused) and on I/O or protocol errors (kExitIo).
  std::string wait_for_text(int timeout_ms);

  // --- Streaming (data plane): no exceptions, no allocation unless the server talks. ---
  // Sends one complete, already framed and masked binary message. Incoming messages are read
  // while the send waits for buffer space; a Close or a reader failure abandons the send.
  IoStatus send_frame(iovec* iov, int count);
  // Reads whatever the server has sent, without blocking, and answers a pending ping. Returns
  // false once the connection is closed or broken.
  bool service();
  // Pops the oldest unread text message.
  bool next_text(std::string& out);

  // Sends Close(code) (unless a frame was abandoned half-sent, after which only dropping the
  // connection is valid) and waits up to wait_ms for the server's Close; then closes the socket.
  // True when the server's Close arrived.
  bool close(uint16_t code, int wait_ms);

  bool peer_closed() const { return peer_closed_; }
  uint16_t peer_close_code() const { return peer_close_code_; }
  const std::string& peer_close_reason() const { return peer_close_reason_; }
  // Why the connection broke (I/O error, EOF, protocol violation); empty while it is healthy.
  const std::string& failure() const { return failure_; }
  // One line describing how the connection ended, for error messages.
  std::string end_description() const;

 private:
  bool on_readable() override { return read_available(); }
  // Reads until the socket is drained and dispatches complete frames. False when the connection
  // can no longer be used.
  bool read_available();
  void parse_frames();
  void dispatch(ws::Opcode opcode, const uint8_t* payload, size_t size);
  void fail(std::string reason);
  // Masks payload with a fresh key and sends it as one control or text frame.
  IoStatus send_small(ws::Opcode opcode, std::string_view payload);
  bool answer_ping();
  void read_handshake_response(const std::string& client_key, int timeout_ms);

  // Server messages are small JSON; anything larger than this is treated as a protocol error.
  static constexpr size_t kInputBufferBytes = 1 << 20;

  StreamSocket socket_;
  uint32_t data_mask_key_ = 0;
  std::vector<uint8_t> input_;  // allocated once; holds at most one partial frame between reads
  size_t input_bytes_ = 0;
  std::deque<std::string> texts_;
  std::string pending_pong_;    // payload of the latest unanswered ping (RFC 6455 section 5.5.3)
  std::string masked_scratch_;  // send_small()'s masked copy, kept so its capacity is reused
  bool pong_due_ = false;
  // A send_frame() stopped part-way: the stream is mid-message, so no Close may follow it.
  bool frame_abandoned_ = false;
  bool peer_closed_ = false;
  uint16_t peer_close_code_ = ws::close_code::kNoStatus;
  std::string peer_close_reason_;
  std::string failure_;
};

}  // namespace syncd::producer
