// sync-producer: a paced native producer of 1080p-class video frames, for syncd (WebSocket,
// control protocol v1) or for the raw TCP baseline sink (--raw-tcp).
//
// Single-threaded: sleep until the frame is due (absolute CLOCK_MONOTONIC schedule, so pacing
// never drifts), prepare it (FrameSource), send it, handle what the server said. Nothing is
// allocated per frame. Exit codes: see tool_error.h.
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "frame_source.h"
#include "frame_transport.h"
#include "tool_error.h"

namespace syncd::producer {
namespace {

volatile sig_atomic_t g_stop_requested = 0;

void request_stop(int) {
  g_stop_requested = 1;
}

// No SA_RESTART: a signal must interrupt the pacing sleep so Ctrl-C stops at once, after which the
// run still ends cleanly (Close, summary, events file).
void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = request_stop;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  signal(SIGPIPE, SIG_IGN);  // every send uses MSG_NOSIGNAL; this also covers stray writes
}

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// False when a stop was requested while sleeping.
bool sleep_until(int64_t due_ns) {
  const timespec due{static_cast<time_t>(due_ns / 1'000'000'000),
                     static_cast<long>(due_ns % 1'000'000'000)};
  while (!g_stop_requested) {
    const int rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &due, nullptr);
    if (rc == 0) return true;
    if (rc != EINTR) return true;  // cannot happen with valid arguments; do not spin on it
  }
  return false;
}

struct Options {
  std::string url = "ws://127.0.0.1:54997/ws";
  std::string stream = "main";
  uint32_t width = 1920;
  uint32_t height = 1080;
  std::string format = "rgba8";
  std::string h264_path;  // --h264: access units to send (format h264)
  double fps = 0;
  uint64_t frames = 0;  // 0: no frame limit
  double seconds = 0;   // 0: no time limit
  uint32_t slots = 4;
  std::string raw_tcp;  // HOST:PORT; empty: WebSocket
  std::string events_path;
  std::string ticket_file;  // WebSocket only: where to write a receiver ticket for the stream
  uint32_t ticket_uses = 1;
  bool quiet = false;
  bool camera_marker = false;
  bool realtime = false;  // asked for; after start-up, whether SCHED_FIFO was granted
};

// Send timestamps per frame, kept in memory and written once at the end so that file I/O never
// sits between two frames.
class EventLog {
 public:
  struct Event {
    uint64_t sequence;
    int64_t send_start_ns;
    int64_t send_end_ns;
  };

  // Without --frames at --fps 0 the count is unknown; this many frames per second is far above
  // what any 1080p stream reaches, and a run that still outgrows it is reported as truncated.
  static constexpr double kUnpacedFpsBound = 2'000;
  // 24 bytes each: a bound on memory for very long runs.
  static constexpr uint64_t kMaxEvents = 50'000'000;

  explicit EventLog(const Options& opt) {
    if (opt.events_path.empty()) return;
    uint64_t capacity = kMaxEvents;
    if (opt.frames > 0) capacity = std::min(capacity, opt.frames);
    if (opt.seconds > 0) {
      const double rate = opt.fps > 0 ? opt.fps : kUnpacedFpsBound;
      capacity = std::min(capacity, static_cast<uint64_t>(std::ceil(opt.seconds * rate)) + 1);
    }
    events_.reserve(capacity);
    enabled_ = true;
  }

  void record(uint64_t sequence, int64_t start_ns, int64_t end_ns) {
    if (!enabled_) return;
    if (events_.size() == events_.capacity()) {
      ++dropped_;  // never grow: a reallocation would stall the stream for milliseconds
      return;
    }
    events_.push_back({sequence, start_ns, end_ns});
  }

  // Returns false and says why on stderr when the file cannot be written.
  bool write(const std::string& path) const {
    if (!enabled_) return true;
    FILE* file = std::fopen(path.c_str(), "w");
    if (!file) {
      std::fprintf(stderr, "sync-producer: cannot write %s: %s\n", path.c_str(),
                   errno_text(errno).c_str());
      return false;
    }
    std::fprintf(file, "sequence,send_start_ns,send_end_ns\n");
    for (const Event& e : events_) {
      std::fprintf(file, "%llu,%lld,%lld\n", static_cast<unsigned long long>(e.sequence),
                   static_cast<long long>(e.send_start_ns), static_cast<long long>(e.send_end_ns));
    }
    const bool ok = std::ferror(file) == 0;
    if (std::fclose(file) != 0 || !ok) {
      std::fprintf(stderr, "sync-producer: writing %s failed\n", path.c_str());
      return false;
    }
    if (dropped_ > 0) {
      std::fprintf(stderr, "sync-producer: %s holds the first %zu frames; %llu more not recorded\n",
                   path.c_str(), events_.size(), static_cast<unsigned long long>(dropped_));
    }
    return true;
  }

 private:
  bool enabled_ = false;
  std::vector<Event> events_;
  uint64_t dropped_ = 0;
};

struct Totals {
  uint64_t frames_sent = 0;
  uint64_t bytes = 0;  // wire bytes of the frames, WebSocket framing included
  int64_t first_send_start_ns = 0;
  int64_t last_send_end_ns = 0;

  double seconds() const {
    return frames_sent == 0 ? 0.0 : (last_send_end_ns - first_send_start_ns) / 1e9;
  }
};

// A once-a-second "\r"-rewritten line on stderr, only when stderr is a terminal, so that logs and
// the JSON on stdout stay clean.
class StatusLine {
 public:
  explicit StatusLine(bool enabled) : enabled_(enabled) {}

  void update(int64_t now, const Totals& totals) {
    if (!enabled_) return;
    if (last_ns_ == 0) {
      last_ns_ = now;
      return;
    }
    if (now - last_ns_ < 1'000'000'000) return;
    const double interval = (now - last_ns_) / 1e9;
    std::fprintf(stderr, "\r%10llu frames  %7.1f fps  %8.1f MB/s ",
                 static_cast<unsigned long long>(totals.frames_sent),
                 (totals.frames_sent - last_frames_) / interval,
                 (totals.bytes - last_bytes_) / interval / 1e6);
    std::fflush(stderr);
    shown_ = true;
    last_ns_ = now;
    last_frames_ = totals.frames_sent;
    last_bytes_ = totals.bytes;
  }

  void finish() {
    if (shown_) std::fputc('\n', stderr);
  }

 private:
  bool enabled_;
  bool shown_ = false;
  int64_t last_ns_ = 0;
  uint64_t last_frames_ = 0;
  uint64_t last_bytes_ = 0;
};

// The paced send loop. Returns kExitOk, or kExitIo when the connection failed or ended early.
ExitCode stream_frames(const Options& opt, FrameTransport& transport, FrameSource& source,
                       Totals& totals, EventLog& events) {
  StatusLine status(!opt.quiet && isatty(STDERR_FILENO));
  const double period_ns = opt.fps > 0 ? 1e9 / opt.fps : 0;
  // A paced schedule starts half a period past a whole second of CLOCK_MONOTONIC (the clock
  // syncd bins unique frames by), so scheduling jitter never moves a frame across a one-second
  // bin boundary (docs/decisions.md).
  const int64_t start_ns =
      period_ns > 0 ? (now_ns() / 1'000'000'000 + 1) * 1'000'000'000 + int64_t(period_ns / 2)
                    : now_ns();
  const int64_t deadline_ns = opt.seconds > 0 ? start_ns + static_cast<int64_t>(opt.seconds * 1e9)
                                              : std::numeric_limits<int64_t>::max();
  FrameSource::WireFrame frame;
  ExitCode result = kExitOk;
  for (uint64_t sequence = 0; !g_stop_requested; ++sequence) {
    if (opt.frames > 0 && sequence >= opt.frames) break;
    if (period_ns > 0) {
      // Absolute schedule: frame n is due at start + n * period however late frame n-1 was, so
      // a slow frame is caught up instead of shifting every later one.
      const int64_t due_ns = start_ns + static_cast<int64_t>(std::llround(sequence * period_ns));
      if (due_ns >= deadline_ns) break;
      if (!sleep_until(due_ns)) break;
    } else if (now_ns() >= deadline_ns) {
      break;
    }

    source.prepare(sequence, static_cast<uint64_t>(now_ns() / 1000), frame);
    const int64_t send_start_ns = now_ns();
    const IoStatus sent = transport.send(frame);
    const int64_t send_end_ns = now_ns();
    if (sent != IoStatus::kOk) {
      std::fprintf(stderr, "sync-producer: sending frame %llu failed (%s): %s\n",
                   static_cast<unsigned long long>(sequence), io_status_name(sent),
                   transport.failure().c_str());
      result = kExitIo;
      break;
    }
    if (totals.frames_sent == 0) totals.first_send_start_ns = send_start_ns;
    totals.last_send_end_ns = send_end_ns;
    ++totals.frames_sent;
    totals.bytes += frame.bytes;
    events.record(sequence, send_start_ns, send_end_ns);

    if (!transport.between_frames()) {
      std::fprintf(stderr, "sync-producer: stopped after %llu frames: %s\n",
                   static_cast<unsigned long long>(totals.frames_sent),
                   transport.failure().c_str());
      result = kExitIo;
      break;
    }
    status.update(send_end_ns, totals);
  }
  status.finish();
  return result;
}

media::PixelFormat parse_format(const std::string& name) {
  media::PixelFormat format = media::PixelFormat::kRgba8;
  media::parse_pixel_format(name, format);  // checked by the option's validator
  return format;
}

// The access units of an Annex B file (split at its delimiters), or a ToolError saying why not.
std::vector<std::vector<uint8_t>> read_access_units(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ToolError(kExitUsage, "cannot read " + path);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  std::string error;
  std::vector<std::vector<uint8_t>> units = split_access_units(bytes, error);
  if (units.empty()) throw ToolError(kExitUsage, path + ": " + error);
  return units;
}

int run(const Options& opt) {
  install_stop_handlers();
  StreamRequest request;
  request.name = opt.stream;
  request.geometry = {opt.width, opt.height, parse_format(opt.format)};
  request.fps = opt.fps;
  request.slots = opt.slots;
  request.quiet = opt.quiet;
  request.ticket_file = opt.ticket_file;
  request.ticket_uses = opt.ticket_uses;

  // Read before connecting, so a bad file is said before any stream opens.
  std::vector<std::vector<uint8_t>> access_units;
  if (!opt.h264_path.empty()) access_units = read_access_units(opt.h264_path);

  std::unique_ptr<FrameTransport> transport = opt.raw_tcp.empty()
                                                  ? open_websocket_transport(opt.url, request)
                                                  : open_raw_tcp_transport(opt.raw_tcp);
  // Built after connecting: the WebSocket twins are masked with this connection's key.
  FrameSource source =
      access_units.empty()
          ? FrameSource(request.geometry, transport->stream_id(), transport->framing(),
                        transport->mask_key(), opt.camera_marker)
          : FrameSource(request.geometry, transport->stream_id(), transport->framing(),
                        transport->mask_key(), std::move(access_units));
  EventLog events(opt);
  Totals totals;

  ExitCode result = stream_frames(opt, *transport, source, totals, events);
  transport->finish();
  if (!events.write(opt.events_path) && result == kExitOk) result = kExitIo;

  const double seconds = totals.seconds();
  nlohmann::ordered_json summary = {
      {"frames_sent", totals.frames_sent},
      {"seconds", seconds},
      {"fps", seconds > 0 ? totals.frames_sent / seconds : 0.0},
      {"bytes", totals.bytes},
      {"errors_received", transport->errors_received()},
      {"realtime", opt.realtime},
  };
  std::printf("%s\n", summary.dump().c_str());
  std::fflush(stdout);
  return result;
}

}  // namespace
}  // namespace syncd::producer

int main(int argc, char** argv) {
  using namespace syncd::producer;
  Options opt;
  CLI::App app{
      "Paced producer of raw video frames for syncd (WebSocket, control protocol v1) or a raw TCP "
      "sink.\nExit codes: 0 ok, 1 usage, 2 refused by the server, 3 connection/IO error."};
  app.add_option("--url", opt.url, "syncd WebSocket URL")->capture_default_str();
  app.add_option("--stream", opt.stream, "stream name")->capture_default_str();
  app.add_option("--width", opt.width, "frame width")
      ->capture_default_str()
      ->check(CLI::Range(1u, 16384u));
  app.add_option("--height", opt.height, "frame height")
      ->capture_default_str()
      ->check(CLI::Range(1u, 16384u));
  app.add_option("--format", opt.format, "pixel format")
      ->capture_default_str()
      ->check(CLI::IsMember({"rgba8", "bgra8", "nv12", "i420", "h264"}));
  app.add_option("--h264", opt.h264_path,
                 "send the access units of this Annex B file (split at its delimiters: x264 "
                 "--aud) in rotation, as an h264 stream of --width x --height")
      ->check(CLI::ExistingFile);
  app.add_option("--fps", opt.fps, "frame rate; 0 sends as fast as the server takes them")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--frames", opt.frames, "stop after N frames")->check(CLI::PositiveNumber);
  app.add_option("--seconds", opt.seconds, "stop after S seconds")->check(CLI::PositiveNumber);
  app.add_option("--slots", opt.slots, "frame pool slots requested from the server")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1024u));
  app.add_option("--raw-tcp", opt.raw_tcp,
                 "send header+pixels to a raw TCP sink at HOST:PORT instead of WebSocket");
  app.add_option("--events", opt.events_path,
                 "write sequence,send_start_ns,send_end_ns (CLOCK_MONOTONIC) CSV here");
  app.add_option("--ticket-file", opt.ticket_file,
                 "after opening the stream, write a receiver ticket (hex) to this file");
  app.add_option("--ticket-uses", opt.ticket_uses, "receivers the --ticket-file ticket admits")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  app.add_flag("--quiet", opt.quiet, "no status line, no server error echo");
  app.add_flag("--camera-marker", opt.camera_marker,
               "also draw the sequence as the camera tests' columns (camera_marker.py) in every "
               "frame; needs a width of at least 136");
  app.add_flag("--realtime", opt.realtime,
               "pace at SCHED_FIFO when permitted: a qualification load generator keeps its "
               "schedule, like a page paced by the display's vsync, so lateness measured at "
               "syncd is syncd's");
  try {
    app.parse(argc, argv);
    if (app.count("--frames") == 0 && app.count("--seconds") == 0) {
      throw CLI::ValidationError("--frames/--seconds", "give --frames N, --seconds S, or both");
    }
    if (!opt.ticket_file.empty() && !opt.raw_tcp.empty()) {
      throw CLI::ValidationError("--ticket-file", "tickets exist only for syncd, not --raw-tcp");
    }
    if (opt.h264_path.empty() != (opt.format != "h264")) {
      throw CLI::ValidationError("--h264/--format", "--format h264 goes with --h264 FILE");
    }
    syncd::media::FrameLayout layout;
    if (!syncd::media::frame_layout(parse_format(opt.format), opt.width, opt.height, layout)) {
      throw CLI::ValidationError("--width/--height", "nv12 and i420 need an even width and height");
    }
    if (layout.bytes < syncd::media::kSequenceMarkerBytes) {
      throw CLI::ValidationError("--width/--height", "a frame must hold the 16-byte marker");
    }
    if (opt.camera_marker && opt.width < FrameSource::kCameraMarkerWidth) {
      throw CLI::ValidationError("--camera-marker", "needs a width of at least 136");
    }
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  if (opt.realtime) {
    // Below sync-audio-reader (50) and the audio capture thread (70): on a shared core those
    // measure syncd and must not wait behind the producer's 8 MB sends.
    sched_param param{};
    param.sched_priority = 40;
    opt.realtime = pthread_setschedparam(pthread_self(), SCHED_FIFO, &param) == 0;
    if (!opt.realtime && !opt.quiet)
      std::fprintf(stderr, "sync-producer: --realtime not permitted; pacing at normal priority\n");
  }
  try {
    return run(opt);
  } catch (const ToolError& e) {
    std::fprintf(stderr, "sync-producer: %s\n", e.what());
    return e.code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sync-producer: %s\n", e.what());
    return kExitIo;
  }
}
