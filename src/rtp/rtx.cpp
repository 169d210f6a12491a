#include "rtp/rtx.h"

#include <cstring>

#include "rtp/byte_io.h"

namespace syncd::rtp {

namespace {

// Copies the header of packet (fixed part, CSRCs, extension block) with a new PT, SSRC and
// sequence, and the padding bit cleared. out holds at least packet.header_bytes.
void copy_header(const RtpPacketView& packet, uint8_t payload_type, uint32_t ssrc,
                 uint16_t sequence, uint8_t* out) {
  std::memcpy(out, packet.datagram.data(), packet.header_bytes);
  out[0] &= static_cast<uint8_t>(~0x20);
  out[1] = static_cast<uint8_t>((out[1] & 0x80) | (payload_type & 0x7F));
  detail::store_be16(out + 2, sequence);
  detail::store_be32(out + 8, ssrc);
}

}  // namespace

size_t rtx_packet_size(const RtpPacketView& original) {
  return original.header_bytes + kRtxOsnBytes + original.payload.size();
}

size_t write_rtx(const RtpPacketView& original, const RtxIdentity& rtx, std::span<uint8_t> out) {
  const size_t size = rtx_packet_size(original);
  if (out.size() < size) return 0;
  uint8_t* p = out.data();
  copy_header(original, rtx.payload_type, rtx.ssrc, rtx.sequence, p);
  detail::store_be16(p + original.header_bytes, original.sequence);
  if (!original.payload.empty()) {
    std::memcpy(p + original.header_bytes + kRtxOsnBytes, original.payload.data(),
                original.payload.size());
  }
  return size;
}

RtxError read_rtx(const RtpPacketView& rtx, RtxContent& out) {
  if (rtx.payload.size() < kRtxOsnBytes) return RtxError::kNoOsn;
  out.original_sequence = detail::load_be16(rtx.payload.data());
  out.payload = rtx.payload.subspan(kRtxOsnBytes);
  return RtxError::kOk;
}

RtxError restore_original(const RtpPacketView& rtx, uint8_t original_payload_type,
                          uint32_t original_ssrc, std::span<uint8_t> out, size_t* size) {
  RtxContent content;
  const RtxError error = read_rtx(rtx, content);
  if (error != RtxError::kOk) return error;
  const size_t total = rtx.header_bytes + content.payload.size();
  if (out.size() < total) return RtxError::kTooSmall;
  copy_header(rtx, original_payload_type, original_ssrc, content.original_sequence, out.data());
  if (!content.payload.empty()) {
    std::memcpy(out.data() + rtx.header_bytes, content.payload.data(), content.payload.size());
  }
  *size = total;
  return RtxError::kOk;
}

}  // namespace syncd::rtp
