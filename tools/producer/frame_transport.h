// Where sync-producer's frames go: a syncd WebSocket session (control protocol v1) or a raw TCP
// sink (the baseline). Both are driven by the same paced loop in main.cpp. Single-threaded.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "frame_source.h"
#include "stream_socket.h"

namespace syncd::producer {

class FrameTransport {
 public:
  virtual ~FrameTransport() = default;

  // How FrameSource must frame the bytes, and with which key and stream id.
  virtual Framing framing() const = 0;
  virtual uint32_t mask_key() const = 0;
  virtual uint32_t stream_id() const = 0;

  // Sends one frame completely, or reports why it could not.
  virtual IoStatus send(FrameSource::WireFrame& frame) = 0;
  // Runs after every frame: handles what the peer said meanwhile. False when the connection has
  // ended and streaming must stop.
  virtual bool between_frames() = 0;
  // Ends the session politely (WebSocket Close and a short wait for the server's).
  virtual void finish() = 0;

  // Why the connection failed, for the error message.
  virtual std::string failure() const = 0;
  // {"type":"error"} messages received so far (always 0 for raw TCP).
  virtual uint64_t errors_received() const = 0;
};

struct StreamRequest {
  std::string name;
  FrameGeometry geometry;
  double fps = 0;  // 0: unpaced, no nominal rate is declared
  uint32_t slots = 4;
  bool quiet = false;  // do not echo server errors to stderr
  // When set: after stream.opened, ask for a one-use ticket and write its hex here (atomically),
  // so that a receiver started next to us can read the stream (docs/protocol.md, "Tickets").
  std::string ticket_file;
  uint32_t ticket_uses = 1;
};

// Connects to a syncd WebSocket URL, says hello and opens the stream. Throws ToolError:
// kExitRefused when the server answers with an error, kExitIo on connection/protocol failures.
std::unique_ptr<FrameTransport> open_websocket_transport(const std::string& url,
                                                         const StreamRequest& request);
// Connects to HOST:PORT ([v6]:PORT accepted) of a raw TCP sink. Throws ToolError.
std::unique_ptr<FrameTransport> open_raw_tcp_transport(const std::string& host_port);

}  // namespace syncd::producer
