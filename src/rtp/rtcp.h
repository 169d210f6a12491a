// RTCP compound packets: SR, RR, SDES CNAME, BYE (RFC 3550 section 6), generic NACK and PLI
// (RFC 4585 section 6), REMB (draft-alvestrand-rmcat-remb-03 section 2.2); parser, writer and the
// NTP and round-trip-time helpers of RFC 3550 section 6.4.1.
//
// Pure, allocation-free. parse_rtcp() validates the whole compound packet before it reports any
// event, so a refused packet yields no events at all. Any thread; the parser holds no state, a
// writer is one per packet being built.
//
// Common header of every RTCP packet (RFC 3550 section 6.4.1):
//  0                   1                   2                   3
//  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
// |V=2|P| RC/FMT  |      PT       |  length (32-bit words - 1)    |
// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Report block (24 bytes, in SR and RR):
// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
// |                 SSRC_1 (SSRC of first source)                 |
// | fraction lost |       cumulative number of packets lost       |
// |           extended highest sequence number received           |
// |                      interarrival jitter                      |
// |                         last SR (LSR)                         |
// |                   delay since last SR (DLSR)                  |
// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace syncd::rtp {

// RFC 3550 section 12.1, RFC 4585 section 6.1.
inline constexpr uint8_t kRtcpSenderReport = 200;
inline constexpr uint8_t kRtcpReceiverReport = 201;
inline constexpr uint8_t kRtcpSourceDescription = 202;
inline constexpr uint8_t kRtcpGoodbye = 203;
inline constexpr uint8_t kRtcpApplication = 204;
inline constexpr uint8_t kRtcpTransportFeedback = 205;   // RTPFB
inline constexpr uint8_t kRtcpPayloadFeedback = 206;     // PSFB
inline constexpr uint8_t kRtcpFmtGenericNack = 1;        // RTPFB
inline constexpr uint8_t kRtcpFmtPli = 1;                // PSFB
inline constexpr uint8_t kRtcpFmtApplicationLayer = 15;  // PSFB, REMB's carrier
inline constexpr uint8_t kSdesCname = 1;
inline constexpr size_t kRtcpHeaderBytes = 4;
inline constexpr size_t kReportBlockBytes = 24;
inline constexpr size_t kMaxReportBlocks = 31;  // 5-bit count
inline constexpr size_t kMaxByeSources = 31;
inline constexpr size_t kMaxRembSsrcs = 255;  // 8-bit count
// A NACK event carries at most this many sequence numbers; a longer list arrives as more events.
inline constexpr size_t kNackEventCapacity = 256;
// Largest cumulative-lost value a report block can carry (signed 24-bit, RFC 3550 6.4.1).
inline constexpr int32_t kMaxCumulativeLost = 0x7FFFFF;
inline constexpr int32_t kMinCumulativeLost = -0x800000;

struct ReportBlock {
  uint32_t source_ssrc = 0;
  uint8_t fraction_lost = 0;    // fixed point, lost / expected * 256
  int32_t cumulative_lost = 0;  // signed 24-bit on the wire (duplicates can make it negative)
  uint32_t extended_highest_sequence = 0;
  uint32_t jitter = 0;               // timestamp units
  uint32_t last_sr = 0;              // LSR: middle 32 bits of the SR's NTP timestamp, 0 if none
  uint32_t delay_since_last_sr = 0;  // DLSR, units of 1/65536 s
};

struct SenderInfo {
  uint64_t ntp_timestamp = 0;  // 32.32 fixed-point seconds
  uint32_t rtp_timestamp = 0;
  uint32_t packet_count = 0;
  uint32_t octet_count = 0;
};

struct SenderReport {
  uint32_t sender_ssrc = 0;
  SenderInfo info;
  std::span<const ReportBlock> blocks;  // valid during the callback
};

struct ReceiverReport {
  uint32_t sender_ssrc = 0;
  std::span<const ReportBlock> blocks;  // valid during the callback
};

struct Goodbye {
  std::span<const uint32_t> ssrcs;  // valid during the callback
  std::string_view reason;          // empty when absent
};

// Generic NACK (RFC 4585 section 6.2.1), its FCI entries' PID and BLP expanded: PID, then
// PID + i + 1 for each bit i of BLP set (least significant bit first).
struct Nack {
  uint32_t sender_ssrc = 0;
  uint32_t media_ssrc = 0;
  std::span<const uint16_t> lost;  // valid during the callback
};

struct Remb {
  uint32_t sender_ssrc = 0;
  uint64_t bitrate_bps = 0;         // mantissa << exponent, saturated at UINT64_MAX
  std::span<const uint32_t> ssrcs;  // valid during the callback
};

// Receives the events of one compound packet, in the order of the packets in it. Each callback
// runs inside parse_rtcp(); spans are valid only during the call. Defaults ignore the event.
class RtcpSink {
 public:
  virtual ~RtcpSink() = default;
  virtual void on_sender_report(const SenderReport&) {}
  virtual void on_receiver_report(const ReceiverReport&) {}
  virtual void on_cname(uint32_t /*ssrc*/, std::string_view /*cname*/) {}
  virtual void on_goodbye(const Goodbye&) {}
  virtual void on_nack(const Nack&) {}
  virtual void on_pli(uint32_t /*sender_ssrc*/, uint32_t /*media_ssrc*/) {}
  virtual void on_remb(const Remb&) {}
  // An APP packet (RFC 3550 6.7), whole as on the wire: the application reads its own (the
  // relay's stream description, relay/relay_wire.h).
  virtual void on_application(std::span<const uint8_t> /*packet*/) {}
};

// Why parse_rtcp() refused a compound packet. Values index RtcpParseCounters::refused.
enum class RtcpParseError : uint8_t {
  kOk = 0,
  kTooShort,             // under 4 bytes, or a packet shorter than its type's fixed part
  kBadVersion,           // V != 2 in any packet
  kLengthOverrun,        // a length field runs past the datagram
  kPaddingNotLast,       // P set on a packet that is not the last (RFC 3550 A.2)
  kBadPadding,           // pad count 0 or larger than the packet body
  kFirstNotReport,       // the first packet is not SR or RR (RFC 3550 6.1, A.2)
  kReportBlocksOverrun,  // RC report blocks do not fit the length
  kSdesMalformed,        // an SDES chunk or item runs past its packet, or chunks != SC
  kByeMalformed,         // SC SSRCs or the reason run past the packet
  kFeedbackMalformed,    // RTPFB/PSFB shorter than sender + media SSRC, NACK without an FCI
  kRembMalformed,        // REMB without "REMB", or its SSRC count does not match the length
  kCount,
};
const char* to_string(RtcpParseError error);

struct RtcpParseOptions {
  // RFC 5506 reduced-size RTCP lets a packet start with feedback; the relay sends compound
  // packets only (docs/wan.md), so it is refused by default.
  bool allow_reduced_size = false;
};

// Validates, then reports the events of, one compound RTCP packet (after SRTCP unprotect).
// Packet types it does not read (XR, other feedback formats, SDES items other than CNAME) are
// skipped; *skipped, when given, counts them. APP packets go to on_application() whole.
RtcpParseError parse_rtcp(std::span<const uint8_t> compound, RtcpSink& sink,
                          RtcpParseOptions options = {}, uint32_t* skipped = nullptr);

struct RtcpParseCounters {
  uint64_t accepted = 0;
  uint64_t refused[static_cast<size_t>(RtcpParseError::kCount)] = {};
  void count(RtcpParseError error) {
    if (error == RtcpParseError::kOk) {
      ++accepted;
    } else {
      ++refused[static_cast<size_t>(error)];
    }
  }
};

// ---- NACK FCI (RFC 4585 section 6.2.1) ----

struct NackItem {
  uint16_t pid = 0;  // packet ID: the first lost packet
  uint16_t blp = 0;  // bitmask of the 16 packets after it; bit i set: PID + i + 1 lost
};
// Expands one FCI entry into out (room for 17); returns the count written.
size_t expand_nack_item(NackItem item, uint16_t out[17]);
// Packs lost sequence numbers into FCI entries: each number is added to the previous entry when
// it lies 1..16 after that entry's PID, else it opens a new one; so a list in ascending (wrapped)
// order packs densely, and any order is still encoded completely. Returns the entries needed;
// writes at most out.size() of them.
size_t pack_nack_items(std::span<const uint16_t> lost, std::span<NackItem> out);

// ---- REMB bitrate (draft-alvestrand-rmcat-remb-03 section 2.2) ----
// BR Exp (6 bits) and BR Mantissa (18 bits): bitrate = mantissa * 2^exp bps. Encoding picks the
// smallest exponent whose mantissa fits, rounding down (never announce more than estimated).
struct RembBitrate {
  uint8_t exponent = 0;
  uint32_t mantissa = 0;
};
RembBitrate encode_remb_bitrate(uint64_t bitrate_bps);
uint64_t decode_remb_bitrate(RembBitrate value);

// ---- NTP time (RFC 3550 section 4) ----
// The NTP format is 32.32 fixed-point seconds. These convert a nanosecond count (whatever epoch
// the caller's clock has) to and from that format; the caller maps its clock's epoch. NTP
// seconds are 32 bits, so times of 2^32 s (136 years) and more wrap.
uint64_t ntp_from_ns(uint64_t time_ns);
uint64_t ns_from_ntp(uint64_t ntp);
// The middle 32 bits (16.16 seconds), as LSR and as the arrival time of an RR (6.4.1).
constexpr uint32_t ntp_compact(uint64_t ntp) {
  return static_cast<uint32_t>(ntp >> 16);
}
// A duration in nanoseconds in 1/65536 s units (DLSR), saturated at UINT32_MAX.
uint32_t compact_from_ns(uint64_t duration_ns);
uint64_t ns_from_compact(uint32_t compact);

// Round-trip time from an RR's report block, RFC 3550 section 6.4.1: arrival - LSR - DLSR, with
// arrival the compact NTP time the RR came in. Empty when LSR is 0 (no SR received yet) or the
// result is negative (clock error or a corrupt block).
std::optional<uint64_t> round_trip_ns(uint32_t arrival_compact, uint32_t last_sr,
                                      uint32_t delay_since_last_sr);

// ---- Writer ----

// Builds one compound packet into the caller's buffer. Each add_*() writes a whole packet or,
// when it does not fit or is invalid, nothing and returns false. The first packet must be SR or
// RR (RFC 3550 section 6.1); other adds fail until one is there. Any thread; not thread-safe.
class RtcpWriter {
 public:
  explicit RtcpWriter(std::span<uint8_t> out) : out_(out) {}

  bool add_sender_report(uint32_t sender_ssrc, const SenderInfo& info,
                         std::span<const ReportBlock> blocks = {});
  bool add_receiver_report(uint32_t sender_ssrc, std::span<const ReportBlock> blocks = {});
  bool add_cname(uint32_t ssrc, std::string_view cname);  // cname.size() <= 255
  bool add_goodbye(std::span<const uint32_t> ssrcs, std::string_view reason = {});
  // Packs lost into NACK FCI entries (pack_nack_items()); false when lost is empty.
  bool add_nack(uint32_t sender_ssrc, uint32_t media_ssrc, std::span<const uint16_t> lost);
  bool add_pli(uint32_t sender_ssrc, uint32_t media_ssrc);
  bool add_remb(uint32_t sender_ssrc, uint64_t bitrate_bps, std::span<const uint32_t> ssrcs);
  // Appends an APP packet the application built (RFC 3550 6.7): refused unless it is one
  // whole, unpadded APP packet whose length field matches its size.
  bool add_application(std::span<const uint8_t> packet);

  // Bytes of the compound packet so far.
  size_t size() const { return size_; }
  std::span<const uint8_t> packet() const { return {out_.data(), size_}; }

 private:
  uint8_t* reserve(size_t bytes, bool is_report);
  std::span<uint8_t> out_;
  size_t size_ = 0;
};

}  // namespace syncd::rtp
