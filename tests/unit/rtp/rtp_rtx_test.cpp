#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "rtp/rtp_packet.h"
#include "rtp/rtx.h"

namespace syncd::rtp {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes original_packet(std::mt19937& rng, size_t payload_size, bool padded) {
  const uint32_t csrcs[2] = {0x01010101, 0x02020202};
  RtpHeader header;
  header.marker = true;
  header.payload_type = 96;
  header.sequence = 0xFFFE;
  header.timestamp = 0x12345678;
  header.ssrc = 0xA1A2A3A4;
  header.csrcs = csrcs;
  header.has_abs_send_time = true;
  header.abs_send_time = 0x0ABCDE;
  Bytes payload(payload_size);
  for (auto& b : payload) b = static_cast<uint8_t>(rng());
  Bytes out(rtp_header_size(header) + payload.size() + 4);
  size_t n = write_rtp_packet(header, payload, out);
  if (padded) {
    out[0] |= 0x20;
    out[n] = 0;
    out[n + 1] = 0;
    out[n + 2] = 0;
    out[n + 3] = 4;
    n += 4;
  }
  out.resize(n);
  return out;
}

// RFC 4588 section 4: RTX header with its own PT, SSRC and sequence and the original's
// timestamp, marker, CSRCs and extensions; payload = OSN then the original payload.
TEST(RtpRtx, BuildsRetransmissionPacket) {
  std::mt19937 rng(1);
  const Bytes original = original_packet(rng, 300, true);
  RtpPacketView view;
  ASSERT_EQ(parse_rtp(original, view), RtpParseError::kOk);
  Bytes rtx(rtx_packet_size(view));
  ASSERT_EQ(rtx.size(), original.size() - 4 + 2);  // padding dropped, OSN added
  ASSERT_EQ(write_rtx(view, {97, 0xB1B2B3B4, 7}, rtx), rtx.size());

  RtpPacketView rtx_view;
  ASSERT_EQ(parse_rtp(rtx, rtx_view), RtpParseError::kOk);
  EXPECT_EQ(rtx_view.payload_type, 97);
  EXPECT_EQ(rtx_view.ssrc, 0xB1B2B3B4u);
  EXPECT_EQ(rtx_view.sequence, 7);
  EXPECT_FALSE(rtx_view.padding);
  EXPECT_EQ(rtx_view.timestamp, view.timestamp);
  EXPECT_EQ(rtx_view.marker, view.marker);
  ASSERT_EQ(rtx_view.csrc_count, 2);
  EXPECT_EQ(rtx_view.csrc(1), 0x02020202u);
  uint32_t abs = 0;
  ASSERT_TRUE(read_abs_send_time(rtx_view, abs));
  EXPECT_EQ(abs, 0x0ABCDEu);
  // OSN 0xFFFE in network order, then the original payload.
  ASSERT_EQ(rtx_view.payload.size(), 302u);
  EXPECT_EQ(rtx_view.payload[0], 0xFF);
  EXPECT_EQ(rtx_view.payload[1], 0xFE);
  EXPECT_TRUE(std::equal(view.payload.begin(), view.payload.end(), rtx_view.payload.begin() + 2));

  RtxContent content;
  ASSERT_EQ(read_rtx(rtx_view, content), RtxError::kOk);
  EXPECT_EQ(content.original_sequence, 0xFFFE);
  EXPECT_TRUE(std::equal(view.payload.begin(), view.payload.end(), content.payload.begin(),
                         content.payload.end()));
}

TEST(RtpRtx, RestoresOriginalByteExact) {
  std::mt19937 rng(2);
  for (size_t payload : {size_t{0}, size_t{1}, size_t{1112}}) {
    const Bytes original = original_packet(rng, payload, false);
    RtpPacketView view;
    ASSERT_EQ(parse_rtp(original, view), RtpParseError::kOk);
    Bytes rtx(rtx_packet_size(view));
    ASSERT_EQ(write_rtx(view, {97, 0xB1B2B3B4, 65535}, rtx), rtx.size());
    RtpPacketView rtx_view;
    ASSERT_EQ(parse_rtp(rtx, rtx_view), RtpParseError::kOk);
    Bytes restored(original.size());
    size_t size = 0;
    ASSERT_EQ(restore_original(rtx_view, 96, 0xA1A2A3A4, restored, &size), RtxError::kOk);
    EXPECT_EQ(size, original.size());
    EXPECT_EQ(restored, original);
    Bytes small(original.size() - 1);
    EXPECT_EQ(restore_original(rtx_view, 96, 0xA1A2A3A4, small, &size), RtxError::kTooSmall);
  }
}

TEST(RtpRtx, RefusesShortPayloadAndSmallBuffer) {
  const Bytes one_byte = {0x80, 97, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 0xAB};
  RtpPacketView view;
  ASSERT_EQ(parse_rtp(one_byte, view), RtpParseError::kOk);
  RtxContent content;
  EXPECT_EQ(read_rtx(view, content), RtxError::kNoOsn);
  size_t size = 0;
  Bytes out(64);
  EXPECT_EQ(restore_original(view, 96, 1, out, &size), RtxError::kNoOsn);

  std::mt19937 rng(3);
  const Bytes original = original_packet(rng, 10, false);
  ASSERT_EQ(parse_rtp(original, view), RtpParseError::kOk);
  Bytes small(rtx_packet_size(view) - 1, 0xEE);
  EXPECT_EQ(write_rtx(view, {97, 1, 1}, small), 0u);
  EXPECT_EQ(small, Bytes(small.size(), 0xEE));
}

}  // namespace
}  // namespace syncd::rtp
