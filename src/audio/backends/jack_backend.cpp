// The JACK backend: one input port per channel; JACK's real-time thread interleaves the port
// buffers straight into the capture ring. A supervisor thread (not real-time) opens the client,
// notices the server going away (jack_on_info_shutdown) and reconnects, so neither the loop
// thread nor the real-time thread ever waits on the JACK server.
#include <jack/jack.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "audio/backend.h"
#include "core/clock.h"

namespace syncd::audio {

namespace {

// JACK prints every failed connection attempt; while we are retrying that is noise.
std::atomic<bool> g_quiet{false};
void jack_error_sink(const char* msg) {
  if (!g_quiet.load(std::memory_order_relaxed)) std::fprintf(stderr, "syncd: jack: %s\n", msg);
}
void jack_info_sink(const char*) {}

enum State : int { kStopped = 0, kRunning = 1, kDisconnected = 2 };

class JackBackend final : public CaptureBackend {
 public:
  JackBackend(const AudioSourceConfig& config, CaptureRing& ring)
      : config_(config), ring_(ring), channels_(config.channels) {
    ports_.resize(channels_, nullptr);
    buffers_.resize(channels_, nullptr);
  }
  ~JackBackend() override { stop(); }

  bool start(std::string& error) override {
    if (supervisor_.joinable()) return true;
    jack_set_error_function(&jack_error_sink);
    jack_set_info_function(&jack_info_sink);
    // The first attempt is made here so that a missing server is reported at startup; syncd
    // still runs and the supervisor keeps trying.
    std::string why;
    if (!connect(why)) {
      std::fprintf(stderr, "syncd: jack: %s; will retry\n", why.c_str());
      state_.store(kDisconnected, std::memory_order_relaxed);
    }
    (void)error;
    stop_requested_ = false;
    supervisor_ = std::thread([this] { supervise(); });
    return true;
  }

  void stop() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_requested_ = true;
    }
    wake_.notify_all();
    if (supervisor_.joinable()) supervisor_.join();
    close_client();
    state_.store(kStopped, std::memory_order_relaxed);
  }

  BackendStatus status() const override {
    BackendStatus s;
    switch (state_.load(std::memory_order_relaxed)) {
      case kRunning:
        s.state = "running";
        break;
      case kDisconnected:
        s.state = "disconnected";
        break;
      default:
        s.state = "stopped";
    }
    s.rate = rate_.load(std::memory_order_relaxed);
    s.period_frames = period_.load(std::memory_order_relaxed);
    s.xruns = xruns_.load(std::memory_order_relaxed);
    s.disconnects = disconnects_.load(std::memory_order_relaxed);
    s.reconnects = reconnects_.load(std::memory_order_relaxed);
    s.realtime = realtime_.load(std::memory_order_relaxed);
    return s;
  }
  const char* name() const override { return "jack"; }

 private:
  // Supervisor thread (and start()): opens, registers, activates and connects.
  bool connect(std::string& why) {
    jack_status_t status{};
    jack_client_t* c = jack_client_open(config_.client_name.c_str(), JackNoStartServer, &status);
    if (!c) {
      why = "cannot open a client (is jackd running?)";
      return false;
    }
    for (uint32_t ch = 0; ch < channels_; ++ch) {
      const std::string port = "in_" + std::to_string(ch + 1);
      ports_[ch] = jack_port_register(c, port.c_str(), JACK_DEFAULT_AUDIO_TYPE, JackPortIsInput, 0);
      if (!ports_[ch]) {
        why = "cannot register port " + port;
        jack_client_close(c);
        return false;
      }
    }
    rate_.store(jack_get_sample_rate(c), std::memory_order_relaxed);
    period_.store(jack_get_buffer_size(c), std::memory_order_relaxed);
    jack_set_process_callback(c, &JackBackend::on_process, this);
    jack_set_xrun_callback(c, &JackBackend::on_xrun, this);
    jack_set_buffer_size_callback(c, &JackBackend::on_buffer_size, this);
    jack_set_sample_rate_callback(c, &JackBackend::on_sample_rate, this);
    jack_on_info_shutdown(c, &JackBackend::on_shutdown, this);
    lost_.store(false, std::memory_order_relaxed);
    // Read by the first process cycle of this client: a reconnection starts with a gap check.
    gap_check_ = had_client_;
    rt_client_ = c;
    have_frame_time_ = false;
    if (jack_activate(c) != 0) {
      why = "cannot activate the client";
      jack_client_close(c);
      return false;
    }
    client_ = c;
    realtime_.store(jack_is_realtime(c) != 0, std::memory_order_relaxed);
    connect_ports();
    if (had_client_) reconnects_.fetch_add(1, std::memory_order_relaxed);
    had_client_ = true;
    g_quiet.store(false, std::memory_order_relaxed);
    state_.store(kRunning, std::memory_order_relaxed);
    return true;
  }

  void connect_ports() {
    std::vector<std::string> sources;
    if (config_.connect.size() == 1 && config_.connect[0] == "none") return;
    if (config_.connect.empty() ||
        (config_.connect.size() == 1 && config_.connect[0] == "system")) {
      const char** found = jack_get_ports(client_, nullptr, JACK_DEFAULT_AUDIO_TYPE,
                                          JackPortIsPhysical | JackPortIsOutput);
      for (size_t i = 0; found && found[i]; ++i) sources.emplace_back(found[i]);
      if (found) jack_free(found);
    } else {
      sources = config_.connect;
    }
    for (uint32_t ch = 0; ch < channels_ && ch < sources.size(); ++ch) {
      const int rc = jack_connect(client_, sources[ch].c_str(), jack_port_name(ports_[ch]));
      if (rc != 0 && rc != EEXIST)
        std::fprintf(stderr, "syncd: jack: cannot connect %s to %s\n", sources[ch].c_str(),
                     jack_port_name(ports_[ch]));
    }
  }

  void close_client() {
    if (!client_) return;
    jack_deactivate(client_);
    jack_client_close(client_);
    client_ = nullptr;
  }

  void supervise() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_requested_) {
      wake_.wait_for(lock, std::chrono::milliseconds(200));
      if (stop_requested_) break;
      if (client_ && lost_.load(std::memory_order_acquire)) {
        // The server is gone: its process thread has stopped. Close our half and retry.
        jack_client_close(client_);
        client_ = nullptr;
        disconnects_.fetch_add(1, std::memory_order_relaxed);
        state_.store(kDisconnected, std::memory_order_relaxed);
        g_quiet.store(true, std::memory_order_relaxed);
        std::fprintf(stderr, "syncd: jack: server went away; reconnecting\n");
      }
      if (!client_) {
        std::string why;
        lock.unlock();
        const bool ok = connect(why);
        lock.lock();
        if (ok) std::fprintf(stderr, "syncd: jack: reconnected\n");
      }
    }
  }

  // ---- JACK's real-time thread ----
  static int on_process(jack_nframes_t nframes, void* arg) {
    auto* self = static_cast<JackBackend*>(arg);
    self->process(nframes);
    return 0;
  }

  void process(jack_nframes_t nframes) {
    const uint32_t rate = rate_.load(std::memory_order_relaxed);
    const uint64_t period_ns = uint64_t(nframes) * 1'000'000'000ull / rate;
    // The callback runs as the period's last frame arrives; its first frame is one period older.
    const uint64_t now = core::monotonic_ns();
    const uint64_t ts = now > period_ns ? now - period_ns : 0;
    if (gap_check_) {
      gap_check_ = false;
      if (last_end_ns_ != 0 && ts > last_end_ns_)
        ring_.mark_gap((ts - last_end_ns_) * rate / 1'000'000'000ull);
    }
    last_end_ns_ = ts + period_ns;
    // Cycles JACK ran without us (an xrun, a late wake-up) show as a jump in its frame clock:
    // those frames never reached us, so they are a gap, placed exactly where they belong.
    const jack_nframes_t frame_time = jack_last_frame_time(rt_client_);
    if (have_frame_time_ && frame_time != expected_frame_time_) {
      const jack_nframes_t missed = frame_time - expected_frame_time_;  // modulo 2^32
      if (missed < rate * 60) ring_.mark_gap(missed);
    }
    expected_frame_time_ = frame_time + nframes;
    have_frame_time_ = true;
    const RingSpan span = ring_.begin_write(nframes);
    if (span.total() == 0) {
      ring_.drop(nframes);
      return;
    }
    for (uint32_t ch = 0; ch < channels_; ++ch)
      buffers_[ch] = static_cast<const float*>(jack_port_get_buffer(ports_[ch], nframes));
    uint32_t src = 0;
    for (int part = 0; part < 2; ++part) {
      float* dst = span.part[part];
      for (uint32_t f = 0; f < span.frames[part]; ++f, ++src)
        for (uint32_t ch = 0; ch < channels_; ++ch) *dst++ = buffers_[ch][src];
    }
    ring_.commit(nframes, ts);
  }

  // ---- JACK's notification thread ----
  static int on_xrun(void* arg) {
    static_cast<JackBackend*>(arg)->xruns_.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  static int on_buffer_size(jack_nframes_t n, void* arg) {
    static_cast<JackBackend*>(arg)->period_.store(n, std::memory_order_relaxed);
    return 0;
  }
  static int on_sample_rate(jack_nframes_t n, void* arg) {
    static_cast<JackBackend*>(arg)->rate_.store(n, std::memory_order_relaxed);
    return 0;
  }
  static void on_shutdown(jack_status_t, const char*, void* arg) {
    // Runs on a JACK thread: only flag it; the supervisor does the closing.
    auto* self = static_cast<JackBackend*>(arg);
    self->lost_.store(true, std::memory_order_release);
    self->state_.store(kDisconnected, std::memory_order_relaxed);
    self->wake_.notify_all();
  }

  const AudioSourceConfig config_;
  CaptureRing& ring_;
  const uint32_t channels_;
  std::vector<jack_port_t*> ports_;    // written by the supervisor while no client is active
  std::vector<const float*> buffers_;  // real-time thread scratch, sized once
  jack_client_t* client_ = nullptr;    // supervisor (and start/stop on the loop thread)
  bool had_client_ = false;
  bool gap_check_ = false;              // set before activate, read by the next process thread
  uint64_t last_end_ns_ = 0;            // real-time thread: end of the last captured period
  jack_client_t* rt_client_ = nullptr;  // set before activate; read by the process thread
  bool have_frame_time_ = false;        // set before activate, then real-time thread only
  jack_nframes_t expected_frame_time_ = 0;

  std::thread supervisor_;
  std::mutex mutex_;  // supervisor wake-ups and stop; never taken on the real-time thread
  std::condition_variable wake_;
  bool stop_requested_ = false;

  std::atomic<int> state_{kStopped};
  std::atomic<bool> lost_{false};
  std::atomic<uint32_t> rate_{0};
  std::atomic<uint32_t> period_{0};
  std::atomic<uint64_t> xruns_{0};
  std::atomic<uint64_t> disconnects_{0};
  std::atomic<uint64_t> reconnects_{0};
  std::atomic<bool> realtime_{false};
};

}  // namespace

std::unique_ptr<CaptureBackend> make_jack_backend(const AudioSourceConfig& config,
                                                  CaptureRing& ring) {
  return std::make_unique<JackBackend>(config, ring);
}

uint32_t probe_jack_rate() {
  jack_set_error_function(&jack_error_sink);
  jack_set_info_function(&jack_info_sink);
  g_quiet.store(true, std::memory_order_relaxed);
  jack_status_t status{};
  jack_client_t* c = jack_client_open("syncd-probe", JackNoStartServer, &status);
  g_quiet.store(false, std::memory_order_relaxed);
  if (!c) return 0;
  const uint32_t rate = jack_get_sample_rate(c);
  jack_client_close(c);
  return rate;
}

}  // namespace syncd::audio
