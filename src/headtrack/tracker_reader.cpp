#include "headtrack/tracker_reader.h"

#include <libudev.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/clock.h"

namespace syncd::headtrack {
namespace {

void copy_text(char* dst, size_t cap, const std::string& s) {
  const size_t n = std::min(cap - 1, s.size());
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

}  // namespace

TrackerReader::TrackerReader(ReaderConfig config) : config_(std::move(config)) {}

TrackerReader::~TrackerReader() {
  stop();
  if (wakeup_fd_ >= 0) ::close(wakeup_fd_);
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

void TrackerReader::set_wakeup_callback(std::function<void()> callback) {
  callback_ = std::move(callback);
}

bool TrackerReader::start(std::string* error) {
  if (thread_.joinable()) return true;
  if (config_.source.rfind("replay:", 0) == 0) {
    if (!load_replay(config_.source.substr(7), replay_, error)) return false;
    ParsedDescriptor parsed;
    const ParseResult pr = parse_hid_descriptor(replay_.descriptor, parsed);
    const char* why = nullptr;
    if (!pr.ok()) {
      if (error) *error = std::string("replay descriptor: ") + to_string(pr.error);
      return false;
    }
    if (!recognize_head_tracker(parsed, layout_, &why)) {
      if (error) *error = std::string("replay descriptor: ") + why;
      return false;
    }
    decoder_ = ReportDecoder(layout_);
    descriptor_ = replay_.descriptor;
    features_ = replay_.features;
  }
  if (wakeup_fd_ < 0) wakeup_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (stop_fd_ < 0) stop_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wakeup_fd_ < 0 || stop_fd_ < 0) {
    if (error) *error = std::string("eventfd: ") + std::strerror(errno);
    return false;
  }
  stopping_.store(false);
  thread_ = std::thread([this] { run(); });
  return true;
}

void TrackerReader::stop() {
  if (!thread_.joinable()) return;
  stopping_.store(true, std::memory_order_release);
  const uint64_t one = 1;
  (void)!::write(stop_fd_, &one, sizeof(one));
  thread_.join();
}

size_t TrackerReader::poll(TrackerEvent* out, size_t max) {
  // Clear the eventfd first, then drain: an event pushed after the drain writes it again.
  uint64_t value;
  if (wakeup_fd_ >= 0) (void)!::read(wakeup_fd_, &value, sizeof(value));
  size_t n = 0;
  while (n < max && ring_.try_pop(out[n])) ++n;
  if (n == max && ring_.size() > 0) {  // more left: keep the fd readable for the next round
    const uint64_t one = 1;
    (void)!::write(wakeup_fd_, &one, sizeof(one));
  }
  return n;
}

ReaderStats TrackerReader::stats() const {
  ReaderStats s;
  s.reports = reports_.load(std::memory_order_relaxed);
  s.samples = samples_.load(std::memory_order_relaxed);
  s.ring_overruns = overruns_.load(std::memory_order_relaxed);
  s.other_report = other_report_.load(std::memory_order_relaxed);
  s.out_of_range = out_of_range_.load(std::memory_order_relaxed);
  s.too_short = too_short_.load(std::memory_order_relaxed);
  s.connects = connects_.load(std::memory_order_relaxed);
  s.disconnects = disconnects_.load(std::memory_order_relaxed);
  s.connected = connected_.load(std::memory_order_relaxed);
  return s;
}

bool TrackerReader::wait(int timeout_ms, int extra_fd) {
  pollfd fds[2] = {{stop_fd_, POLLIN, 0}, {extra_fd, POLLIN, 0}};
  const int rc = ::poll(fds, extra_fd >= 0 ? 2 : 1, timeout_ms);
  (void)rc;
  return !stopping_.load(std::memory_order_acquire);
}

bool TrackerReader::push(const TrackerEvent& event, bool wait_when_full) {
  while (!ring_.try_push(event)) {
    if (!wait_when_full) {
      overruns_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    if (!wait(1)) return false;
  }
  const uint64_t one = 1;
  (void)!::write(wakeup_fd_, &one, sizeof(one));
  if (callback_) callback_();
  return true;
}

void TrackerReader::push_text(TrackerEvent::Kind kind, const std::string& text, uint8_t version) {
  TrackerEvent e;
  e.kind = kind;
  e.version = version;
  copy_text(e.text, sizeof(e.text), text);
  push(e, true);
}

void TrackerReader::count_decode(DecodeStatus status) {
  switch (status) {
    case DecodeStatus::kOk:
      break;
    case DecodeStatus::kOtherReport:
      other_report_.fetch_add(1, std::memory_order_relaxed);
      break;
    case DecodeStatus::kOutOfRange:
      out_of_range_.fetch_add(1, std::memory_order_relaxed);
      break;
    case DecodeStatus::kTooShort:
      too_short_.fetch_add(1, std::memory_order_relaxed);
      break;
  }
}

void TrackerReader::run() {
  if (!replay_.descriptor.empty())
    run_replay();
  else
    run_hidraw();
}

void TrackerReader::run_replay() {
  const std::string path = config_.source.substr(7);
  if (!config_.record_path.empty()) {
    std::string error;
    if (!recorder_.open(config_.record_path, descriptor_, features_, "re-recorded from " + path,
                        &error)) {
      push_text(TrackerEvent::Kind::kStatus, "record: " + error);
    }
  }
  connected_.store(true);
  connects_.fetch_add(1, std::memory_order_relaxed);
  push_text(TrackerEvent::Kind::kConnected, "replay:" + path, uint8_t(layout_.version_hint()));
  const int64_t t0 = int64_t(core::monotonic_ns());
  TrackerEvent e;
  e.kind = TrackerEvent::Kind::kSample;
  // A looped pass starts one report interval after the previous one's last report, so file
  // time (and with it the filter's dt) keeps going forward.
  const double pass_ms =
      replay_.reports.empty() ? 0 : replay_.reports.back().t_ms + config_.interval_ms;
  double offset_ms = 0;
  do {
    for (const ReplayReport& r : replay_.reports) {
      if (stopping_.load(std::memory_order_acquire)) break;
      const double t_ms = offset_ms + r.t_ms;
      if (config_.replay_realtime) {
        const int64_t due = t0 + int64_t(t_ms * 1e6);
        for (;;) {
          const int64_t now = int64_t(core::monotonic_ns());
          if (now >= due) break;
          if (!wait(int((due - now + 999'999) / 1'000'000))) break;
        }
        if (stopping_.load(std::memory_order_acquire)) break;
      }
      reports_.fetch_add(1, std::memory_order_relaxed);
      recorder_.write(t_ms, r.bytes);
      const DecodeStatus st = decoder_.decode(r.bytes, e.sample);
      count_decode(st);
      if (st != DecodeStatus::kOk) continue;
      // Paced by the file, stamped like a device: CLOCK_MONOTONIC when the report is read, so
      // poses line up with video and audio. An unpaced replay has no moment of reading; it
      // keeps the file's time, which also makes the filter's dt deterministic there.
      e.sample.t_ns = config_.replay_realtime ? int64_t(core::monotonic_ns()) : int64_t(t_ms * 1e6);
      if (push(e, true)) samples_.fetch_add(1, std::memory_order_relaxed);
    }
    offset_ms += pass_ms;
  } while (config_.replay_loop && config_.replay_realtime && pass_ms > 0 &&
           !stopping_.load(std::memory_order_acquire));
  recorder_.close();
  connected_.store(false);
  disconnects_.fetch_add(1, std::memory_order_relaxed);
  const bool stopped = stopping_.load(std::memory_order_acquire);
  push_text(TrackerEvent::Kind::kDisconnected, stopped ? "stopped" : "end of replay");
  finished_.store(!stopped, std::memory_order_release);
  const uint64_t one = 1;
  (void)!::write(wakeup_fd_, &one, sizeof(one));
  if (callback_) callback_();
}

bool TrackerReader::connect(HidrawDevice& dev, std::string& name, std::string& why) {
  std::string devnode = config_.source;
  name = devnode;
  if (config_.source == "auto") {
    devnode.clear();
    std::string denied;
    for (const ProbeEntry& p : probe_all(config_.enumerate)) {
      if (!p.is_tracker) continue;
      if (p.access == NodeAccess::kOk) {
        devnode = p.node.devnode;
        name = p.node.hid_name.empty() ? devnode : p.node.hid_name;
        break;
      }
      if (p.access == NodeAccess::kDenied && denied.empty()) denied = p.node.devnode;
    }
    if (devnode.empty()) {
      why = denied.empty() ? "no head tracker found"
                           : "head tracker " + denied + ": access denied (see the udev rule)";
      return false;
    }
  }
  if (!dev.open(devnode, true)) {
    why =
        devnode + ": " +
        (errno == EACCES ? "access denied (see the udev rule)" : std::string(std::strerror(errno)));
    return false;
  }
  ParsedDescriptor parsed;
  const char* reason = nullptr;
  if (!dev.read_descriptor(descriptor_)) {
    why = devnode + ": HIDIOCGRDESC: " + std::strerror(errno);
    return false;
  }
  const ParseResult pr = parse_hid_descriptor(descriptor_, parsed);
  if (!pr.ok() || !recognize_head_tracker(parsed, layout_, &reason)) {
    why = devnode + ": not a head tracker: " + (pr.ok() ? reason : to_string(pr.error));
    return false;
  }
  features_.clear();
  uint8_t version = uint8_t(layout_.version_hint());
  if (layout_.description.present) {
    const uint8_t id = layout_.description.report_id;
    std::vector<uint8_t> report(std::max<size_t>(layout_.feature_report_bytes[id], 2));
    report[0] = id;
    const int n = dev.get_feature(report);
    SensorDescription desc;
    if (n <= 0 || !parse_sensor_description(
                      description_bytes(layout_, std::span(report.data(), size_t(n))), desc)) {
      why = devnode + ": custom sensor without the #AndroidHeadTracker# description";
      return false;
    }
    version = uint8_t(desc.major);
    report.resize(size_t(n));
    features_.push_back(report);
  }
  // Read-modify-write each control report; keep the originals so stop() can restore them.
  saved_controls_.clear();
  for (uint8_t id : layout_.control_report_ids()) {
    std::vector<uint8_t> report(std::max<size_t>(layout_.feature_report_bytes[id], 1));
    if (layout_.uses_report_ids) report[0] = id;
    const int n = dev.get_feature(report);
    if (n <= 0) {
      why = devnode + ": HIDIOCGFEATURE: " + std::strerror(errno);
      return false;
    }
    saved_controls_.push_back(report);
    if (apply_enable(layout_, report, config_.interval_ms / 1000.0) && !dev.set_feature(report)) {
      why = devnode + ": HIDIOCSFEATURE: " + std::strerror(errno);
      return false;
    }
  }
  decoder_ = ReportDecoder(layout_);
  if (!config_.record_path.empty() && !recorder_.is_open()) {
    std::string error;
    if (!recorder_.open(config_.record_path, descriptor_, features_, "recorded from " + name,
                        &error)) {
      push_text(TrackerEvent::Kind::kStatus, "record: " + error);
    }
    record_t0_ns_ = -1;
  }
  connected_.store(true);
  connects_.fetch_add(1, std::memory_order_relaxed);
  push_text(TrackerEvent::Kind::kConnected, name, version);
  return true;
}

void TrackerReader::stream(HidrawDevice& dev) {
  uint8_t buffer[256];
  TrackerEvent e;
  e.kind = TrackerEvent::Kind::kSample;
  std::string why = "device disconnected";
  while (!stopping_.load(std::memory_order_acquire)) {
    pollfd fds[2] = {{dev.fd(), POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      why = std::string("poll: ") + std::strerror(errno);
      break;
    }
    if (fds[1].revents) break;
    if (fds[0].revents & (POLLERR | POLLHUP | POLLNVAL)) break;
    const ssize_t n = dev.read_report(buffer);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      if (n < 0) why = std::string("read: ") + std::strerror(errno);
      break;
    }
    const int64_t now = int64_t(core::monotonic_ns());
    reports_.fetch_add(1, std::memory_order_relaxed);
    if (recorder_.is_open()) {
      if (record_t0_ns_ < 0) record_t0_ns_ = now;
      recorder_.write(double(now - record_t0_ns_) / 1e6, std::span(buffer, size_t(n)));
    }
    const DecodeStatus st = decoder_.decode(std::span(buffer, size_t(n)), e.sample);
    count_decode(st);
    if (st != DecodeStatus::kOk) continue;
    e.sample.t_ns = now;
    if (push(e, false)) samples_.fetch_add(1, std::memory_order_relaxed);
  }
  if (stopping_.load(std::memory_order_acquire)) restore(dev);
  connected_.store(false);
  disconnects_.fetch_add(1, std::memory_order_relaxed);
  push_text(TrackerEvent::Kind::kDisconnected, stopping_.load() ? std::string("stopped") : why);
}

void TrackerReader::restore(HidrawDevice& dev) {
  // Spec: on exit write "no events" and "power off", keeping the other bits as they were found.
  for (std::vector<uint8_t> report : saved_controls_) {
    if (apply_disable(layout_, report)) (void)dev.set_feature(report);
  }
  saved_controls_.clear();
}

void TrackerReader::run_hidraw() {
  udev* u = nullptr;
  udev_monitor* monitor = nullptr;
  int monitor_fd = -1;
  if (config_.source == "auto" && config_.enumerate.sysfs_root == "/sys/class/hidraw") {
    u = udev_new();
    if (u) monitor = udev_monitor_new_from_netlink(u, "udev");
    if (monitor) {
      udev_monitor_filter_add_match_subsystem_devtype(monitor, "hidraw", nullptr);
      if (udev_monitor_enable_receiving(monitor) == 0) monitor_fd = udev_monitor_get_fd(monitor);
    }
  }
  std::string last_status;
  while (!stopping_.load(std::memory_order_acquire)) {
    HidrawDevice dev;
    std::string name, why;
    if (connect(dev, name, why)) {
      last_status.clear();
      stream(dev);
    } else if (why != last_status) {
      push_text(TrackerEvent::Kind::kStatus, why);
      last_status = why;
    }
    dev.close();
    // Re-enumerate every reenumerate_ms, or at once when udev announces a hidraw node.
    if (!wait(config_.reenumerate_ms, monitor_fd)) break;
    if (monitor) {
      while (udev_device* d = udev_monitor_receive_device(monitor)) udev_device_unref(d);
    }
  }
  recorder_.close();
  if (monitor) udev_monitor_unref(monitor);
  if (u) udev_unref(u);
}

}  // namespace syncd::headtrack
