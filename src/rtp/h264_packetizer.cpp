#include "rtp/h264_packetizer.h"

#include <algorithm>
#include <cstring>

namespace syncd::rtp {

namespace {

// FU-A: FU indicator and FU header (RFC 6184 section 5.8).
constexpr size_t kFuAHeaderBytes = 2;

// Fragment payload size for a NAL unit whose payload (after its 1-byte header) is nal_payload
// bytes: the fewest fragments that fit, sized evenly so the last one is not a runt (the FEC
// encoder pads every source packet to the largest of its block).
size_t fragment_size(size_t nal_payload, size_t max_payload) {
  const size_t capacity = max_payload - kFuAHeaderBytes;
  const size_t fragments = (nal_payload + capacity - 1) / capacity;
  return (nal_payload + fragments - 1) / fragments;
}

}  // namespace

const char* to_string(PacketizeError error) {
  switch (error) {
    case PacketizeError::kOk:
      return "ok";
    case PacketizeError::kNoStartCode:
      return "no Annex B start code";
    case PacketizeError::kNoNalUnits:
      return "no NAL units";
    case PacketizeError::kForbiddenBit:
      return "forbidden_zero_bit set";
    case PacketizeError::kReservedNalType:
      return "NAL type 0 or 24..31";
    case PacketizeError::kTooManyNalUnits:
      return "too many NAL units";
    case PacketizeError::kCount:
      break;
  }
  return "unknown";
}

H264Packetizer::H264Packetizer(PacketizerConfig config) : config_(config) {
  config_.max_payload_bytes = std::max(config_.max_payload_bytes, kMinMaxPayloadBytes);
}

PacketizeError H264Packetizer::begin(std::span<const uint8_t> access_unit) {
  access_unit_ = {};
  nal_count_ = 0;
  packet_count_ = 0;
  packets_written_ = 0;
  nal_index_ = 0;
  nal_sent_ = 0;
  fragment_bytes_ = 0;

  PacketizeError error = PacketizeError::kOk;
  size_t packets = 0;
  const bool found = split_annex_b(access_unit, [&](std::span<const uint8_t> nal) {
    if (error != PacketizeError::kOk) return;
    const uint8_t type = nal[0] & 0x1F;
    if (nal[0] & 0x80) {
      error = PacketizeError::kForbiddenBit;
    } else if (type == 0 || type >= kNalTypeStapA) {
      error = PacketizeError::kReservedNalType;
    } else if (nal_count_ == kMaxNalUnitsPerAccessUnit || nal.size() > UINT32_MAX) {
      error = PacketizeError::kTooManyNalUnits;
    } else {
      nal_units_[nal_count_++] = {static_cast<uint32_t>(nal.data() - access_unit.data()),
                                  static_cast<uint32_t>(nal.size())};
      if (nal.size() <= config_.max_payload_bytes) {
        packets += 1;
      } else {
        const size_t payload = nal.size() - 1;
        const size_t fragment = fragment_size(payload, config_.max_payload_bytes);
        packets += (payload + fragment - 1) / fragment;
      }
    }
  });
  if (!found) error = PacketizeError::kNoStartCode;
  if (error == PacketizeError::kOk && nal_count_ == 0) error = PacketizeError::kNoNalUnits;
  if (error != PacketizeError::kOk) {
    nal_count_ = 0;
    ++counters_.refused[static_cast<size_t>(error)];
    return error;
  }
  access_unit_ = access_unit;
  packet_count_ = packets;
  ++counters_.access_units;
  return PacketizeError::kOk;
}

size_t H264Packetizer::next_payload_size() const {
  const NalUnit& nal = nal_units_[nal_index_];
  if (nal.size <= config_.max_payload_bytes) return nal.size;
  const size_t payload = nal.size - 1;
  const size_t fragment =
      nal_sent_ == 0 ? fragment_size(payload, config_.max_payload_bytes) : fragment_bytes_;
  return kFuAHeaderBytes + std::min(fragment, payload - nal_sent_);
}

size_t H264Packetizer::write_next_payload(std::span<uint8_t> out, bool& last) {
  if (!has_next()) return 0;
  const size_t size = next_payload_size();
  if (out.size() < size) return 0;
  const NalUnit& nal = nal_units_[nal_index_];
  const uint8_t* nal_bytes = access_unit_.data() + nal.offset;
  if (nal.size <= config_.max_payload_bytes) {
    // RFC 6184 section 5.6: a single NAL unit packet is the NAL unit itself.
    std::memcpy(out.data(), nal_bytes, nal.size);
    ++nal_index_;
    ++counters_.single_nal_packets;
  } else {
    const size_t payload = nal.size - 1;
    if (nal_sent_ == 0) fragment_bytes_ = fragment_size(payload, config_.max_payload_bytes);
    const size_t chunk = size - kFuAHeaderBytes;
    const bool start = nal_sent_ == 0;
    const bool end = nal_sent_ + chunk == payload;
    // FU indicator: F and NRI of the NAL header, type 28. FU header: S, E, R = 0, NAL type.
    out[0] = static_cast<uint8_t>((nal_bytes[0] & 0xE0) | kNalTypeFuA);
    out[1] = static_cast<uint8_t>((start ? 0x80 : 0) | (end ? 0x40 : 0) | (nal_bytes[0] & 0x1F));
    std::memcpy(out.data() + kFuAHeaderBytes, nal_bytes + 1 + nal_sent_, chunk);
    nal_sent_ += chunk;
    if (end) {
      ++nal_index_;
      nal_sent_ = 0;
    }
    ++counters_.fu_a_packets;
  }
  ++packets_written_;
  last = !has_next();
  return size;
}

size_t H264Packetizer::write_next(const RtpHeader& header, std::span<uint8_t> out) {
  if (!has_next() || header.csrcs.size() > kMaxCsrcs) return 0;
  RtpHeader h = header;
  const size_t header_bytes = rtp_header_size(h);
  if (out.size() < header_bytes + next_payload_size()) return 0;
  bool last = false;
  const size_t payload = write_next_payload(out.subspan(header_bytes), last);
  h.marker = last;
  if (write_rtp_header(h, out) == 0) return 0;
  return header_bytes + payload;
}

}  // namespace syncd::rtp
