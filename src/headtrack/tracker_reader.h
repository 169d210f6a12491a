// The head-tracker source for syncd and the CLI: a reader thread that owns the device (hidraw or a
// replay file), decodes each report and hands samples to one consumer thread over a lock-free
// SPSC ring.
//
// Threads:
//   - control thread: constructor, set_wakeup_callback(), start(), stop(), destructor;
//   - reader thread (owned here): blocking poll()+read() on hidraw, decoding, enabling and
//     restoring the device, re-enumerating every reenumerate_ms (and on udev hotplug) after a
//     disconnect, recording;
//   - consumer thread (exactly one; syncd's loop thread): poll(), which never blocks;
//   - any thread: wakeup_fd(), stats(), finished().
// The consumer learns there is work from wakeup_fd() (an eventfd, readable while events are
// pending; watch it with uv_poll or poll(2)) or from the wakeup callback, which runs on the reader
// thread after each push and suits uv_async_send(). Nothing is allocated per report.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "core/spsc_ring.h"
#include "headtrack/hidraw.h"
#include "headtrack/replay.h"
#include "headtrack/report_decoder.h"

namespace syncd::headtrack {

struct ReaderConfig {
  // "auto" (first head tracker found), "/dev/hidrawN", or "replay:FILE".
  std::string source = "auto";
  // Paced by the file's deltas, each report stamped with CLOCK_MONOTONIC when it is read (as a
  // device's are). false: as fast as the consumer drains, stamped with the file's own time.
  bool replay_realtime = true;
  // Play a replay file again and again, as a device keeps reporting (syncd's pose topic); off,
  // the reader ends with "end of replay" (the bridge exits then). Real-time replays only.
  bool replay_loop = false;
  double interval_ms = 20;  // report interval requested from the device
  std::string record_path;  // when set, every report read is appended in replay format
  EnumerateOptions enumerate;
  int reenumerate_ms = 2000;
};

struct TrackerEvent {
  enum class Kind : uint8_t {
    kSample,        // sample holds a decoded report
    kConnected,     // text: device name; version: 1 or 2 (0 unknown)
    kDisconnected,  // text: why (unplugged, read error, end of replay)
    kStatus,        // text: why no device is in use yet (none found, access denied, ...)
  };
  Kind kind = Kind::kSample;
  uint8_t version = 0;
  TrackerSample sample;
  char text[118] = {};
};

struct ReaderStats {
  uint64_t reports = 0;        // input reports read
  uint64_t samples = 0;        // decoded and queued
  uint64_t ring_overruns = 0;  // samples dropped because the consumer fell behind
  uint64_t other_report = 0;
  uint64_t out_of_range = 0;
  uint64_t too_short = 0;
  uint64_t connects = 0;
  uint64_t disconnects = 0;
  bool connected = false;
};

class TrackerReader {
 public:
  static constexpr size_t kRingCapacity = 256;  // ~2.5 s at 100 Hz

  explicit TrackerReader(ReaderConfig config);
  ~TrackerReader();  // stop()
  TrackerReader(const TrackerReader&) = delete;
  TrackerReader& operator=(const TrackerReader&) = delete;

  // Control thread, before start(). Runs on the reader thread after each queued event; must be
  // cheap and thread-safe (uv_async_send is).
  void set_wakeup_callback(std::function<void()> callback);
  // Control thread. Loads and checks a replay file up front (so a bad file fails here), creates
  // the eventfds and the thread. Control path: false with *error on failure, never throws.
  bool start(std::string* error);
  // Control thread. Wakes the reader, which restores the device (reporting off, power off) and
  // exits; joins it. Idempotent.
  void stop();

  // Consumer thread only. Copies up to max pending events into out, oldest first; never blocks.
  size_t poll(TrackerEvent* out, size_t max);
  // Any thread. Readable (POLLIN) while events may be pending; poll() clears it.
  int wakeup_fd() const { return wakeup_fd_; }
  ReaderStats stats() const;
  // Any thread. True once a replay has delivered its last event.
  bool finished() const { return finished_.load(std::memory_order_acquire); }

 private:
  void run();
  void run_replay();
  void run_hidraw();
  // Opens, checks and enables a device; on failure returns false with a reason in why.
  bool connect(HidrawDevice& dev, std::string& name, std::string& why);
  void stream(HidrawDevice& dev);
  void restore(HidrawDevice& dev);
  bool push(const TrackerEvent& event, bool wait_when_full);
  void push_text(TrackerEvent::Kind kind, const std::string& text, uint8_t version = 0);
  // Sleeps up to timeout_ms or until stop; also returns early when extra_fd is readable.
  bool wait(int timeout_ms, int extra_fd = -1);
  void count_decode(DecodeStatus status);

  ReaderConfig config_;
  std::function<void()> callback_;
  std::thread thread_;
  int wakeup_fd_ = -1;
  int stop_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> finished_{false};
  core::SpscRing<TrackerEvent, kRingCapacity> ring_;

  // Reader-thread state.
  ReplayFile replay_;
  TrackerLayout layout_;
  ReportDecoder decoder_;
  ReplayRecorder recorder_;
  std::vector<std::vector<uint8_t>> saved_controls_;  // feature reports as found, for restore
  std::vector<uint8_t> descriptor_;
  std::vector<std::vector<uint8_t>> features_;
  int64_t record_t0_ns_ = -1;

  std::atomic<uint64_t> reports_{0}, samples_{0}, overruns_{0};
  std::atomic<uint64_t> other_report_{0}, out_of_range_{0}, too_short_{0};
  std::atomic<uint64_t> connects_{0}, disconnects_{0};
  std::atomic<bool> connected_{false};
};

}  // namespace syncd::headtrack
