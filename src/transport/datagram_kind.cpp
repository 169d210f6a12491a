#include "transport/datagram_kind.h"

namespace syncd::transport {

DatagramKind classify_datagram(std::span<const uint8_t> d) {
  if (d.empty()) return DatagramKind::kUnknown;
  const uint8_t first = d[0];
  // A STUN header is 20 bytes (RFC 8489 5); whether it is well formed is the STUN parser's.
  if (first <= 3) return d.size() >= 20 ? DatagramKind::kStun : DatagramKind::kUnknown;
  if (first >= 20 && first <= 63) return DatagramKind::kDtls;
  if (first >= 128 && first <= 191) {
    // An RTP or RTCP header is at least 8 bytes (RTCP's shortest, an empty RR).
    if (d.size() < 8) return DatagramKind::kUnknown;
    return d[1] >= 192 && d[1] <= 223 ? DatagramKind::kRtcp : DatagramKind::kRtp;
  }
  return DatagramKind::kUnknown;
}

const char* datagram_kind_name(DatagramKind kind) {
  switch (kind) {
    case DatagramKind::kStun:
      return "stun";
    case DatagramKind::kDtls:
      return "dtls";
    case DatagramKind::kRtp:
      return "rtp";
    case DatagramKind::kRtcp:
      return "rtcp";
    case DatagramKind::kUnknown:
      break;
  }
  return "unknown";
}

}  // namespace syncd::transport
