// The WAN relay's own wire formats, beside the standard ones that src/rtp carries
// (docs/wan.md, "Relay wire formats"):
//  - which protocol a datagram on the session's one UDP 5-tuple belongs to (RFC 7983);
//  - the frame-info header extensions on the first RTP packet of every access unit, which carry
//    what the producer's frame header said (sequence, content hash, capture time, flags) and
//    the sender's accept time, so the receiver's publishers see the frame as it was sent;
//  - the stream description, an RTCP APP packet ("SYNC"), that tells the receiver which stream
//    to open (name, format, width, height, rate).
//
// Pure: bytes in, values out; no allocation. Any thread; no state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace syncd::relay {

// RFC 7983 section 7: the first byte decides; RFC 5761 section 4: RTCP packet types 192-223
// (marker bit and payload type together, the second byte) are RTCP, the rest RTP.
enum class DatagramKind : uint8_t {
  kDtls,     // first byte 20..63
  kRtp,      // first byte 128..191, second byte outside 192..223
  kRtcp,     // first byte 128..191, second byte 192..223
  kUnknown,  // anything else (STUN, ZRTP, TURN channels, noise): dropped and counted
};
DatagramKind classify_datagram(std::span<const uint8_t> datagram);
const char* datagram_kind_name(DatagramKind kind);

// RFC 8285 one-byte header extension ids the relay uses (abs-send-time is src/rtp's, id 3).
inline constexpr uint8_t kFrameIdExtension = 4;     // sequence u64, content hash u64: 16 bytes
inline constexpr uint8_t kFrameTimeExtension = 5;   // capture time us u64, flags u32: 12 bytes
inline constexpr uint8_t kSenderTimeExtension = 6;  // sender accept time ns u64: 8 bytes
inline constexpr size_t kFrameIdBytes = 16;
inline constexpr size_t kFrameTimeBytes = 12;
inline constexpr size_t kSenderTimeBytes = 8;

// What the first packet of an access unit says about its frame.
struct FrameInfoWire {
  uint64_t sequence = 0;
  uint64_t content_hash = 0;
  uint64_t capture_time_us = 0;
  uint32_t flags = 0;
  uint64_t sender_accept_ns = 0;  // CLOCK_MONOTONIC of the sender: a latency figure only when
                                  // both ends share a clock (two syncd on one machine)
};
// Big-endian element payloads. The writers fill exactly their *_Bytes; the readers refuse any
// other length (false).
void write_frame_id(const FrameInfoWire& info, uint8_t out[kFrameIdBytes]);
void write_frame_time(const FrameInfoWire& info, uint8_t out[kFrameTimeBytes]);
void write_sender_time(const FrameInfoWire& info, uint8_t out[kSenderTimeBytes]);
bool read_frame_id(std::span<const uint8_t> element, FrameInfoWire& info);
bool read_frame_time(std::span<const uint8_t> element, FrameInfoWire& info);
bool read_sender_time(std::span<const uint8_t> element, FrameInfoWire& info);

// The stream description: RTCP APP (RFC 3550 section 6.7), name "SYNC", subtype 0.
//
//   0                   1                   2                   3
//   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//  |V=2|P|subtype=0|   PT=APP=204  |             length            |
//  |                        SSRC of the sender                     |
//  |                          "SYNC"                               |
//  |   version=1   |    format     |  name length  | source format |
//  |                             width                             |
//  |                             height                            |
//  |                    frame rate, millihertz                     |
//  |    sender's RTT, 100 us units |           reserved            |
//  |   name (UTF-8, name length bytes), zero-padded to 32 bits ... |
inline constexpr size_t kMaxStreamNameBytes = 64;
inline constexpr size_t kMaxStreamDescriptionBytes = 32 + kMaxStreamNameBytes;
struct StreamDescription {
  uint32_t ssrc = 0;
  uint8_t format = 0;  // media::PixelFormat's wire value
  // The raw format the sender's relay encoded the stream from (0: none, the producer sent
  // `format` itself): a receiver decodes such a stream back to raw frames for its consumers.
  uint8_t source_format = 0;
  uint32_t width = 0;
  uint32_t height = 0;
  uint32_t fps_millihertz = 0;
  // The round trip the sender measured from the receiver's reports, in 100 us units (0: not
  // yet): the receiver sends no media, so it learns its NACK and repair timing from this.
  uint16_t rtt_100us = 0;
  uint8_t name_bytes = 0;
  char name[kMaxStreamNameBytes] = {};
  std::string_view name_view() const { return {name, name_bytes}; }
};
enum class DescriptionError : uint8_t {
  kNone,
  kTooShort,
  kNotApp,       // version, packet type or subtype
  kNotSync,      // another application's APP packet: not ours to read
  kBadLength,    // the length field disagrees with the bytes
  kBadVersion,   // a description version this syncd does not know
  kBadName,      // empty, over 64 bytes, or past the packet
  kBadGeometry,  // zero width, height or rate
};
const char* description_error_name(DescriptionError error);
// Writes the packet into out; returns its length (a multiple of 4), or 0 when out is too small
// or the description cannot be written (empty name, over 64 bytes).
size_t write_stream_description(const StreamDescription& d, std::span<uint8_t> out);
// Reads one APP packet (its RTCP header included, as a compound walk hands it out).
DescriptionError parse_stream_description(std::span<const uint8_t> packet, StreamDescription& out);

}  // namespace syncd::relay
