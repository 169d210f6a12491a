// src/server units over real sockets: the writer's limits, control routing through a real
// Connection, and a consumer that stops reading. The loop runs on the test's thread; the peer is
// a plain socket the test reads or leaves unread.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "live_server.h"
#include "media/frame_pool.h"
#include "media/stream_registry.h"
#include "server/connection.h"
#include "server/control_router.h"
#include "server/server_config.h"
#include "server/socket_writer.h"

using namespace syncd;
using namespace syncd::server;

namespace {

using syncd::test::pump;  // turns the loop until a condition holds (live_server.h)

// ---------------------------------------------------------------------------------------------
// SocketWriter on one end of a socket pair; the test holds the other end.

struct WriterFixture : ::testing::Test, WriterListener {
  uv_loop_t loop;
  uv_pipe_t pipe;
  int peer = -1;
  int completions = 0;
  void on_write_complete(int) override { ++completions; }

  void SetUp() override {
    uv_loop_init(&loop);
    int fds[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    // Small kernel buffers, so a peer that does not read stalls writes within a few KiB.
    int small = 4096;
    ::setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    ::setsockopt(fds[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    uv_pipe_init(&loop, &pipe, 0);
    ASSERT_EQ(uv_pipe_open(&pipe, fds[0]), 0);
    peer = fds[1];
    ::fcntl(peer, F_SETFL, O_NONBLOCK);
  }
  void TearDown() override {
    uv_close(reinterpret_cast<uv_handle_t*>(&pipe), nullptr);
    uv_run(&loop, UV_RUN_DEFAULT);
    ::close(peer);
    uv_loop_close(&loop);
  }
  uv_stream_t* stream() { return reinterpret_cast<uv_stream_t*>(&pipe); }
  size_t drain_peer() {
    size_t total = 0;
    char buf[65536];
    for (;;) {
      const ssize_t n = ::recv(peer, buf, sizeof buf, 0);
      if (n <= 0) return total;
      total += size_t(n);
    }
  }
};

TEST_F(WriterFixture, CopiedBytesAreCappedPerConnection) {
  OutputBudget budget(64u << 20);
  WriterLimits limits;
  limits.max_queued_bytes = 64 * 1024;
  auto w = std::make_unique<SocketWriter>(stream(), budget, limits, *this);
  const std::string chunk(8 * 1024, 'x');
  int queued = 0;
  SendStatus last = SendStatus::kQueued;
  for (int i = 0; i < 100 && last == SendStatus::kQueued; ++i) {
    last = w->send_copy({chunk});
    if (last == SendStatus::kQueued) ++queued;
  }
  // The peer reads nothing: the cap, not the kernel, stops the queue.
  EXPECT_EQ(last, SendStatus::kConnectionCap);
  EXPECT_LE(w->queued_bytes(), limits.max_queued_bytes);
  EXPECT_GT(queued, 2);
  EXPECT_EQ(budget.used(), w->queued_bytes());
  // Once the peer reads, everything is written and the charge is given back.
  size_t read = 0;
  ASSERT_TRUE(pump(&loop, [&] {
    read += drain_peer();
    return w->writes_in_flight() == 0;
  }));
  read += drain_peer();
  EXPECT_EQ(read, size_t(queued) * chunk.size());
  EXPECT_EQ(budget.used(), 0u);
  EXPECT_EQ(w->send_copy({chunk}), SendStatus::kQueued);
  ASSERT_TRUE(pump(&loop, [&] {
    drain_peer();
    return w->writes_in_flight() == 0;
  }));
}

TEST_F(WriterFixture, TheProcessBudgetBindsAcrossWriters) {
  OutputBudget budget(40 * 1024);
  WriterLimits limits;  // 1 MiB per connection: the budget binds first
  SocketWriter a(stream(), budget, limits, *this);
  SocketWriter b(stream(), budget, limits, *this);
  const std::string chunk(16 * 1024, 'y');
  EXPECT_EQ(a.send_copy({chunk}), SendStatus::kQueued);
  EXPECT_EQ(b.send_copy({chunk}), SendStatus::kQueued);
  EXPECT_EQ(b.send_copy({chunk}), SendStatus::kProcessBudget);
  EXPECT_LE(budget.used(), budget.limit());
  ASSERT_TRUE(pump(&loop, [&] {
    drain_peer();
    return a.writes_in_flight() == 0 && b.writes_in_flight() == 0;
  }));
  EXPECT_EQ(budget.used(), 0u);
}

struct FrameDone {
  int calls = 0;
  int last_status = 1;
  static void on_done(void* self, int status) {
    auto* d = static_cast<FrameDone*>(self);
    ++d->calls;
    d->last_status = status;
  }
};

TEST_F(WriterFixture, FramesPinAtMostTheSlotCapAndReleaseWhenWritten) {
  OutputBudget budget(64u << 20);
  WriterLimits limits;
  limits.max_pinned_slots = 2;
  SocketWriter w(stream(), budget, limits, *this);
  media::FramePool* pool = media::FramePool::create(256 * 1024, 8);
  FrameDone done;
  std::vector<media::FrameSlot*> frames;
  int queued = 0;
  std::vector<SendStatus> results;
  for (int i = 0; i < 4; ++i) {
    media::FrameSlot* s = pool->acquire();
    std::memset(s->pixels, i, 256 * 1024);
    results.push_back(w.send_frame("HEAD", s, 256 * 1024, &FrameDone::on_done, &done));
    if (results.back() == SendStatus::kQueued) ++queued;
    media::FramePool::release(s);  // the publisher's reference goes; the writer's pin stays
  }
  EXPECT_EQ(queued, 2);
  EXPECT_EQ(results[2], SendStatus::kSlotCap);
  EXPECT_EQ(w.pinned_slots(), 2u);
  EXPECT_EQ(pool->slots_in_use(), 2u);  // only what the writer pinned
  size_t read = 0;
  ASSERT_TRUE(pump(&loop, [&] {
    read += drain_peer();
    return done.calls == 2;
  }));
  EXPECT_EQ(done.last_status, 0);
  read += drain_peer();
  EXPECT_EQ(read, 2 * (4 + 256 * 1024u));
  EXPECT_EQ(w.pinned_slots(), 0u);
  EXPECT_EQ(pool->slots_in_use(), 0u);
  pool->drop_ref();
}

TEST_F(WriterFixture, AWriterThatMakesNoProgressIsStalled) {
  OutputBudget budget(64u << 20);
  WriterLimits limits;
  limits.write_timeout_ms = 30;
  SocketWriter w(stream(), budget, limits, *this);
  EXPECT_EQ(w.send_copy({std::string(256 * 1024, 'z')}), SendStatus::kQueued);
  uv_run(&loop, UV_RUN_NOWAIT);
  EXPECT_FALSE(w.stalled(core::monotonic_ns()));
  usleep(60'000);
  uv_run(&loop, UV_RUN_NOWAIT);
  EXPECT_TRUE(w.stalled(core::monotonic_ns()));  // the peer took a few KiB at most
  ASSERT_TRUE(pump(&loop, [&] {
    drain_peer();
    return w.writes_in_flight() == 0;
  }));
  EXPECT_FALSE(w.stalled(core::monotonic_ns() + 1'000'000'000));  // nothing waits
}

// ---------------------------------------------------------------------------------------------
// A real Connection with a fake host: routing of control messages, and a peer that stops reading.

class FakeHost final : public ConnectionHost {
 public:
  explicit FakeHost(ServerConfig cfg) : config_(std::move(cfg)), budget_(64u << 20) {}
  const ServerConfig& config() const override { return config_; }
  ServerCounters& counters() override { return counters_; }
  OutputBudget& output_budget() override { return budget_; }
  media::StreamRegistry& registry() override { return registry_; }
  void on_http_request(Connection& c, const http::Request&, char* rest, size_t n) override {
    c.upgrade_to_websocket("HTTP/1.1 101 Switching Protocols\r\n\r\n", rest, n);
  }
  void on_control_message(Connection& c, std::string_view text) override { router.route(c, text); }
  void connection_closed(Connection&) override { closed = true; }
  bool others_waiting(int) override { return false; }
  void resume_after_poll(Connection& c) override { c.resume_reading(); }
  std::span<uint8_t> discard_buffer() override { return {discard_, sizeof discard_}; }

  ControlRouter router;
  bool closed = false;

 private:
  ServerConfig config_;
  ServerCounters counters_;
  OutputBudget budget_;
  media::StreamRegistry registry_;
  uint8_t discard_[4096];
};

// A client frame: FIN + opcode, masked with key 0 (so the payload goes as it is).
std::string client_text(std::string_view payload) {
  std::string f;
  f.push_back(char(0x81));
  if (payload.size() < 126) {
    f.push_back(char(0x80 | payload.size()));
  } else {
    f.push_back(char(0x80 | 126));
    f.push_back(char(payload.size() >> 8));
    f.push_back(char(payload.size() & 0xFF));
  }
  f.append(4, '\0');
  f.append(payload);
  return f;
}

struct ConnectionFixture : ::testing::Test {
  uv_loop_t loop;
  uv_tcp_t listener;
  std::unique_ptr<FakeHost> host;
  Connection* connection = nullptr;
  int client = -1;
  std::string received;  // bytes from the server not yet parsed

  void start(ServerConfig cfg) {
    uv_loop_init(&loop);
    host = std::make_unique<FakeHost>(std::move(cfg));
    uv_tcp_init(&loop, &listener);
    sockaddr_in addr{};
    uv_ip4_addr("127.0.0.1", 0, &addr);
    ASSERT_EQ(uv_tcp_bind(&listener, reinterpret_cast<sockaddr*>(&addr), 0), 0);
    listener.data = this;
    ASSERT_EQ(uv_listen(reinterpret_cast<uv_stream_t*>(&listener), 4,
                        [](uv_stream_t* l, int) {
                          auto* self = static_cast<ConnectionFixture*>(l->data);
                          self->connection = new Connection(*self->host, 1);
                          uv_tcp_init(&self->loop, self->connection->handle());
                          uv_accept(l, reinterpret_cast<uv_stream_t*>(self->connection->handle()));
                          self->connection->start();
                        }),
              0);
    int len = sizeof addr;
    uv_tcp_getsockname(&listener, reinterpret_cast<sockaddr*>(&addr), &len);
    client = ::socket(AF_INET, SOCK_STREAM, 0);
    int small = 8192;
    ::setsockopt(client, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    ASSERT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ::fcntl(client, F_SETFL, O_NONBLOCK);
    ASSERT_TRUE(pump(&loop, [&] { return connection != nullptr; }));
    send("GET /ws HTTP/1.1\r\nHost: x\r\n\r\n");
    ASSERT_TRUE(pump(&loop, [&] {
      read_some();
      return received.find("\r\n\r\n") != std::string::npos;
    }));
    received.erase(0, received.find("\r\n\r\n") + 4);
  }
  void TearDown() override {
    if (connection && !host->closed) connection->destroy();
    uv_close(reinterpret_cast<uv_handle_t*>(&listener), nullptr);
    uv_run(&loop, UV_RUN_DEFAULT);
    if (client >= 0) ::close(client);
    uv_loop_close(&loop);
  }
  void send(std::string_view bytes) {
    size_t at = 0;
    while (at < bytes.size()) {
      const ssize_t n = ::send(client, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
      if (n > 0) {
        at += size_t(n);
      } else {
        uv_run(&loop, UV_RUN_NOWAIT);  // the server's socket buffer is full: let it read
      }
    }
  }
  void read_some() {
    char buf[65536];
    ssize_t n;
    while ((n = ::recv(client, buf, sizeof buf, 0)) > 0) received.append(buf, size_t(n));
  }
  // The next server text message, or "" when none arrives in time.
  std::string next_text(int ms = 2000) {
    std::string out;
    pump(
        &loop,
        [&] {
          read_some();
          if (received.size() < 2) return false;
          size_t len = uint8_t(received[1]) & 0x7F, head = 2;
          if (len == 126) {
            if (received.size() < 4) return false;
            len = (size_t(uint8_t(received[2])) << 8) | uint8_t(received[3]);
            head = 4;
          }
          if (received.size() < head + len) return false;
          out = received.substr(head, len);
          received.erase(0, head + len);
          return true;
        },
        ms);
    return out;
  }
};

TEST_F(ConnectionFixture, ControlMessagesAreRoutedByTheTable) {
  start(ServerConfig{});
  int stats_calls = 0;
  host->router.add<control::Hello>(
      "",
      [](Connection& c, const control::ControlMessage&) {
        c.set_hello_done();
        c.send_text(R"({"type":"welcome"})");
      },
      /*hello_first=*/false);
  host->router.add<control::StatsRequest>("stats",
                                          [&](Connection& c, const control::ControlMessage&) {
                                            ++stats_calls;
                                            c.send_text(R"({"type":"stats"})");
                                          });
  host->router.add<control::Ping>("ping", [](Connection&, const control::ControlMessage&) {});
  host->router.add<control::Credit>("stats", [](Connection&, const control::ControlMessage&) {});
  host->router.refuse<control::AudioRead>("audio_unavailable", "no audio here");
  EXPECT_EQ(host->router.capabilities(), (std::vector<std::string>{"stats", "ping"}));

  send(client_text(R"({"type":"stats"})"));
  EXPECT_NE(next_text().find("hello_required"), std::string::npos);
  send(client_text(R"({"type":"hello","protocol":1})"));
  EXPECT_EQ(next_text(), R"({"type":"welcome"})");
  send(client_text(R"({"type":"stats"})"));
  EXPECT_EQ(next_text(), R"({"type":"stats"})");
  EXPECT_EQ(stats_calls, 1);
  send(client_text(R"({"type":"audio.read"})"));
  EXPECT_NE(next_text().find("audio_unavailable"), std::string::npos);
  send(client_text(R"({"type":"ticket.create","stream":1})"));  // nobody registered it
  EXPECT_NE(next_text().find("unknown_type"), std::string::npos);
  send(client_text(R"({"type":"no.such"})"));
  EXPECT_NE(next_text().find("unknown_type"), std::string::npos);
  EXPECT_EQ(host->counters().control_errors, 4u);
}

TEST_F(ConnectionFixture, APeerThatStopsReadingPausesItsRequestsInsteadOfGrowing) {
  ServerConfig cfg;
  cfg.writer.max_queued_bytes = 64 * 1024;
  start(cfg);
  host->router.add<control::Ping>(
      "ping",
      [](Connection& c, const control::ControlMessage&) {
        c.send_text(std::string(R"({"type":"pong","pad":")") + std::string(2000, 'p') + "\"}");
      },
      /*hello_first=*/false);
  // 400 requests of ~2 KB replies each (800 KB) from a peer that reads nothing meanwhile.
  const std::string ping = client_text(R"({"type":"ping"})");
  std::string burst;
  for (int i = 0; i < 400; ++i) burst += ping;
  ::send(client, burst.data(), burst.size(), MSG_NOSIGNAL);
  pump(
      &loop, [] { return false; }, 300);
  EXPECT_GE(host->counters().reads_paused_for_output, 1u);
  EXPECT_LE(connection->writer().queued_bytes(), cfg.writer.max_queued_bytes);
  EXPECT_FALSE(host->closed);
  EXPECT_EQ(host->counters().slow_consumer_closes, 0u);
  // Once it reads, every request is answered.
  int pongs = 0;
  while (pongs < 400) {
    const std::string t = next_text();
    if (t.empty()) break;
    ++pongs;
  }
  EXPECT_EQ(pongs, 400);
  EXPECT_FALSE(host->closed);
}

TEST_F(ConnectionFixture, AStalledPeerIsClosedAfterTheWriteTimeout) {
  ServerConfig cfg;
  cfg.writer.write_timeout_ms = 50;
  cfg.writer.max_queued_bytes = 16u << 20;
  start(cfg);
  host->router.add<control::Ping>(
      "ping",
      [](Connection& c, const control::ControlMessage&) {
        // More than loopback's kernel buffers hold, so the write cannot complete unread.
        c.send_text(std::string(R"({"type":"pong","pad":")") + std::string(12u << 20, 'p') + "\"}");
      },
      /*hello_first=*/false);
  send(client_text(R"({"type":"ping"})"));
  ASSERT_TRUE(pump(&loop, [&] { return connection->writer().writes_in_flight() == 1; }));
  connection->check_timeouts(core::monotonic_ns());
  EXPECT_EQ(host->counters().write_timeouts, 0u);  // not yet
  pump(
      &loop, [] { return false; }, 120);
  ASSERT_FALSE(host->closed);
  connection->check_timeouts(core::monotonic_ns());
  EXPECT_TRUE(pump(&loop, [&] { return host->closed; }));
  EXPECT_EQ(host->counters().write_timeouts, 1u);
}

}  // namespace
