#include "rtp/rtp_packet.h"

#include <cstring>

#include "rtp/byte_io.h"

namespace syncd::rtp {

using detail::load_be16;
using detail::load_be32;
using detail::store_be16;
using detail::store_be24;
using detail::store_be32;

const char* to_string(RtpParseError error) {
  switch (error) {
    case RtpParseError::kOk:
      return "ok";
    case RtpParseError::kTooShort:
      return "too short";
    case RtpParseError::kBadVersion:
      return "bad version";
    case RtpParseError::kCsrcOverrun:
      return "CSRC list overruns the datagram";
    case RtpParseError::kExtensionOverrun:
      return "header extension overruns the datagram";
    case RtpParseError::kPaddingZero:
      return "padding count is zero";
    case RtpParseError::kPaddingOverrun:
      return "padding overruns the payload";
    case RtpParseError::kCount:
      break;
  }
  return "unknown";
}

uint32_t RtpPacketView::csrc(size_t i) const {
  return load_be32(datagram.data() + kRtpFixedHeaderBytes + 4 * i);
}

RtpParseError parse_rtp(std::span<const uint8_t> datagram, RtpPacketView& out) {
  const uint8_t* p = datagram.data();
  const size_t size = datagram.size();
  if (size < kRtpFixedHeaderBytes) return RtpParseError::kTooShort;
  if ((p[0] >> 6) != kRtpVersion) return RtpParseError::kBadVersion;
  out.datagram = datagram;
  out.padding = (p[0] & 0x20) != 0;
  out.extension = (p[0] & 0x10) != 0;
  out.csrc_count = p[0] & 0x0F;
  out.marker = (p[1] & 0x80) != 0;
  out.payload_type = p[1] & 0x7F;
  out.sequence = load_be16(p + 2);
  out.timestamp = load_be32(p + 4);
  out.ssrc = load_be32(p + 8);

  size_t offset = kRtpFixedHeaderBytes + size_t{4} * out.csrc_count;
  if (offset > size) return RtpParseError::kCsrcOverrun;
  out.extension_profile = 0;
  out.extension_data = {};
  if (out.extension) {
    // RFC 3550 section 5.3.1: 16-bit profile, 16-bit length in 32-bit words (header excluded).
    if (size - offset < 4) return RtpParseError::kExtensionOverrun;
    out.extension_profile = load_be16(p + offset);
    const size_t words = load_be16(p + offset + 2);
    offset += 4;
    if (words * 4 > size - offset) return RtpParseError::kExtensionOverrun;
    out.extension_data = datagram.subspan(offset, words * 4);
    offset += words * 4;
  }
  out.header_bytes = offset;
  size_t payload_end = size;
  out.padding_bytes = 0;
  if (out.padding) {
    // RFC 3550 section 5.1: the last octet counts the padding octets, itself included.
    if (size == offset) return RtpParseError::kPaddingOverrun;
    const uint8_t count = p[size - 1];
    if (count == 0) return RtpParseError::kPaddingZero;
    if (count > size - offset) return RtpParseError::kPaddingOverrun;
    out.padding_bytes = count;
    payload_end = size - count;
  }
  out.payload = datagram.subspan(offset, payload_end - offset);
  return RtpParseError::kOk;
}

OneByteExtensionReader::OneByteExtensionReader(const RtpPacketView& packet) {
  if (packet.extension && packet.extension_profile == kOneByteExtensionProfile) {
    block_ = packet.extension_data;
  }
}

bool OneByteExtensionReader::next(uint8_t& id, std::span<const uint8_t>& data) {
  while (offset_ < block_.size()) {
    const uint8_t byte = block_[offset_];
    const uint8_t element_id = byte >> 4;
    if (element_id == 0) {
      // RFC 8285 section 4.2: a zero byte is padding; a nonzero L with ID 0 is also skipped as
      // one byte (the receiver "MUST ignore" it rather than trusting its length).
      ++offset_;
      continue;
    }
    if (element_id == 15) {
      offset_ = block_.size();
      return false;
    }
    const size_t length = static_cast<size_t>(byte & 0x0F) + 1;
    if (length > block_.size() - offset_ - 1) {
      malformed_ = true;
      offset_ = block_.size();
      return false;
    }
    id = element_id;
    data = block_.subspan(offset_ + 1, length);
    offset_ += 1 + length;
    return true;
  }
  return false;
}

bool find_one_byte_extension(const RtpPacketView& packet, uint8_t id,
                             std::span<const uint8_t>& data) {
  OneByteExtensionReader reader(packet);
  uint8_t element_id = 0;
  std::span<const uint8_t> element;
  while (reader.next(element_id, element)) {
    if (element_id == id) {
      data = element;
      return true;
    }
  }
  return false;
}

uint32_t abs_send_time_from_ns(uint64_t time_ns) {
  // Split so that nothing overflows: seconds << 18 wraps harmlessly in the mask, the fraction
  // (< 1e9) << 18 stays below 2^48.
  const uint64_t seconds = time_ns / 1'000'000'000u;
  const uint64_t fraction_ns = time_ns % 1'000'000'000u;
  const uint64_t value = (seconds << 18) + (fraction_ns << 18) / 1'000'000'000u;
  return static_cast<uint32_t>(value) & kAbsSendTimeMask;
}

int32_t abs_send_time_diff(uint32_t later, uint32_t earlier) {
  const uint32_t d = (later - earlier) & kAbsSendTimeMask;
  // Sign-extend 24 bits.
  return static_cast<int32_t>(d << 8) >> 8;
}

int64_t abs_send_time_diff_ns(uint32_t later, uint32_t earlier) {
  return int64_t{abs_send_time_diff(later, earlier)} * 1'000'000'000 / (int64_t{1} << 18);
}

bool read_abs_send_time(const RtpPacketView& packet, uint32_t& value) {
  std::span<const uint8_t> data;
  if (!find_one_byte_extension(packet, kAbsSendTimeExtensionId, data) || data.size() != 3) {
    return false;
  }
  value = detail::load_be24(data.data());
  return true;
}

namespace {
// Bytes of the one-byte extension block's elements (without its 4-byte header or padding).
size_t extension_elements_bytes(const RtpHeader& header) {
  size_t bytes = header.has_abs_send_time ? 4 : 0;
  for (const OneByteExtension& e : header.extensions) bytes += 1 + e.data.size();
  return bytes;
}
}  // namespace

size_t rtp_header_size(const RtpHeader& header) {
  const size_t elements = extension_elements_bytes(header);
  return kRtpFixedHeaderBytes + 4 * header.csrcs.size() +
         (elements ? 4 + (elements + 3) / 4 * 4 : 0);
}

size_t write_rtp_header(const RtpHeader& header, std::span<uint8_t> out) {
  if (header.csrcs.size() > kMaxCsrcs) return 0;
  for (const OneByteExtension& e : header.extensions)
    if (e.id < 1 || e.id > 14 || e.data.empty() || e.data.size() > 16) return 0;
  const size_t elements = extension_elements_bytes(header);
  const size_t size = rtp_header_size(header);
  if (out.size() < size) return 0;
  uint8_t* p = out.data();
  p[0] = static_cast<uint8_t>(kRtpVersion << 6 | (elements ? 0x10 : 0) | header.csrcs.size());
  p[1] = static_cast<uint8_t>((header.marker ? 0x80 : 0) | (header.payload_type & 0x7F));
  store_be16(p + 2, header.sequence);
  store_be32(p + 4, header.timestamp);
  store_be32(p + 8, header.ssrc);
  size_t offset = kRtpFixedHeaderBytes;
  for (uint32_t csrc : header.csrcs) {
    store_be32(p + offset, csrc);
    offset += 4;
  }
  if (elements) {
    const size_t words = (elements + 3) / 4;
    store_be16(p + offset, kOneByteExtensionProfile);
    store_be16(p + offset + 2, static_cast<uint16_t>(words));
    size_t at = offset + 4;
    if (header.has_abs_send_time) {
      p[at] = static_cast<uint8_t>(kAbsSendTimeExtensionId << 4 | (3 - 1));
      store_be24(p + at + 1, header.abs_send_time & kAbsSendTimeMask);
      at += 4;
    }
    for (const OneByteExtension& e : header.extensions) {
      p[at] = static_cast<uint8_t>(e.id << 4 | (e.data.size() - 1));
      std::memcpy(p + at + 1, e.data.data(), e.data.size());
      at += 1 + e.data.size();
    }
    offset += 4 + words * 4;
    std::memset(p + at, 0, p + offset - (p + at));  // padding: id 0 bytes (RFC 8285 4.2)
  }
  return offset;
}

size_t write_rtp_packet(const RtpHeader& header, std::span<const uint8_t> payload,
                        std::span<uint8_t> out) {
  const size_t header_bytes = rtp_header_size(header);
  if (header_bytes > out.size() || payload.size() > out.size() - header_bytes) return 0;
  if (write_rtp_header(header, out) == 0) return 0;
  if (!payload.empty()) std::memcpy(out.data() + header_bytes, payload.data(), payload.size());
  return header_bytes + payload.size();
}

bool set_abs_send_time(std::span<uint8_t> packet, uint32_t value) {
  RtpPacketView view;
  if (parse_rtp(packet, view) != RtpParseError::kOk) return false;
  std::span<const uint8_t> data;
  if (!find_one_byte_extension(view, kAbsSendTimeExtensionId, data) || data.size() != 3) {
    return false;
  }
  const auto offset = static_cast<size_t>(data.data() - packet.data());
  store_be24(packet.data() + offset, value & kAbsSendTimeMask);
  return true;
}

}  // namespace syncd::rtp
