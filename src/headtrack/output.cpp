#include "headtrack/output.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>

#include "headtrack/format_g9.h"

namespace syncd::headtrack {

void encode_opentrack(const double values[6], OpenTrackPacket& out) {
  static_assert(std::endian::native == std::endian::little, "add a byte swap for big-endian");
  for (int i = 0; i < 6; ++i) {
    const double v = std::isfinite(values[i]) ? values[i] : 0.0;
    std::memcpy(out.data() + 8 * i, &v, 8);
  }
}

void encode_opentrack(const Pose& pose, OpenTrackPacket& out) {
  const double v[6] = {0, 0, 0, pose.ypr_deg[0], pose.ypr_deg[1], pose.ypr_deg[2]};
  encode_opentrack(v, out);
}

namespace {

// Appends into a fixed buffer; once full, further appends are dropped and ok() turns false.
class Appender {
 public:
  Appender(char* begin, size_t size) : p_(begin), end_(begin + size) {}
  void raw(std::string_view s) {
    if (size_t(end_ - p_) < s.size()) {
      overflow_ = true;
      return;
    }
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  void ch(char c) {
    if (p_ == end_) {
      overflow_ = true;
      return;
    }
    *p_++ = c;
  }
  void g9(double v) {  // printf("%.9g")
    if (!std::isfinite(v)) return raw("null");
    auto r = to_chars_g9(p_, end_, v);
    if (r.ec != std::errc())
      overflow_ = true;
    else
      p_ = r.ptr;
  }
  void f3(double v) {  // printf("%.3f")
    if (!std::isfinite(v)) return raw("null");
    auto r = std::to_chars(p_, end_, v, std::chars_format::fixed, 3);
    if (r.ec != std::errc())
      overflow_ = true;
    else
      p_ = r.ptr;
  }
  void u64(uint64_t v) {
    auto r = std::to_chars(p_, end_, v);
    if (r.ec != std::errc())
      overflow_ = true;
    else
      p_ = r.ptr;
  }
  void vec(const double* v, int n) {
    ch('[');
    for (int i = 0; i < n; ++i) {
      if (i) ch(',');
      g9(v[i]);
    }
    ch(']');
  }
  void string(std::string_view s) {
    static constexpr char kHex[] = "0123456789abcdef";
    ch('"');
    for (unsigned char c : s) {
      if (c == '"' || c == '\\') {
        ch('\\');
        ch(char(c));
      } else if (c < 0x20) {
        raw("\\u00");
        ch(kHex[c >> 4]);
        ch(kHex[c & 15]);
      } else {
        ch(char(c));
      }
    }
    ch('"');
  }
  char* pos() const { return p_; }
  bool ok() const { return !overflow_; }

 private:
  char* p_;
  char* end_;
  bool overflow_ = false;
};

std::string_view cut_utf8(std::string_view s, size_t max) {
  if (s.size() <= max) return s;
  size_t n = max;
  while (n > 0 && (uint8_t(s[n]) & 0xC0) == 0x80) --n;  // do not split a multi-byte sequence
  return s.substr(0, n);
}

}  // namespace

std::string_view TelemetryJson::serialize(const TelemetrySample& s) {
  Appender a(buffer_, sizeof(buffer_));
  a.raw("{\"version\":");
  a.u64(kVersion);
  a.raw(",\"device\":");
  if (s.device.empty())
    a.raw("null");
  else
    a.string(cut_utf8(s.device, kMaxDeviceBytes));
  a.raw(",\"rotationVector\":");
  a.vec(s.rotation_vector, 3);
  a.raw(",\"quaternion\":");
  const double q[4] = {s.quaternion.w, s.quaternion.x, s.quaternion.y, s.quaternion.z};
  a.vec(q, 4);
  a.raw(",\"yprDegrees\":");
  a.vec(s.ypr_deg, 3);
  a.raw(",\"gyroscope\":");
  if (s.gyroscope)
    a.vec(s.gyroscope, 3);
  else
    a.raw("null");
  a.raw(",\"resetCounter\":");
  a.u64(s.reset_counter);
  a.raw(",\"packetsPerSecond\":");
  a.f3(s.packets_per_second);
  a.raw(",\"discontinuityCount\":");
  a.u64(s.discontinuity_count);
  a.raw(",\"seq\":");
  a.u64(s.seq);
  a.raw(",\"timestampNs\":");
  a.u64(s.timestamp_ns);
  a.ch('}');
  // The buffer is sized for the worst case (128-byte name fully escaped); this cannot trigger.
  if (!a.ok()) return {};
  return std::string_view(buffer_, size_t(a.pos() - buffer_));
}

std::string errno_text(int err) {
  const char* name = strerrorname_np(err);
  std::string s = name ? name : ("errno " + std::to_string(err));
  s += " (";
  s += strerror(err);
  s += ")";
  return s;
}

UdpOutput::~UdpOutput() {
  close();
}

void UdpOutput::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool UdpOutput::open(const std::string& host, uint16_t port, std::string* error) {
  close();
  if (port < 1 || port > 65534) {
    if (error) *error = "port must be 1..65534 (JSON goes to port + 1)";
    return false;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0 || !res) {
    if (error) *error = std::string("getaddrinfo ") + host + ": " + gai_strerror(rc);
    return false;
  }
  std::memcpy(&opentrack_addr_, res->ai_addr, res->ai_addrlen);
  addr_len_ = res->ai_addrlen;
  const int family = res->ai_family;
  freeaddrinfo(res);
  json_addr_ = opentrack_addr_;
  if (family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&json_addr_)->sin_port = htons(uint16_t(port + 1));
  } else {
    reinterpret_cast<sockaddr_in6*>(&json_addr_)->sin6_port = htons(uint16_t(port + 1));
  }
  fd_ = ::socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    if (error) *error = "socket: " + errno_text(errno);
    return false;
  }
  // Bind the ephemeral source port now, so both datagrams visibly share it from the start.
  sockaddr_storage any{};
  any.ss_family = sa_family_t(family);
  const socklen_t any_len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&any), any_len) != 0) {
    if (error) *error = "bind: " + errno_text(errno);
    close();
    return false;
  }
  return true;
}

uint16_t UdpOutput::local_port() const {
  sockaddr_storage local{};
  socklen_t len = sizeof(local);
  if (fd_ < 0 || getsockname(fd_, reinterpret_cast<sockaddr*>(&local), &len) != 0) return 0;
  if (local.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&local)->sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6*>(&local)->sin6_port);
}

int UdpOutput::send(std::span<const uint8_t> opentrack, std::string_view json) {
  if (fd_ < 0) return 0;
  iovec iov[2] = {{const_cast<uint8_t*>(opentrack.data()), opentrack.size()},
                  {const_cast<char*>(json.data()), json.size()}};
  mmsghdr msgs[2] = {};
  msgs[0].msg_hdr.msg_name = &opentrack_addr_;
  msgs[0].msg_hdr.msg_namelen = addr_len_;
  msgs[0].msg_hdr.msg_iov = &iov[0];
  msgs[0].msg_hdr.msg_iovlen = 1;
  msgs[1].msg_hdr.msg_name = &json_addr_;
  msgs[1].msg_hdr.msg_namelen = addr_len_;
  msgs[1].msg_hdr.msg_iov = &iov[1];
  msgs[1].msg_hdr.msg_iovlen = 1;
  const unsigned count = json.empty() ? 1 : 2;
  int sent = ::sendmmsg(fd_, msgs, count, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (sent < 0) {
    last_errno_ = errno;
    ++send_errors_;
    return 0;
  }
  if (unsigned(sent) < count) {
    // The first datagram went; retry the rest once (sendmmsg stops at the first error).
    const int more = ::sendmmsg(fd_, msgs + sent, count - unsigned(sent), MSG_DONTWAIT);
    if (more > 0)
      sent += more;
    else {
      last_errno_ = errno;
      ++send_errors_;
    }
  }
  return sent;
}

int UdpOutput::send_separately(std::span<const uint8_t> opentrack, std::string_view json) {
  if (fd_ < 0) return 0;
  int sent = 0;
  if (::sendto(fd_, opentrack.data(), opentrack.size(), MSG_DONTWAIT | MSG_NOSIGNAL,
               reinterpret_cast<const sockaddr*>(&opentrack_addr_), addr_len_) >= 0) {
    ++sent;
  } else {
    last_errno_ = errno;
    ++send_errors_;
  }
  if (::sendto(fd_, json.data(), json.size(), MSG_DONTWAIT | MSG_NOSIGNAL,
               reinterpret_cast<const sockaddr*>(&json_addr_), addr_len_) >= 0) {
    ++sent;
  } else {
    last_errno_ = errno;
    ++send_errors_;
  }
  return sent;
}

}  // namespace syncd::headtrack
