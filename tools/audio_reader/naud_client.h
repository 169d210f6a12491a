// A blocking WebSocket client for sync-audio-reader: the RFC 6455 opening handshake, masked
// text messages out, and whole server messages (text or binary NAUD packets) in, read into one
// buffer allocated at start-up. Reuses sync-producer's StreamSocket. Used by the tool's single
// thread. Setup failures throw producer::ToolError; reads return false with failure() set.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "../producer/stream_socket.h"
#include "net/ws/frame_decoder.h"

namespace syncd::audio_reader {

class NaudClient {
 public:
  // Connects to ws://host:port/path and upgrades. max_message: largest server message.
  NaudClient(const std::string& host, uint16_t port, const std::string& path, size_t max_message,
             int timeout_ms);

  void send_text(std::string_view text);
  // Waits up to timeout_ms for the next text or binary message, answering pings. The payload
  // stays valid until the next call.
  bool next_message(int timeout_ms, ws::Opcode& opcode, const uint8_t*& payload, size_t& size);
  void close();
  const std::string& failure() const { return failure_; }

 private:
  bool fill(int timeout_ms);  // reads more bytes; false on timeout or failure
  void send_frame(ws::Opcode opcode, std::string_view payload);

  producer::StreamSocket socket_;
  std::vector<uint8_t> buffer_;
  size_t begin_ = 0;  // unparsed bytes are buffer_[begin_, end_)
  size_t end_ = 0;
  std::string failure_;
};

}  // namespace syncd::audio_reader
