// A real server::Server on an ephemeral loopback port, whose loop the test's thread turns, and
// plain-socket clients of it: one HTTP exchange, a WebSocket control client, a frame producer.
// Every wait turns the server's loop until a condition holds or a generous deadline passes.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/text.h"
#include "loop_pump.h"
#include "media/frame_header.h"
#include "server/server.h"
#include "server/server_config.h"

namespace syncd::test {

// A configuration for tests: loopback, any free port, no publishers of its own (no worker
// threads), WHEP off unless a test turns it on.
inline server::ServerConfig test_config() {
  server::ServerConfig cfg;
  cfg.host = "127.0.0.1";
  cfg.port = 0;
  cfg.publishers = {};
  cfg.whep.reset();
  return cfg;
}

class LiveServer {
 public:
  explicit LiveServer(server::ServerConfig cfg) : server_(std::make_unique<server::Server>(cfg)) {
    started_ = server_->start() == 0;
  }
  ~LiveServer() {
    if (!server_) return;
    if (started_) {
      server_->stop();
      server_->run();  // until every handle (connections, services, timers) has closed
    }
    server_.reset();
  }
  LiveServer(const LiveServer&) = delete;
  LiveServer& operator=(const LiveServer&) = delete;

  bool started() const { return started_; }
  server::Server& server() { return *server_; }
  uv_loop_t* loop() { return server_->loop(); }
  uint16_t port() const { return server_->bound_port(); }
  bool pump_until(const std::function<bool()>& done, int ms = kWaitMs) {
    return pump(loop(), done, ms);
  }
  void pump_for(int ms) {
    pump(
        loop(), [] { return false; }, ms);
  }
  nlohmann::json stats() { return nlohmann::json::parse(server_->stats_json()); }
  // The /stats entry of the stream called `name` (open or retained closed), or null.
  nlohmann::json stream_stats(std::string_view name) {
    const nlohmann::json all = stats();  // kept: the loop below refers into it
    for (const auto& s : all["streams"])
      if (s["name"] == name) return s;
    return nullptr;
  }

 private:
  std::unique_ptr<server::Server> server_;
  bool started_ = false;
};

// A non-blocking TCP socket connected to the server.
inline int connect_to(LiveServer& server) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(server.port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  ::fcntl(fd, F_SETFL, O_NONBLOCK);
  return fd;
}

// Writes all of `bytes`, turning the loop while the socket's buffer is full.
inline bool send_all(LiveServer& server, int fd, std::string_view bytes) {
  size_t at = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMs);
  while (at < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
    if (n > 0) {
      at += size_t(n);
    } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      return false;
    } else {
      if (std::chrono::steady_clock::now() > end) return false;
      uv_run(server.loop(), UV_RUN_NOWAIT);
    }
  }
  return true;
}

// Appends what the socket has to `out`; false once the peer has closed (or the socket failed).
inline bool read_available(int fd, std::string& out) {
  char buf[65536];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      out.append(buf, size_t(n));
      continue;
    }
    if (n == 0) return false;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

struct HttpResponse {
  int status = 0;  // 0: no response came
  std::string head;
  std::string body;

  // The value of header `name` (case-insensitive), or "" when absent.
  std::string header(std::string_view name) const {
    size_t at = head.find("\r\n");
    while (at != std::string::npos && at + 2 < head.size()) {
      const size_t end = head.find("\r\n", at + 2);
      const std::string_view line = std::string_view(head).substr(
          at + 2, (end == std::string::npos ? head.size() : end) - at - 2);
      const size_t colon = line.find(':');
      if (colon != std::string_view::npos && core::equals_ignore_case(line.substr(0, colon), name))
        return std::string(core::trim(line.substr(colon + 1)));
      at = end;
    }
    return {};
  }
  bool has_header(std::string_view name) const {
    return head.find("\r\n" + std::string(name) + ":") != std::string::npos;
  }
};

// Splits "HTTP/1.1 NNN ...\r\n...\r\n\r\nbody"; status 0 when the head is incomplete.
inline HttpResponse parse_response(const std::string& bytes) {
  HttpResponse r;
  const size_t end = bytes.find("\r\n\r\n");
  if (end == std::string::npos || bytes.compare(0, 9, "HTTP/1.1 ") != 0) return r;
  r.head = bytes.substr(0, end);
  r.body = bytes.substr(end + 4);
  r.status = std::atoi(bytes.c_str() + 9);
  return r;
}

// One request on a new connection; the reply is read until the server closes (it closes after
// every response but a stream's or a WebSocket's).
inline HttpResponse http_exchange(LiveServer& server, std::string_view request) {
  const int fd = connect_to(server);
  if (fd < 0) return {};
  std::string received;
  bool open = send_all(server, fd, request);
  server.pump_until([&] {
    open = open && read_available(fd, received);
    return !open;
  });
  ::close(fd);
  return parse_response(received);
}

// "GET path HTTP/1.1" with a loopback Host and `headers` ("Name: value\r\n" each).
inline std::string request_text(std::string_view method, std::string_view target,
                                std::string_view headers = {}, std::string_view body = {}) {
  std::string r = std::string(method) + " " + std::string(target) +
                  " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + std::string(headers);
  if (!body.empty()) r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  return r + "\r\n" + std::string(body);
}

// A client's WebSocket frame: FIN + opcode, masked with the zero key (the payload as it is).
inline std::string client_frame(uint8_t opcode, std::string_view payload) {
  std::string f;
  f.push_back(char(0x80 | opcode));
  if (payload.size() < 126) {
    f.push_back(char(0x80 | payload.size()));
  } else if (payload.size() <= 0xFFFF) {
    f.push_back(char(0x80 | 126));
    f.push_back(char(payload.size() >> 8));
    f.push_back(char(payload.size() & 0xFF));
  } else {
    f.push_back(char(0x80 | 127));
    for (int shift = 56; shift >= 0; shift -= 8)
      f.push_back(char(uint64_t(payload.size()) >> shift));
  }
  f.append(4, '\0');
  f.append(payload);
  return f;
}

// A control connection: upgraded to a WebSocket at construction; text messages in and out.
class WsClient {
 public:
  explicit WsClient(LiveServer& server, std::string_view extra_headers = {}) : server_(server) {
    fd_ = connect_to(server);
    if (fd_ < 0) return;
    send_all(server_, fd_,
             request_text("GET", "/ws",
                          "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                          "Sec-WebSocket-Version: 13\r\n"
                          "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" +
                              std::string(extra_headers)));
    server_.pump_until([&] {
      open_ = read_available(fd_, buffer_) && open_;
      return buffer_.find("\r\n\r\n") != std::string::npos || !open_;
    });
    const size_t end = buffer_.find("\r\n\r\n");
    if (end == std::string::npos) return;
    upgrade_status_ = parse_response(buffer_).status;
    buffer_.erase(0, end + 4);
  }
  ~WsClient() { close(); }
  WsClient(const WsClient&) = delete;
  WsClient& operator=(const WsClient&) = delete;

  bool upgraded() const { return upgrade_status_ == 101; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  bool send_text(std::string_view json) { return send_all(server_, fd_, client_frame(0x1, json)); }
  bool send_binary(std::string_view bytes) {
    return send_all(server_, fd_, client_frame(0x2, bytes));
  }
  bool send_raw(std::string_view bytes) { return send_all(server_, fd_, bytes); }
  // The next text message from the server, or "" when none comes within `ms`. Binary
  // messages before it are set aside for next_binary().
  std::string next_text(int ms = kWaitMs) { return next_message(0x1, ms); }
  // The next binary message (an audio packet), or "" when none comes within `ms`.
  std::string next_binary(int ms = kWaitMs) { return next_message(0x2, ms); }
  nlohmann::json next_json(int ms = kWaitMs) {
    const std::string text = next_text(ms);
    return text.empty() ? nlohmann::json() : nlohmann::json::parse(text);
  }
  nlohmann::json request(const nlohmann::json& message) {
    send_text(message.dump());
    return next_json();
  }
  // hello, answered by welcome.
  nlohmann::json hello() { return request({{"type", "hello"}, {"protocol", 1}}); }
  // Opens a stream and waits for stream.opened (or the error).
  nlohmann::json open_stream(const nlohmann::json& open) {
    nlohmann::json m = open;
    m["type"] = "stream.open";
    return request(m);
  }
  // Whether the server closed the connection (within `ms`).
  bool closed_by_server(int ms = kWaitMs) {
    server_.pump_until(
        [&] {
          open_ = read_available(fd_, buffer_) && open_;
          return !open_;
        },
        ms);
    return !open_;
  }
  int fd() const { return fd_; }

 private:
  std::string next_message(uint8_t opcode, int ms) {
    std::string out;
    auto take_kept = [&] {
      auto& kept = opcode == 0x1 ? texts_ : binaries_;
      if (kept.empty()) return false;
      out = std::move(kept.front());
      kept.erase(kept.begin());
      return true;
    };
    server_.pump_until(
        [&] {
          if (take_kept()) return true;
          open_ = read_available(fd_, buffer_) && open_;
          while (take_frame()) {
            if (take_kept()) return true;
          }
          return !open_;
        },
        ms);
    return out;
  }
  // One whole server frame off the buffer into texts_ or binaries_ (control frames are
  // dropped): true when one was taken.
  bool take_frame() {
    if (buffer_.size() < 2) return false;
    const uint8_t opcode = uint8_t(buffer_[0]) & 0x0F;
    size_t len = uint8_t(buffer_[1]) & 0x7F, head = 2;
    if (len == 126) {
      if (buffer_.size() < 4) return false;
      len = (size_t(uint8_t(buffer_[2])) << 8) | uint8_t(buffer_[3]);
      head = 4;
    } else if (len == 127) {
      if (buffer_.size() < 10) return false;
      len = 0;
      for (int i = 0; i < 8; ++i) len = (len << 8) | uint8_t(buffer_[2 + i]);
      head = 10;
    }
    if (buffer_.size() < head + len) return false;
    if (opcode == 0x1) texts_.push_back(buffer_.substr(head, len));
    if (opcode == 0x2) binaries_.push_back(buffer_.substr(head, len));
    buffer_.erase(0, head + len);
    return true;
  }

  LiveServer& server_;
  int fd_ = -1;
  bool open_ = true;
  int upgrade_status_ = 0;
  std::string buffer_;
  std::vector<std::string> texts_, binaries_;  // whole messages not yet asked for
};

// A binary frame message: the 56-byte header for `stream`, then `payload`.
inline std::string frame_message(uint32_t stream, uint64_t sequence, std::string_view payload,
                                 uint32_t width = 0, uint32_t height = 0, uint32_t format = 0) {
  media::FrameHeader h;
  h.stream_id = stream;
  h.sequence = sequence;
  h.capture_time_us = sequence * 1000;
  h.width = width;
  h.height = height;
  h.format = format;
  std::string out(media::kFrameHeaderBytes, '\0');
  media::write_frame_header(h, reinterpret_cast<uint8_t*>(out.data()));
  out.append(payload);
  return out;
}

// Whether a JSON array (capabilities, topics) holds `item`.
inline bool has(const nlohmann::json& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// A live server with one producer that has said hello and opened a side x side rgba8 stream
// named "main": where the ingest and receiver tests start.
struct OneStreamFixture : ::testing::Test {
  std::unique_ptr<LiveServer> live;
  std::unique_ptr<WsClient> producer;
  uint32_t stream = 0;

  void start(server::ServerConfig cfg, int side) {
    live = std::make_unique<LiveServer>(std::move(cfg));
    ASSERT_TRUE(live->started());
    producer = std::make_unique<WsClient>(*live);
    ASSERT_EQ(producer->hello()["type"], "welcome");
    const nlohmann::json opened =
        producer->open_stream({{"name", "main"}, {"width", side}, {"height", side}});
    ASSERT_EQ(opened["type"], "stream.opened") << opened;
    stream = opened["stream"];
  }
  void TearDown() override {
    producer.reset();
    live.reset();
  }
};

}  // namespace syncd::test
