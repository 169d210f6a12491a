// The FEC payload format (docs/wan.md, "FEC payload format"): what follows the RTP header of a
// repair packet (PT 115, its own SSRC and sequence; the relay writes that RTP header).
//
//  0                   1                   2                   3
//  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
// |  V=1  | rsvd=0|       k       |       m       |  repair index |
// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
// |         base sequence         |         symbol length         |
// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
// |                     protected (media) SSRC                    |
// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
// |            repair symbol (symbol length bytes) ...            |
//
// Pure code; every function here may be called from any thread (no state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace syncd::fec {

inline constexpr uint8_t kFormatVersion = 1;
inline constexpr size_t kHeaderBytes = 12;
// Largest source packet (whole plaintext RTP packet) a block carries: the path's MTU budget.
inline constexpr size_t kMaxPacketBytes = 1500;
// Smallest: a bare RTP header (RFC 3550 section 5.1).
inline constexpr size_t kMinPacketBytes = 12;
// A symbol is the packet's length (2 bytes, big-endian) then its bytes, zero-padded.
inline constexpr size_t kLengthPrefixBytes = 2;
inline constexpr size_t kMaxSymbolBytes = kLengthPrefixBytes + kMaxPacketBytes;
inline constexpr size_t kMinSymbolBytes = kLengthPrefixBytes + kMinPacketBytes;
// Largest repair payload: header plus the largest symbol.
inline constexpr size_t kMaxRepairPayloadBytes = kHeaderBytes + kMaxSymbolBytes;
// Block shape limits (docs/wan.md): k + m <= 64 keeps the Cauchy rows distinct from the identity
// rows in GF(2^8) and the decode matrix small.
inline constexpr uint8_t kMaxK = 48;
inline constexpr uint8_t kMaxM = 16;

// The fixed header, host order.
struct RepairHeader {
  uint8_t k = 0;               // source packets in the block, 1..kMaxK
  uint8_t m = 0;               // repair packets in the block, 1..kMaxM
  uint8_t repair_index = 0;    // 0..m-1: which Cauchy row this symbol is
  uint16_t base_sequence = 0;  // RTP sequence of the block's first source packet
  uint16_t symbol_bytes = 0;   // kMinSymbolBytes..kMaxSymbolBytes
  uint32_t media_ssrc = 0;     // SSRC of the protected stream
};

// Why a repair payload or a source packet was refused (each counted by the decoder).
enum class Refusal : uint8_t {
  kNone = 0,
  // Repair payloads.
  kRepairTooShort,         // fewer than kHeaderBytes
  kRepairBadVersion,       // V != 1 or reserved bits set
  kRepairBadShape,         // k or m zero or over the limits
  kRepairBadIndex,         // repair index >= m
  kRepairBadSymbolLength,  // symbol length outside kMinSymbolBytes..kMaxSymbolBytes
  kRepairLengthMismatch,   // payload is not exactly header + symbol length (truncated, overrun)
  kRepairForeignSsrc,      // protects another SSRC
  kRepairInconsistent,     // disagrees on k, m or symbol length with earlier repairs of its block
  kRepairOverlap,          // its block's sequences overlap another block in flight
  kRepairOutOfWindow,      // its block is older than the source window or too far ahead
  kRepairDuplicate,        // this repair index of this block was already received
  kRepairSymbolTooShort,   // a source packet of the block is longer than the symbol
  // Source packets.
  kSourceTooShort,          // fewer than kMinPacketBytes
  kSourceTooLong,           // more than kMaxPacketBytes
  kSourceNotRtp,            // RTP version is not 2
  kSourceSequenceMismatch,  // the sequence given is not the one in the packet
  kSourceForeignSsrc,       // another SSRC than the protected one
  // Recovery (the decoded bytes contradict the headers).
  kRecoveredInvalid,  // bad length prefix, non-zero padding, or wrong sequence or SSRC
  kCount
};

// Static name of a refusal, for logs and /stats ("repair_bad_index", ...).
// Any thread.
const char* refusal_name(Refusal refusal);

// Checks the fixed fields of a repair payload (version, shape, index, symbol length and the
// payload's exact size) and fills *header. Does not know about blocks in flight.
// Any thread; pure.
Refusal parse_repair_header(std::span<const uint8_t> payload, RepairHeader* header);

// Writes the 12-byte header into out[0..12). out must hold kHeaderBytes. Any thread; pure.
void write_repair_header(const RepairHeader& header, uint8_t* out);

// Zeroes, in place, the value bytes of every RFC 8285 one-byte header extension element with
// this id in an RTP packet (section 4.2), e.g. abs-send-time, which the pacer writes after FEC
// has seen the packet. Returns false (and touches nothing) if the packet's header or extension
// block is malformed; a packet without the extension is left as it is. id 0 does nothing.
// Bounded by the packet's size. Any thread; pure.
bool zero_extension(std::span<uint8_t> rtp_packet, uint8_t extension_id);

// Big-endian helpers for wire integers (memcpy-free byte assembly; never reads out of the span
// the caller checked).
inline uint16_t load_be16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] << 8 | p[1]);
}
inline uint32_t load_be32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | uint32_t{p[3]};
}
inline void store_be16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline void store_be32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}

}  // namespace syncd::fec
