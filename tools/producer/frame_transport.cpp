#include "frame_transport.h"

#include <cerrno>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string_view>

#include "tool_error.h"
#include "ws_client.h"

namespace syncd::producer {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;  // outgoing messages keep "type" first for readable logs

constexpr int kSetupTimeoutMs = 5'000;
constexpr int kCloseWaitMs = 1'000;

// "code: message" of a server error reply. Tolerates any field types: it reads what the server
// sent and must not throw on the streaming path.
std::string describe_error(const json& message) {
  std::string code = "?";
  if (auto it = message.find("code"); it != message.end()) {
    code = it->is_string() ? it->get<std::string>() : it->dump();
  }
  if (auto it = message.find("message"); it != message.end() && it->is_string()) {
    code += ": " + it->get<std::string>();
  }
  return code;
}

// The "type" of a control message, or "" when it has none (or not a string).
std::string message_type(const json& message) {
  const auto type = message.find("type");
  return type != message.end() && type->is_string() ? type->get<std::string>() : std::string{};
}

class WebSocketTransport final : public FrameTransport {
 public:
  WebSocketTransport(const std::string& url, const StreamRequest& request)
      : client_(WsClient::parse_url(url), kSetupTimeoutMs), quiet_(request.quiet) {
    client_.send_text(
        ordered_json{{"type", "hello"}, {"protocol", 1}, {"client", "sync-producer"}}.dump());
    expect_reply("welcome", "hello");

    const FrameGeometry& g = request.geometry;
    ordered_json open = {{"type", "stream.open"},
                         {"name", request.name},
                         {"width", g.width},
                         {"height", g.height},
                         {"format", pixel_format_name(g.format)},
                         {"slots", request.slots}};
    // "fps" is the stream's nominal rate; unpaced runs (--fps 0) have none to declare.
    if (request.fps > 0) open["fps"] = request.fps;
    client_.send_text(open.dump());
    const json opened = expect_reply("stream.opened", "stream.open");
    const auto id = opened.find("stream");
    if (id == opened.end() || !id->is_number_unsigned()) {
      throw ToolError(kExitIo, "stream.opened carries no numeric 'stream' id: " + opened.dump());
    }
    stream_id_ = id->get<uint32_t>();
    if (!request.ticket_file.empty()) write_ticket(request.ticket_file, request.ticket_uses);
  }

  Framing framing() const override { return Framing::kWebSocket; }
  uint32_t mask_key() const override { return client_.data_mask_key(); }
  uint32_t stream_id() const override { return stream_id_; }

  IoStatus send(FrameSource::WireFrame& frame) override {
    return client_.send_frame(frame.iov.data(), frame.iov_count);
  }

  bool between_frames() override {
    const bool alive = client_.service();
    drain_texts();
    return alive;
  }

  void finish() override {
    // After a failure the cause has been reported already; only a healthy session that gets no
    // answer to its Close deserves a warning.
    const bool healthy = client_.failure().empty() && !client_.peer_closed();
    const bool answered = client_.close(ws::close_code::kNormal, kCloseWaitMs);
    drain_texts();
    if (healthy && !answered && !quiet_) {
      std::fprintf(stderr, "sync-producer: no Close from the server within %d ms (%s)\n",
                   kCloseWaitMs, client_.end_description().c_str());
    }
  }

  std::string failure() const override { return client_.end_description(); }
  uint64_t errors_received() const override { return errors_received_; }

 private:
  // Waits for a reply of type `expected`, skipping unrelated notifications. An error reply means
  // the server refused `request_name`.
  json expect_reply(std::string_view expected, std::string_view request_name) {
    for (;;) {
      const std::string text = client_.wait_for_text(kSetupTimeoutMs);
      json message = json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (message.is_discarded() || !message.is_object()) {
        throw ToolError(kExitIo,
                        "the server sent a text message that is not a JSON object: " + text);
      }
      const std::string type = message_type(message);
      if (type == expected) return message;
      if (type == "error") {
        ++errors_received_;
        throw ToolError(kExitRefused, "the server refused " + std::string(request_name) + ": " +
                                          describe_error(message));
      }
    }
  }

  // Asks for a ticket for our stream that `uses` receivers may redeem, and publishes it as
  // PATH.tmp renamed to PATH, so a receiver polling for PATH never reads a half-written ticket.
  void write_ticket(const std::string& path, uint32_t uses) {
    client_.send_text(ordered_json{
        {"type", "ticket.create"},
        {"stream", stream_id_},
        {"uses", uses},
        {"ttl_s", 600}}.dump());
    const json reply = expect_reply("ticket", "ticket.create");
    const auto ticket = reply.find("ticket");
    if (ticket == reply.end() || !ticket->is_string()) {
      throw ToolError(kExitIo, "the ticket reply carries no 'ticket' string: " + reply.dump());
    }
    const std::string tmp = path + ".tmp";
    FILE* file = std::fopen(tmp.c_str(), "w");
    if (!file) throw ToolError(kExitIo, "cannot write " + tmp + ": " + errno_text(errno));
    const std::string hex = ticket->get<std::string>();
    const bool written = std::fprintf(file, "%s\n", hex.c_str()) > 0;
    if (std::fclose(file) != 0 || !written || std::rename(tmp.c_str(), path.c_str()) != 0) {
      throw ToolError(kExitIo, "cannot write the ticket to " + path + ": " + errno_text(errno));
    }
  }

  // Server messages are rare while streaming; parsing them allocates, frames never do.
  void drain_texts() {
    while (client_.next_text(text_)) {
      const json message = json::parse(text_, nullptr, /*allow_exceptions=*/false);
      if (message.is_object() && message_type(message) == "error") {
        ++errors_received_;
        if (!quiet_) {
          std::fprintf(stderr, "sync-producer: server error %s\n", describe_error(message).c_str());
        }
      }
    }
  }

  WsClient client_;
  bool quiet_;
  uint32_t stream_id_ = 0;
  uint64_t errors_received_ = 0;
  std::string text_;
};

class RawTcpTransport final : public FrameTransport {
 public:
  RawTcpTransport(const std::string& host, uint16_t port)
      : socket_(StreamSocket::connect(host, port)) {}

  Framing framing() const override { return Framing::kRawTcp; }
  uint32_t mask_key() const override { return 0; }
  uint32_t stream_id() const override { return 0; }

  IoStatus send(FrameSource::WireFrame& frame) override {
    return socket_.write_all(frame.iov.data(), frame.iov_count, nullptr, kStallTimeoutMs);
  }
  bool between_frames() override { return true; }
  // A FIN after the last byte: the sink sees EOF at a frame boundary.
  void finish() override {
    socket_.shutdown_write();
    socket_.close();
  }
  std::string failure() const override { return socket_.last_error(); }
  uint64_t errors_received() const override { return 0; }

 private:
  StreamSocket socket_;
};

}  // namespace

std::unique_ptr<FrameTransport> open_websocket_transport(const std::string& url,
                                                         const StreamRequest& request) {
  return std::make_unique<WebSocketTransport>(url, request);
}

std::unique_ptr<FrameTransport> open_raw_tcp_transport(const std::string& host_port) {
  std::string host;
  std::string_view port_text;
  const std::string_view spec(host_port);
  if (!spec.empty() && spec.front() == '[') {
    const size_t close = spec.find("]:");
    if (close == std::string_view::npos) throw ToolError(kExitUsage, "--raw-tcp wants [V6]:PORT");
    host = std::string(spec.substr(1, close - 1));
    port_text = spec.substr(close + 2);
  } else {
    const size_t colon = spec.rfind(':');
    if (colon == std::string_view::npos) throw ToolError(kExitUsage, "--raw-tcp wants HOST:PORT");
    host = std::string(spec.substr(0, colon));
    port_text = spec.substr(colon + 1);
  }
  unsigned long port = 0;
  try {
    size_t used = 0;
    port = std::stoul(std::string(port_text), &used);
    if (used != port_text.size()) port = 0;
  } catch (const std::exception&) {
    port = 0;
  }
  if (host.empty() || port == 0 || port > 65535) {
    throw ToolError(kExitUsage, "--raw-tcp wants HOST:PORT, got " + host_port);
  }
  return std::make_unique<RawTcpTransport>(host, static_cast<uint16_t>(port));
}

}  // namespace syncd::producer
