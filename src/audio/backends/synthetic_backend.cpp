// The synthetic backend: a timed thread that writes the counter signal (audio/test_signal.h)
// at an exact long-run rate. Each wake-up writes the frames due by the clock since start, so a
// late wake-up catches up instead of drifting.
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <atomic>
#include <thread>

#include "audio/backend.h"
#include "audio/test_signal.h"

namespace syncd::audio {

namespace {

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

class SyntheticBackend final : public CaptureBackend {
 public:
  SyntheticBackend(const AudioSourceConfig& config, CaptureRing& ring)
      : ring_(ring),
        channels_(config.channels),
        rate_(config.rate),
        period_(config.period_frames ? config.period_frames : std::max(1u, config.rate / 200)),
        tone_(config.tone) {}
  ~SyntheticBackend() override { stop(); }

  bool start(std::string&) override {
    if (thread_.joinable()) return true;
    stop_.store(false, std::memory_order_relaxed);
    thread_ = std::thread([this] { run(); });
    return true;
  }

  void stop() override {
    stop_.store(true, std::memory_order_relaxed);
    if (thread_.joinable()) thread_.join();
  }

  BackendStatus status() const override {
    BackendStatus s;
    s.state = thread_.joinable() ? "running" : "stopped";
    s.rate = rate_;
    s.period_frames = period_;
    s.realtime = realtime_.load(std::memory_order_relaxed);
    return s;
  }
  const char* name() const override { return "synthetic"; }

 private:
  void run() {
    // SCHED_FIFO when permitted (root or RLIMIT_RTPRIO): the thread then preempts the loop and
    // video work on a busy machine. Without it we still run, at normal priority.
    sched_param param{};
    param.sched_priority = 70;
    realtime_.store(pthread_setschedparam(pthread_self(), SCHED_FIFO, &param) == 0,
                    std::memory_order_relaxed);
    const uint64_t t0 = now_ns();
    uint64_t produced = 0;
    timespec wake;
    clock_gettime(CLOCK_MONOTONIC, &wake);
    const uint64_t period_ns = uint64_t(period_) * 1'000'000'000ull / rate_;
    while (!stop_.load(std::memory_order_relaxed)) {
      const uint64_t due = (now_ns() - t0) * rate_ / 1'000'000'000ull;
      while (produced < due) {
        const uint32_t n = uint32_t(std::min<uint64_t>(due - produced, period_));
        // The real-time part: fill ring memory in place and publish. No lock, no allocation.
        const RingSpan span = ring_.begin_write(n);
        const uint64_t ts = t0 + produced * 1'000'000'000ull / rate_;
        if (span.total() == 0) {
          ring_.drop(n);
        } else {
          if (tone_) {
            fill_tone(span.part[0], produced, span.frames[0], channels_, rate_);
            if (span.frames[1])
              fill_tone(span.part[1], produced + span.frames[0], span.frames[1], channels_, rate_);
          } else {
            fill_counter(span.part[0], produced, span.frames[0], channels_);
            if (span.frames[1])
              fill_counter(span.part[1], produced + span.frames[0], span.frames[1], channels_);
          }
          ring_.commit(n, ts);
        }
        produced += n;
      }
      uint64_t next = uint64_t(wake.tv_sec) * 1'000'000'000ull + uint64_t(wake.tv_nsec) + period_ns;
      wake.tv_sec = time_t(next / 1'000'000'000ull);
      wake.tv_nsec = long(next % 1'000'000'000ull);
      clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &wake, nullptr);
    }
  }

  CaptureRing& ring_;
  const uint32_t channels_;
  const uint32_t rate_;
  const uint32_t period_;
  const bool tone_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> realtime_{false};
};

}  // namespace

std::unique_ptr<CaptureBackend> make_synthetic_backend(const AudioSourceConfig& config,
                                                       CaptureRing& ring) {
  return std::make_unique<SyntheticBackend>(config, ring);
}

}  // namespace syncd::audio
