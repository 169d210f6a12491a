#include "rtp/rtcp.h"

#include <cstring>

#include "rtp/byte_io.h"

namespace syncd::rtp {

using detail::load_be16;
using detail::load_be24;
using detail::load_be32;
using detail::load_be64;
using detail::store_be16;
using detail::store_be24;
using detail::store_be32;
using detail::store_be64;

namespace {

constexpr uint8_t kRembIdentifier[4] = {'R', 'E', 'M', 'B'};
constexpr size_t kSenderInfoBytes = 20;
constexpr size_t kFeedbackHeaderBytes = 8;  // sender SSRC, media SSRC (RFC 4585 6.1)
constexpr uint64_t kNanosPerSecond = 1'000'000'000;

constexpr size_t align4(size_t n) {
  return (n + 3) & ~size_t{3};
}

ReportBlock read_report_block(const uint8_t* p) {
  ReportBlock block;
  block.source_ssrc = load_be32(p);
  block.fraction_lost = p[4];
  uint32_t lost = load_be24(p + 5);
  // Sign-extend the 24-bit two's-complement field.
  if (lost & 0x800000) lost |= 0xFF000000u;
  block.cumulative_lost = static_cast<int32_t>(lost);
  block.extended_highest_sequence = load_be32(p + 8);
  block.jitter = load_be32(p + 12);
  block.last_sr = load_be32(p + 16);
  block.delay_since_last_sr = load_be32(p + 20);
  return block;
}

void write_report_block(uint8_t* p, const ReportBlock& block) {
  store_be32(p, block.source_ssrc);
  p[4] = block.fraction_lost;
  int32_t lost = block.cumulative_lost;
  if (lost > kMaxCumulativeLost) lost = kMaxCumulativeLost;
  if (lost < kMinCumulativeLost) lost = kMinCumulativeLost;
  store_be24(p + 5, static_cast<uint32_t>(lost) & 0xFFFFFF);
  store_be32(p + 8, block.extended_highest_sequence);
  store_be32(p + 12, block.jitter);
  store_be32(p + 16, block.last_sr);
  store_be32(p + 20, block.delay_since_last_sr);
}

void write_common_header(uint8_t* p, bool padding, uint8_t count, uint8_t type, size_t bytes) {
  p[0] = static_cast<uint8_t>(2 << 6 | (padding ? 0x20 : 0) | (count & 0x1F));
  p[1] = type;
  store_be16(p + 2, static_cast<uint16_t>(bytes / 4 - 1));
}

// One packet of a compound, its padding removed.
struct PacketBody {
  uint8_t count;  // RC, SC or FMT
  uint8_t type;
  std::span<const uint8_t> body;   // after the 4-byte common header
  std::span<const uint8_t> whole;  // the packet as on the wire, header and padding included
};

// Parses (and with a sink, reports) one packet's contents. sink == nullptr only validates.
RtcpParseError read_packet(const PacketBody& packet, RtcpSink* sink, uint32_t* skipped) {
  const uint8_t* p = packet.body.data();
  const size_t size = packet.body.size();
  switch (packet.type) {
    case kRtcpSenderReport: {
      if (size < 4 + kSenderInfoBytes) return RtcpParseError::kTooShort;
      if (size_t{packet.count} * kReportBlockBytes > size - 4 - kSenderInfoBytes) {
        return RtcpParseError::kReportBlocksOverrun;
      }
      if (!sink) return RtcpParseError::kOk;
      ReportBlock blocks[kMaxReportBlocks];
      for (size_t i = 0; i < packet.count; ++i) {
        blocks[i] = read_report_block(p + 4 + kSenderInfoBytes + i * kReportBlockBytes);
      }
      SenderReport report;
      report.sender_ssrc = load_be32(p);
      report.info.ntp_timestamp = load_be64(p + 4);
      report.info.rtp_timestamp = load_be32(p + 12);
      report.info.packet_count = load_be32(p + 16);
      report.info.octet_count = load_be32(p + 20);
      report.blocks = {blocks, packet.count};
      sink->on_sender_report(report);
      return RtcpParseError::kOk;
    }
    case kRtcpReceiverReport: {
      if (size < 4) return RtcpParseError::kTooShort;
      if (size_t{packet.count} * kReportBlockBytes > size - 4) {
        return RtcpParseError::kReportBlocksOverrun;
      }
      if (!sink) return RtcpParseError::kOk;
      ReportBlock blocks[kMaxReportBlocks];
      for (size_t i = 0; i < packet.count; ++i) {
        blocks[i] = read_report_block(p + 4 + i * kReportBlockBytes);
      }
      ReceiverReport report;
      report.sender_ssrc = load_be32(p);
      report.blocks = {blocks, packet.count};
      sink->on_receiver_report(report);
      return RtcpParseError::kOk;
    }
    case kRtcpSourceDescription: {
      // RFC 3550 section 6.5: SC chunks, each an SSRC then items [type | length | text], ended
      // by one or more null octets up to the next 32-bit boundary.
      size_t offset = 0;
      for (size_t chunk = 0; chunk < packet.count; ++chunk) {
        if (size - offset < 4) return RtcpParseError::kSdesMalformed;
        const uint32_t ssrc = load_be32(p + offset);
        offset += 4;
        while (true) {
          if (offset >= size) return RtcpParseError::kSdesMalformed;
          const uint8_t item = p[offset];
          if (item == 0) {
            offset = align4(offset + 1);
            if (offset > size) return RtcpParseError::kSdesMalformed;
            break;
          }
          if (size - offset < 2) return RtcpParseError::kSdesMalformed;
          const size_t length = p[offset + 1];
          if (length > size - offset - 2) return RtcpParseError::kSdesMalformed;
          if (sink) {
            if (item == kSdesCname) {
              sink->on_cname(ssrc, {reinterpret_cast<const char*>(p + offset + 2), length});
            } else if (skipped) {
              ++*skipped;
            }
          }
          offset += 2 + length;
        }
      }
      return RtcpParseError::kOk;
    }
    case kRtcpGoodbye: {
      // RFC 3550 section 6.6: SC SSRCs, then an optional [length | reason].
      const size_t ssrc_bytes = size_t{packet.count} * 4;
      if (ssrc_bytes > size) return RtcpParseError::kByeMalformed;
      std::string_view reason;
      if (size > ssrc_bytes) {
        const size_t length = p[ssrc_bytes];
        if (length > size - ssrc_bytes - 1) return RtcpParseError::kByeMalformed;
        reason = {reinterpret_cast<const char*>(p + ssrc_bytes + 1), length};
      }
      if (!sink) return RtcpParseError::kOk;
      uint32_t ssrcs[kMaxByeSources];
      for (size_t i = 0; i < packet.count; ++i) ssrcs[i] = load_be32(p + 4 * i);
      sink->on_goodbye(Goodbye{{ssrcs, packet.count}, reason});
      return RtcpParseError::kOk;
    }
    case kRtcpTransportFeedback: {
      if (size < kFeedbackHeaderBytes) return RtcpParseError::kFeedbackMalformed;
      if (packet.count != kRtcpFmtGenericNack) {
        if (sink && skipped) ++*skipped;
        return RtcpParseError::kOk;
      }
      // RFC 4585 section 6.2.1: one or more 4-byte FCI entries [PID | BLP].
      const size_t fci = size - kFeedbackHeaderBytes;
      if (fci == 0 || fci % 4 != 0) return RtcpParseError::kFeedbackMalformed;
      if (!sink) return RtcpParseError::kOk;
      uint16_t lost[kNackEventCapacity];
      size_t count = 0;
      Nack nack;
      nack.sender_ssrc = load_be32(p);
      nack.media_ssrc = load_be32(p + 4);
      for (size_t offset = kFeedbackHeaderBytes; offset < size; offset += 4) {
        if (count + 17 > kNackEventCapacity) {
          nack.lost = {lost, count};
          sink->on_nack(nack);
          count = 0;
        }
        count += expand_nack_item({load_be16(p + offset), load_be16(p + offset + 2)}, lost + count);
      }
      nack.lost = {lost, count};
      sink->on_nack(nack);
      return RtcpParseError::kOk;
    }
    case kRtcpPayloadFeedback: {
      if (size < kFeedbackHeaderBytes) return RtcpParseError::kFeedbackMalformed;
      if (packet.count == kRtcpFmtPli) {
        // RFC 4585 section 6.3.1: no FCI.
        if (sink) sink->on_pli(load_be32(p), load_be32(p + 4));
        return RtcpParseError::kOk;
      }
      const size_t fci = size - kFeedbackHeaderBytes;
      if (packet.count == kRtcpFmtApplicationLayer && fci >= 4 &&
          std::memcmp(p + kFeedbackHeaderBytes, kRembIdentifier, 4) == 0) {
        // REMB: "REMB", [num SSRC:8 | BR Exp:6 | BR Mantissa:18], num SSRC feedback SSRCs.
        if (fci < 8) return RtcpParseError::kRembMalformed;
        const uint8_t* q = p + kFeedbackHeaderBytes + 4;
        const size_t ssrc_count = q[0];
        if (ssrc_count * 4 > fci - 8) return RtcpParseError::kRembMalformed;
        if (!sink) return RtcpParseError::kOk;
        const uint32_t bits = load_be24(q + 1);
        uint32_t ssrcs[kMaxRembSsrcs];
        for (size_t i = 0; i < ssrc_count; ++i) ssrcs[i] = load_be32(q + 4 + 4 * i);
        Remb remb;
        remb.sender_ssrc = load_be32(p);
        remb.bitrate_bps = decode_remb_bitrate(
            {static_cast<uint8_t>(bits >> 18), static_cast<uint32_t>(bits & 0x3FFFF)});
        remb.ssrcs = {ssrcs, ssrc_count};
        sink->on_remb(remb);
        return RtcpParseError::kOk;
      }
      if (sink && skipped) ++*skipped;
      return RtcpParseError::kOk;
    }
    case kRtcpApplication:
      // RFC 3550 6.7: SSRC and a 4-byte name at least. The contents are the application's.
      if (size < 8) return RtcpParseError::kTooShort;
      if (sink) sink->on_application(packet.whole);
      return RtcpParseError::kOk;
    default:
      if (sink && skipped) ++*skipped;
      return RtcpParseError::kOk;
  }
}

// Walks the compound packet: header checks, then each packet's contents. Validation only when
// sink is null.
RtcpParseError walk(std::span<const uint8_t> compound, RtcpSink* sink, RtcpParseOptions options,
                    uint32_t* skipped) {
  const uint8_t* p = compound.data();
  const size_t size = compound.size();
  if (size < kRtcpHeaderBytes) return RtcpParseError::kTooShort;
  size_t offset = 0;
  while (offset < size) {
    if (size - offset < kRtcpHeaderBytes) return RtcpParseError::kLengthOverrun;
    const uint8_t* h = p + offset;
    if ((h[0] >> 6) != 2) return RtcpParseError::kBadVersion;
    const bool padding = h[0] & 0x20;
    const uint8_t type = h[1];
    const size_t bytes = (size_t{load_be16(h + 2)} + 1) * 4;
    if (bytes > size - offset) return RtcpParseError::kLengthOverrun;
    if (offset == 0 && !options.allow_reduced_size && type != kRtcpSenderReport &&
        type != kRtcpReceiverReport) {
      return RtcpParseError::kFirstNotReport;
    }
    size_t body_bytes = bytes - kRtcpHeaderBytes;
    if (padding) {
      // RFC 3550 section 6.4.1 / A.2: only the last packet of a compound may be padded; the last
      // octet counts the padding, itself included.
      if (offset + bytes != size) return RtcpParseError::kPaddingNotLast;
      const uint8_t pad = h[bytes - 1];
      if (pad == 0 || pad > body_bytes) return RtcpParseError::kBadPadding;
      body_bytes -= pad;
    }
    const PacketBody packet{static_cast<uint8_t>(h[0] & 0x1F), type,
                            compound.subspan(offset + kRtcpHeaderBytes, body_bytes),
                            compound.subspan(offset, bytes)};
    const RtcpParseError error = read_packet(packet, sink, skipped);
    if (error != RtcpParseError::kOk) return error;
    offset += bytes;
  }
  return RtcpParseError::kOk;
}

}  // namespace

const char* to_string(RtcpParseError error) {
  switch (error) {
    case RtcpParseError::kOk:
      return "ok";
    case RtcpParseError::kTooShort:
      return "too short";
    case RtcpParseError::kBadVersion:
      return "bad version";
    case RtcpParseError::kLengthOverrun:
      return "length overruns the datagram";
    case RtcpParseError::kPaddingNotLast:
      return "padding on a packet that is not the last";
    case RtcpParseError::kBadPadding:
      return "bad padding count";
    case RtcpParseError::kFirstNotReport:
      return "first packet is not SR or RR";
    case RtcpParseError::kReportBlocksOverrun:
      return "report blocks overrun the packet";
    case RtcpParseError::kSdesMalformed:
      return "malformed SDES";
    case RtcpParseError::kByeMalformed:
      return "malformed BYE";
    case RtcpParseError::kFeedbackMalformed:
      return "malformed feedback";
    case RtcpParseError::kRembMalformed:
      return "malformed REMB";
    case RtcpParseError::kCount:
      break;
  }
  return "unknown";
}

RtcpParseError parse_rtcp(std::span<const uint8_t> compound, RtcpSink& sink,
                          RtcpParseOptions options, uint32_t* skipped) {
  // Two passes, so that a packet refused anywhere reports no event at all.
  const RtcpParseError error = walk(compound, nullptr, options, nullptr);
  if (error != RtcpParseError::kOk) return error;
  return walk(compound, &sink, options, skipped);
}

size_t expand_nack_item(NackItem item, uint16_t out[17]) {
  size_t count = 0;
  out[count++] = item.pid;
  for (unsigned bit = 0; bit < 16; ++bit) {
    if (item.blp & (1u << bit)) out[count++] = static_cast<uint16_t>(item.pid + bit + 1);
  }
  return count;
}

size_t pack_nack_items(std::span<const uint16_t> lost, std::span<NackItem> out) {
  size_t count = 0;
  NackItem current;
  for (uint16_t sequence : lost) {
    if (count > 0) {
      const auto distance = static_cast<uint16_t>(sequence - current.pid);
      if (distance == 0) continue;  // a repeat of the PID
      if (distance <= 16) {
        current.blp = static_cast<uint16_t>(current.blp | 1u << (distance - 1));
        if (count <= out.size()) out[count - 1] = current;
        continue;
      }
    }
    current = {sequence, 0};
    ++count;
    if (count <= out.size()) out[count - 1] = current;
  }
  return count;
}

RembBitrate encode_remb_bitrate(uint64_t bitrate_bps) {
  uint8_t exponent = 0;
  while ((bitrate_bps >> exponent) > 0x3FFFF) ++exponent;
  return {exponent, static_cast<uint32_t>(bitrate_bps >> exponent)};
}

uint64_t decode_remb_bitrate(RembBitrate value) {
  const uint64_t mantissa = value.mantissa & 0x3FFFF;
  const unsigned exponent = value.exponent & 0x3F;
  if (mantissa > (UINT64_MAX >> exponent)) return UINT64_MAX;
  return mantissa << exponent;
}

uint64_t ntp_from_ns(uint64_t time_ns) {
  const uint64_t seconds = time_ns / kNanosPerSecond;
  const uint64_t fraction = ((time_ns % kNanosPerSecond) << 32) / kNanosPerSecond;
  return seconds << 32 | fraction;
}

uint64_t ns_from_ntp(uint64_t ntp) {
  // Rounded to nearest, so ns -> NTP -> ns returns the same nanosecond.
  return (ntp >> 32) * kNanosPerSecond +
         (((ntp & 0xFFFFFFFFu) * kNanosPerSecond + (uint64_t{1} << 31)) >> 32);
}

uint32_t compact_from_ns(uint64_t duration_ns) {
  const uint64_t seconds = duration_ns / kNanosPerSecond;
  if (seconds >= 0x10000) return UINT32_MAX;
  return static_cast<uint32_t>(seconds << 16 |
                               ((duration_ns % kNanosPerSecond) << 16) / kNanosPerSecond);
}

uint64_t ns_from_compact(uint32_t compact) {
  return uint64_t{compact >> 16} * kNanosPerSecond +
         ((uint64_t{compact & 0xFFFFu} * kNanosPerSecond + 0x8000) >> 16);
}

std::optional<uint64_t> round_trip_ns(uint32_t arrival_compact, uint32_t last_sr,
                                      uint32_t delay_since_last_sr) {
  if (last_sr == 0) return std::nullopt;
  const uint32_t rtt = arrival_compact - last_sr - delay_since_last_sr;
  if (static_cast<int32_t>(rtt) < 0) return std::nullopt;
  return ns_from_compact(rtt);
}

uint8_t* RtcpWriter::reserve(size_t bytes, bool is_report) {
  if (size_ == 0 && !is_report) return nullptr;
  if (bytes > out_.size() - size_) return nullptr;
  uint8_t* p = out_.data() + size_;
  size_ += bytes;
  return p;
}

bool RtcpWriter::add_application(std::span<const uint8_t> packet) {
  if (packet.size() < 12 || packet.size() % 4 != 0 || (packet[0] >> 6) != 2 ||
      (packet[0] & 0x20) != 0 || packet[1] != kRtcpApplication ||
      (size_t{load_be16(packet.data() + 2)} + 1) * 4 != packet.size())
    return false;
  uint8_t* p = reserve(packet.size(), false);
  if (!p) return false;
  std::memcpy(p, packet.data(), packet.size());
  return true;
}

bool RtcpWriter::add_sender_report(uint32_t sender_ssrc, const SenderInfo& info,
                                   std::span<const ReportBlock> blocks) {
  if (blocks.size() > kMaxReportBlocks) return false;
  const size_t bytes = kRtcpHeaderBytes + 4 + kSenderInfoBytes + blocks.size() * kReportBlockBytes;
  uint8_t* p = reserve(bytes, true);
  if (!p) return false;
  write_common_header(p, false, static_cast<uint8_t>(blocks.size()), kRtcpSenderReport, bytes);
  store_be32(p + 4, sender_ssrc);
  store_be64(p + 8, info.ntp_timestamp);
  store_be32(p + 16, info.rtp_timestamp);
  store_be32(p + 20, info.packet_count);
  store_be32(p + 24, info.octet_count);
  for (size_t i = 0; i < blocks.size(); ++i) {
    write_report_block(p + 28 + i * kReportBlockBytes, blocks[i]);
  }
  return true;
}

bool RtcpWriter::add_receiver_report(uint32_t sender_ssrc, std::span<const ReportBlock> blocks) {
  if (blocks.size() > kMaxReportBlocks) return false;
  const size_t bytes = kRtcpHeaderBytes + 4 + blocks.size() * kReportBlockBytes;
  uint8_t* p = reserve(bytes, true);
  if (!p) return false;
  write_common_header(p, false, static_cast<uint8_t>(blocks.size()), kRtcpReceiverReport, bytes);
  store_be32(p + 4, sender_ssrc);
  for (size_t i = 0; i < blocks.size(); ++i) {
    write_report_block(p + 8 + i * kReportBlockBytes, blocks[i]);
  }
  return true;
}

bool RtcpWriter::add_cname(uint32_t ssrc, std::string_view cname) {
  if (cname.size() > 255) return false;
  // One chunk: SSRC, CNAME item, then at least one null octet up to the 32-bit boundary.
  const size_t chunk = align4(4 + 2 + cname.size() + 1);
  const size_t bytes = kRtcpHeaderBytes + chunk;
  uint8_t* p = reserve(bytes, false);
  if (!p) return false;
  std::memset(p, 0, bytes);
  write_common_header(p, false, 1, kRtcpSourceDescription, bytes);
  store_be32(p + 4, ssrc);
  p[8] = kSdesCname;
  p[9] = static_cast<uint8_t>(cname.size());
  if (!cname.empty()) std::memcpy(p + 10, cname.data(), cname.size());
  return true;
}

bool RtcpWriter::add_goodbye(std::span<const uint32_t> ssrcs, std::string_view reason) {
  if (ssrcs.size() > kMaxByeSources || reason.size() > 255) return false;
  const size_t reason_bytes = reason.empty() ? 0 : align4(1 + reason.size());
  const size_t bytes = kRtcpHeaderBytes + 4 * ssrcs.size() + reason_bytes;
  uint8_t* p = reserve(bytes, false);
  if (!p) return false;
  std::memset(p, 0, bytes);
  write_common_header(p, false, static_cast<uint8_t>(ssrcs.size()), kRtcpGoodbye, bytes);
  for (size_t i = 0; i < ssrcs.size(); ++i) store_be32(p + 4 + 4 * i, ssrcs[i]);
  if (!reason.empty()) {
    uint8_t* r = p + 4 + 4 * ssrcs.size();
    r[0] = static_cast<uint8_t>(reason.size());
    std::memcpy(r + 1, reason.data(), reason.size());
  }
  return true;
}

bool RtcpWriter::add_nack(uint32_t sender_ssrc, uint32_t media_ssrc,
                          std::span<const uint16_t> lost) {
  if (lost.empty()) return false;
  NackItem items[kNackEventCapacity];
  const size_t count = pack_nack_items(lost, items);
  if (count > kNackEventCapacity) return false;
  const size_t bytes = kRtcpHeaderBytes + kFeedbackHeaderBytes + 4 * count;
  uint8_t* p = reserve(bytes, false);
  if (!p) return false;
  write_common_header(p, false, kRtcpFmtGenericNack, kRtcpTransportFeedback, bytes);
  store_be32(p + 4, sender_ssrc);
  store_be32(p + 8, media_ssrc);
  for (size_t i = 0; i < count; ++i) {
    store_be16(p + 12 + 4 * i, items[i].pid);
    store_be16(p + 14 + 4 * i, items[i].blp);
  }
  return true;
}

bool RtcpWriter::add_pli(uint32_t sender_ssrc, uint32_t media_ssrc) {
  const size_t bytes = kRtcpHeaderBytes + kFeedbackHeaderBytes;
  uint8_t* p = reserve(bytes, false);
  if (!p) return false;
  write_common_header(p, false, kRtcpFmtPli, kRtcpPayloadFeedback, bytes);
  store_be32(p + 4, sender_ssrc);
  store_be32(p + 8, media_ssrc);
  return true;
}

bool RtcpWriter::add_remb(uint32_t sender_ssrc, uint64_t bitrate_bps,
                          std::span<const uint32_t> ssrcs) {
  if (ssrcs.size() > kMaxRembSsrcs) return false;
  const size_t bytes = kRtcpHeaderBytes + kFeedbackHeaderBytes + 8 + 4 * ssrcs.size();
  uint8_t* p = reserve(bytes, false);
  if (!p) return false;
  write_common_header(p, false, kRtcpFmtApplicationLayer, kRtcpPayloadFeedback, bytes);
  store_be32(p + 4, sender_ssrc);
  store_be32(p + 8, 0);  // media SSRC: unused by REMB, always 0
  std::memcpy(p + 12, kRembIdentifier, 4);
  const RembBitrate value = encode_remb_bitrate(bitrate_bps);
  p[16] = static_cast<uint8_t>(ssrcs.size());
  store_be24(p + 17, uint32_t{value.exponent} << 18 | value.mantissa);
  for (size_t i = 0; i < ssrcs.size(); ++i) store_be32(p + 20 + 4 * i, ssrcs[i]);
  return true;
}

}  // namespace syncd::rtp
