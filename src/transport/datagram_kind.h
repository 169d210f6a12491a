// Which protocol a datagram on a media transport's one UDP 5-tuple belongs to: RFC 7983
// section 7 decides on the first byte, RFC 5761 section 4 tells RTCP from RTP (RTCP packet types
// 192-223, the marker bit and payload type together, in the second byte). The WAN relay and the
// WebRTC egress demultiplex with this one function.
//
// Pure; any thread.
#pragma once

#include <cstdint>
#include <span>

namespace syncd::transport {

enum class DatagramKind : uint8_t {
  kStun,     // first byte 0..3 (ICE connectivity checks and consent)
  kDtls,     // first byte 20..63
  kRtp,      // first byte 128..191, second byte outside 192..223
  kRtcp,     // first byte 128..191, second byte 192..223
  kUnknown,  // anything else (ZRTP, TURN channels, noise, too short): dropped and counted
};
DatagramKind classify_datagram(std::span<const uint8_t> datagram);
const char* datagram_kind_name(DatagramKind kind);

}  // namespace syncd::transport
