// sync-tcp-sink: the raw TCP baseline that syncd's WebSocket ingest is measured against.
//
// Accepts one connection and reads frames as sync-producer --raw-tcp sends them: the 56-byte frame
// header, then the pixels, straight from the socket into one preallocated buffer (no intermediate
// copy), hashing each --hash-window-kb window with XXH3-64 as soon as it has landed (while it is
// in cache, as syncd's ingest does), and the digest against the header's content_hash. That is
// the least work any verifying receiver must do, so its CPU per frame is the floor for syncd's.
// --hash-window-kb 0 reads the whole frame first and hashes it after.
//
// Prints {"frames","hash_failures","seq_gaps","seconds","fps","cpu_seconds","cpu_ms_per_frame",
// "steady_cpu_ms_per_frame","steady_fps",...}
// on stdout at the end; cpu_seconds is getrusage(RUSAGE_SELF) user+system from accept() on. Exit
// codes: 0 ok, 1 usage, 3 socket error, bad header or EOF mid-frame.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/content_hash.h"
#include "media/frame_header.h"
#include "media/frame_pool.h"

namespace {

namespace media = syncd::media;

constexpr int kExitOk = 0;
constexpr int kExitUsage = 1;
constexpr int kExitIo = 3;

// Linux caps it at net.core.rmem_max (4 MiB here). Set on the listener before accept() so the
// accepted socket inherits it and the window scale is negotiated for it.
constexpr int kReceiveBufferBytes = 4 << 20;
// A header announcing more than this is corrupt, not a frame (16384 x 16384 x 4 = 1 GiB).
constexpr uint64_t kMaxFrameBytes = 1ull << 30;

struct Options {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  uint64_t frames = 0;  // 0: until EOF
  uint32_t width = 1920;
  uint32_t height = 1080;
  // Read into a buffer from syncd's own frame pool (huge pages) instead of a std::vector (small
  // pages): shows how much of a syncd/sink ratio is memory layout rather than protocol work.
  bool huge_pages = false;
  uint64_t warmup_frames = 0;     // steady_cpu_ms_per_frame counts CPU from the end of this frame
  uint32_t hash_window_kb = 256;  // syncd's default --read-window-kb; 0: hash the whole frame
};

struct Counters {
  uint64_t frames = 0;
  uint64_t hash_failures = 0;
  // Frames missing by sequence number (as syncd's test publisher counts them), plus one for
  // each step backwards, which TCP cannot produce but a broken producer could.
  uint64_t seq_gaps = 0;
  uint64_t unhashed_frames = 0;  // frames without kHasContentHash, so not verified
  int64_t first_byte_ns = 0;
  int64_t last_frame_ns = 0;
};

std::string errno_text(int err) {
  const char* name = strerrorname_np(err);
  return std::string(name ? name : "E?") + " (" + std::strerror(err) + ")";
}

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& tv) { return tv.tv_sec + tv.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "sync-tcp-sink: %s\n", message.c_str());
  std::exit(kExitIo);
}

int listen_on(const Options& opt) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket: " + errno_text(errno));
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const int rcvbuf = kReceiveBufferBytes;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(opt.port);
  if (::inet_pton(AF_INET, opt.host.c_str(), &addr.sin_addr) != 1) {
    std::fprintf(stderr, "sync-tcp-sink: --host must be an IPv4 address, got %s\n",
                 opt.host.c_str());
    std::exit(kExitUsage);
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    die("bind " + opt.host + ":" + std::to_string(opt.port) + ": " + errno_text(errno));
  }
  if (::listen(fd, 1) != 0) die("listen: " + errno_text(errno));
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  // The first stdout line is the contract with scripts that started us with --port 0.
  std::printf("listening on %s:%u\n", opt.host.c_str(), ntohs(addr.sin_port));
  std::fflush(stdout);
  return fd;
}

enum class ReadResult { kComplete, kEof, kEofMidway };

// Reads exactly `size` bytes into `out`. MSG_WAITALL lets the kernel copy an 8 MB frame into
// place in a few wake-ups rather than one recv per socket-buffer's worth.
ReadResult read_exact(int fd, uint8_t* out, size_t size, Counters& counters) {
  size_t have = 0;
  while (have < size) {
    const ssize_t got = ::recv(fd, out + have, size - have, MSG_WAITALL);
    if (got > 0) {
      if (counters.first_byte_ns == 0) counters.first_byte_ns = now_ns();
      have += static_cast<size_t>(got);
      continue;
    }
    if (got == 0) return have == 0 ? ReadResult::kEof : ReadResult::kEofMidway;
    if (errno == EINTR) continue;
    die("recv: " + errno_text(errno));
  }
  return ReadResult::kComplete;
}

// The one buffer frames are read into.
class FrameBuffer {
 public:
  FrameBuffer(bool huge_pages, size_t bytes) : huge_pages_(huge_pages) { grow(bytes); }
  ~FrameBuffer() { release(); }
  uint8_t* data() { return pool_ ? slot_->pixels : vector_.data(); }
  size_t size() const { return size_; }
  void grow(size_t bytes) {
    if (bytes <= size_) return;
    if (!huge_pages_) {
      vector_.resize(bytes);
    } else {
      release();
      pool_ = media::FramePool::create(bytes, 1);
      if (!pool_) die("cannot map a " + std::to_string(bytes) + "-byte frame buffer");
      slot_ = pool_->acquire();
    }
    size_ = bytes;
  }

 private:
  void release() {
    if (!pool_) return;
    media::FramePool::release(slot_);
    pool_->drop_ref();
    pool_ = nullptr;
  }
  bool huge_pages_;
  std::vector<uint8_t> vector_;
  media::FramePool* pool_ = nullptr;
  media::FrameSlot* slot_ = nullptr;
  size_t size_ = 0;
};

int run(const Options& opt) {
  const int listener = listen_on(opt);
  // Allocated and touched before the connection arrives, so neither page faults nor allocation
  // land in the measured interval. It only grows if a frame is larger than --width x --height.
  FrameBuffer pixels(opt.huge_pages, size_t{opt.width} * opt.height * 4);
  uint8_t header_bytes[media::kFrameHeaderBytes];
  syncd::core::ContentHasher hasher;

  const int conn = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (conn < 0) die("accept: " + errno_text(errno));
  ::close(listener);
  const double cpu_at_accept = cpu_seconds();
  double cpu_after_warmup = cpu_at_accept;  // stays so with --warmup-frames 0
  int64_t warmup_end_ns = 0;

  Counters counters;
  uint64_t expected_sequence = 0;
  int exit_code = kExitOk;
  while (opt.frames == 0 || counters.frames < opt.frames) {
    const ReadResult header_read = read_exact(conn, header_bytes, sizeof header_bytes, counters);
    if (header_read == ReadResult::kEof) break;
    if (header_read == ReadResult::kEofMidway) {
      std::fprintf(stderr, "sync-tcp-sink: EOF inside the header of frame %llu\n",
                   static_cast<unsigned long long>(counters.frames));
      exit_code = kExitIo;
      break;
    }
    media::FrameHeader header;
    if (auto error = media::parse_frame_header(header_bytes, header);
        error != media::FrameHeaderError::kNone) {
      // The stream cannot be resynchronised: there is no frame delimiter besides the header.
      std::fprintf(stderr, "sync-tcp-sink: frame %llu: %s\n",
                   static_cast<unsigned long long>(counters.frames),
                   media::frame_header_error_name(error));
      exit_code = kExitIo;
      break;
    }
    const uint64_t width = header.width ? header.width : opt.width;
    const uint64_t height = header.height ? header.height : opt.height;
    const uint64_t frame_bytes = width * height * 4;
    if (frame_bytes > kMaxFrameBytes) {
      std::fprintf(stderr, "sync-tcp-sink: frame %llu announces %llux%llu, too large\n",
                   static_cast<unsigned long long>(counters.frames),
                   static_cast<unsigned long long>(width), static_cast<unsigned long long>(height));
      exit_code = kExitIo;
      break;
    }
    pixels.grow(frame_bytes);

    const bool hashed = header.flags & media::frame_flag::kHasContentHash;
    const size_t window =
        opt.hash_window_kb && hashed ? size_t{opt.hash_window_kb} * 1024 : size_t(frame_bytes);
    if (hashed) hasher.reset();
    bool complete = true;
    for (size_t at = 0; at < frame_bytes && complete; at += window) {
      const size_t n = std::min<size_t>(window, frame_bytes - at);
      complete = read_exact(conn, pixels.data() + at, n, counters) == ReadResult::kComplete;
      if (complete && hashed) hasher.update(pixels.data() + at, n);
    }
    if (!complete) {
      std::fprintf(stderr, "sync-tcp-sink: EOF inside the pixels of frame %llu\n",
                   static_cast<unsigned long long>(counters.frames));
      exit_code = kExitIo;
      break;
    }
    if (!hashed) {
      ++counters.unhashed_frames;
    } else if (hasher.digest() != header.content_hash) {
      ++counters.hash_failures;
    }
    if (counters.frames > 0 && header.sequence > expected_sequence) {
      counters.seq_gaps += header.sequence - expected_sequence;
    } else if (counters.frames > 0 && header.sequence < expected_sequence) {
      ++counters.seq_gaps;
    }
    expected_sequence = header.sequence + 1;
    ++counters.frames;
    counters.last_frame_ns = now_ns();
    if (counters.frames == opt.warmup_frames) {
      cpu_after_warmup = cpu_seconds();
      warmup_end_ns = counters.last_frame_ns;
    }
  }
  const double cpu_end = cpu_seconds();
  const double cpu = cpu_end - cpu_at_accept;
  const uint64_t steady_frames =
      counters.frames > opt.warmup_frames ? counters.frames - opt.warmup_frames : 0;
  ::close(conn);

  const double seconds =
      counters.frames > 0 ? (counters.last_frame_ns - counters.first_byte_ns) / 1e9 : 0.0;
  nlohmann::ordered_json summary = {
      {"frames", counters.frames},
      {"hash_failures", counters.hash_failures},
      {"seq_gaps", counters.seq_gaps},
      {"unhashed_frames", counters.unhashed_frames},
      {"seconds", seconds},
      {"fps", seconds > 0 ? counters.frames / seconds : 0.0},
      {"cpu_seconds", cpu},
      {"cpu_ms_per_frame", counters.frames > 0 ? cpu * 1e3 / counters.frames : 0.0},
      {"warmup_frames", opt.warmup_frames},
      // Over the frames after the warm-up: the steady state, without connection set-up.
      {"steady_cpu_ms_per_frame",
       steady_frames > 0 ? (cpu_end - cpu_after_warmup) * 1e3 / steady_frames : 0.0},
      {"steady_fps", steady_frames > 0 && warmup_end_ns > 0
                         ? steady_frames / ((counters.last_frame_ns - warmup_end_ns) / 1e9)
                         : 0.0},
      // CLOCK_MONOTONIC, system-wide: lets a script relate them to when it started the producer.
      {"first_byte_monotonic_ns", counters.first_byte_ns},
      {"last_frame_monotonic_ns", counters.last_frame_ns},
  };
  std::printf("%s\n", summary.dump().c_str());
  std::fflush(stdout);
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  CLI::App app{
      "Raw TCP baseline sink: reads header+pixels frames from one connection, verifies XXH3 "
      "hashes, prints JSON.\nExit codes: 0 ok, 1 usage, 3 connection/IO error."};
  app.add_option("--host", opt.host, "IPv4 address to listen on")->capture_default_str();
  app.add_option("--port", opt.port, "port; 0 picks a free one and prints it first")
      ->capture_default_str();
  app.add_option("--frames", opt.frames, "exit after N frames (0: at EOF)")->capture_default_str();
  app.add_option("--width", opt.width, "width for the preallocated buffer and for headers with 0")
      ->capture_default_str()
      ->check(CLI::Range(1u, 16384u));
  app.add_option("--height", opt.height, "height, likewise")
      ->capture_default_str()
      ->check(CLI::Range(1u, 16384u));
  app.add_option("--warmup-frames", opt.warmup_frames,
                 "frames before steady_cpu_ms_per_frame starts counting")
      ->capture_default_str();
  app.add_option("--hash-window-kb", opt.hash_window_kb,
                 "read and hash the pixels in windows of this size (0: whole frame, then hash)")
      ->capture_default_str()
      ->check(CLI::Range(0u, 1u << 20));
  app.add_flag("--huge-pages", opt.huge_pages,
               "read into a huge-page buffer from syncd's frame pool instead of a std::vector");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  return run(opt);
}
