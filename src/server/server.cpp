#include "server/server.h"

#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "core/process_stats.h"
#include "decode/decode_publisher.h"
#include "media/publisher_factory.h"
#include "net/ws/unmask.h"
#include "server/audio_service.h"
#include "server/connection.h"
#include "telemetry/prometheus.h"
#include "telemetry/stage_json.h"

namespace syncd::server {

namespace {
constexpr uint64_t kTickMs = 250;
// Descriptors kept for everything that is not a connection: the listener, the loop's own,
// pools and rings, devices, audio, logs.
constexpr size_t kReservedDescriptors = 64;

// Every connection is a descriptor. With the usual soft limit (1,024) descriptors would run out
// before --max-connections applies, and then accept() fails for everyone, /healthz and new
// producers included. So: raise the soft limit to the hard one, and keep the cap below it.
size_t fit_connections_to_descriptors(size_t wanted) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return wanted;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  const size_t usable = limit.rlim_cur == RLIM_INFINITY ? wanted
                        : limit.rlim_cur > kReservedDescriptors * 2
                            ? size_t(limit.rlim_cur) - kReservedDescriptors
                            : size_t(limit.rlim_cur) / 2;
  if (usable >= wanted) return wanted;
  std::fprintf(stderr,
               "syncd: --max-connections %zu lowered to %zu: the descriptor limit is %llu\n",
               wanted, usable, static_cast<unsigned long long>(limit.rlim_cur));
  return usable;
}
}  // namespace

namespace {
// The HTTP stream publisher is part of every syncd: receivers come and go with tickets.
StreamReceivers* add_receivers(media::StreamRegistry& registry, const ServerConfig& config) {
  auto receivers = std::make_unique<StreamReceivers>(config.receiver_max_frames);
  StreamReceivers* raw = receivers.get();
  registry.add_publisher(std::move(receivers));
  return raw;
}
}  // namespace

Server::Server(ServerConfig config)
    : config_(std::move(config)),
      output_budget_(config_.output_budget_bytes),
      registry_(config_.stream_limits),
      receivers_(add_receivers(registry_, config_)),
      http_routes_(HttpRoutes::Services{config_, counters_, registry_, tickets_, *receivers_,
                                        [this] { return stats_json(); },
                                        [this] { return metrics_text(); }}),
      stream_control_(
          config_, &loop_, registry_, tickets_, control_, [this] { return stats_json(); },
          [this](uint64_t id) { return find_connection(id); }),
      discard_(new uint8_t[config_.read_window_bytes]) {
  uv_loop_init(&loop_);
  // A closed stream's pool is unmapped on a libuv pool thread (when the stream held its last
  // reference): munmap of a 1 GiB ring of small pages holds a thread for ~100 ms.
  registry_.set_pool_release([this](media::FramePool* pool) {
    auto* work = new uv_work_t;
    work->data = pool;
    uv_queue_work(
        &loop_, work, [](uv_work_t* w) { static_cast<media::FramePool*>(w->data)->drop_ref(); },
        [](uv_work_t* w, int) { delete w; });
  });
  // libuv then accounts the time it waits in epoll, which the loop's busy time excludes.
  uv_loop_configure(&loop_, UV_METRICS_IDLE_TIME);
  loop_.data = this;
  media::PublisherContext context{&loop_, config_.shm, config_.camera};
  for (const std::string& name : config_.publishers) {
    // Names were checked against the table on the command line; an unknown one is skipped.
    if (const media::PublisherEntry* entry = media::find_publisher(name))
      registry_.add_publisher(entry->make(context));
  }
  // Encoded streams (a page's WebCodecs H.264) are decoded once for the consumers that want
  // pixels: the pixel publishers, or an HTTP receiver of the decoded twin (docs/web.md,
  // "Encoded publishing"). Last, so it sees a stream's frame after every other publisher.
  decode::DecodePublisherConfig decode;
  for (const std::string& name : config_.publishers)
    decode.pixel_publishers |= name == "test" || name == "shm" || name == "camera";
  registry_.add_publisher(std::make_unique<decode::DecodePublisher>(
      &loop_, registry_, decode,
      [receivers = receivers_](uint32_t twin) { return receivers->receiving(twin); }));
}

Server::~Server() {
  if (!stopping_) {
    // start() failed (or never ran): what the constructor and start() opened is still open
    // (the publishers' worker hand-offs, services). Stopped as stop() would, and the loop
    // turned until their close callbacks have run, so that uv_loop_close frees the loop
    // (a sanitized syncd refused on its command line or port reported the loop as leaked).
    stop_services();
    registry_.stop_publishers();
    for (int i = 0; i < 100 && uv_loop_alive(&loop_); ++i) uv_run(&loop_, UV_RUN_NOWAIT);
  }
  pattern_.reset();
  uv_loop_close(&loop_);
}

void Server::register_control() {
  stream_control_.register_control(control_);
  receivers_->register_control(control_);
  const std::vector<ServiceEntry>& table = service_table();
  for (size_t i = 0; i < table.size(); ++i) {
    if (by_entry_[i]) {
      by_entry_[i]->register_control(control_);
      by_entry_[i]->register_routes(http_routes_);
    } else if (table[i].register_absent) {
      table[i].register_absent(control_);
    }
  }
}

bool Server::start_services() {
  const ServiceContext context{&loop_, &registry_, &config_, &services_};
  for (const ServiceEntry& entry : service_table()) {
    std::string fatal;
    std::unique_ptr<Service> service = entry.start(context, fatal);
    if (!fatal.empty()) {
      std::fprintf(stderr, "syncd: %s\n", fatal.c_str());
      stop_services();
      return false;
    }
    by_entry_.push_back(service.get());
    if (service) services_.push_back(std::move(service));
  }
  return true;
}

void Server::stop_services() {
  if (services_stopped_) return;
  services_stopped_ = true;
  for (auto it = services_.rbegin(); it != services_.rend(); ++it) (*it)->stop();
}

int Server::start() {
  started_ns_ = core::monotonic_ns();
  config_.max_connections = fit_connections_to_descriptors(config_.max_connections);
  // First, so that a service the operator asked for and cannot have (a head tracker's
  // unreadable replay file, the relay's port taken) stops syncd before anything is open.
  if (!start_services()) return UV_EINVAL;
  uv_tcp_init(&loop_, &listener_);
  listener_.data = this;
  sockaddr_storage addr{};
  int rc = uv_ip4_addr(config_.host.c_str(), config_.port, reinterpret_cast<sockaddr_in*>(&addr));
  if (rc < 0)
    rc = uv_ip6_addr(config_.host.c_str(), config_.port, reinterpret_cast<sockaddr_in6*>(&addr));
  if (rc == 0) rc = uv_tcp_bind(&listener_, reinterpret_cast<const sockaddr*>(&addr), 0);
  if (rc == 0) rc = uv_listen(reinterpret_cast<uv_stream_t*>(&listener_), 511, &on_connection);
  if (rc < 0) {
    // Closed here; the rest of what was opened goes in the destructor (~Server).
    uv_close(reinterpret_cast<uv_handle_t*>(&listener_), nullptr);
    return rc;
  }
  listening_ = true;
  sockaddr_storage bound{};
  int len = sizeof bound;
  uv_tcp_getsockname(&listener_, reinterpret_cast<sockaddr*>(&bound), &len);
  char ip[64] = {};
  if (bound.ss_family == AF_INET6) {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&bound);
    uv_ip6_name(a6, ip, sizeof ip);
    bound_port_ = ntohs(a6->sin6_port);
  } else {
    auto* a4 = reinterpret_cast<sockaddr_in*>(&bound);
    uv_ip4_name(a4, ip, sizeof ip);
    bound_port_ = ntohs(a4->sin_port);
  }

  uv_signal_init(&loop_, &sigint_);
  uv_signal_init(&loop_, &sigterm_);
  sigint_.data = sigterm_.data = this;
  uv_signal_start(&sigint_, &on_signal, SIGINT);
  uv_signal_start(&sigterm_, &on_signal, SIGTERM);
  uv_timer_init(&loop_, &tick_timer_);
  tick_timer_.data = this;
  uv_timer_start(&tick_timer_, &on_tick, kTickMs, kTickMs);
  uv_timer_init(&loop_, &pattern_timer_);
  pattern_timer_.data = this;
  uv_timer_init(&loop_, &shutdown_timer_);
  shutdown_timer_.data = this;
  uv_check_init(&loop_, &resume_check_);
  resume_check_.data = this;
  paused_.reserve(64);
  resuming_.reserve(64);
  uv_prepare_init(&loop_, &busy_prepare_);
  busy_prepare_.data = this;
  uv_prepare_start(&busy_prepare_, &Server::on_prepare);

  if (config_.pattern) {
    pattern_ = std::make_unique<media::PatternSource>(registry_, *config_.pattern);
    std::string error;
    if (!pattern_->start(error)) {
      std::fprintf(stderr, "syncd: pattern source refused: %s\n", error.c_str());
      pattern_.reset();
    } else {
      uv_timer_start(&pattern_timer_, &on_pattern_timer, 1, 0);
    }
  }
  register_control();
  std::printf("syncd listening on %s:%u\n", ip, unsigned(bound_port_));
  // After the first line, which tools read for the port.
  for (const auto& service : services_) service->announce();
  std::fflush(stdout);
  return 0;
}

int Server::run() {
  return uv_run(&loop_, UV_RUN_DEFAULT);
}

void Server::on_connection(uv_stream_t* listener, int status) {
  auto* self = static_cast<Server*>(listener->data);
  if (status < 0 || self->stopping_) return;
  auto* c = new Connection(*self, self->next_connection_id_++);
  uv_tcp_init(&self->loop_, c->handle());
  if (uv_accept(listener, reinterpret_cast<uv_stream_t*>(c->handle())) != 0) {
    c->destroy();
    return;
  }
  if (self->connections_.size() >= self->config_.max_connections) {
    // At the cap, the oldest connection that has not yet sent a complete request makes room:
    // silent or slow sockets cannot lock out /healthz and new producers. With none of those,
    // the new one is closed at once (rather than not accepted, which would fill the backlog
    // with peers waiting forever); it sees a reset and may retry.
    Connection* oldest = nullptr;
    for (Connection* open : self->connections_)
      if (open->awaiting_request()) {
        oldest = open;
        break;
      }
    if (!oldest) {
      ++self->counters_.connections_refused;
      c->destroy();
      return;
    }
    ++self->counters_.connections_evicted;
    oldest->destroy();
  }
  self->connections_.push_back(c);
  ++self->counters_.connections_accepted;
  c->start();
}

Connection* Server::find_connection(uint64_t id) {
  for (Connection* c : connections_)
    if (c->id() == id) return c;
  return nullptr;
}

void Server::resume_after_poll(Connection& connection) {
  if (paused_.empty()) uv_check_start(&resume_check_, &Server::on_check);
  paused_.push_back(&connection);
}

bool Server::others_waiting(int own_fd) {
  uv_update_time(&loop_);
  if (uv_backend_timeout(&loop_) == 0) return true;  // a timer is due, or callbacks are pending
  // libuv's epoll set is level-triggered, so a zero-timeout peek consumes nothing: the loop's
  // own epoll_wait sees the same events. libuv keys each event by descriptor (data.fd); if that
  // ever changed, every event would look foreign and this would simply always yield.
  epoll_event ready[16];
  const int n = ::epoll_wait(uv_backend_fd(&loop_), ready, 16, 0);
  if (n < 0) return true;  // cannot tell: yield, as before
  for (int i = 0; i < n; ++i)
    if (ready[i].data.fd != own_fd) return true;
  return false;
}

void Server::on_check(uv_check_t* check) {
  auto* self = static_cast<Server*>(check->data);
  uv_check_stop(check);
  // Two reserved lists swapped, so pausing and resuming never allocate in steady state.
  self->resuming_.swap(self->paused_);
  for (Connection* c : self->resuming_) c->resume_reading();
  self->resuming_.clear();
}

void Server::on_prepare(uv_prepare_t* prepare) {
  auto* self = static_cast<Server*>(prepare->data);
  const uint64_t now = core::monotonic_ns();
  const uint64_t idle = uv_metrics_idle_time(&self->loop_);
  if (self->last_prepare_ns_ != 0) {
    const uint64_t elapsed = now - self->last_prepare_ns_;
    const uint64_t waited = idle - self->last_idle_ns_;
    self->loop_busy_.record(elapsed > waited ? elapsed - waited : 0);
  }
  self->last_prepare_ns_ = now;
  self->last_idle_ns_ = idle;
}

void Server::connection_closed(Connection& c) {
  receivers_->remove(c);
  for (const auto& service : services_) service->connection_closed(c);
  registry_.close_owned_by(c.id());
  tickets_.drop_owner(c.id());
  std::erase(paused_, &c);
  std::erase(resuming_, &c);
  connections_.remove(&c);
  if (stopping_ && connections_.empty()) close_shutdown_timer();
}

void Server::close_shutdown_timer() {
  if (shutdown_timer_closed_) return;
  shutdown_timer_closed_ = true;
  uv_timer_stop(&shutdown_timer_);
  uv_close(reinterpret_cast<uv_handle_t*>(&shutdown_timer_), nullptr);
}

void Server::on_signal(uv_signal_t* handle, int) {
  auto* self = static_cast<Server*>(handle->data);
  if (self->stopping_) {
    std::fprintf(stderr, "syncd: second signal, exiting now\n");
    std::_Exit(1);
  }
  self->stop();
}

void Server::stop() {
  if (stopping_) return;
  stopping_ = true;
  if (config_.status_line) std::fputs("\n", stderr);
  if (listening_) uv_close(reinterpret_cast<uv_handle_t*>(&listener_), nullptr);
  listening_ = false;
  if (pattern_) pattern_->stop();
  // The services first, the last started first: the relay's thread hands back the frames it
  // held to the relay publisher, which the registry still owns.
  stop_services();
  registry_.stop_publishers();  // worker threads end; the frames they held are released
  // Copy: connections remove themselves from the list as they close.
  std::vector<Connection*> open(connections_.begin(), connections_.end());
  for (Connection* c : open) c->shutdown_for_exit();
  uv_timer_stop(&tick_timer_);
  uv_timer_stop(&pattern_timer_);
  uv_close(reinterpret_cast<uv_handle_t*>(&tick_timer_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&pattern_timer_), nullptr);
  uv_check_stop(&resume_check_);
  uv_close(reinterpret_cast<uv_handle_t*>(&resume_check_), nullptr);
  uv_prepare_stop(&busy_prepare_);
  uv_close(reinterpret_cast<uv_handle_t*>(&busy_prepare_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&sigint_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&sigterm_), nullptr);
  // Peers get a second to read their Close; then whatever is left is closed regardless.
  uv_timer_start(
      &shutdown_timer_,
      [](uv_timer_t* t) {
        auto* s = static_cast<Server*>(t->data);
        std::vector<Connection*> left(s->connections_.begin(), s->connections_.end());
        for (Connection* c : left) c->destroy();
        s->close_shutdown_timer();
      },
      1000, 0);
  if (connections_.empty()) close_shutdown_timer();
}

void Server::on_tick(uv_timer_t* timer) {
  auto* self = static_cast<Server*>(timer->data);
  const uint64_t now = core::monotonic_ns();
  self->registry_.tick(now);
  self->tickets_.purge(now);
  self->receivers_->end_overdue(now);
  self->sweep_connections(now);
  if (self->config_.status_line && now - self->last_status_ns_ >= 1'000'000'000) {
    self->last_status_ns_ = now;
    self->print_status_line();
  }
}

void Server::sweep_connections(uint64_t now_ns) {
  std::vector<Connection*> open(connections_.begin(), connections_.end());
  for (Connection* c : open) c->check_timeouts(now_ns);
}

void Server::on_pattern_timer(uv_timer_t* timer) {
  auto* self = static_cast<Server*>(timer->data);
  if (!self->pattern_ || self->stopping_) return;
  const uint64_t wait_ns = self->pattern_->produce_due(core::monotonic_ns());
  // libuv timers have millisecond resolution. Rounding up makes a frame at most ~1 ms late but
  // never drifts (the schedule is absolute); rounding down would spin through 0 ms re-arms.
  uv_timer_start(&self->pattern_timer_, &on_pattern_timer, (wait_ns + 999'999) / 1'000'000, 0);
}

void Server::print_status_line() {
  const uint64_t rss = core::resident_memory_bytes();
  std::string line = "\r\x1b[2Ksyncd";
  size_t open_streams = 0;
  for (const media::Stream* s : registry_.all_streams()) {
    if (!s->open()) continue;
    ++open_streams;
    char buf[160];
    std::snprintf(buf, sizeof buf, " | %s %u fps low %llu drop %llu", s->config().name.c_str(),
                  s->rate().last_complete_fps(),
                  static_cast<unsigned long long>(s->rate().low_rate_seconds()),
                  static_cast<unsigned long long>(s->counters().dropped_total()));
    line += buf;
  }
  if (open_streams == 0) line += " | no streams";
  char tail[96];
  std::snprintf(tail, sizeof tail, " | conns %zu | rss %.1f MiB", connections_.size(),
                double(rss) / (1024.0 * 1024.0));
  line += tail;
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

std::string Server::stats_json() {
  nlohmann::json j;
  const uint64_t now = core::monotonic_ns();
  const ServerCounters& c = counters_;
  j["server"] = {
      {"version", SYNC_VERSION},
      {"uptime_s", double(now - started_ns_) / 1e9},
      {"port", bound_port_},
      {"publishers", config_.publishers},
      {"unmask_kernel", ws::unmask_kernel_name()},
      {"connections_open", connections_.size()},
      {"connections_accepted", c.connections_accepted},
      {"connections_refused", c.connections_refused},
      {"connections_evicted", c.connections_evicted},
      {"silent_closes", c.silent_closes},
      {"max_connections", config_.max_connections},
      {"handshake_timeouts", c.handshake_timeouts},
      {"idle_timeouts", c.idle_timeouts},
      {"slow_consumer_closes", c.slow_consumer_closes},
      {"write_timeouts", c.write_timeouts},
      {"reads_paused_for_output", c.reads_paused_for_output},
      {"output_queued_bytes", output_budget_.used()},
      {"output_budget_bytes", output_budget_.limit()},
      {"http_method_not_allowed", c.http_method_not_allowed},
      {"http_bad_requests", c.http_bad_requests},
      {"http_headers_too_large", c.http_headers_too_large},
      {"http_not_found", c.http_not_found},
      {"origin_refused", c.origin_refused},
      {"origin_missing_refused", c.origin_missing_refused},
      {"cors_preflights", c.cors_preflights},
      {"cors_preflight_refused", c.cors_preflight_refused},
      {"http_host_refused", c.http_host_refused},
      {"http_host_invalid", c.http_host_invalid},
      {"http_framing_refused", c.http_framing_refused},
      {"http_body_too_large", c.http_body_too_large},
      {"tickets_refused", c.tickets_refused},
      {"tickets_live", tickets_.size()},
      {"receivers", receivers_->count()},
      {"version_refused", c.version_refused},
      {"ws_protocol_errors", c.ws_protocol_errors},
      {"ws_close_1002", c.ws_close_1002},
      {"ws_close_1007", c.ws_close_1007},
      {"ws_close_1009", c.ws_close_1009},
      {"control_errors", c.control_errors},
      {"frames_rejected",
       {{"unknown_stream", c.frames_rejected_unknown_stream},
        {"bad_header", c.frames_rejected_bad_header}}},
      {"read_turns", {{"yielded", c.read_turns_yielded}, {"continued", c.read_turns_continued}}},
  };
  j["process"] = {{"resident_memory_bytes", core::resident_memory_bytes()},
                  {"loop_cpu_seconds", double(core::thread_cpu_ns()) / 1e9},
                  {"loop_iteration_busy", telemetry::stage_json(loop_busy_)},
                  {"pool_bytes", registry_.pool_bytes()}};
  if (pattern_) {
    j["source"] = {{"kind", "pattern"},
                   {"frames_produced", pattern_->frames_produced()},
                   {"ticks_skipped", pattern_->frames_skipped()}};
  }
  for (const auto& service : services_) service->write_stats(j);
  registry_.write_stats(j);
  return j.dump();
}

std::string Server::metrics_text() {
  telemetry::PrometheusText out;
  const ServerCounters& c = counters_;
  out.family("syncd_resident_memory_bytes", "gauge", "Resident set size of syncd.");
  out.sample("syncd_resident_memory_bytes", "", core::resident_memory_bytes());
  out.family("syncd_loop_cpu_seconds_total", "counter", "CPU time of the event-loop thread.");
  out.sample("syncd_loop_cpu_seconds_total", "", double(core::thread_cpu_ns()) / 1e9);
  out.family("syncd_loop_iteration_busy_seconds", "histogram",
             "Busy time of each event-loop iteration, time waiting in epoll excluded.");
  out.histogram("syncd_loop_iteration_busy_seconds", "", loop_busy_);
  out.family("syncd_frame_pool_bytes", "gauge", "Memory mapped for frame pools.");
  out.sample("syncd_frame_pool_bytes", "", uint64_t(registry_.pool_bytes()));
  out.family("syncd_connections_open", "gauge", "Open client connections.");
  out.sample("syncd_connections_open", "", uint64_t(connections_.size()));
  out.family("syncd_connections_total", "counter", "Connections by outcome.");
  out.sample("syncd_connections_total", "outcome=\"accepted\"", c.connections_accepted);
  out.sample("syncd_connections_total", "outcome=\"refused_limit\"", c.connections_refused);
  out.sample("syncd_connections_total", "outcome=\"evicted_at_limit\"", c.connections_evicted);
  out.sample("syncd_connections_total", "outcome=\"closed_silent\"", c.silent_closes);
  out.family("syncd_read_turns_total", "counter",
             "Read turns that used up --read-turn-kb, by outcome (yielded to others or went on).");
  out.sample("syncd_read_turns_total", "outcome=\"yielded\"", c.read_turns_yielded);
  out.sample("syncd_read_turns_total", "outcome=\"continued\"", c.read_turns_continued);
  out.family("syncd_connection_closes_total", "counter", "Connections closed by syncd, by cause.");
  out.sample("syncd_connection_closes_total", "cause=\"handshake_timeout\"", c.handshake_timeouts);
  out.sample("syncd_connection_closes_total", "cause=\"idle_timeout\"", c.idle_timeouts);
  out.sample("syncd_connection_closes_total", "cause=\"slow_consumer\"", c.slow_consumer_closes);
  out.sample("syncd_connection_closes_total", "cause=\"write_timeout\"", c.write_timeouts);
  out.family("syncd_output_queued_bytes", "gauge",
             "Bytes copied for connections and not yet written (all connections).");
  out.sample("syncd_output_queued_bytes", "", uint64_t(output_budget_.used()));
  out.family("syncd_http_errors_total", "counter", "HTTP requests refused, by status.");
  out.sample(
      "syncd_http_errors_total", "status=\"400\"",
      c.http_bad_requests + c.http_host_invalid + c.http_framing_refused + c.http_body_too_large);
  out.sample(
      "syncd_http_errors_total", "status=\"403\"",
      c.origin_refused + c.origin_missing_refused + c.tickets_refused + c.cors_preflight_refused);
  out.sample("syncd_http_errors_total", "status=\"404\"", c.http_not_found);
  out.sample("syncd_http_errors_total", "status=\"405\"", c.http_method_not_allowed);
  out.sample("syncd_http_errors_total", "status=\"421\"", c.http_host_refused);
  out.sample("syncd_http_errors_total", "status=\"426\"", c.version_refused);
  out.sample("syncd_http_errors_total", "status=\"431\"", c.http_headers_too_large);
  out.family("syncd_http_refused_total", "counter",
             "HTTP requests refused by the cross-site and framing checks, by reason.");
  out.sample("syncd_http_refused_total", "reason=\"host_not_allowed\"", c.http_host_refused);
  out.sample("syncd_http_refused_total", "reason=\"host_invalid\"", c.http_host_invalid);
  out.sample("syncd_http_refused_total", "reason=\"origin_not_allowed\"", c.origin_refused);
  out.sample("syncd_http_refused_total", "reason=\"origin_missing\"", c.origin_missing_refused);
  out.sample("syncd_http_refused_total", "reason=\"cors_preflight\"", c.cors_preflight_refused);
  out.sample("syncd_http_refused_total", "reason=\"framing\"", c.http_framing_refused);
  out.sample("syncd_http_refused_total", "reason=\"body_too_large\"", c.http_body_too_large);
  out.family("syncd_ws_protocol_errors_total", "counter",
             "WebSocket connections failed by syncd, by close code.");
  out.sample("syncd_ws_protocol_errors_total", "code=\"1002\"", c.ws_close_1002);
  out.sample("syncd_ws_protocol_errors_total", "code=\"1007\"", c.ws_close_1007);
  out.sample("syncd_ws_protocol_errors_total", "code=\"1009\"", c.ws_close_1009);
  out.family("syncd_control_errors_total", "counter", "Error replies to control messages.");
  out.sample("syncd_control_errors_total", "", c.control_errors);
  out.family("syncd_frames_rejected_total", "counter",
             "Frames that named no stream of their connection, by reason.");
  out.sample("syncd_frames_rejected_total", "reason=\"unknown_stream\"",
             c.frames_rejected_unknown_stream);
  out.sample("syncd_frames_rejected_total", "reason=\"bad_header\"", c.frames_rejected_bad_header);
  for (const auto& service : services_) service->write_metrics(out);
  registry_.write_metrics(out);
  return out.text();
}

}  // namespace syncd::server
