// What the bridge sends: the OpenTrack "UDP over network" datagram and the JSON telemetry
// datagram (docs/headtracker.md, "Outputs"), and the one UDP socket both leave from.
//
// encode_opentrack() and TelemetryJson are pure (no I/O, no allocation per call) and belong to
// the thread that owns them. UdpOutput owns a socket; it is used by one thread at a time (in the
// CLI the main thread, in syncd the loop thread).
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "headtrack/orientation.h"

namespace syncd::headtrack {

// OpenTrack UDP protocol: six little-endian doubles x, y, z (cm), yaw, pitch, roll (degrees).
// OpenTrack drops a datagram holding NaN/Inf and keeps stale values from a short one, so the
// packet is always exactly 48 bytes and non-finite inputs are sent as 0.
inline constexpr size_t kOpenTrackBytes = 48;
using OpenTrackPacket = std::array<uint8_t, kOpenTrackBytes>;
void encode_opentrack(const double values[6], OpenTrackPacket& out);
// Convenience: translation 0, rotation from the pose's mapped yaw/pitch/roll.
void encode_opentrack(const Pose& pose, OpenTrackPacket& out);

// One telemetry sample, the fields existing consumers read plus ours.
struct TelemetrySample {
  std::string_view device;  // headset name; empty -> null
  double rotation_vector[3] = {};
  Quat quaternion;                    // recentered orientation
  double ypr_deg[3] = {};             // mapped output angles
  const double* gyroscope = nullptr;  // rad/s, or nullptr -> null
  uint32_t reset_counter = 0;         // raw discontinuity counter (upstream name)
  double packets_per_second = 0;
  uint64_t discontinuity_count = 0;  // counter changes seen since start
  uint64_t seq = 0;
  uint64_t timestamp_ns = 0;  // CLOCK_MONOTONIC when the sample was read
};

// Serialises with std::to_chars into a buffer it owns and reuses: no allocation, no locale.
// Doubles are printed like printf("%.9g"), packetsPerSecond like "%.3f"; non-finite -> null.
// Device names longer than kMaxDeviceBytes are cut (at a UTF-8 boundary).
class TelemetryJson {
 public:
  static constexpr size_t kMaxDeviceBytes = 128;
  static constexpr int kVersion = 2;  // the upstream telemetry "version"
  // The returned view stays valid until the next call.
  std::string_view serialize(const TelemetrySample& s);

 private:
  char buffer_[2048];
};

class UdpOutput {
 public:
  UdpOutput() = default;
  ~UdpOutput();
  UdpOutput(const UdpOutput&) = delete;
  UdpOutput& operator=(const UdpOutput&) = delete;

  // Resolves host (IPv4/IPv6 literal or name) and opens one unconnected UDP socket; OpenTrack
  // goes to port, JSON to port + 1 (port must be 1..65534). Control path: false with *error set
  // ("getaddrinfo: ...", "socket: EMFILE (...)") on failure.
  bool open(const std::string& host, uint16_t port, std::string* error);
  void close();

  // Both datagrams in one sendmmsg() from the one socket (one source port). Returns how many
  // were sent (0..2); failures are counted, never thrown. Non-blocking: a full socket buffer
  // drops the sample rather than stalling the caller.
  int send(std::span<const uint8_t> opentrack, std::string_view json);
  // The same two datagrams with two sendto() calls (benchmark comparison).
  int send_separately(std::span<const uint8_t> opentrack, std::string_view json);

  int fd() const { return fd_; }
  uint16_t local_port() const;
  uint64_t send_errors() const { return send_errors_; }
  int last_errno() const { return last_errno_; }

 private:
  int fd_ = -1;
  sockaddr_storage opentrack_addr_{};
  sockaddr_storage json_addr_{};
  socklen_t addr_len_ = 0;
  uint64_t send_errors_ = 0;
  int last_errno_ = 0;
};

// "ECONNREFUSED (Connection refused)": errno's name for grepping, its text for people.
std::string errno_text(int err);

}  // namespace syncd::headtrack
