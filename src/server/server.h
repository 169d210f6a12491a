// syncd's server: one libuv loop that owns the listener, the connections, the stream registry
// and its publishers, the services (audio, pose, HTTP stream receivers), the routes of HTTP
// requests and control messages, and the telemetry timers.
//
// Connections see it only as their ConnectionHost; services register the control messages they
// own with the ControlRouter; nothing reaches into the server for another service.
//
// Thread: everything here runs on the loop thread, the thread that calls run(). The only entry
// from elsewhere is a signal (SIGINT/SIGTERM), which libuv delivers on the loop thread, and the
// results of publishers' worker threads, which come back through uv_async handles.
#pragma once

#include <uv.h>

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "media/pattern_source.h"
#include "media/stream_registry.h"
#include "server/connection.h"
#include "server/control_router.h"
#include "server/http_routes.h"
#include "server/server_config.h"
#include "server/service.h"
#include "server/socket_writer.h"
#include "server/stream_control.h"
#include "server/stream_receivers.h"
#include "server/ticket_store.h"
#include "telemetry/stage_stats.h"

namespace syncd::server {

class Server final : private ConnectionHost {
 public:
  explicit Server(ServerConfig config);
  ~Server() override;
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

  std::string stats_json();
  std::string metrics_text();

 private:
  // ConnectionHost
  const ServerConfig& config() const override { return config_; }
  ServerCounters& counters() override { return counters_; }
  OutputBudget& output_budget() override { return output_budget_; }
  media::StreamRegistry& registry() override { return registry_; }
  void on_http_request(Connection& c, const http::Request& request, char* rest,
                       size_t rest_size) override {
    http_routes_.handle(c, request, rest, rest_size);
  }
  void on_control_message(Connection& c, std::string_view text) override {
    control_.route(c, text);
  }
  void connection_closed(Connection& c) override;
  // Whether anything besides the socket own_fd wants the loop now: a due timer, a pending
  // callback, or another ready descriptor. A connection that used up its read turn yields only
  // then; with nobody waiting, stopping and restarting its reads would cost two epoll_ctl calls
  // and a loop turn for nothing (~0.1 ms a 1080p frame).
  bool others_waiting(int own_fd) override;
  // The connection paused its reading for this turn; resume it once the loop has polled.
  void resume_after_poll(Connection& c) override;
  std::span<uint8_t> discard_buffer() override {
    return {discard_.get(), config_.read_window_bytes};
  }

  Connection* find_connection(uint64_t id);  // an open connection, or nullptr
  void register_control();
  // Starts the services of service_table() the configuration asks for; false (after stopping
  // those started, having said why) when one the operator asked for cannot start.
  bool start_services();
  // Stops the services, the last started first; once.
  void stop_services();
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
  bool services_stopped_ = false;
  bool shutdown_timer_closed_ = false;
  uint16_t bound_port_ = 0;
  uint64_t next_connection_id_ = 1;
  uint64_t started_ns_ = 0;
  uint64_t last_status_ns_ = 0;
  std::list<Connection*> connections_;
  ServerCounters counters_;
  OutputBudget output_budget_;
  media::StreamRegistry registry_;
  StreamReceivers* receivers_ = nullptr;  // owned by the registry (a publisher)
  TicketStore tickets_;
  ControlRouter control_;
  HttpRoutes http_routes_;
  StreamControl stream_control_;
  std::unique_ptr<media::PatternSource> pattern_;
  // The services that run (service.h), in start order; by_entry_[i] is service_table()[i]'s,
  // or null.
  std::vector<std::unique_ptr<Service>> services_;
  std::vector<Service*> by_entry_;
  std::unique_ptr<uint8_t[]> discard_;
};

}  // namespace syncd::server
