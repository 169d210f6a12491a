// sync-stream-receiver: a native receiver of syncd's HTTP stream (docs/protocol.md, "HTTP stream
// to receivers"), for the issue-6 benchmarks and integration tests.
//
// It reads GET /streams/NAME?ticket=..&credit=.. on a plain blocking socket: each record's 64-byte
// header, then its pixels straight from the socket into one reused buffer (no intermediate copy).
// It grants one frame of credit per record consumed on a control WebSocket to the same syncd,
// verifies XXH3-64 when the record says the hash is valid, and checks the sequence: gaps,
// duplicates and reorders, and that each record's dropped_before accounts for the gap before it.
//
// Unique pairs/s: every frame is binned by the whole CLOCK_MONOTONIC second in which its last byte
// arrived. A second is complete when it ended before the run did and is not the first frame's
// second; complete seconds under 50 unique frames are low-rate seconds.
//
// Single-threaded. After the first record (which sizes the pixel buffer) nothing is allocated per
// frame: the credit message is formatted into a stack buffer and WsClient reuses its scratch.
//
// Exit codes: 0 ok, 1 usage, 2 refused (403/404 or the control handshake), 3 I/O or protocol
// error, 4 verification failures (hash, duplicates, reorders, unaccounted gaps).
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/content_hash.h"
#include "tool_error.h"
#include "ws_client.h"

namespace syncd::stream_receiver {
namespace {

using producer::errno_text;
using producer::ToolError;

constexpr int kExitOk = 0;
constexpr int kExitUsage = 1;
constexpr int kExitRefused = 2;
constexpr int kExitIo = 3;
constexpr int kExitVerify = 4;

constexpr uint32_t kRecordMagic = 0x534E5953;  // "SYNS"
constexpr size_t kRecordHeaderBytes = 64;
constexpr uint32_t kFlagHashValid = 1u << 0;
// A record announcing more than this is corrupt, not a frame (16384 x 16384 x 4 = 1 GiB).
constexpr uint64_t kMaxPayloadBytes = 1ull << 30;
constexpr uint32_t kLowRateFps = 50;

// A record's payload size for its format and geometry (docs/protocol.md, "Pixel formats"): 4
// bytes a pixel for rgba8 (1) and bgra8 (2); a full-size Y plane plus quarter-size chroma, 1.5
// bytes a pixel, for nv12 (3) and i420 (4), whose sides must be even. 0 for anything else, so a
// record that is not a frame of a known format is refused. Computed here because this tool
// links none of syncd's media code; integration tests check it against syncd's own records.
uint64_t frame_bytes_of(uint32_t format, uint32_t width, uint32_t height) {
  const uint64_t pixels = uint64_t{width} * height;
  switch (format) {
    case 1:
    case 2:
      return pixels * 4;
    case 3:
    case 4:
      return (width % 2 || height % 2) ? 0 : pixels + pixels / 2;
    default:
      return 0;
  }
}

const char* format_name(uint32_t format) {
  static const char* const kNames[] = {"?", "rgba8", "bgra8", "nv12", "i420"};
  return format < 5 ? kNames[format] : "?";
}
// Linux caps it at net.core.rmem_max (4 MiB here). Set before connect() so the window scale is
// negotiated for it: an 8 MB frame then arrives in a few large reads.
constexpr int kReceiveBufferBytes = 4 << 20;
// recv() wakes at least this often while the stream is quiet, to service the control WebSocket
// (pings), the live line, --seconds and Ctrl-C.
constexpr int kReceiveTimeoutMs = 200;
constexpr int kSetupTimeoutMs = 5'000;
constexpr int kTicketWaitMs = 10'000;
constexpr size_t kMaxResponseHeadBytes = 16 << 10;

volatile sig_atomic_t g_stop_requested = 0;

void request_stop(int) {
  g_stop_requested = 1;
}

// No SA_RESTART: a signal interrupts recv() so Ctrl-C ends the run at once, summary included.
void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = request_stop;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  signal(SIGPIPE, SIG_IGN);
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

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // the record is little-endian, like every host we build for
  return v;
}

struct Options {
  std::string url = "http://127.0.0.1:54997";
  std::string stream = "main";
  std::string ticket;
  std::string ticket_file;
  double seconds = 0;   // 0: no time limit
  uint64_t frames = 0;  // 0: no frame limit
  uint32_t credit = 2;
  int receive_buffer_kb = kReceiveBufferBytes >> 10;  // 0: kernel autotuning
  bool quiet = false;
  std::string events_path;
};

struct HostPort {
  std::string host;
  uint16_t port = 80;
};

// http://HOST[:PORT][/] -> host and port. The path, if any, is ignored: streams live at /streams.
HostPort parse_http_url(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    throw ToolError(producer::kExitUsage,
                    "--url must look like http://HOST:PORT, got " + std::string(url));
  }
  std::string_view authority = url.substr(kScheme.size());
  authority = authority.substr(0, authority.find('/'));
  HostPort out;
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) throw ToolError(producer::kExitUsage, "bad host in --url");
    out.host = std::string(authority.substr(1, close - 1));
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') throw ToolError(producer::kExitUsage, "bad host in --url");
      port_text = authority.substr(close + 2);
    }
  } else {
    const size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
  }
  if (out.host.empty()) throw ToolError(producer::kExitUsage, "--url has no host");
  if (!port_text.empty()) {
    unsigned port = 0;
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || port == 0 ||
        port > 65535) {
      throw ToolError(producer::kExitUsage, "bad port in --url: " + std::string(port_text));
    }
    out.port = static_cast<uint16_t>(port);
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// The ticket goes into the request target verbatim, so only hex digits are accepted.
std::string checked_ticket(std::string_view text, const std::string& where) {
  const std::string_view t = trim(text);
  const bool hex = !t.empty() && std::all_of(t.begin(), t.end(), [](char c) {
    return std::isxdigit(static_cast<unsigned char>(c)) != 0;
  });
  if (!hex) {
    throw ToolError(producer::kExitUsage, where + " holds no hex ticket: '" + std::string(t) + "'");
  }
  return std::string(t);
}

// The producer writes PATH.tmp and renames it, so a file that exists is complete.
std::string wait_for_ticket_file(const std::string& path) {
  const int64_t deadline = now_ns() + int64_t{kTicketWaitMs} * 1'000'000;
  // Polled every millisecond: a paced producer may send its first frame as little as half a
  // period after writing the ticket, and frames published before we are admitted never reach us.
  while (::access(path.c_str(), F_OK) != 0) {
    if (g_stop_requested) throw ToolError(producer::kExitIo, "stopped while waiting for " + path);
    if (now_ns() >= deadline) {
      throw ToolError(producer::kExitIo, "no ticket file " + path + " within " +
                                             std::to_string(kTicketWaitMs / 1000) + " s");
    }
    usleep(1'000);
  }
  std::ifstream in(path);
  if (!in) throw ToolError(producer::kExitIo, "cannot read " + path + ": " + errno_text(errno));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return checked_ticket(text, path);
}

// ---------------------------------------------------------------------------------------------
// The HTTP stream: a blocking socket with a receive timeout, read exactly record by record.

enum class ReadResult { kComplete, kEof, kEofMidway, kStopped };

class HttpStream {
 public:
  struct Head {
    int status = 0;
    std::string status_line;
    std::string content_type;
    uint64_t receiver = 0;
    std::string body;  // of a refusal, for the error message
  };

  HttpStream(const HostPort& at, const std::string& target, int receive_buffer_kb) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const std::string port = std::to_string(at.port);
    if (const int rc = ::getaddrinfo(at.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
      throw ToolError(producer::kExitIo, "cannot resolve " + at.host + ": " + gai_strerror(rc));
    }
    int err = 0;
    for (addrinfo* a = found; a && fd_ < 0; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) {
        err = errno;
        continue;
      }
      if (receive_buffer_kb > 0) {  // an explicit size turns the kernel's autotuning off
        const int rcvbuf = receive_buffer_kb << 10;
        ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
      }
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        fd_ = fd;
      } else {
        err = errno;
        ::close(fd);
      }
    }
    ::freeaddrinfo(found);
    if (fd_ < 0) {
      throw ToolError(producer::kExitIo,
                      "cannot connect to " + at.host + ":" + port + ": " + errno_text(err));
    }
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    set_receive_timeout(kSetupTimeoutMs);
    const std::string request = "GET " + target + " HTTP/1.1\r\nHost: " + at.host + ":" + port +
                                "\r\nAccept: application/vnd.sync.frames\r\n\r\n";
    for (size_t sent = 0; sent < request.size();) {
      const ssize_t n = ::send(fd_, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw ToolError(producer::kExitIo, "sending the request: " + errno_text(errno));
      sent += size_t(n);
    }
  }
  HttpStream(const HttpStream&) = delete;
  HttpStream& operator=(const HttpStream&) = delete;
  ~HttpStream() { close(); }

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // Reads the response head. Bytes that follow it already belong to the first record; they stay
  // in prefix_ and read_exact() hands them out first.
  Head read_head() {
    prefix_.resize(kMaxResponseHeadBytes);
    size_t have = 0, end = std::string_view::npos;
    while (end == std::string_view::npos) {
      if (have == prefix_.size()) {
        throw ToolError(producer::kExitIo, "the response head exceeds 16 KiB");
      }
      const ssize_t n = ::recv(fd_, prefix_.data() + have, prefix_.size() - have, 0);
      if (n == 0) {
        if (have == 0) throw ToolError(producer::kExitIo, "the server closed without a response");
        break;
      }
      if (n < 0) {
        if (errno == EINTR && !g_stop_requested) continue;
        throw ToolError(producer::kExitIo, errno == EAGAIN
                                               ? std::string("no response head within 5 s")
                                               : "reading the response head: " + errno_text(errno));
      }
      have += size_t(n);
      end = std::string_view(prefix_.data(), have).find("\r\n\r\n");
    }
    const std::string_view all(prefix_.data(), have);
    const std::string_view head = all.substr(0, end);
    Head out;
    out.status_line = std::string(head.substr(0, head.find("\r\n")));
    // "HTTP/1.1 200 OK"
    if (out.status_line.size() >= 12 && out.status_line.compare(0, 5, "HTTP/") == 0) {
      std::from_chars(out.status_line.data() + 9, out.status_line.data() + 12, out.status);
    }
    size_t pos = out.status_line.size() + 2;
    while (pos < head.size()) {
      size_t eol = head.find("\r\n", pos);
      if (eol == std::string_view::npos) eol = head.size();
      const std::string_view line = head.substr(pos, eol - pos);
      pos = eol + 2;
      const size_t colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      std::string name(trim(line.substr(0, colon)));
      for (char& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
      const std::string_view value = trim(line.substr(colon + 1));
      if (name == "content-type") out.content_type = std::string(value);
      if (name == "x-sync-receiver")
        std::from_chars(value.data(), value.data() + value.size(), out.receiver);
    }
    if (end == std::string_view::npos) {
      out.body.clear();
      prefix_begin_ = prefix_end_ = 0;
      return out;
    }
    prefix_begin_ = end + 4;
    prefix_end_ = have;
    if (out.status != 200) {
      // A refusal's body is a one-line reason and the server closes after it.
      out.body.assign(all.substr(prefix_begin_));
      char more[512];
      while (out.body.size() < 4096) {
        const ssize_t n = ::recv(fd_, more, sizeof more, 0);
        if (n <= 0) break;
        out.body.append(more, size_t(n));
      }
      while (!out.body.empty() && (out.body.back() == '\n' || out.body.back() == '\r'))
        out.body.pop_back();
    }
    set_receive_timeout(kReceiveTimeoutMs);
    return out;
  }

  // Reads exactly `size` bytes into `out`. `idle` runs whenever the stream is quiet for the
  // receive timeout; it returns false to stop. MSG_WAITALL lets the kernel fill an 8 MB frame in a
  // few wake-ups instead of one recv per socket buffer's worth.
  template <typename Idle>
  ReadResult read_exact(uint8_t* out, size_t size, Idle&& idle) {
    size_t have = 0;
    if (prefix_begin_ < prefix_end_) {
      const size_t n = std::min(size, prefix_end_ - prefix_begin_);
      std::memcpy(out, prefix_.data() + prefix_begin_, n);
      prefix_begin_ += n;
      have = n;
    }
    while (have < size) {
      const ssize_t got = ::recv(fd_, out + have, size - have, MSG_WAITALL);
      if (got > 0) {
        if (first_byte_ns_ == 0) first_byte_ns_ = now_ns();
        have += size_t(got);
        continue;
      }
      if (got == 0) return have == 0 ? ReadResult::kEof : ReadResult::kEofMidway;
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
        if (!idle()) return ReadResult::kStopped;
        continue;
      }
      error_ = errno;
      return ReadResult::kEofMidway;
    }
    return ReadResult::kComplete;
  }

  int64_t first_byte_ns() const { return first_byte_ns_; }
  // errno of a failed recv, 0 when the stream just ended.
  int error() const { return error_; }

 private:
  void set_receive_timeout(int ms) {
    timeval tv{ms / 1000, (ms % 1000) * 1000};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }

  int fd_ = -1;
  std::vector<char> prefix_;
  size_t prefix_begin_ = 0, prefix_end_ = 0;
  int64_t first_byte_ns_ = 0;
  int error_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Counters and the per-second bins

struct Counters {
  uint64_t records = 0;
  uint64_t unique = 0;  // records with a sequence above every earlier one
  uint64_t bytes = 0;
  uint64_t hash_verified = 0;
  uint64_t hash_failures = 0;
  uint64_t unhashed = 0;
  uint64_t dropped_reported = 0;  // sum of dropped_before, first record included
  uint64_t missing = 0;           // sequences skipped between consecutive records
  uint64_t gaps = 0;              // places where sequences were skipped
  uint64_t gaps_unaccounted = 0;  // records whose dropped_before exceeds the gap before them
  uint64_t missing_upstream = 0;  // frames missing beyond dropped_before: refused at ingest
  uint64_t duplicates = 0;
  uint64_t reorders = 0;
  uint64_t geometry_changes = 0;
  // The last record's format, geometry and payload size (0 before the first record).
  uint32_t format = 0;
  uint32_t width = 0;
  uint32_t height = 0;
  uint64_t frame_bytes = 0;
  uint64_t credit_granted = 0;
  uint64_t server_errors = 0;   // error replies on the control connection, but:
  uint64_t credit_refused = 0;  // unknown_receiver replies to our credit
  double latency_sum_ms = 0;
  double latency_max_ms = 0;
  int64_t first_receive_ns = 0;
  int64_t last_receive_ns = 0;

  uint64_t verify_failures() const {
    return hash_failures + duplicates + reorders + gaps_unaccounted;
  }
};

// Unique frames per whole CLOCK_MONOTONIC second of receive time, from the first frame's second
// on; seconds without frames are kept as zeros, since they are the lowest-rate seconds of all.
class SecondBins {
 public:
  explicit SecondBins(size_t expected_seconds) { counts_.reserve(expected_seconds + 4); }

  void add(int64_t receive_ns) {
    const int64_t second = receive_ns / 1'000'000'000;
    if (counts_.empty()) first_second_ = second;
    const int64_t index = second - first_second_;
    if (index < 0) return;  // cannot happen with a monotonic clock
    // Grows once per second at most (and only past the reserved run length), never per frame.
    while (int64_t(counts_.size()) <= index) counts_.push_back(0);
    ++counts_[size_t(index)];
  }

  // Complete seconds: every second after the first frame's that had ended by end_ns.
  std::vector<uint32_t> complete(int64_t end_ns) const {
    std::vector<uint32_t> out;
    if (counts_.empty()) return out;
    const int64_t ended = end_ns / 1'000'000'000 - first_second_;  // first not-yet-ended index
    for (int64_t i = 1; i < ended; ++i) out.push_back(i < int64_t(counts_.size()) ? counts_[i] : 0);
    return out;
  }

  // The newest second that has ended, for the live line; -1 before there is one.
  int64_t last_ended(int64_t now) const {
    if (counts_.empty()) return -1;
    const int64_t i = now / 1'000'000'000 - first_second_ - 1;
    if (i < 1) return -1;
    return i < int64_t(counts_.size()) ? counts_[size_t(i)] : 0;
  }

 private:
  int64_t first_second_ = 0;
  std::vector<uint32_t> counts_;
};

// Per-frame receive events, kept in memory and written once at the end so file I/O never sits
// between two frames. Capacity is fixed up front: a full log stops recording rather than grow.
class EventLog {
 public:
  struct Event {
    uint64_t sequence;
    int64_t publish_ns;
    int64_t receive_ns;
  };
  // Without --frames the count is bounded by time at this rate, far above any 1080p stream.
  static constexpr double kRateBound = 2'000;
  static constexpr uint64_t kMaxEvents = 50'000'000;

  explicit EventLog(const Options& opt) {
    if (opt.events_path.empty()) return;
    uint64_t capacity = kMaxEvents;
    if (opt.frames > 0) capacity = std::min(capacity, opt.frames);
    if (opt.seconds > 0) {
      capacity = std::min(capacity, uint64_t(std::ceil(opt.seconds * kRateBound)) + 1);
    } else if (opt.frames == 0) {
      capacity = std::min<uint64_t>(capacity, 3600 * 240);  // an hour at 240 fps
    }
    events_.reserve(capacity);
    enabled_ = true;
  }

  void record(uint64_t sequence, int64_t publish_ns, int64_t receive_ns) {
    if (!enabled_) return;
    if (events_.size() == events_.capacity()) {
      ++not_recorded_;
      return;
    }
    events_.push_back({sequence, publish_ns, receive_ns});
  }

  bool write(const std::string& path) const {
    if (!enabled_) return true;
    FILE* file = std::fopen(path.c_str(), "w");
    if (!file) {
      std::fprintf(stderr, "sync-stream-receiver: cannot write %s: %s\n", path.c_str(),
                   errno_text(errno).c_str());
      return false;
    }
    std::fprintf(file, "sequence,publish_ns,receive_ns\n");
    for (const Event& e : events_) {
      std::fprintf(file, "%llu,%lld,%lld\n", static_cast<unsigned long long>(e.sequence),
                   static_cast<long long>(e.publish_ns), static_cast<long long>(e.receive_ns));
    }
    const bool ok = std::ferror(file) == 0;
    if (std::fclose(file) != 0 || !ok) {
      std::fprintf(stderr, "sync-stream-receiver: writing %s failed\n", path.c_str());
      return false;
    }
    if (not_recorded_ > 0) {
      std::fprintf(stderr,
                   "sync-stream-receiver: %s holds the first %zu frames; %llu more not "
                   "recorded\n",
                   path.c_str(), events_.size(), static_cast<unsigned long long>(not_recorded_));
    }
    return true;
  }

 private:
  bool enabled_ = false;
  std::vector<Event> events_;
  uint64_t not_recorded_ = 0;
};

// ---------------------------------------------------------------------------------------------

// "code: message" of a server error reply.
std::string describe_error(const nlohmann::json& m) {
  std::string text = "?";
  if (auto it = m.find("code"); it != m.end())
    text = it->is_string() ? it->get<std::string>() : it->dump();
  if (auto it = m.find("message"); it != m.end() && it->is_string())
    text += ": " + it->get<std::string>();
  return text;
}

class Receiver {
 public:
  explicit Receiver(const Options& opt)
      : opt_(opt),
        bins_(opt.seconds > 0 ? size_t(std::ceil(opt.seconds)) : 3600),
        events_(opt),
        live_(!opt.quiet && isatty(STDERR_FILENO)) {}

  int run() {
    const HostPort at = parse_http_url(opt_.url);
    const std::string given_ticket =
        opt_.ticket_file.empty() ? checked_ticket(opt_.ticket, "--ticket") : std::string();

    // The control WebSocket comes up before the ticket is awaited and the stream requested: the
    // first record's credit can go out at once, and the GET follows the ticket file without
    // a handshake in between.
    producer::WsClient::Url ws_url;
    ws_url.host = at.host;
    ws_url.port = at.port;
    ws_url.path = "/ws";
    control_.emplace(ws_url, kSetupTimeoutMs);
    control_->send_text(R"({"type":"hello","protocol":1,"client":"sync-stream-receiver"})");
    expect_welcome();
    // With --ticket-file it appears once the producer has opened its stream.
    const std::string ticket =
        opt_.ticket_file.empty() ? given_ticket : wait_for_ticket_file(opt_.ticket_file);

    const std::string target =
        "/streams/" + opt_.stream + "?ticket=" + ticket + "&credit=" + std::to_string(opt_.credit);
    HttpStream http(at, target, opt_.receive_buffer_kb);
    const HttpStream::Head head = http.read_head();
    if (head.status == 403 || head.status == 404) {
      throw ToolError(producer::kExitRefused,
                      "GET /streams/" + opt_.stream + ": " + head.status_line + ": " + head.body);
    }
    if (head.status != 200) {
      throw ToolError(producer::kExitIo, "GET /streams/" + opt_.stream + ": unexpected " +
                                             head.status_line + (head.body.empty() ? "" : ": ") +
                                             head.body);
    }
    if (head.receiver == 0) {
      throw ToolError(producer::kExitIo, "the 200 response has no X-Sync-Receiver header");
    }
    receiver_id_ = head.receiver;
    const int n = std::snprintf(credit_msg_, sizeof credit_msg_,
                                R"({"type":"credit","receiver":%llu,"frames":1})",
                                static_cast<unsigned long long>(receiver_id_));
    credit_len_ = size_t(n);

    const double cpu_start = cpu_seconds();
    int exit_code = kExitOk;
    try {
      exit_code = stream(http);
    } catch (const ToolError& e) {  // a credit that could not be sent: report what we have
      std::fprintf(stderr, "\nsync-stream-receiver: %s\n", e.what());
      end_ = "control_lost";
      exit_code = e.code();
    }
    const int64_t end_ns = now_ns();
    const double cpu = cpu_seconds() - cpu_start;
    // Leave in this order: the stream first, so syncd settles this receiver's account (a pending
    // frame becomes a drop) while the control connection still says goodbye properly.
    http.close();
    control_->close(ws::close_code::kNormal, 1'000);
    drain_texts();
    if (c_.credit_refused > opt_.credit) {  // more than the stream's end can explain
      std::fprintf(stderr,
                   "sync-stream-receiver: syncd refused %llu credit messages "
                   "(unknown_receiver %llu)\n",
                   static_cast<unsigned long long>(c_.credit_refused),
                   static_cast<unsigned long long>(receiver_id_));
    }
    const bool events_ok = events_.write(opt_.events_path);
    print_summary(end_ns, http.first_byte_ns(), cpu);
    if (exit_code != kExitOk) return exit_code;
    if (!events_ok) return kExitIo;
    return c_.verify_failures() > 0 ? kExitVerify : kExitOk;
  }

 private:
  void expect_welcome() {
    for (;;) {
      const std::string text = control_->wait_for_text(kSetupTimeoutMs);
      const auto m = nlohmann::json::parse(text, nullptr, false);
      if (!m.is_object()) throw ToolError(producer::kExitIo, "not a JSON object: " + text);
      const std::string type = m.value("type", "");
      if (type == "welcome") return;
      if (type == "error")
        throw ToolError(producer::kExitRefused, "the server refused hello: " + describe_error(m));
    }
  }

  // What the server says on the control connection; only errors matter. unknown_receiver is
  // counted, not printed: when the stream ends syncd forgets the receiver while the last records
  // (up to the credit window) are still in the pipe, so their credits are refused normally.
  void drain_texts() {
    while (control_->next_text(text_)) {
      const auto m = nlohmann::json::parse(text_, nullptr, false);
      if (!m.is_object() || m.value("type", "") != "error") continue;
      if (m.value("code", "") == "unknown_receiver") {
        ++c_.credit_refused;
        continue;
      }
      ++c_.server_errors;
      std::fprintf(stderr, "\nsync-stream-receiver: server error %s\n", describe_error(m).c_str());
    }
  }

  bool limits_reached(int64_t now) const {
    if (g_stop_requested) return true;
    if (opt_.frames > 0 && c_.records >= opt_.frames) return true;
    return opt_.seconds > 0 && c_.first_receive_ns > 0 &&
           now - c_.first_receive_ns >= int64_t(opt_.seconds * 1e9);
  }

  // The record loop; returns the exit code so far.
  int stream(HttpStream& http) {
    uint8_t header[kRecordHeaderBytes];
    // Runs while the stream is quiet: keeps the control connection answered and the line live.
    auto idle = [&]() {
      const int64_t now = now_ns();
      if (!control_->service()) return false;
      drain_texts();
      update_live(now);
      return !limits_reached(now);
    };
    bool have_previous = false;
    uint64_t previous = 0;
    while (!limits_reached(now_ns())) {
      ReadResult r = http.read_exact(header, sizeof header, idle);
      if (r == ReadResult::kEof) {
        end_ = "stream_ended";
        return kExitOk;
      }
      if (r == ReadResult::kStopped) return stopped();
      if (r == ReadResult::kEofMidway) return broken(http, "record header");

      const uint32_t magic = load<uint32_t>(header + 0);
      const uint16_t version = load<uint16_t>(header + 4);
      const uint16_t header_bytes = load<uint16_t>(header + 6);
      if (magic != kRecordMagic || version != 1 || header_bytes != kRecordHeaderBytes) {
        // Records have no delimiter besides their header: the stream cannot be resynchronised.
        std::fprintf(stderr,
                     "\nsync-stream-receiver: record %llu: bad header (magic 0x%08x, "
                     "version %u, %u header bytes)\n",
                     static_cast<unsigned long long>(c_.records), magic, version, header_bytes);
        end_ = "bad_record";
        return kExitIo;
      }
      const uint64_t sequence = load<uint64_t>(header + 8);
      const int64_t publish_ns = int64_t(load<uint64_t>(header + 24));
      const uint32_t width = load<uint32_t>(header + 32);
      const uint32_t height = load<uint32_t>(header + 36);
      const uint32_t format = load<uint32_t>(header + 40);
      const uint32_t flags = load<uint32_t>(header + 44);
      const uint64_t hash = load<uint64_t>(header + 48);
      const uint32_t payload = load<uint32_t>(header + 56);
      const uint32_t dropped_before = load<uint32_t>(header + 60);
      const uint64_t expected = frame_bytes_of(format, width, height);
      if (expected == 0 || expected != payload || payload > kMaxPayloadBytes) {
        std::fprintf(stderr,
                     "\nsync-stream-receiver: record %llu (sequence %llu): %ux%u format %u (%s) "
                     "does not match %u payload bytes\n",
                     static_cast<unsigned long long>(c_.records),
                     static_cast<unsigned long long>(sequence), width, height, format,
                     format_name(format), payload);
        end_ = "bad_record";
        return kExitIo;
      }
      c_.format = format;
      c_.width = width;
      c_.height = height;
      c_.frame_bytes = payload;
      if (payload > pixels_.size()) {
        // Sized by the first record (a stream's geometry is fixed when it opens); touched now so
        // page faults do not land inside the next read.
        if (!pixels_.empty()) ++c_.geometry_changes;
        pixels_.assign(payload, 0);
      }
      r = http.read_exact(pixels_.data(), payload, idle);
      if (r == ReadResult::kStopped) return stopped();
      if (r != ReadResult::kComplete) return broken(http, "pixels");
      const int64_t receive_ns = now_ns();

      // Credit right after the bytes are out of the socket and before verifying: the buffer is
      // ours until the next read, so syncd may already push the next frame through the kernel
      // while we hash this one. Granting after the hash would serialise the two for nothing.
      control_->send_text(std::string_view(credit_msg_, credit_len_));
      ++c_.credit_granted;

      if (flags & kFlagHashValid) {
        if (core::content_hash(pixels_.data(), payload) == hash) {
          ++c_.hash_verified;
        } else {
          ++c_.hash_failures;
        }
      } else {
        ++c_.unhashed;
      }

      c_.dropped_reported += dropped_before;
      bool unique = true;
      if (have_previous) {
        if (sequence > previous) {
          const uint64_t gap = sequence - previous - 1;
          if (gap > 0) {
            ++c_.gaps;
            c_.missing += gap;
          }
          // Frames dropped for this receiver are reported in dropped_before; frames refused at
          // ingest never reached it and are counted by syncd per stream (upstream). Fewer
          // missing than reported cannot happen honestly.
          if (gap < dropped_before) ++c_.gaps_unaccounted;
          if (gap > dropped_before) c_.missing_upstream += gap - dropped_before;
        } else {
          unique = false;
          if (sequence == previous)
            ++c_.duplicates;
          else
            ++c_.reorders;
        }
      }
      // The first record's dropped_before covers frames offered before it, which this receiver
      // never saw the sequences of, so it is counted but cannot be checked.
      if (unique) {
        previous = sequence;
        have_previous = true;
        ++c_.unique;
        bins_.add(receive_ns);
      }
      ++c_.records;
      c_.bytes += kRecordHeaderBytes + payload;
      if (c_.first_receive_ns == 0) c_.first_receive_ns = receive_ns;
      c_.last_receive_ns = receive_ns;
      const double latency_ms = (receive_ns - publish_ns) / 1e6;
      c_.latency_sum_ms += latency_ms;
      c_.latency_max_ms = std::max(c_.latency_max_ms, latency_ms);
      events_.record(sequence, publish_ns, receive_ns);

      if (!control_->service()) {
        std::fprintf(stderr, "\nsync-stream-receiver: control connection lost: %s\n",
                     control_->end_description().c_str());
        end_ = "control_lost";
        return kExitIo;
      }
      drain_texts();
      update_live(receive_ns);
    }
    return stopped();
  }

  int stopped() {
    if (g_stop_requested) {
      end_ = "signal";
    } else if (opt_.frames > 0 && c_.records >= opt_.frames) {
      end_ = "frames";
    } else if (!control_->failure().empty() || control_->peer_closed()) {
      std::fprintf(stderr, "\nsync-stream-receiver: control connection lost: %s\n",
                   control_->end_description().c_str());
      end_ = "control_lost";
      return kExitIo;
    } else {
      end_ = "seconds";
    }
    return kExitOk;
  }

  int broken(const HttpStream& http, const char* where) {
    std::fprintf(stderr,
                 "\nsync-stream-receiver: the stream broke inside the %s of record %llu: "
                 "%s\n",
                 where, static_cast<unsigned long long>(c_.records),
                 http.error() ? errno_text(http.error()).c_str() : "EOF");
    end_ = "broken";
    return kExitIo;
  }

  void update_live(int64_t now) {
    if (!live_) return;
    if (now - live_last_ns_ < 1'000'000'000) return;
    live_last_ns_ = now;
    const int64_t last = bins_.last_ended(now);
    std::fprintf(stderr, "\r%9llu frames  last second %3lld unique  drops %llu  failures %llu ",
                 static_cast<unsigned long long>(c_.records), static_cast<long long>(last),
                 static_cast<unsigned long long>(c_.dropped_reported),
                 static_cast<unsigned long long>(c_.verify_failures()));
    std::fflush(stderr);
    live_shown_ = true;
  }

  void print_summary(int64_t end_ns, int64_t first_byte_ns, double cpu) {
    if (live_shown_) std::fputc('\n', stderr);
    const std::vector<uint32_t> seconds = bins_.complete(end_ns);
    uint64_t low = 0, sum = 0;
    for (uint32_t s : seconds) {
      sum += s;
      if (s < kLowRateFps) ++low;
    }
    // Throughput counts from the first byte of the first record, as sync-tcp-sink does.
    const int64_t first = first_byte_ns ? first_byte_ns : c_.first_receive_ns;
    const double span = c_.records > 1 ? (c_.last_receive_ns - first) / 1e9 : 0.0;
    nlohmann::ordered_json summary = {
        {"receiver", receiver_id_},
        {"stream", opt_.stream},
        {"end", end_},
        {"frames", c_.records},
        {"format", c_.records ? format_name(c_.format) : ""},
        {"width", c_.width},
        {"height", c_.height},
        {"frame_bytes", c_.frame_bytes},
        {"unique_frames", c_.unique},
        {"bytes", c_.bytes},
        {"seconds", span},
        {"fps", span > 0 ? c_.records / span : 0.0},
        {"hash_verified", c_.hash_verified},
        {"hash_failures", c_.hash_failures},
        {"unhashed_frames", c_.unhashed},
        {"dropped_reported", c_.dropped_reported},
        {"missing_sequences", c_.missing},
        {"gaps", c_.gaps},
        {"gaps_unaccounted", c_.gaps_unaccounted},
        {"missing_upstream", c_.missing_upstream},
        {"duplicates", c_.duplicates},
        {"reorders", c_.reorders},
        {"verify_failures", c_.verify_failures()},
        {"credit_granted", c_.credit_granted},
        {"server_errors", c_.server_errors},
        {"credit_refused", c_.credit_refused},
        {"complete_seconds", seconds.size()},
        {"low_rate_seconds", low},
        {"mean_unique_fps", seconds.empty() ? 0.0 : double(sum) / seconds.size()},
        {"min_second_unique_fps",
         seconds.empty() ? 0 : *std::min_element(seconds.begin(), seconds.end())},
        {"max_second_unique_fps",
         seconds.empty() ? 0 : *std::max_element(seconds.begin(), seconds.end())},
        {"per_second_unique_fps", seconds},
        {"latency_ms_mean", c_.records ? c_.latency_sum_ms / c_.records : 0.0},
        {"latency_ms_max", c_.latency_max_ms},
        {"cpu_seconds", cpu},
        {"cpu_ms_per_frame", c_.records ? cpu * 1e3 / c_.records : 0.0},
        // CLOCK_MONOTONIC, system-wide: lets a script relate them to when it started a producer.
        {"first_byte_monotonic_ns", first},
        {"last_frame_monotonic_ns", c_.last_receive_ns},
    };
    std::printf("%s\n", summary.dump().c_str());
    std::fflush(stdout);
  }

  const Options& opt_;
  std::optional<producer::WsClient> control_;
  uint64_t receiver_id_ = 0;
  char credit_msg_[96] = {};
  size_t credit_len_ = 0;
  std::string text_;
  std::vector<uint8_t> pixels_;  // the one reused frame buffer
  Counters c_;
  SecondBins bins_;
  EventLog events_;
  bool live_;
  bool live_shown_ = false;
  int64_t live_last_ns_ = 0;
  std::string end_ = "none";
};

}  // namespace
}  // namespace syncd::stream_receiver

int main(int argc, char** argv) {
  using namespace syncd::stream_receiver;
  Options opt;
  CLI::App app{
      "Receives a syncd stream over HTTP (GET /streams/NAME), verifies every record, grants "
      "credit on a control WebSocket and prints a JSON summary.\nExit codes: 0 ok, 1 usage, "
      "2 refused (403/404), 3 connection/IO/protocol error, 4 verification failures."};
  app.add_option("--url", opt.url, "syncd base URL, http://HOST:PORT")->capture_default_str();
  app.add_option("--stream", opt.stream, "stream name")->capture_default_str();
  auto* ticket = app.add_option("--ticket", opt.ticket, "ticket (hex)");
  auto* ticket_file = app.add_option("--ticket-file", opt.ticket_file,
                                     "read the ticket from this file, waiting "
                                     "up to 10 s for it to appear (sync-producer --ticket-file)");
  ticket->excludes(ticket_file);
  app.add_option("--seconds", opt.seconds, "stop S seconds after the first record")
      ->check(CLI::PositiveNumber);
  app.add_option("--frames", opt.frames, "stop after N records")->check(CLI::PositiveNumber);
  app.add_option("--credit", opt.credit, "initial credit, in frames")
      ->capture_default_str()
      ->check(CLI::Range(1u, 16u));
  app.add_option("--receive-buffer-kb", opt.receive_buffer_kb,
                 "SO_RCVBUF of the stream socket in KiB; 0: kernel autotuning")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  app.add_flag("--quiet", opt.quiet, "no live line");
  app.add_option("--events", opt.events_path,
                 "write sequence,publish_ns,receive_ns (CLOCK_MONOTONIC) CSV here");
  try {
    app.parse(argc, argv);
    if (opt.ticket.empty() && opt.ticket_file.empty()) {
      throw CLI::ValidationError("--ticket/--ticket-file", "give --ticket HEX or --ticket-file");
    }
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  install_stop_handlers();
  try {
    Receiver receiver(opt);
    return receiver.run();
  } catch (const syncd::producer::ToolError& e) {
    std::fprintf(stderr, "sync-stream-receiver: %s\n", e.what());
    return e.code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sync-stream-receiver: %s\n", e.what());
    return kExitIo;
  }
}
