// A browser-like WHEP offer for tests: one video m-line offering `codec` at payload type 102
// (H264 with packetization-mode 1), ICE credentials, a sha-256 fingerprint and rtcp-mux: what
// webrtc::parse_sdp_offer needs and no more.
#pragma once

#include <string>

namespace syncd::test {

inline std::string offer_sdp(const std::string& codec = "H264") {
  // Appended piece by piece: g++ 12 warns (-Wrestrict) on some literal + std::string chains.
  std::string sdp;
  sdp.append("v=0\r\n");
  sdp.append("o=- 4611731400430051336 2 IN IP4 127.0.0.1\r\n");
  sdp.append("s=-\r\n");
  sdp.append("t=0 0\r\n");
  sdp.append("a=group:BUNDLE 0\r\n");
  sdp.append("m=video 9 UDP/TLS/RTP/SAVPF 102\r\n");
  sdp.append("c=IN IP4 0.0.0.0\r\n");
  sdp.append("a=ice-ufrag:Tq3v\r\n");
  sdp.append("a=ice-pwd:Zk8pQw2xLm4nRt6yUv8bCd0f\r\n");
  sdp.append("a=fingerprint:sha-256 A5");
  for (int i = 1; i < 32; ++i) sdp.append(":A5");  // 32 bytes
  sdp.append("\r\n");
  sdp.append("a=setup:actpass\r\n");
  sdp.append("a=mid:0\r\n");
  sdp.append("a=recvonly\r\n");
  sdp.append("a=rtcp-mux\r\n");
  sdp.append("a=rtpmap:102 ").append(codec).append("/90000\r\n");
  if (codec == "H264")
    sdp.append(
        "a=fmtp:102 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f\r\n");
  return sdp;
}

}  // namespace syncd::test
