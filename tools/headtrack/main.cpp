// sync-headtrack: read-only probe for Android head trackers, and a bridge that streams one to
// OpenTrack ("UDP over network", port N) and JSON telemetry (port N + 1). See docs/headtracker.md.
//
// Threads: main (argument parsing, the send loop, the status line) and the TrackerReader's HID
// reader thread. The pose pipeline and the UDP socket live on the main thread only.
// Exit codes (users' scripts rely on them): 0 ok / found, 1 bad arguments, 2 probe found nothing,
// 3 bridge has no tracker, 4 socket failure.
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <string>

#include "core/clock.h"
#include "headtrack/hidraw.h"
#include "headtrack/orientation.h"
#include "headtrack/output.h"
#include "headtrack/tracker_reader.h"

namespace syncd::headtrack {
namespace {

enum ExitCode : int {
  kExitOk = 0,
  kExitUsage = 1,
  kExitNoneFound = 2,
  kExitNoTracker = 3,
  kExitSocket = 4,
};

volatile sig_atomic_t g_stop = 0;
volatile sig_atomic_t g_recenter = 0;

void on_stop(int) {
  g_stop = 1;
}
void on_recenter(int) {
  g_recenter = 1;
}

void install_signals() {
  struct sigaction a {};
  a.sa_handler = on_stop;
  sigemptyset(&a.sa_mask);
  sigaction(SIGINT, &a, nullptr);
  sigaction(SIGTERM, &a, nullptr);
  a.sa_handler = on_recenter;
  sigaction(SIGUSR1, &a, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

struct BridgeOptions {
  int port = 4242;
  std::string host = "127.0.0.1";
  double seconds = 0;
  std::string device = "auto";
  std::string replay;
  bool fast = false;
  std::string record;
  std::string axis_map = "ZXY";
  std::string invert;  // empty: the default signs
  double smoothing = 0.3;
  double predict_ms = 0;
  double interval_ms = 20;
  bool quiet = false;
  EnumerateOptions enumerate;
};

int run_probe(const EnumerateOptions& options) {
  const auto entries = probe_all(options);
  int found = 0;
  bool denied = false;
  if (entries.empty()) std::printf("no hidraw nodes under %s\n", options.sysfs_root.c_str());
  for (const ProbeEntry& p : entries) {
    std::printf("%s  %-10s %-24s %s: %s\n", p.is_tracker ? "[tracker]" : "[-]      ",
                p.node.name.c_str(), p.node.hid_id.c_str(),
                p.node.hid_name.empty() ? "?" : p.node.hid_name.c_str(), p.reason.c_str());
    if (p.is_tracker) {
      ++found;
      const TrackerLayout& l = p.layout;
      std::printf("           input report %u (%zu bytes): rotation @bit %u x%u bits%s%s%s\n",
                  l.input_report_id, l.input_report_bytes, l.rotation[0].bit_offset,
                  l.rotation[0].bit_size, l.has_angular_velocity ? ", angular velocity" : "",
                  l.has_counter ? ", discontinuity counter" : "",
                  l.transport.present ? ", transport (v2)" : "");
      if (p.access == NodeAccess::kDenied) denied = true;
    }
  }
  if (denied) std::printf("access denied: install the udev rule:\n  %s\n", kUdevRuleHint);
  std::printf("%d head tracker(s) found\n", found);
  return found ? kExitOk : kExitNoneFound;
}

// Samples per second over the last completed one-second window.
class RateMeter {
 public:
  void add(uint64_t now_ns) {
    if (window_start_ == 0) window_start_ = now_ns;
    if (now_ns - window_start_ >= 1'000'000'000ull) {
      rate_ = double(count_) * 1e9 / double(now_ns - window_start_);
      count_ = 0;
      window_start_ = now_ns;
    }
    ++count_;
  }
  double rate() const { return rate_; }

 private:
  uint64_t window_start_ = 0;
  uint64_t count_ = 0;
  double rate_ = 0;
};

int run_bridge(const BridgeOptions& o) {
  PipelineConfig pipeline_config;
  if (!parse_axis_order(o.axis_map, pipeline_config.axes)) {
    std::fprintf(stderr, "--axis-map: expected a permutation of XYZ, got '%s'\n",
                 o.axis_map.c_str());
    return kExitUsage;
  }
  if (!o.invert.empty() && !parse_invert(o.invert, pipeline_config.axes)) {
    std::fprintf(stderr, "--invert: expected letters from XYZ or 'none', got '%s'\n",
                 o.invert.c_str());
    return kExitUsage;
  }
  pipeline_config.filter.smoothing = o.smoothing;
  pipeline_config.filter.predict_ms = o.predict_ms;

  ReaderConfig rc;
  rc.enumerate = o.enumerate;
  rc.record_path = o.record;
  rc.interval_ms = o.interval_ms;
  rc.replay_realtime = !o.fast;
  if (!o.replay.empty()) {
    rc.source = "replay:" + o.replay;
    ReplayFile file;
    std::string error;
    if (!load_replay(o.replay, file, &error)) {
      std::fprintf(stderr, "--replay: %s\n", error.c_str());
      return kExitUsage;
    }
    ParsedDescriptor parsed;
    TrackerLayout layout;
    const char* why = nullptr;
    if (!parse_hid_descriptor(file.descriptor, parsed).ok() ||
        !recognize_head_tracker(parsed, layout, &why)) {
      std::fprintf(stderr, "no tracker: the replay's descriptor is not a head tracker (%s)\n",
                   why ? why : "does not parse");
      return kExitNoTracker;
    }
  } else {
    rc.source = o.device;
    if (o.device == "auto") {
      bool any = false, denied = false;
      for (const ProbeEntry& p : probe_all(o.enumerate)) {
        if (!p.is_tracker) continue;
        if (p.access == NodeAccess::kOk)
          any = true;
        else if (p.access == NodeAccess::kDenied)
          denied = true;
      }
      if (!any) {
        std::fprintf(stderr, "no tracker: %s\n",
                     denied ? "a head tracker is present but access is denied; install the udev "
                              "rule (docs/headtracker.md)"
                            : "no Android head tracker found (run 'sync-headtrack probe')");
        if (denied) std::fprintf(stderr, "  %s\n", kUdevRuleHint);
        return kExitNoTracker;
      }
    } else if (access(o.device.c_str(), F_OK) != 0) {
      std::fprintf(stderr, "no tracker: %s does not exist\n", o.device.c_str());
      return kExitNoTracker;
    }
  }

  UdpOutput out;
  std::string error;
  if (!out.open(o.host, uint16_t(o.port), &error)) {
    std::fprintf(stderr, "socket failure: %s\n", error.c_str());
    return kExitSocket;
  }
  TrackerReader reader(rc);
  if (!reader.start(&error)) {
    std::fprintf(stderr, "no tracker: %s\n", error.c_str());
    return kExitNoTracker;
  }
  const bool tty = isatty(STDOUT_FILENO) && !o.quiet;
  if (!o.quiet) {
    std::printf("bridge: OpenTrack -> %s:%d, JSON -> %s:%d (source port %u)\n", o.host.c_str(),
                o.port, o.host.c_str(), o.port + 1, out.local_port());
    std::fflush(stdout);
  }

  PosePipeline pipeline(pipeline_config);
  TelemetryJson json;
  OpenTrackPacket packet;
  RateMeter rate;
  std::string device;
  uint64_t seq = 0, sent = 0;
  int64_t previous_t = -1;
  const uint64_t start = core::monotonic_ns();
  uint64_t next_status = start;
  TrackerEvent events[64];
  for (;;) {
    if (g_stop) break;
    if (o.seconds > 0 && double(core::monotonic_ns() - start) / 1e9 >= o.seconds) break;
    pollfd pfd{reader.wakeup_fd(), POLLIN, 0};
    ::poll(&pfd, 1, 100);
    if (g_recenter) {
      g_recenter = 0;
      pipeline.request_recenter();
    }
    const size_t n = reader.poll(events, 64);
    for (size_t i = 0; i < n; ++i) {
      const TrackerEvent& e = events[i];
      if (e.kind != TrackerEvent::Kind::kSample) {
        if (e.kind == TrackerEvent::Kind::kConnected) {
          device = e.text;
          pipeline.reset();
          previous_t = -1;
        }
        if (!o.quiet) {
          static const char* kNames[] = {"sample", "connected", "disconnected", "status"};
          std::printf("%s%s: %s", tty ? "\r\033[K" : "", kNames[int(e.kind)], e.text);
          if (e.kind == TrackerEvent::Kind::kConnected && e.version) {
            std::printf(" (v%u)", e.version);
          }
          std::printf("\n");
          std::fflush(stdout);
        }
        continue;
      }
      const double dt = previous_t < 0 ? 0.0 : double(e.sample.t_ns - previous_t) / 1e9;
      previous_t = e.sample.t_ns;
      const Pose& pose = pipeline.process(e.sample, dt);
      const uint64_t now = core::monotonic_ns();
      rate.add(now);
      encode_opentrack(pose, packet);
      TelemetrySample t;
      t.device = device;
      for (int k = 0; k < 3; ++k) t.rotation_vector[k] = e.sample.rotation[k];
      t.quaternion = pose.orientation;
      for (int k = 0; k < 3; ++k) t.ypr_deg[k] = pose.ypr_deg[k];
      t.gyroscope = e.sample.has_angular_velocity ? e.sample.angular_velocity : nullptr;
      t.reset_counter = pose.counter;
      t.packets_per_second = rate.rate();
      t.discontinuity_count = pose.discontinuities;
      t.seq = seq++;
      t.timestamp_ns = now;
      sent += unsigned(out.send(packet, json.serialize(t)));
    }
    const uint64_t now = core::monotonic_ns();
    if (tty && now >= next_status) {
      const Pose& p = pipeline.pose();
      std::printf("\r\033[K%6.1f pkt/s  yaw %7.2f  pitch %7.2f  roll %7.2f  [%s]", rate.rate(),
                  p.ypr_deg[0], p.ypr_deg[1], p.ypr_deg[2],
                  device.empty() ? "waiting" : device.c_str());
      std::fflush(stdout);
      next_status = now + 250'000'000;
    }
    if (reader.finished() && n == 0) break;
  }
  reader.stop();
  const ReaderStats s = reader.stats();
  if (!o.quiet) {
    std::printf(
        "%sbridge: %llu samples, %llu datagrams sent, %llu send errors, %llu rejected "
        "(out of range), %llu dropped (overrun)\n",
        tty ? "\r\033[K" : "", (unsigned long long)seq, (unsigned long long)sent,
        (unsigned long long)out.send_errors(), (unsigned long long)s.out_of_range,
        (unsigned long long)s.ring_overruns);
  }
  return kExitOk;
}

int main_impl(int argc, char** argv) {
  CLI::App app{"sync-headtrack: Android head tracker -> OpenTrack UDP + JSON telemetry"};
  app.require_subcommand(1);
  EnumerateOptions enumerate;
  auto add_enumerate = [&](CLI::App* sub) {
    sub->add_option("--sysfs-root", enumerate.sysfs_root,
                    "Directory shaped like /sys/class/hidraw (tests use a fake tree)");
    sub->add_option("--dev-root", enumerate.dev_root, "Where hidrawN device nodes live");
  };
  auto* version = app.add_subcommand("version", "Print the version");
  auto* probe = app.add_subcommand("probe",
                                   "List hidraw nodes and whether each is a tracker "
                                   "(read-only)");
  add_enumerate(probe);
  BridgeOptions o;
  auto* bridge = app.add_subcommand("bridge", "Stream a head tracker to OpenTrack and JSON");
  add_enumerate(bridge);
  bridge->add_option("--port", o.port, "OpenTrack UDP port; JSON goes to port + 1");
  bridge->add_option("--host", o.host, "Destination host");
  bridge->add_option("--seconds", o.seconds, "Stop after this many seconds (0: run until a signal)")
      ->check(CLI::NonNegativeNumber);
  bridge->add_option("--device", o.device, "auto or /dev/hidrawN");
  bridge->add_option("--replay", o.replay, "Play a replay file instead of a device");
  bridge->add_flag("--fast", o.fast, "Play the replay as fast as possible");
  bridge->add_option("--record", o.record, "Record every report to this replay file");
  bridge->add_option("--axis-map", o.axis_map,
                     "Head axes feeding yaw, pitch, roll (permutation of XYZ; default ZXY)");
  bridge->add_option("--invert", o.invert,
                     "Head axes to negate, or 'none' (default: ZY, i.e. yaw=-Z, roll=-Y)");
  bridge
      ->add_option("--smoothing", o.smoothing,
                   "0 (none) .. 1 (heaviest): steadier at rest, more lag on slow turns; "
                   "default 0.3")
      ->check(CLI::Range(0.0, 1.0));
  bridge->add_option("--predict-ms", o.predict_ms, "Predict ahead by angular velocity (ms)")
      ->check(CLI::Range(0.0, 200.0));
  bridge->add_option("--interval-ms", o.interval_ms, "Report interval asked of the device")
      ->check(CLI::Range(1.0, 1000.0));
  bridge->add_flag("--quiet", o.quiet, "No status output");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }
  if (version->parsed()) {
    std::printf("sync-headtrack %s\n", SYNC_VERSION);
    return kExitOk;
  }
  if (probe->parsed()) return run_probe(enumerate);
  if (o.port < 1 || o.port > 65534) {
    std::fprintf(stderr, "--port must be 1..65534 (JSON goes to port + 1)\n");
    return kExitUsage;
  }
  o.enumerate = enumerate;
  install_signals();
  return run_bridge(o);
}

}  // namespace
}  // namespace syncd::headtrack

int main(int argc, char** argv) {
  return syncd::headtrack::main_impl(argc, argv);
}
