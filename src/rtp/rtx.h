// RTP retransmission payload format, RFC 4588 (session multiplexing: its own SSRC, sequence and
// payload type). The RTX payload is the original sequence number (OSN, 16 bits) followed by the
// original payload (section 4):
//
//  0                   1                   2                   3
//  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
// |                         RTP Header                            |
// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
// |            OSN                |                               |
// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               |
// |                  Original RTP Packet Payload                  |
// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// The RTX header keeps the original's timestamp, marker, CSRCs and header extension block
// (section 4: "the same as the original"); the original's padding is dropped. Pure, stateless;
// any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "rtp/rtp_packet.h"

namespace syncd::rtp {

inline constexpr size_t kRtxOsnBytes = 2;

struct RtxIdentity {
  uint8_t payload_type = 0;  // the relay's RTX PT, 97 (docs/wan.md)
  uint32_t ssrc = 0;
  uint16_t sequence = 0;  // the RTX stream's own next sequence number
};

// Bytes write_rtx() needs for this original.
size_t rtx_packet_size(const RtpPacketView& original);
// Builds the retransmission of original into out; returns its size, or 0 when out is too small.
size_t write_rtx(const RtpPacketView& original, const RtxIdentity& rtx, std::span<uint8_t> out);

enum class RtxError : uint8_t {
  kOk = 0,
  kNoOsn,     // payload shorter than the 2-byte OSN
  kTooSmall,  // the output buffer cannot hold the restored packet
};

// The original sequence number and payload inside an RTX packet (spans into rtx's datagram).
struct RtxContent {
  uint16_t original_sequence = 0;
  std::span<const uint8_t> payload;
};
RtxError read_rtx(const RtpPacketView& rtx, RtxContent& out);

// Restores the original packet into out: the RTX packet's header with the original PT, SSRC and
// sequence, and the payload after the OSN. *size gets the packet size.
RtxError restore_original(const RtpPacketView& rtx, uint8_t original_payload_type,
                          uint32_t original_ssrc, std::span<uint8_t> out, size_t* size);

}  // namespace syncd::rtp
