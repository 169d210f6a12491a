// H.264 RTP depacketizer, RFC 6184 packetization-mode 1: single NAL unit packets, STAP-A and
// FU-A, rebuilt into one Annex B access unit (every NAL unit behind a 00 00 00 01 start code).
//
// The jitter buffer hands over the packets of one access unit in sequence order and complete;
// anything that breaks that contract (a gap, a FU-A without its start, a change of timestamp) is
// refused with a DepacketizeError, the access unit is marked failed, and the caller drops it
// (and asks for a key frame). Pure, allocation-free: output goes into the caller's buffer.
// Any thread; not thread-safe; one instance per receiving stream.
//
// Use:
//   depacketizer.begin(frame_buffer);                 // e.g. a frame-pool slot
//   for each packet of the AU: if (depacketizer.push(view) != kOk) { drop the AU; }
//   if (depacketizer.finish() == kOk) publish depacketizer.access_unit();
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "rtp/rtp_packet.h"

namespace syncd::rtp {

// Why push() or finish() refused. Values index DepacketizerCounters::refused.
enum class DepacketizeError : uint8_t {
  kOk = 0,
  kNotStarted,          // push() before begin()
  kAlreadyFailed,       // the AU was refused before; begin() again
  kAfterMarker,         // a packet after the one with the marker bit
  kSequenceGap,         // sequence number is not the previous one + 1 (mod 2^16)
  kTimestampMismatch,   // not the AU's RTP timestamp (RFC 6184 5.1: one AU, one timestamp)
  kEmptyPayload,        // no payload byte
  kForbiddenBit,        // F = 1 in a NAL or payload header (RFC 6184 5.3)
  kReservedNalType,     // type 0, 30 or 31 (RFC 6184 table 1: reserved / undefined)
  kUnsupportedNalType,  // STAP-B, MTAP16, MTAP24, FU-B: not in packetization-mode 1 (5.4)
  kStapTruncated,       // a STAP-A NAL size runs past the payload, or a dangling size byte
  kStapEmptyNal,        // a STAP-A NAL size of 0
  kStapNestedType,      // a STAP-A holding a payload structure type (24..31) or type 0
  kFuTooShort,          // FU-A with no byte after its two header bytes
  kFuStartAndEnd,       // S and E both set (RFC 6184 5.8: MUST NOT)
  kFuWithoutStart,      // a continuation or end FU-A with no fragmented NAL open
  kFuStartInsideFu,     // a start FU-A while another NAL's fragments are open
  kFuTypeMismatch,      // NAL type or NRI changes inside one fragmented NAL
  kFuNestedType,        // the FU header names type 0 or 24..31
  kNalInsideFu,         // a single NAL or STAP-A while a fragmented NAL is open
  kOversize,            // the AU does not fit the output buffer
  kIncompleteFu,        // finish(): a fragmented NAL has no end fragment
  kNoNalUnits,          // finish(): nothing was pushed
  kCount,
};
const char* to_string(DepacketizeError error);

struct DepacketizerCounters {
  uint64_t packets = 0;       // accepted
  uint64_t access_units = 0;  // finished without error
  uint64_t nal_units = 0;
  uint64_t refused[static_cast<size_t>(DepacketizeError::kCount)] = {};
};

class H264Depacketizer {
 public:
  // Starts an access unit written into out (its size is the capacity). out must stay valid until
  // finish(); a previous AU is abandoned.
  void begin(std::span<uint8_t> out);
  // Adds the AU's next packet (payload, sequence, timestamp and marker are read from it).
  DepacketizeError push(const RtpPacketView& packet);
  // The same from fields, for callers that hold no RtpPacketView (e.g. after RTX unwrap).
  DepacketizeError push(std::span<const uint8_t> payload, uint16_t sequence, uint32_t timestamp,
                        bool marker);
  // Ends the AU; kOk when it holds at least one NAL unit and no fragment is left open. The
  // marker bit is not required: the jitter buffer decides completeness (it may end an AU at the
  // next timestamp).
  DepacketizeError finish();

  // The Annex B bytes written so far (after a successful finish(): the whole access unit).
  std::span<const uint8_t> access_unit() const { return {out_.data(), size_}; }
  bool failed() const { return failed_; }
  bool marker_seen() const { return marker_seen_; }
  const DepacketizerCounters& counters() const { return counters_; }

 private:
  DepacketizeError refuse(DepacketizeError error);
  bool append_nal(std::span<const uint8_t> nal);
  bool append(const uint8_t* data, size_t size);

  std::span<uint8_t> out_;
  size_t size_ = 0;
  bool started_ = false;
  bool failed_ = false;
  bool have_packet_ = false;
  bool marker_seen_ = false;
  bool fu_open_ = false;
  uint8_t fu_nal_header_ = 0;
  uint16_t last_sequence_ = 0;
  uint32_t timestamp_ = 0;
  size_t nal_count_ = 0;
  DepacketizerCounters counters_;
};

}  // namespace syncd::rtp
