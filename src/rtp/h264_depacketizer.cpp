#include "rtp/h264_depacketizer.h"

#include <cstring>

#include "rtp/byte_io.h"
#include "rtp/h264_packetizer.h"

namespace syncd::rtp {

namespace {

constexpr uint8_t kStartCode[4] = {0, 0, 0, 1};
constexpr uint8_t kNalTypeStapB = 25;
constexpr uint8_t kNalTypeMtap16 = 26;
constexpr uint8_t kNalTypeMtap24 = 27;
constexpr uint8_t kNalTypeFuB = 29;

// A NAL unit type that may stand on its own inside a STAP-A or FU-A: 1..23 (H.264 table 7-1).
bool is_plain_nal_type(uint8_t type) {
  return type >= 1 && type <= 23;
}

}  // namespace

const char* to_string(DepacketizeError error) {
  switch (error) {
    case DepacketizeError::kOk:
      return "ok";
    case DepacketizeError::kNotStarted:
      return "no access unit begun";
    case DepacketizeError::kAlreadyFailed:
      return "access unit already failed";
    case DepacketizeError::kAfterMarker:
      return "packet after the marker";
    case DepacketizeError::kSequenceGap:
      return "sequence gap";
    case DepacketizeError::kTimestampMismatch:
      return "timestamp differs inside the AU";
    case DepacketizeError::kEmptyPayload:
      return "empty payload";
    case DepacketizeError::kForbiddenBit:
      return "forbidden bit set";
    case DepacketizeError::kReservedNalType:
      return "NAL type 0, 30 or 31";
    case DepacketizeError::kUnsupportedNalType:
      return "STAP-B, MTAP or FU-B";
    case DepacketizeError::kStapTruncated:
      return "STAP-A truncated";
    case DepacketizeError::kStapEmptyNal:
      return "STAP-A NAL of size 0";
    case DepacketizeError::kStapNestedType:
      return "STAP-A holds a non-NAL type";
    case DepacketizeError::kFuTooShort:
      return "FU-A too short";
    case DepacketizeError::kFuStartAndEnd:
      return "FU-A with S and E";
    case DepacketizeError::kFuWithoutStart:
      return "FU-A without start";
    case DepacketizeError::kFuStartInsideFu:
      return "FU-A start inside another FU";
    case DepacketizeError::kFuTypeMismatch:
      return "FU-A NAL type changes";
    case DepacketizeError::kFuNestedType:
      return "FU-A of a non-NAL type";
    case DepacketizeError::kNalInsideFu:
      return "NAL inside an open FU";
    case DepacketizeError::kOversize:
      return "access unit too large";
    case DepacketizeError::kIncompleteFu:
      return "fragmented NAL left open";
    case DepacketizeError::kNoNalUnits:
      return "no NAL units";
    case DepacketizeError::kCount:
      break;
  }
  return "unknown";
}

void H264Depacketizer::begin(std::span<uint8_t> out) {
  out_ = out;
  size_ = 0;
  started_ = true;
  failed_ = false;
  have_packet_ = false;
  marker_seen_ = false;
  fu_open_ = false;
  fu_nal_header_ = 0;
  nal_count_ = 0;
}

DepacketizeError H264Depacketizer::refuse(DepacketizeError error) {
  ++counters_.refused[static_cast<size_t>(error)];
  if (error != DepacketizeError::kNotStarted && error != DepacketizeError::kAlreadyFailed) {
    failed_ = true;
  }
  return error;
}

bool H264Depacketizer::append(const uint8_t* data, size_t size) {
  if (size > out_.size() - size_) return false;
  std::memcpy(out_.data() + size_, data, size);
  size_ += size;
  return true;
}

bool H264Depacketizer::append_nal(std::span<const uint8_t> nal) {
  if (sizeof kStartCode + nal.size() > out_.size() - size_) return false;
  append(kStartCode, sizeof kStartCode);
  append(nal.data(), nal.size());
  ++nal_count_;
  ++counters_.nal_units;
  return true;
}

DepacketizeError H264Depacketizer::push(const RtpPacketView& packet) {
  return push(packet.payload, packet.sequence, packet.timestamp, packet.marker);
}

DepacketizeError H264Depacketizer::push(std::span<const uint8_t> payload, uint16_t sequence,
                                        uint32_t timestamp, bool marker) {
  if (!started_) return refuse(DepacketizeError::kNotStarted);
  if (failed_) return refuse(DepacketizeError::kAlreadyFailed);
  if (have_packet_) {
    if (marker_seen_) return refuse(DepacketizeError::kAfterMarker);
    if (sequence != static_cast<uint16_t>(last_sequence_ + 1)) {
      return refuse(DepacketizeError::kSequenceGap);
    }
    if (timestamp != timestamp_) return refuse(DepacketizeError::kTimestampMismatch);
  }
  if (payload.empty()) return refuse(DepacketizeError::kEmptyPayload);
  const uint8_t header = payload[0];
  if (header & 0x80) return refuse(DepacketizeError::kForbiddenBit);
  const uint8_t type = header & 0x1F;

  if (is_plain_nal_type(type)) {
    // RFC 6184 section 5.6: single NAL unit packet.
    if (fu_open_) return refuse(DepacketizeError::kNalInsideFu);
    if (!append_nal(payload)) return refuse(DepacketizeError::kOversize);
  } else if (type == kNalTypeStapA) {
    // RFC 6184 section 5.7.1: STAP-A header, then [16-bit size | NAL unit] repeated.
    if (fu_open_) return refuse(DepacketizeError::kNalInsideFu);
    // Validate every unit before writing any, so a refused packet leaves no partial output.
    size_t offset = 1;
    size_t total = 0;
    if (payload.size() == 1) return refuse(DepacketizeError::kStapTruncated);
    while (offset < payload.size()) {
      if (payload.size() - offset < 2) return refuse(DepacketizeError::kStapTruncated);
      const size_t nal_size = detail::load_be16(payload.data() + offset);
      offset += 2;
      if (nal_size == 0) return refuse(DepacketizeError::kStapEmptyNal);
      if (nal_size > payload.size() - offset) return refuse(DepacketizeError::kStapTruncated);
      const uint8_t nal_header = payload[offset];
      if (nal_header & 0x80) return refuse(DepacketizeError::kForbiddenBit);
      if (!is_plain_nal_type(nal_header & 0x1F)) return refuse(DepacketizeError::kStapNestedType);
      total += 4 + nal_size;
      offset += nal_size;
    }
    if (total > out_.size() - size_) return refuse(DepacketizeError::kOversize);
    offset = 1;
    while (offset < payload.size()) {
      const size_t nal_size = detail::load_be16(payload.data() + offset);
      append_nal(payload.subspan(offset + 2, nal_size));
      offset += 2 + nal_size;
    }
  } else if (type == kNalTypeFuA) {
    // RFC 6184 section 5.8: FU indicator, FU header [S|E|R|type], fragment.
    if (payload.size() < 3) return refuse(DepacketizeError::kFuTooShort);
    const uint8_t fu_header = payload[1];
    const bool start = fu_header & 0x80;
    const bool end = fu_header & 0x40;
    const uint8_t nal_type = fu_header & 0x1F;
    if (start && end) return refuse(DepacketizeError::kFuStartAndEnd);
    if (!is_plain_nal_type(nal_type)) return refuse(DepacketizeError::kFuNestedType);
    // The reconstructed NAL header: F and NRI from the indicator, type from the FU header.
    const auto nal_header = static_cast<uint8_t>((header & 0xE0) | nal_type);
    const std::span<const uint8_t> fragment = payload.subspan(2);
    if (start) {
      if (fu_open_) return refuse(DepacketizeError::kFuStartInsideFu);
      if (sizeof kStartCode + 1 + fragment.size() > out_.size() - size_) {
        return refuse(DepacketizeError::kOversize);
      }
      append(kStartCode, sizeof kStartCode);
      append(&nal_header, 1);
      append(fragment.data(), fragment.size());
      fu_open_ = true;
      fu_nal_header_ = nal_header;
    } else {
      if (!fu_open_) return refuse(DepacketizeError::kFuWithoutStart);
      if (nal_header != fu_nal_header_) return refuse(DepacketizeError::kFuTypeMismatch);
      if (!append(fragment.data(), fragment.size())) return refuse(DepacketizeError::kOversize);
      if (end) {
        fu_open_ = false;
        ++nal_count_;
        ++counters_.nal_units;
      }
    }
  } else if (type == kNalTypeStapB || type == kNalTypeMtap16 || type == kNalTypeMtap24 ||
             type == kNalTypeFuB) {
    return refuse(DepacketizeError::kUnsupportedNalType);
  } else {
    return refuse(DepacketizeError::kReservedNalType);  // 0, 30, 31
  }

  have_packet_ = true;
  last_sequence_ = sequence;
  timestamp_ = timestamp;
  marker_seen_ = marker;
  ++counters_.packets;
  return DepacketizeError::kOk;
}

DepacketizeError H264Depacketizer::finish() {
  if (!started_) return refuse(DepacketizeError::kNotStarted);
  if (failed_) return refuse(DepacketizeError::kAlreadyFailed);
  if (fu_open_) return refuse(DepacketizeError::kIncompleteFu);
  if (nal_count_ == 0) return refuse(DepacketizeError::kNoNalUnits);
  started_ = false;
  ++counters_.access_units;
  return DepacketizeError::kOk;
}

}  // namespace syncd::rtp
