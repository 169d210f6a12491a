// syncd's server: one libuv loop that owns the listener, the connections, the stream registry
// and its publishers, the built-in pattern source and the telemetry timers.
//
// Thread: everything here runs on the loop thread, the thread that calls run(). The only entry
// from elsewhere is a signal (SIGINT/SIGTERM), which libuv delivers on the loop thread.
#pragma once

#include <uv.h>

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "audio/backend.h"
#include "media/pattern_source.h"
#include "media/publishers/shm_publisher.h"
#include "server/pose_service.h"
#include "server/stream_receivers.h"
#include "server/ticket_store.h"
#include "media/stream_registry.h"
#include "telemetry/stage_stats.h"

namespace syncd::server {

class AudioService;
class Connection;

struct ServerConfig {
  std::string host = "127.0.0.1";
  uint16_t port = 54997;  // 0: pick a free port
  std::vector<std::string> publishers = {"test"};  // "test", "shm"
  media::ShmPublisherConfig shm;
  std::optional<media::PatternConfig> pattern;
  std::optional<audio::AudioSourceConfig> audio;  // --audio-source
  std::vector<std::string> allowed_origins;  // exact Origin values allowed besides loopback
  size_t max_connections = 1024;
  size_t max_header_bytes = 8192;
  size_t max_message_bytes = 64ull << 20;  // data messages (frames); 1009 above
  size_t max_text_bytes = 1ull << 20;      // control messages
  uint32_t handshake_timeout_ms = 10'000;  // HTTP request head must complete within this
  uint32_t idle_timeout_ms = 120'000;      // WebSocket: nothing received (pings are sent at half)
  size_t read_window_bytes = 256 * 1024;   // largest read straight into a frame slot
  size_t read_turn_bytes = 1024 * 1024;    // bytes one connection reads per loop turn
  size_t receive_low_water_bytes = 256 * 1024;  // SO_RCVLOWAT while a frame's payload arrives
  size_t max_pending_write_bytes = 16ull << 20;  // a peer that reads slower is disconnected
  bool status_line = false;                // live status line on stderr
  std::string headtracker;                 // "", "auto", "/dev/hidrawN" or "replay:FILE"
  uint32_t receiver_max_frames = 2;        // HTTP stream receivers: frames in flight at most
  media::StreamLimits stream_limits;
};

// Counters of the server itself (bad input and connections). Exact; loop thread only.
struct ServerCounters {
  uint64_t connections_accepted = 0;
  uint64_t connections_refused = 0;  // over max_connections
  uint64_t handshake_timeouts = 0;
  uint64_t idle_timeouts = 0;
  uint64_t slow_consumer_closes = 0;
  uint64_t http_responses[6] = {};  // by status class: index status/100
  uint64_t http_bad_requests = 0;   // 400
  uint64_t http_headers_too_large = 0;  // 431
  uint64_t http_not_found = 0;      // 404
  uint64_t origin_refused = 0;      // 403
  uint64_t tickets_refused = 0;     // 403 on /streams/
  uint64_t version_refused = 0;     // 426
  uint64_t ws_protocol_errors = 0;  // closes we initiated for 1002/1007/1009
  uint64_t ws_close_1002 = 0;
  uint64_t ws_close_1007 = 0;
  uint64_t ws_close_1009 = 0;
  uint64_t control_errors = 0;      // error replies to control messages
  uint64_t frames_rejected_unknown_stream = 0;  // frames naming no stream of theirs
  uint64_t frames_rejected_bad_header = 0;
  // Read turns that reached --read-turn-kb: yielded to others waiting, or went on (nobody was).
  uint64_t read_turns_yielded = 0;
  uint64_t read_turns_continued = 0;
};

class Server {
 public:
  explicit Server(ServerConfig config);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and listens; prints "syncd listening on HOST:PORT" on stdout. Returns 0 or a negative
  // libuv error code.
  int start();
  // Runs the loop until a signal (or stop()) ends it and every handle is closed.
  int run();
  // Begins an orderly shutdown: stop accepting, close WebSockets with 1001, release everything.
  void stop();

  uint16_t bound_port() const { return bound_port_; }
  uv_loop_t* loop() { return &loop_; }
  const ServerConfig& config() const { return config_; }
  media::StreamRegistry& registry() { return registry_; }
  ServerCounters& counters() { return counters_; }
  AudioService* audio() { return audio_.get(); }  // nullptr without --audio-source
  StreamReceivers& receivers() { return *receivers_; }
  TicketStore& tickets() { return tickets_; }
  // nullptr when syncd runs without --headtracker.
  PoseService* pose() { return pose_.get(); }
  bool stopping() const { return stopping_; }

  // A scratch buffer that frames being discarded are read into (one loop thread, one reader at a
  // time: its content is never looked at).
  uint8_t* discard_buffer() { return discard_.get(); }
  size_t discard_buffer_bytes() const { return config_.read_window_bytes; }

  std::string stats_json();
  std::string metrics_text();
  // Called by a connection from its close callback.
  void forget(Connection* connection);
  // The connection paused its reading for this turn; resume it once the loop has polled.
  void resume_after_poll(Connection* connection);
  // Whether anything besides the socket own_fd wants the loop now: a due timer, a pending
  // callback, or another ready descriptor. A connection that used up its read turn yields only
  // then; with nobody waiting, stopping and restarting its reads would cost two epoll_ctl calls
  // and a loop turn for nothing (~0.1 ms a 1080p frame). Loop thread.
  bool others_waiting(int own_fd);

 private:
  static void on_connection(uv_stream_t* listener, int status);
  static void on_signal(uv_signal_t* handle, int signum);
  static void on_tick(uv_timer_t* timer);
  static void on_pattern_timer(uv_timer_t* timer);
  static void on_check(uv_check_t* check);
  static void on_prepare(uv_prepare_t* prepare);
  void sweep_connections(uint64_t now_ns);
  void print_status_line();
  void close_shutdown_timer();

  ServerConfig config_;
  uv_loop_t loop_;
  uv_tcp_t listener_;
  uv_signal_t sigint_;
  uv_signal_t sigterm_;
  uv_timer_t tick_timer_;
  uv_timer_t pattern_timer_;
  uv_timer_t shutdown_timer_;
  uv_check_t resume_check_;
  // Runs once per loop iteration, right before the loop polls: measures the iteration's busy time.
  uv_prepare_t busy_prepare_;
  uint64_t last_prepare_ns_ = 0;
  uint64_t last_idle_ns_ = 0;
  // Busy time of each loop iteration (timers, I/O callbacks, check and close phases; the time
  // spent waiting in epoll excluded): how long a ready socket can wait for the loop.
  telemetry::StageStats loop_busy_;
  std::vector<Connection*> paused_;    // reading paused until the next check phase
  std::vector<Connection*> resuming_;  // being resumed in on_check
  bool listening_ = false;
  bool stopping_ = false;
  bool shutdown_timer_closed_ = false;
  uint16_t bound_port_ = 0;
  uint64_t next_connection_id_ = 1;
  uint64_t started_ns_ = 0;
  uint64_t last_status_ns_ = 0;
  std::list<Connection*> connections_;
  media::StreamRegistry registry_;
  std::unique_ptr<media::PatternSource> pattern_;
  std::unique_ptr<AudioService> audio_;
  StreamReceivers* receivers_ = nullptr;  // owned by the registry (a publisher)
  TicketStore tickets_;
  std::unique_ptr<PoseService> pose_;
  ServerCounters counters_;
  std::unique_ptr<uint8_t[]> discard_;
};

}  // namespace syncd::server
