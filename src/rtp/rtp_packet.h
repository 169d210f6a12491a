// RTP packets (RFC 3550 section 5.1) with RFC 8285 one-byte header extensions.
//
// Pure: no sockets, clocks, logs or allocation. parse_rtp() checks every length against the
// datagram before anything is read; bad input is refused with an RtpParseError, never trusted.
// All functions may be called from any thread; they hold no state.
//
//  0                   1                   2                   3
//  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
// |V=2|P|X|  CC   |M|     PT      |       sequence number         |
// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
// |                           timestamp                           |
// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
// |           synchronization source (SSRC) identifier            |
// +=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+
// |            contributing source (CSRC) identifiers             |
// |                             ....                              |
// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
// |  defined by profile (0xBEDE)  |    length (32-bit words)      |  if X (section 5.3.1)
// |                        extension data                         |
// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
// |                     payload ...    | padding ... | pad count  |  if P
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace syncd::rtp {

inline constexpr uint8_t kRtpVersion = 2;
inline constexpr size_t kRtpFixedHeaderBytes = 12;
inline constexpr size_t kMaxCsrcs = 15;
// RFC 8285 section 4.2: the "defined by profile" value of the one-byte form.
inline constexpr uint16_t kOneByteExtensionProfile = 0xBEDE;
// The relay's id for abs-send-time (docs/wan.md, "Header extension").
inline constexpr uint8_t kAbsSendTimeExtensionId = 3;
// 0xBEDE, length 1, then [id 3 | len-1 = 2] and 3 bytes of value: 8 bytes on the wire.
inline constexpr size_t kAbsSendTimeExtensionBlockBytes = 8;

// Why parse_rtp() refused a datagram. Values index RtpParseCounters::refused.
enum class RtpParseError : uint8_t {
  kOk = 0,
  kTooShort,          // fewer than 12 bytes
  kBadVersion,        // V != 2
  kCsrcOverrun,       // CC * 4 runs past the datagram
  kExtensionOverrun,  // the extension header or its length runs past the datagram
  kPaddingZero,       // P set but the last byte (pad count) is 0 (RFC 3550 5.1: it counts itself)
  kPaddingOverrun,    // pad count larger than what follows the header
  kCount,
};
const char* to_string(RtpParseError error);

// A parsed datagram. Spans point into the caller's datagram, which must outlive the view.
struct RtpPacketView {
  bool padding = false;
  bool extension = false;
  bool marker = false;
  uint8_t csrc_count = 0;
  uint8_t payload_type = 0;
  uint16_t sequence = 0;
  uint32_t timestamp = 0;
  uint32_t ssrc = 0;
  uint16_t extension_profile = 0;           // valid when extension
  std::span<const uint8_t> extension_data;  // the words after the extension header
  std::span<const uint8_t> payload;
  uint8_t padding_bytes = 0;          // including the count byte itself
  size_t header_bytes = 0;            // fixed header + CSRCs + extension block
  std::span<const uint8_t> datagram;  // the whole packet as given

  // i < csrc_count.
  uint32_t csrc(size_t i) const;
};

// Parses one RTP datagram into out. On error out is unspecified. Demultiplexing RTP from RTCP
// (RFC 5761) is the caller's job; this checks only what RFC 3550 section 5.1 defines.
RtpParseError parse_rtp(std::span<const uint8_t> datagram, RtpPacketView& out);

// Counters a caller keeps next to a stream; count() records one parse result.
struct RtpParseCounters {
  uint64_t accepted = 0;
  uint64_t refused[static_cast<size_t>(RtpParseError::kCount)] = {};
  void count(RtpParseError error) {
    if (error == RtpParseError::kOk) {
      ++accepted;
    } else {
      ++refused[static_cast<size_t>(error)];
    }
  }
};

// Walks RFC 8285 section 4.2 one-byte extension elements: [ID:4 | L:4] then L+1 bytes. ID 0 is a
// padding byte and is skipped; ID 15 ends processing (section 4.2: "the rest of the header
// extension"). An element whose length runs past the block ends the walk, and malformed() turns
// true. Reads nothing outside the block. Any thread; not thread-safe; one per walk.
class OneByteExtensionReader {
 public:
  // Empty when the packet has no one-byte extension block (profile other than 0xBEDE).
  explicit OneByteExtensionReader(const RtpPacketView& packet);
  // Returns false when there are no more elements.
  bool next(uint8_t& id, std::span<const uint8_t>& data);
  bool malformed() const { return malformed_; }

 private:
  std::span<const uint8_t> block_;
  size_t offset_ = 0;
  bool malformed_ = false;
};

// Finds one-byte extension id (1..14) in packet; false when absent.
bool find_one_byte_extension(const RtpPacketView& packet, uint8_t id,
                             std::span<const uint8_t>& data);

// abs-send-time (http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time): 24 bits, 6.18
// fixed-point seconds, i.e. the send time modulo 64 s in units of 2^-18 s (3.8 us).
inline constexpr uint32_t kAbsSendTimeMask = 0xFFFFFF;
uint32_t abs_send_time_from_ns(uint64_t time_ns);
// later - earlier on the 64-s circle, in 2^-18 s units, in [-2^23, 2^23 - 1].
int32_t abs_send_time_diff(uint32_t later, uint32_t earlier);
// The same difference in nanoseconds (rounded toward zero).
int64_t abs_send_time_diff_ns(uint32_t later, uint32_t earlier);
// Reads the abs-send-time extension (id kAbsSendTimeExtensionId, 3 bytes); false when absent
// or of another length.
bool read_abs_send_time(const RtpPacketView& packet, uint32_t& value);

// One RFC 8285 one-byte element to write: id 1..14, 1..16 bytes of data.
struct OneByteExtension {
  uint8_t id = 0;
  std::span<const uint8_t> data;
};

// What write_rtp_header() puts on the wire. csrcs.size() <= kMaxCsrcs.
struct RtpHeader {
  bool marker = false;
  uint8_t payload_type = 0;  // 7 bits
  uint16_t sequence = 0;
  uint32_t timestamp = 0;
  uint32_t ssrc = 0;
  std::span<const uint32_t> csrcs;
  // When set, a one-byte extension block with abs-send-time (id 3) follows the CSRCs; its value
  // is normally patched by set_abs_send_time() just before SRTP protect.
  bool has_abs_send_time = false;
  uint32_t abs_send_time = 0;
  // More one-byte elements, after abs-send-time, in this order; the block is zero-padded to a
  // multiple of 4 bytes (RFC 8285 section 4.2). The relay's frame info rides here.
  std::span<const OneByteExtension> extensions;
};

// Bytes write_rtp_header() writes for this header.
size_t rtp_header_size(const RtpHeader& header);
// Writes the header into out; returns the bytes written, or 0 (nothing written) when out is too
// small or the header is invalid (too many CSRCs, an extension id outside 1..14 or data outside
// 1..16 bytes).
size_t write_rtp_header(const RtpHeader& header, std::span<uint8_t> out);
// Header and payload; returns the packet size or 0 when out is too small.
size_t write_rtp_packet(const RtpHeader& header, std::span<const uint8_t> payload,
                        std::span<uint8_t> out);
// Overwrites the value of an existing abs-send-time element in a packet, in place (the pacer
// stamps it just before protect). False when the packet does not parse or has no such element.
bool set_abs_send_time(std::span<uint8_t> packet, uint32_t value);

}  // namespace syncd::rtp
