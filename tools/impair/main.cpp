// sync-impair: user-space UDP impairment proxy (docs/wan.md, "Impairment proxy"). This kernel
// has no netem, so loss, delay, jitter, reordering, duplication and a rate cap are applied here.
//
//   client --> [--listen HOST:PORT] sync-impair [fwd chain] --> --to HOST:PORT (target)
//   client <-- (the last client address)        [rev chain] <-- target's replies
//
// Each direction's fate decisions come from the pure model in model.h, seeded by --seed. The
// proxy only moves bytes: a datagram is copied into a pooled buffer, its copies are scheduled at
// their delivery times in a min-heap, and a timerfd (CLOCK_MONOTONIC, absolute, ns resolution;
// libuv's own timers have 1-ms resolution) polled by the libuv loop sends them when due.
//
// Output: "listening HOST:PORT" on stdout once bound (so --listen 127.0.0.1:0 can be used), a
// per-second line per direction (the second's packets in/out, drops by reason, duplicates,
// reorders), a final JSON line with the totals; with --log-csv, one CSV line per datagram.
// Exit codes: 0 ok, 1 usage, 3 socket error.
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <queue>
#include <string>
#include <vector>

#include "impair/model.h"

namespace {

namespace impair = syncd::impair;

constexpr int kExitOk = 0;
constexpr int kExitUsage = 1;
constexpr int kExitSocket = 3;
constexpr size_t kMaxDatagram = 65536;

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // uv_hrtime() reads the same clock
  return uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
}

struct Options {
  std::string listen = "127.0.0.1:0";
  std::string to;
  uint64_t seed = 1;
  std::string log_csv;
  double duration_s = 0;
  size_t max_in_flight = 1 << 16;
  bool quiet = false;
  impair::ChainConfig chain[2];
  double burst_loss[2] = {0, 0};
  double burst_length[2] = {0, 0};
  std::string jitter_dist[2] = {"uniform", "uniform"};
  // --fwd-rate-schedule "S:KBPS,...": the rate cap becomes KBPS S seconds after start.
  std::string rate_schedule_text[2];
  std::vector<std::pair<double, double>> rate_schedule[2];
};

const char* const kDirectionName[2] = {"fwd", "rev"};

bool parse_host_port(const std::string& text, sockaddr_storage* out) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = text.substr(0, colon);
  const std::string port = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* result = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &result) != 0 || !result) return false;
  std::memset(out, 0, sizeof(*out));
  std::memcpy(out, result->ai_addr, result->ai_addrlen);
  freeaddrinfo(result);
  return true;
}

std::string address_text(const sockaddr* addr) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (addr->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
  inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
  port = ntohs(in6->sin6_port);
  return "[" + std::string(host) + "]:" + std::to_string(port);
}

struct Scheduled {
  uint64_t deliver_ns;
  uint64_t order;  // FIFO among equal times
  uint32_t buffer;
  uint8_t direction;
  bool operator>(const Scheduled& o) const {
    return deliver_ns != o.deliver_ns ? deliver_ns > o.deliver_ns : order > o.order;
  }
};

struct DirectionCounters {
  uint64_t in = 0, sent = 0, send_errors = 0, dropped_random = 0, dropped_burst = 0,
           dropped_rate = 0, dropped_overflow = 0, duplicated = 0, reordered = 0;
  uint64_t late_ns_sum = 0, late_ns_max = 0;
};

class Proxy {
 public:
  Proxy(const Options& options, uv_loop_t* loop)
      : options_(options),
        loop_(loop),
        chains_{impair::ImpairmentChain(options.chain[0], options.seed * 2 + 1),
                impair::ImpairmentChain(options.chain[1], options.seed * 2 + 2)} {}

  int start(const sockaddr_storage& listen, const sockaddr_storage& target) {
    target_ = target;
    start_ns_ = now_ns();
    if (!options_.log_csv.empty()) {
      csv_ = std::fopen(options_.log_csv.c_str(), "w");
      if (!csv_) {
        std::fprintf(stderr, "sync-impair: cannot open %s: %s\n", options_.log_csv.c_str(),
                     std::strerror(errno));
        return kExitUsage;
      }
      std::setvbuf(csv_, nullptr, _IOFBF, 1 << 20);
      std::fprintf(csv_,
                   "direction,index,bytes,arrival_us,fate,deliver_us,deliver2_us,reordered\n");
    }
    uv_udp_init(loop_, &listen_socket_);
    uv_udp_init(loop_, &target_socket_);
    listen_socket_.data = this;
    target_socket_.data = this;
    int rc = uv_udp_bind(&listen_socket_, reinterpret_cast<const sockaddr*>(&listen), 0);
    if (rc == 0) {
      sockaddr_storage any{};
      any.ss_family = target.ss_family;
      rc = uv_udp_bind(&target_socket_, reinterpret_cast<const sockaddr*>(&any), 0);
    }
    if (rc == 0) rc = uv_udp_recv_start(&listen_socket_, on_alloc, on_client_datagram);
    if (rc == 0) rc = uv_udp_recv_start(&target_socket_, on_alloc, on_target_datagram);
    if (rc != 0) {
      std::fprintf(stderr, "sync-impair: socket: %s\n", uv_err_name(rc));
      return kExitSocket;
    }
    for (uv_udp_t* socket : {&listen_socket_, &target_socket_}) {
      int size = 4 << 20;
      uv_send_buffer_size(reinterpret_cast<uv_handle_t*>(socket), &size);
      size = 4 << 20;
      uv_recv_buffer_size(reinterpret_cast<uv_handle_t*>(socket), &size);
    }
    timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (timer_fd_ < 0) {
      std::fprintf(stderr, "sync-impair: timerfd: %s\n", std::strerror(errno));
      return kExitSocket;
    }
    uv_poll_init(loop_, &timer_poll_, timer_fd_);
    timer_poll_.data = this;
    uv_poll_start(&timer_poll_, UV_READABLE, on_timer_fd);
    uv_timer_init(loop_, &stats_timer_);
    stats_timer_.data = this;
    uv_timer_start(&stats_timer_, on_stats_timer, 1000, 1000);
    uv_signal_init(loop_, &sigint_);
    uv_signal_init(loop_, &sigterm_);
    sigint_.data = sigterm_.data = this;
    uv_signal_start(&sigint_, on_signal, SIGINT);
    uv_signal_start(&sigterm_, on_signal, SIGTERM);
    uv_timer_init(loop_, &stop_timer_);
    stop_timer_.data = this;
    if (options_.duration_s > 0) {
      uv_timer_start(&stop_timer_, on_stop_timer, uint64_t(options_.duration_s * 1000), 0);
    }
    uv_timer_init(loop_, &schedule_timer_);
    schedule_timer_.data = this;
    schedule_start_ns_ = now_ns();
    if (!options_.rate_schedule[0].empty() || !options_.rate_schedule[1].empty()) {
      uv_timer_start(&schedule_timer_, on_schedule_timer, 0, 50);
    }
    sockaddr_storage bound{};
    int length = sizeof(bound);
    uv_udp_getsockname(&listen_socket_, reinterpret_cast<sockaddr*>(&bound), &length);
    std::printf("listening %s\n", address_text(reinterpret_cast<sockaddr*>(&bound)).c_str());
    std::fflush(stdout);
    return kExitOk;
  }

  void stop() {
    if (stopping_) return;
    stopping_ = true;
    print_second(true);
    print_summary();
    if (csv_) std::fclose(csv_);
    csv_ = nullptr;
    uv_poll_stop(&timer_poll_);
    for (uv_handle_t* handle :
         {reinterpret_cast<uv_handle_t*>(&listen_socket_),
          reinterpret_cast<uv_handle_t*>(&target_socket_),
          reinterpret_cast<uv_handle_t*>(&timer_poll_),
          reinterpret_cast<uv_handle_t*>(&stats_timer_),
          reinterpret_cast<uv_handle_t*>(&stop_timer_),
          reinterpret_cast<uv_handle_t*>(&schedule_timer_),
          reinterpret_cast<uv_handle_t*>(&sigint_), reinterpret_cast<uv_handle_t*>(&sigterm_)}) {
      uv_close(handle, nullptr);
    }
  }

  void close_timer_fd() {
    if (timer_fd_ >= 0) close(timer_fd_);
    timer_fd_ = -1;
  }

 private:
  static void on_alloc(uv_handle_t* handle, size_t, uv_buf_t* buf) {
    auto* self = static_cast<Proxy*>(handle->data);
    *buf = uv_buf_init(reinterpret_cast<char*>(self->receive_buffer_.data()),
                       static_cast<unsigned>(self->receive_buffer_.size()));
  }

  static void on_client_datagram(uv_udp_t* socket, ssize_t nread, const uv_buf_t*,
                                 const sockaddr* from, unsigned) {
    auto* self = static_cast<Proxy*>(socket->data);
    if (nread < 0 || !from) return;
    std::memcpy(&self->client_, from,
                from->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    self->have_client_ = true;
    self->on_datagram(0, size_t(nread));
  }

  static void on_target_datagram(uv_udp_t* socket, ssize_t nread, const uv_buf_t*,
                                 const sockaddr* from, unsigned) {
    auto* self = static_cast<Proxy*>(socket->data);
    if (nread < 0 || !from) return;
    // Replies go to the last client; with none yet there is nowhere to send them.
    if (!self->have_client_) return;
    self->on_datagram(1, size_t(nread));
  }

  void on_datagram(uint8_t direction, size_t bytes) {
    const uint64_t arrival = now_ns();
    DirectionCounters& c = counters_[direction];
    const uint64_t index = c.in++;
    const impair::Decision d = chains_[direction].on_packet(arrival, bytes);
    switch (d.fate) {
      case impair::Fate::kDropRandom:
        ++c.dropped_random;
        break;
      case impair::Fate::kDropBurst:
        ++c.dropped_burst;
        break;
      case impair::Fate::kDropRate:
        ++c.dropped_rate;
        break;
      case impair::Fate::kDuplicated:
        ++c.duplicated;
        break;
      case impair::Fate::kDelivered:
        break;
    }
    if (d.reordered) ++c.reordered;
    // A dropped duplicate copy at the rate cap is counted by the model.
    if (d.copies == 1 && chains_[direction].counters().dropped_rate > rate_seen_[direction]) {
      ++c.dropped_rate;
    }
    rate_seen_[direction] = chains_[direction].counters().dropped_rate;
    if (csv_) {
      auto us = [&](uint64_t t) { return double(t - start_ns_) / 1e3; };
      std::fprintf(csv_, "%s,%" PRIu64 ",%zu,%.1f,%s,", kDirectionName[direction], index, bytes,
                   us(arrival), impair::fate_name(d.fate));
      if (d.copies >= 1) std::fprintf(csv_, "%.1f", us(d.deliver_at_ns[0]));
      std::fputc(',', csv_);
      if (d.copies >= 2) std::fprintf(csv_, "%.1f", us(d.deliver_at_ns[1]));
      std::fprintf(csv_, ",%d\n", d.reordered ? 1 : 0);
    }
    for (uint8_t copy = 0; copy < d.copies; ++copy) {
      if (schedule_.size() >= options_.max_in_flight) {
        ++c.dropped_overflow;
        continue;
      }
      uint32_t buffer;
      if (!free_buffers_.empty()) {
        buffer = free_buffers_.back();
        free_buffers_.pop_back();
      } else {
        buffer = uint32_t(buffers_.size());
        buffers_.emplace_back();
      }
      buffers_[buffer].assign(receive_buffer_.begin(), receive_buffer_.begin() + long(bytes));
      schedule_.push({d.deliver_at_ns[copy], next_order_++, buffer, direction});
    }
    deliver_due();
  }

  void deliver_due() {
    const uint64_t now = now_ns();
    while (!schedule_.empty() && schedule_.top().deliver_ns <= now) {
      const Scheduled s = schedule_.top();
      schedule_.pop();
      std::vector<uint8_t>& bytes = buffers_[s.buffer];
      uv_buf_t buf = uv_buf_init(reinterpret_cast<char*>(bytes.data()), unsigned(bytes.size()));
      uv_udp_t* socket = s.direction == 0 ? &target_socket_ : &listen_socket_;
      const sockaddr* to = s.direction == 0 ? reinterpret_cast<const sockaddr*>(&target_)
                                            : reinterpret_cast<const sockaddr*>(&client_);
      const int rc = uv_udp_try_send(socket, &buf, 1, to);
      DirectionCounters& c = counters_[s.direction];
      if (rc >= 0) {
        ++c.sent;
      } else {
        ++c.send_errors;
      }
      // How late the send was against its schedule: this process's own timing error.
      const uint64_t late = now - s.deliver_ns;
      c.late_ns_sum += late;
      c.late_ns_max = std::max(c.late_ns_max, late);
      free_buffers_.push_back(s.buffer);
    }
    arm_timer();
  }

  void arm_timer() {
    itimerspec spec{};
    if (!schedule_.empty()) {
      const uint64_t at = std::max<uint64_t>(schedule_.top().deliver_ns, 1);
      spec.it_value.tv_sec = time_t(at / 1'000'000'000);
      spec.it_value.tv_nsec = long(at % 1'000'000'000);
    }
    timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &spec, nullptr);
  }

  static void on_timer_fd(uv_poll_t* poll, int, int) {
    auto* self = static_cast<Proxy*>(poll->data);
    uint64_t expirations;
    while (read(self->timer_fd_, &expirations, sizeof(expirations)) > 0) {
    }
    self->deliver_due();
  }

  void print_second(bool final_partial) {
    if (options_.quiet) return;
    const double t = double(now_ns() - start_ns_) / 1e9;
    std::string line = final_partial ? "end t=" : "t=";
    char text[512];
    std::snprintf(text, sizeof(text), "%.0f", t);
    line += text;
    for (int d = 0; d < 2; ++d) {
      const DirectionCounters& c = counters_[d];
      const DirectionCounters& p = printed_[d];
      std::snprintf(text, sizeof(text),
                    " | %s in=%" PRIu64 " out=%" PRIu64 " drop_random=%" PRIu64
                    " drop_burst=%" PRIu64 " drop_rate=%" PRIu64 " drop_overflow=%" PRIu64
                    " dup=%" PRIu64 " reorder=%" PRIu64 " send_err=%" PRIu64,
                    kDirectionName[d], c.in - p.in, c.sent - p.sent,
                    c.dropped_random - p.dropped_random, c.dropped_burst - p.dropped_burst,
                    c.dropped_rate - p.dropped_rate, c.dropped_overflow - p.dropped_overflow,
                    c.duplicated - p.duplicated, c.reordered - p.reordered,
                    c.send_errors - p.send_errors);
      line += text;
      printed_[d] = c;
    }
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }

  void print_summary() {
    std::string json = "{\"seconds\":" + std::to_string(double(now_ns() - start_ns_) / 1e9) +
                       ",\"seed\":" + std::to_string(options_.seed) +
                       ",\"unsent_at_exit\":" + std::to_string(schedule_.size());
    for (int d = 0; d < 2; ++d) {
      const DirectionCounters& c = counters_[d];
      json += std::string(",\"") + kDirectionName[d] + "\":{\"in\":" + std::to_string(c.in) +
              ",\"out\":" + std::to_string(c.sent) +
              ",\"drop_random\":" + std::to_string(c.dropped_random) +
              ",\"drop_burst\":" + std::to_string(c.dropped_burst) +
              ",\"drop_rate\":" + std::to_string(c.dropped_rate) +
              ",\"drop_overflow\":" + std::to_string(c.dropped_overflow) +
              ",\"duplicated\":" + std::to_string(c.duplicated) +
              ",\"reordered\":" + std::to_string(c.reordered) +
              ",\"send_errors\":" + std::to_string(c.send_errors) + ",\"late_ms_mean\":" +
              std::to_string(c.sent + c.send_errors
                                 ? double(c.late_ns_sum) / 1e6 / double(c.sent + c.send_errors)
                                 : 0.0) +
              ",\"late_ms_max\":" + std::to_string(double(c.late_ns_max) / 1e6) + "}";
    }
    std::printf("%s}\n", json.c_str());
    std::fflush(stdout);
  }

  static void on_stats_timer(uv_timer_t* timer) {
    static_cast<Proxy*>(timer->data)->print_second(false);
  }
  static void on_stop_timer(uv_timer_t* timer) { static_cast<Proxy*>(timer->data)->stop(); }
  static void on_schedule_timer(uv_timer_t* timer) {
    auto* self = static_cast<Proxy*>(timer->data);
    const double elapsed_s = double(now_ns() - self->schedule_start_ns_) / 1e9;
    for (int d = 0; d < 2; ++d) {
      const auto& steps = self->options_.rate_schedule[d];
      while (self->schedule_next_[d] < steps.size() &&
             steps[self->schedule_next_[d]].first <= elapsed_s) {
        const double kbps = steps[self->schedule_next_[d]++].second;
        self->chains_[d].set_rate(kbps);
        // On stderr: stdout's lines are the per-second counters and the summary.
        std::fprintf(stderr, "sync-impair: %s rate cap %.0f kbit/s at %.2f s\n",
                     d == 0 ? "fwd" : "rev", kbps, elapsed_s);
      }
    }
  }
  static void on_signal(uv_signal_t* signal, int) { static_cast<Proxy*>(signal->data)->stop(); }

  const Options& options_;
  uv_loop_t* loop_;
  impair::ImpairmentChain chains_[2];
  DirectionCounters counters_[2];
  DirectionCounters printed_[2];
  uint64_t rate_seen_[2] = {0, 0};
  sockaddr_storage target_{};
  sockaddr_storage client_{};
  bool have_client_ = false;
  bool stopping_ = false;
  uint64_t start_ns_ = 0;
  FILE* csv_ = nullptr;
  int timer_fd_ = -1;
  uv_udp_t listen_socket_{};
  uv_udp_t target_socket_{};
  uv_poll_t timer_poll_{};
  uv_timer_t stats_timer_{};
  uv_timer_t stop_timer_{};
  uv_timer_t schedule_timer_{};
  uint64_t schedule_start_ns_ = 0;
  size_t schedule_next_[2] = {0, 0};
  uv_signal_t sigint_{};
  uv_signal_t sigterm_{};
  std::vector<uint8_t> receive_buffer_ = std::vector<uint8_t>(kMaxDatagram);
  std::vector<std::vector<uint8_t>> buffers_;
  std::vector<uint32_t> free_buffers_;
  std::priority_queue<Scheduled, std::vector<Scheduled>, std::greater<>> schedule_;
  uint64_t next_order_ = 0;
};

bool parse_rate_schedule(const std::string& text, std::vector<std::pair<double, double>>& out) {
  out.clear();
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string step = text.substr(at, comma - at);
    const size_t colon = step.find(':');
    if (colon == std::string::npos) return false;
    char* end = nullptr;
    const double seconds = std::strtod(step.c_str(), &end);
    if (end != step.c_str() + colon || seconds < 0) return false;
    const double kbps = std::strtod(step.c_str() + colon + 1, &end);
    if (*end != '\0' || kbps < 0) return false;
    if (!out.empty() && seconds < out.back().first) return false;
    out.emplace_back(seconds, kbps);
    at = comma + 1;
  }
  return !out.empty();
}

void add_chain_options(CLI::App& app, Options& options, int d) {
  const std::string p = std::string("--") + kDirectionName[d] + "-";
  const std::string what = d == 0 ? " (client -> target)" : " (target -> client)";
  impair::ChainConfig& c = options.chain[d];
  app.add_option(p + "loss", c.loss_percent, "random loss, percent" + what)
      ->check(CLI::Range(0.0, 100.0));
  app.add_option(p + "ge-p", c.ge_p, "Gilbert-Elliott P(good -> bad) per packet" + what)
      ->check(CLI::Range(0.0, 1.0));
  app.add_option(p + "ge-r", c.ge_r, "Gilbert-Elliott P(bad -> good) per packet" + what)
      ->check(CLI::Range(0.0, 1.0));
  app.add_option(p + "ge-bad-loss", c.ge_bad_loss_percent, "loss in the bad state, percent")
      ->check(CLI::Range(0.0, 100.0));
  app.add_option(p + "ge-good-loss", c.ge_good_loss_percent, "loss in the good state, percent")
      ->check(CLI::Range(0.0, 100.0));
  app.add_option(p + "burst-loss", options.burst_loss[d],
                 "Gilbert-Elliott from a target: long-run loss, percent (with " + p +
                     "burst-length)" + what)
      ->check(CLI::Range(0.0, 99.9));
  app.add_option(p + "burst-length", options.burst_length[d], "mean loss burst, packets")
      ->check(CLI::Range(1.0, 1000.0));
  app.add_option(p + "delay", c.delay_ms, "one-way delay, ms" + what)->check(CLI::Range(0.0, 1e5));
  app.add_option(p + "jitter", c.jitter_ms, "jitter, ms (uniform: +-; normal: sd)" + what)
      ->check(CLI::Range(0.0, 1e5));
  app.add_option(p + "jitter-dist", options.jitter_dist[d], "uniform or normal")
      ->check(CLI::IsMember({"uniform", "normal"}));
  app.add_flag(p + "reorder", c.allow_reorder, "let jitter reorder packets" + what);
  app.add_option(p + "reorder-pct", c.reorder_percent,
                 "hold this percent of packets by the reorder gap" + what)
      ->check(CLI::Range(0.0, 100.0));
  app.add_option(p + "reorder-gap", c.reorder_gap_ms, "extra hold of a reordered packet, ms")
      ->check(CLI::Range(0.0, 1e5));
  app.add_option(p + "dup", c.duplicate_percent, "duplication, percent" + what)
      ->check(CLI::Range(0.0, 100.0));
  app.add_option(p + "rate", c.rate_kbps, "rate cap, kbit/s (0: none)" + what)
      ->check(CLI::Range(0.0, 1e8));
  app.add_option(p + "rate-schedule", options.rate_schedule_text[d],
                 "rate cap changes during the run, \"S:KBPS,S:KBPS,...\" (seconds after start, "
                 "ascending; KBPS 0: none)" +
                     what);
  app.add_option(p + "bucket", c.bucket_bytes, "token bucket depth, bytes (default 1500)");
  app.add_option(p + "queue", c.queue_limit_bytes,
                 "queue limit before tail drop, bytes (default 100 ms at the rate)");
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{
      "sync-impair: UDP proxy that impairs each direction (loss, bursts, delay, jitter, "
      "reordering, duplication, rate cap), seeded and logged"};
  app.add_option("--listen", options.listen, "HOST:PORT to listen on (port 0: any)");
  app.add_option("--to", options.to, "HOST:PORT of the target")->required();
  app.add_option("--seed", options.seed, "seed of every random stage");
  app.add_option("--log-csv", options.log_csv, "write every datagram's fate to this CSV file");
  app.add_option("--duration", options.duration_s, "exit after this many seconds (0: on signal)");
  app.add_option("--max-in-flight", options.max_in_flight, "datagrams held at once, at most");
  app.add_flag("--quiet", options.quiet, "no per-second lines");
  add_chain_options(app, options, 0);
  add_chain_options(app, options, 1);
  try {
    app.parse(argc, argv);
    for (int d = 0; d < 2; ++d) {
      if (options.burst_loss[d] > 0) {
        if (!impair::set_gilbert_elliott_from_target(options.chain[d], options.burst_loss[d],
                                                     std::max(1.0, options.burst_length[d]))) {
          throw CLI::ValidationError("burst-loss", "needs 0 < loss < 100 and length >= 1");
        }
      }
      if (!options.rate_schedule_text[d].empty() &&
          !parse_rate_schedule(options.rate_schedule_text[d], options.rate_schedule[d])) {
        throw CLI::ValidationError("rate-schedule", "needs \"S:KBPS,...\" with S ascending");
      }
      if (options.jitter_dist[d] == "normal") {
        options.chain[d].jitter_distribution = impair::JitterDistribution::kNormal;
      }
    }
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  sockaddr_storage listen{}, target{};
  if (!parse_host_port(options.listen, &listen) || !parse_host_port(options.to, &target)) {
    std::fprintf(stderr, "sync-impair: addresses are HOST:PORT\n");
    return kExitUsage;
  }
  uv_loop_t* loop = uv_default_loop();
  Proxy proxy(options, loop);
  const int rc = proxy.start(listen, target);
  if (rc != kExitOk) return rc;
  uv_run(loop, UV_RUN_DEFAULT);
  proxy.close_timer_fd();
  uv_loop_close(loop);
  return kExitOk;
}
