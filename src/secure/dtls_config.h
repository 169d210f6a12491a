// The DTLS endpoints' settings, plain data (dtls_endpoint.h).
//
// Any thread.
#pragma once

#include <cstdint>

namespace syncd::secure {

struct DtlsConfig {
  // No DTLS datagram we send exceeds this (the handshake is fragmented to fit, RFC 6347 4.2.3):
  // 1200 bytes stays under any path MTU we expect on the WAN, tunnels included.
  uint32_t mtu = 1200;
  // First retransmission timeout; doubles on each timeout up to 60 s (RFC 6347 4.2.4.1 says
  // 1 s). Tests set it short.
  uint32_t initial_retransmit_ms = 1000;
  // handle_timeout() calls without progress before the handshake is declared dead.
  uint32_t max_retransmits = 6;
  // The SRTP profiles offered (client) and accepted (server), in our order of preference.
  // kGcmOrCm: WebRTC peers, some of whose DTLS has no GCM profile (GStreamer's webrtcbin up to
  // 1.22). The WAN relay keeps kGcm: its framing (the epoch as MKI) is GCM's. kCmOnly is what
  // such a peer offers; tests stand in for one with it.
  enum class SrtpProfiles : uint8_t { kGcm, kGcmOrCm, kCmOnly };
  SrtpProfiles srtp_profiles = SrtpProfiles::kGcm;
};

}  // namespace syncd::secure
