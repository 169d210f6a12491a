// Small helpers for the relay thread's peers' addresses, shared by the WAN relay session and the
// WHEP egress: equality, the bytes a DTLS cookie is bound to (and back), a printable form, and the
// wall clock an RTCP sender report carries.
//
// Pure apart from wall_clock_ntp_ns (the system's CLOCK_REALTIME); any thread.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

namespace syncd::transport {

inline bool same_address(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET) {
    const auto& x = reinterpret_cast<const sockaddr_in&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in&>(b);
    return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
  }
  const auto& x = reinterpret_cast<const sockaddr_in6&>(a);
  const auto& y = reinterpret_cast<const sockaddr_in6&>(b);
  return x.sin6_port == y.sin6_port && std::memcmp(&x.sin6_addr, &y.sin6_addr, 16) == 0;
}

// The address as bytes (at most 32), e.g. what a DTLS server binds its cookie to.
inline std::span<const uint8_t> address_bytes(const sockaddr_storage& a) {
  const size_t n = a.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  return {reinterpret_cast<const uint8_t*>(&a), std::min<size_t>(n, 32)};
}

// The inverse: the address DtlsAssociations keeps as bytes, back into a sockaddr.
inline sockaddr_storage address_from_bytes(std::span<const uint8_t> bytes) {
  sockaddr_storage a{};
  if (!bytes.empty()) std::memcpy(&a, bytes.data(), std::min(bytes.size(), sizeof(a)));
  return a;
}

// "HOST:PORT" ("[HOST]:PORT" for IPv6) for messages; "?" for no address. Allocates: not for
// the data path.
inline std::string format_address(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = "?";
  std::string out;
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    inet_ntop(AF_INET, &in.sin_addr, host, sizeof host);
    out.append(host).append(":").append(std::to_string(ntohs(in.sin_port)));
  } else if (a.ss_family == AF_INET6) {
    const auto& in = reinterpret_cast<const sockaddr_in6&>(a);
    inet_ntop(AF_INET6, &in.sin6_addr, host, sizeof host);
    out.append("[").append(host).append("]:").append(std::to_string(ntohs(in.sin6_port)));
  } else {
    out = "?";
  }
  return out;
}

// Nanoseconds since the NTP epoch (1900) by the system's wall clock: an RTCP sender report's
// NTP timestamp (RFC 3550 6.4.1), which receivers pair with its RTP timestamp.
inline uint64_t wall_clock_ntp_ns() {
  constexpr uint64_t kNtpEpochOffsetNs = 2'208'988'800ull * 1'000'000'000ull;
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec) + kNtpEpochOffsetNs;
}

}  // namespace syncd::transport
