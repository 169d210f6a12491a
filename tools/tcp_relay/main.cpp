// sync-tcp-relay: the fair two-hop ceiling that syncd's HTTP stream to receivers is measured
// against (issue 6, tools/bench_stream.py).
//
//   sync-producer --raw-tcp 127.0.0.1:P  ->  sync-tcp-relay --port P --to 127.0.0.1:S
//                                        ->  sync-tcp-sink --port S
//
// It connects to the receiver first (sync-tcp-sink listens), then accepts one producer
// connection and forwards each frame as it came: the 56-byte frame header plus the pixels are
// read into one preallocated buffer, then written out in one go. No framing of its own, no
// hashing, no copy besides the kernel's: this is the least any store-and-forward hop can do, the
// same shape as syncd (a whole frame in a pool slot, then written to the receiver).
//
// Prints {"frames","bytes","seconds","fps","cpu_seconds","cpu_ms_per_frame",...} on stdout at
// the end (EOF from the producer at a frame boundary, or --frames). cpu_seconds is
// getrusage(RUSAGE_SELF) user+system from accept() on.
// Exit codes: 0 ok, 1 usage, 3 socket error, bad header or EOF mid-frame.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "media/frame_header.h"

namespace {

namespace media = syncd::media;

constexpr int kExitOk = 0;
constexpr int kExitUsage = 1;
constexpr int kExitIo = 3;

// As in sync-tcp-sink and syncd: large kernel buffers on both sides (Linux caps them at
// net.core.{r,w}mem_max, 4 MiB here).
constexpr int kSocketBufferBytes = 4 << 20;
// A header announcing more than this is corrupt, not a frame (16384 x 16384 x 4 = 1 GiB).
constexpr uint64_t kMaxFrameBytes = 1ull << 30;

struct Options {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  std::string to;       // HOST:PORT of the receiver (a listening sync-tcp-sink)
  uint64_t frames = 0;  // 0: until EOF
  uint32_t width = 1920;
  uint32_t height = 1080;
  // SO_SNDBUF towards the receiver, KiB; 0 leaves the kernel's autotuning (what syncd does for
  // its HTTP stream sockets), so the effect of the buffer on the ratio can be measured.
  int send_buffer_kb = kSocketBufferBytes >> 10;
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

[[noreturn]] void die(int code, const std::string& message) {
  std::fprintf(stderr, "sync-tcp-relay: %s\n", message.c_str());
  std::exit(code);
}

sockaddr_in ipv4(const std::string& host, uint16_t port, const char* what) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    die(kExitUsage, std::string(what) + " must be an IPv4 address, got " + host);
  }
  return addr;
}

int connect_receiver(const std::string& to, int send_buffer_kb) {
  const size_t colon = to.rfind(':');
  unsigned long port = 0;
  if (colon != std::string::npos) port = std::strtoul(to.c_str() + colon + 1, nullptr, 10);
  if (colon == std::string::npos || port == 0 || port > 65535) {
    die(kExitUsage, "--to wants HOST:PORT, got " + to);
  }
  sockaddr_in addr = ipv4(to.substr(0, colon), uint16_t(port), "--to");
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die(kExitIo, "socket: " + errno_text(errno));
  if (send_buffer_kb > 0) {
    const int sndbuf = send_buffer_kb << 10;
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
  }
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    die(kExitIo, "connect " + to + ": " + errno_text(errno));
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

int listen_on(const Options& opt) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die(kExitIo, "socket: " + errno_text(errno));
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  // Set on the listener so the accepted socket inherits it and the window scale fits it.
  const int rcvbuf = kSocketBufferBytes;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  sockaddr_in addr = ipv4(opt.host, opt.port, "--host");
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    die(kExitIo, "bind " + opt.host + ":" + std::to_string(opt.port) + ": " + errno_text(errno));
  }
  if (::listen(fd, 1) != 0) die(kExitIo, "listen: " + errno_text(errno));
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  // The first stdout line is the contract with scripts that started us with --port 0.
  std::printf("listening on %s:%u\n", opt.host.c_str(), ntohs(addr.sin_port));
  std::fflush(stdout);
  return fd;
}

enum class ReadResult { kComplete, kEof, kEofMidway };

// Reads exactly `size` bytes. MSG_WAITALL: a whole frame in few wake-ups, as the sink does.
ReadResult read_exact(int fd, uint8_t* out, size_t size, int64_t& first_byte_ns) {
  size_t have = 0;
  while (have < size) {
    const ssize_t got = ::recv(fd, out + have, size - have, MSG_WAITALL);
    if (got > 0) {
      if (first_byte_ns == 0) first_byte_ns = now_ns();
      have += size_t(got);
      continue;
    }
    if (got == 0) return have == 0 ? ReadResult::kEof : ReadResult::kEofMidway;
    if (errno == EINTR) continue;
    die(kExitIo, "recv from the producer: " + errno_text(errno));
  }
  return ReadResult::kComplete;
}

void write_all(int fd, const uint8_t* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      die(kExitIo, "send to the receiver: " + errno_text(errno));
    }
    data += n;
    size -= size_t(n);
  }
}

int run(const Options& opt) {
  signal(SIGPIPE, SIG_IGN);
  const int out = connect_receiver(opt.to, opt.send_buffer_kb);
  const int listener = listen_on(opt);
  // Header and pixels of one frame, contiguous, so each frame leaves in a single send().
  // Allocated and touched before the producer connects; grows only for a larger frame.
  std::vector<uint8_t> frame(media::kFrameHeaderBytes + size_t{opt.width} * opt.height * 4);

  const int in = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (in < 0) die(kExitIo, "accept: " + errno_text(errno));
  ::close(listener);
  const double cpu_at_accept = cpu_seconds();

  uint64_t frames = 0, bytes = 0;
  int64_t first_byte_ns = 0, last_frame_ns = 0;
  int exit_code = kExitOk;
  while (opt.frames == 0 || frames < opt.frames) {
    const ReadResult head = read_exact(in, frame.data(), media::kFrameHeaderBytes, first_byte_ns);
    if (head == ReadResult::kEof) break;
    if (head == ReadResult::kEofMidway) {
      std::fprintf(stderr, "sync-tcp-relay: EOF inside the header of frame %llu\n",
                   static_cast<unsigned long long>(frames));
      exit_code = kExitIo;
      break;
    }
    // The header is parsed only to learn the frame's length; it is forwarded as it came.
    media::FrameHeader header;
    if (auto error = media::parse_frame_header(frame.data(), header);
        error != media::FrameHeaderError::kNone) {
      std::fprintf(stderr, "sync-tcp-relay: frame %llu: %s\n",
                   static_cast<unsigned long long>(frames), media::frame_header_error_name(error));
      exit_code = kExitIo;
      break;
    }
    const uint64_t width = header.width ? header.width : opt.width;
    const uint64_t height = header.height ? header.height : opt.height;
    const uint64_t pixel_bytes = width * height * 4;
    if (pixel_bytes > kMaxFrameBytes) {
      std::fprintf(stderr, "sync-tcp-relay: frame %llu announces %llux%llu, too large\n",
                   static_cast<unsigned long long>(frames), static_cast<unsigned long long>(width),
                   static_cast<unsigned long long>(height));
      exit_code = kExitIo;
      break;
    }
    const size_t total = media::kFrameHeaderBytes + pixel_bytes;
    if (total > frame.size()) frame.resize(total);
    if (read_exact(in, frame.data() + media::kFrameHeaderBytes, pixel_bytes, first_byte_ns) !=
        ReadResult::kComplete) {
      std::fprintf(stderr, "sync-tcp-relay: EOF inside the pixels of frame %llu\n",
                   static_cast<unsigned long long>(frames));
      exit_code = kExitIo;
      break;
    }
    write_all(out, frame.data(), total);
    ++frames;
    bytes += total;
    last_frame_ns = now_ns();
  }
  const double cpu = cpu_seconds() - cpu_at_accept;
  // A FIN after the last frame: the sink sees EOF at a frame boundary.
  ::shutdown(out, SHUT_WR);
  ::close(out);
  ::close(in);

  const double seconds = frames > 0 ? (last_frame_ns - first_byte_ns) / 1e9 : 0.0;
  nlohmann::ordered_json summary = {
      {"frames", frames},
      {"bytes", bytes},
      {"seconds", seconds},
      {"fps", seconds > 0 ? frames / seconds : 0.0},
      {"cpu_seconds", cpu},
      {"cpu_ms_per_frame", frames > 0 ? cpu * 1e3 / frames : 0.0},
      {"first_byte_monotonic_ns", first_byte_ns},
      {"last_frame_monotonic_ns", last_frame_ns},
  };
  std::printf("%s\n", summary.dump().c_str());
  std::fflush(stdout);
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  CLI::App app{
      "Raw TCP relay, the two-hop baseline: accepts one sync-producer --raw-tcp connection and "
      "forwards each frame (header+pixels) to a receiver such as sync-tcp-sink.\nExit codes: 0 "
      "ok, 1 usage, 3 connection/IO error."};
  app.add_option("--host", opt.host, "IPv4 address to listen on")->capture_default_str();
  app.add_option("--port", opt.port, "port for the producer; 0 picks a free one, printed first")
      ->capture_default_str();
  app.add_option("--to", opt.to, "receiver to connect to, HOST:PORT (IPv4)")->required();
  app.add_option("--frames", opt.frames, "exit after N frames (0: at EOF)")->capture_default_str();
  app.add_option("--send-buffer-kb", opt.send_buffer_kb,
                 "SO_SNDBUF towards the receiver in KiB; 0: kernel autotuning")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--width", opt.width, "width for the preallocated buffer and for headers with 0")
      ->capture_default_str()
      ->check(CLI::Range(1u, 16384u));
  app.add_option("--height", opt.height, "height, likewise")
      ->capture_default_str()
      ->check(CLI::Range(1u, 16384u));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  return run(opt);
}
