#include "rtp/rtp_packet.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace syncd::rtp {
namespace {

using Bytes = std::vector<uint8_t>;

// The RTP header of the example packet in RFC 7714 section 16.1.1 (AES-128-GCM test vectors):
// V=2, no padding/extension/CSRC, PT 64, sequence 0xf17b, timestamp 0x8041f8d3, SSRC 0x5501a0b2.
const Bytes kRfc7714Header = {0x80, 0x40, 0xf1, 0x7b, 0x80, 0x41,
                              0xf8, 0xd3, 0x55, 0x01, 0xa0, 0xb2};

TEST(RtpPacket, ParsesRfc7714ExampleHeader) {
  Bytes packet = kRfc7714Header;
  packet.insert(packet.end(), {0x47, 0x61, 0x6c, 0x6c, 0x69, 0x61});  // "Gallia"
  RtpPacketView view;
  ASSERT_EQ(parse_rtp(packet, view), RtpParseError::kOk);
  EXPECT_FALSE(view.padding);
  EXPECT_FALSE(view.extension);
  EXPECT_FALSE(view.marker);
  EXPECT_EQ(view.csrc_count, 0);
  EXPECT_EQ(view.payload_type, 64);
  EXPECT_EQ(view.sequence, 0xf17b);
  EXPECT_EQ(view.timestamp, 0x8041f8d3u);
  EXPECT_EQ(view.ssrc, 0x5501a0b2u);
  EXPECT_EQ(view.header_bytes, 12u);
  EXPECT_EQ(Bytes(view.payload.begin(), view.payload.end()), (Bytes{'G', 'a', 'l', 'l', 'i', 'a'}));
}

TEST(RtpPacket, WriterReproducesRfc7714ExampleHeader) {
  RtpHeader header;
  header.payload_type = 64;
  header.sequence = 0xf17b;
  header.timestamp = 0x8041f8d3;
  header.ssrc = 0x5501a0b2;
  Bytes out(12);
  ASSERT_EQ(write_rtp_header(header, out), 12u);
  EXPECT_EQ(out, kRfc7714Header);
}

// A packet using every optional part: 2 CSRCs, a one-byte extension block (RFC 8285 4.2) with
// two elements and padding, and 4 bytes of RTP padding.
Bytes full_packet() {
  return Bytes{
      0xB2, 0xE0, 0x12, 0x34,  // V=2 P=1 X=1 CC=2 | M=1 PT=96 | seq 0x1234
      0xDE, 0xAD, 0xBE, 0xEF,  // timestamp
      0x01, 0x02, 0x03, 0x04,  // SSRC
      0x11, 0x11, 0x11, 0x11,  // CSRC 1
      0x22, 0x22, 0x22, 0x22,  // CSRC 2
      0xBE, 0xDE, 0x00, 0x02,  // one-byte profile, 2 words
      0x10, 0xAA,              // id 1, 1 byte
      0x00,                    // padding byte between elements
      0x32, 0x01, 0x02, 0x03,  // id 3, 3 bytes: abs-send-time 0x010203
      0x00,                    // padding to the word
      0x50, 0x51, 0x52,        // payload
      0x00, 0x00, 0x00, 0x04,  // RTP padding, count 4
  };
}

TEST(RtpPacket, ParsesEveryOptionalPart) {
  const Bytes packet = full_packet();
  RtpPacketView view;
  ASSERT_EQ(parse_rtp(packet, view), RtpParseError::kOk);
  EXPECT_TRUE(view.padding);
  EXPECT_TRUE(view.extension);
  EXPECT_TRUE(view.marker);
  EXPECT_EQ(view.payload_type, 96);
  EXPECT_EQ(view.csrc_count, 2);
  EXPECT_EQ(view.csrc(0), 0x11111111u);
  EXPECT_EQ(view.csrc(1), 0x22222222u);
  EXPECT_EQ(view.extension_profile, kOneByteExtensionProfile);
  EXPECT_EQ(view.extension_data.size(), 8u);
  EXPECT_EQ(view.header_bytes, 32u);
  EXPECT_EQ(view.padding_bytes, 4);
  EXPECT_EQ(Bytes(view.payload.begin(), view.payload.end()), (Bytes{0x50, 0x51, 0x52}));

  OneByteExtensionReader reader(view);
  uint8_t id = 0;
  std::span<const uint8_t> data;
  ASSERT_TRUE(reader.next(id, data));
  EXPECT_EQ(id, 1);
  EXPECT_EQ(Bytes(data.begin(), data.end()), Bytes{0xAA});
  ASSERT_TRUE(reader.next(id, data));
  EXPECT_EQ(id, 3);
  EXPECT_EQ(data.size(), 3u);
  EXPECT_FALSE(reader.next(id, data));
  EXPECT_FALSE(reader.malformed());

  uint32_t abs = 0;
  ASSERT_TRUE(read_abs_send_time(view, abs));
  EXPECT_EQ(abs, 0x010203u);
}

TEST(RtpPacket, RefusesWithReasons) {
  RtpPacketView view;
  Bytes packet = full_packet();
  packet[0] = 0x72;  // version 1
  EXPECT_EQ(parse_rtp(packet, view), RtpParseError::kBadVersion);

  packet = full_packet();
  packet.back() = 0;
  EXPECT_EQ(parse_rtp(packet, view), RtpParseError::kPaddingZero);
  packet.back() = 8;  // more than the 7 bytes after the 32-byte header
  EXPECT_EQ(parse_rtp(packet, view), RtpParseError::kPaddingOverrun);
  packet.back() = 7;  // exactly the payload and padding: an empty payload
  ASSERT_EQ(parse_rtp(packet, view), RtpParseError::kOk);
  EXPECT_TRUE(view.payload.empty());

  packet = full_packet();
  packet[23] = 0x09;  // extension length 9 words
  EXPECT_EQ(parse_rtp(packet, view), RtpParseError::kExtensionOverrun);

  packet = Bytes(kRfc7714Header);
  packet[0] = 0x8F;  // 15 CSRCs in a 12-byte packet
  EXPECT_EQ(parse_rtp(packet, view), RtpParseError::kCsrcOverrun);

  EXPECT_EQ(parse_rtp(Bytes(11, 0x80), view), RtpParseError::kTooShort);
  EXPECT_EQ(parse_rtp({}, view), RtpParseError::kTooShort);
}

// Every prefix of a valid packet: either refused, or a view whose parts lie inside the prefix.
// Prefixes shorter than the header are always refused.
TEST(RtpPacket, TruncationAtEveryOffset) {
  const Bytes packet = full_packet();
  RtpParseCounters counters;
  for (size_t n = 0; n < packet.size(); ++n) {
    Bytes prefix(packet.begin(), packet.begin() + static_cast<long>(n));
    RtpPacketView view;
    const RtpParseError error = parse_rtp(prefix, view);
    counters.count(error);
    if (n < 32) {
      EXPECT_NE(error, RtpParseError::kOk) << n;
      continue;
    }
    if (error != RtpParseError::kOk) continue;
    EXPECT_GE(view.payload.data(), prefix.data() + view.header_bytes);
    EXPECT_LE(view.payload.data() + view.payload.size() + view.padding_bytes,
              prefix.data() + prefix.size());
  }
  EXPECT_GT(counters.refused[static_cast<size_t>(RtpParseError::kTooShort)], 0u);
  EXPECT_GT(counters.refused[static_cast<size_t>(RtpParseError::kCsrcOverrun)], 0u);
  EXPECT_GT(counters.refused[static_cast<size_t>(RtpParseError::kExtensionOverrun)], 0u);
}

TEST(RtpPacket, ExtensionReaderStopsAtId15AndFlagsOverrun) {
  Bytes packet = {0x90, 0x60, 0,    1,    0,    0,    0,    1,   0, 0, 0, 2,  // X=1
                  0xBE, 0xDE, 0x00, 0x01, 0x10, 0x01, 0xF0, 0x20};
  RtpPacketView view;
  ASSERT_EQ(parse_rtp(packet, view), RtpParseError::kOk);
  OneByteExtensionReader reader(view);
  uint8_t id = 0;
  std::span<const uint8_t> data;
  ASSERT_TRUE(reader.next(id, data));
  EXPECT_EQ(id, 1);
  EXPECT_FALSE(reader.next(id, data));  // id 15 ends processing; the 0x20 after it is not read
  EXPECT_FALSE(reader.malformed());

  packet[18] = 0x23;  // id 2 claims 4 bytes, only 1 left in the block
  ASSERT_EQ(parse_rtp(packet, view), RtpParseError::kOk);
  OneByteExtensionReader overrun(view);
  ASSERT_TRUE(overrun.next(id, data));
  EXPECT_FALSE(overrun.next(id, data));
  EXPECT_TRUE(overrun.malformed());

  packet[13] = 0xDF;  // not the one-byte profile: no elements
  ASSERT_EQ(parse_rtp(packet, view), RtpParseError::kOk);
  OneByteExtensionReader other(view);
  EXPECT_FALSE(other.next(id, data));
}

TEST(RtpPacket, WriterRoundTripsRandomHeaders) {
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    uint32_t csrcs[kMaxCsrcs];
    const size_t csrc_count = rng() % (kMaxCsrcs + 1);
    for (size_t c = 0; c < csrc_count; ++c) csrcs[c] = rng();
    RtpHeader header;
    header.marker = rng() & 1;
    header.payload_type = rng() & 0x7F;
    header.sequence = static_cast<uint16_t>(rng());
    header.timestamp = rng();
    header.ssrc = rng();
    header.csrcs = {csrcs, csrc_count};
    header.has_abs_send_time = rng() & 1;
    header.abs_send_time = rng() & kAbsSendTimeMask;
    Bytes payload(rng() % 1500);
    for (auto& b : payload) b = static_cast<uint8_t>(rng());

    Bytes out(rtp_header_size(header) + payload.size());
    ASSERT_EQ(write_rtp_packet(header, payload, out), out.size());
    // One byte short: nothing written, 0 returned.
    Bytes small(out.size() - 1, 0xEE);
    EXPECT_EQ(write_rtp_packet(header, payload, small), 0u);
    EXPECT_EQ(small, Bytes(out.size() - 1, 0xEE));

    RtpPacketView view;
    ASSERT_EQ(parse_rtp(out, view), RtpParseError::kOk);
    EXPECT_EQ(view.marker, header.marker);
    EXPECT_EQ(view.payload_type, header.payload_type);
    EXPECT_EQ(view.sequence, header.sequence);
    EXPECT_EQ(view.timestamp, header.timestamp);
    EXPECT_EQ(view.ssrc, header.ssrc);
    ASSERT_EQ(view.csrc_count, csrc_count);
    for (size_t c = 0; c < csrc_count; ++c) EXPECT_EQ(view.csrc(c), csrcs[c]);
    uint32_t abs = 0;
    EXPECT_EQ(read_abs_send_time(view, abs), header.has_abs_send_time);
    if (header.has_abs_send_time) {
      EXPECT_EQ(abs, header.abs_send_time);
    }
    EXPECT_EQ(Bytes(view.payload.begin(), view.payload.end()), payload);
  }
}

TEST(RtpPacket, WriterRefusesSixteenCsrcs) {
  uint32_t csrcs[16] = {};
  RtpHeader header;
  header.csrcs = csrcs;
  Bytes out(200);
  EXPECT_EQ(write_rtp_header(header, out), 0u);
}

TEST(RtpPacket, AbsSendTimeFixedPoint) {
  EXPECT_EQ(abs_send_time_from_ns(0), 0u);
  EXPECT_EQ(abs_send_time_from_ns(1'000'000'000), 1u << 18);
  EXPECT_EQ(abs_send_time_from_ns(500'000'000), 1u << 17);
  EXPECT_EQ(abs_send_time_from_ns(63'000'000'000), 63u << 18);
  // 64 s wraps to 0: six integer bits.
  EXPECT_EQ(abs_send_time_from_ns(64'000'000'000), 0u);
  EXPECT_EQ(abs_send_time_from_ns(65'500'000'000), (1u << 18) | (1u << 17));
  // One unit is 2^-18 s = 3814.7 ns.
  EXPECT_EQ(abs_send_time_from_ns(3814), 0u);
  EXPECT_EQ(abs_send_time_from_ns(3815), 1u);
  // Large clocks do not overflow.
  EXPECT_LE(abs_send_time_from_ns(UINT64_MAX), kAbsSendTimeMask);
}

TEST(RtpPacket, AbsSendTimeDifferenceAcrossWrap) {
  EXPECT_EQ(abs_send_time_diff(0x000010, 0xFFFFF0), 0x20);
  EXPECT_EQ(abs_send_time_diff(0xFFFFF0, 0x000010), -0x20);
  EXPECT_EQ(abs_send_time_diff(5, 5), 0);
  EXPECT_EQ(abs_send_time_diff(0x7FFFFF, 0), 0x7FFFFF);
  EXPECT_EQ(abs_send_time_diff(0x800000, 0), -0x800000);
  EXPECT_EQ(abs_send_time_diff_ns(1u << 18, 0), 1'000'000'000);
  // Property: for send times up to 32 s apart, the wrapped difference is the true one within a
  // unit of rounding, wherever the two land on the 64-s circle.
  std::mt19937_64 rng(3);
  for (int i = 0; i < 10000; ++i) {
    const uint64_t a = rng() % (1ull << 50);
    const uint64_t delta = rng() % 31'000'000'000ull;
    const int64_t d =
        abs_send_time_diff_ns(abs_send_time_from_ns(a + delta), abs_send_time_from_ns(a));
    EXPECT_NEAR(static_cast<double>(d), static_cast<double>(delta), 3815.0 * 2);
  }
}

TEST(RtpPacket, SetAbsSendTimeInPlace) {
  RtpHeader header;
  header.payload_type = 96;
  header.has_abs_send_time = true;
  const uint8_t payload[3] = {1, 2, 3};
  Bytes out(64);
  out.resize(write_rtp_packet(header, payload, out));
  ASSERT_EQ(out.size(), 12 + kAbsSendTimeExtensionBlockBytes + 3);
  ASSERT_TRUE(set_abs_send_time(out, 0xABCDEF));
  RtpPacketView view;
  ASSERT_EQ(parse_rtp(out, view), RtpParseError::kOk);
  uint32_t abs = 0;
  ASSERT_TRUE(read_abs_send_time(view, abs));
  EXPECT_EQ(abs, 0xABCDEFu);
  EXPECT_EQ(Bytes(view.payload.begin(), view.payload.end()), (Bytes{1, 2, 3}));

  header.has_abs_send_time = false;
  Bytes plain(64);
  plain.resize(write_rtp_packet(header, payload, plain));
  EXPECT_FALSE(set_abs_send_time(plain, 1));
}

}  // namespace
}  // namespace syncd::rtp

TEST(RtpPacket, MoreOneByteElementsFollowAbsSendTimeAndPadToAWord) {
  const uint8_t id16[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  const uint8_t time12[12] = {0xA0, 0xA1, 0xA2, 0xA3, 0xA4, 0xA5,
                              0xA6, 0xA7, 0xA8, 0xA9, 0xAA, 0xAB};
  const syncd::rtp::OneByteExtension extra[] = {{4, id16}, {5, time12}};
  syncd::rtp::RtpHeader h;
  h.payload_type = 96;
  h.sequence = 7;
  h.ssrc = 0x11223344;
  h.has_abs_send_time = true;
  h.abs_send_time = 0x123456;
  h.extensions = extra;
  // 4 (abs-send-time) + 17 + 13 = 34 bytes of elements: 9 words, 2 bytes of padding.
  EXPECT_EQ(syncd::rtp::rtp_header_size(h), 12u + 4 + 36);
  uint8_t buf[200];
  const uint8_t payload[3] = {0x65, 0x88, 0x99};
  const size_t n = syncd::rtp::write_rtp_packet(h, payload, buf);
  ASSERT_EQ(n, 12u + 40 + 3);
  syncd::rtp::RtpPacketView v;
  ASSERT_EQ(syncd::rtp::parse_rtp({buf, n}, v), syncd::rtp::RtpParseError::kOk);
  uint32_t ast = 0;
  ASSERT_TRUE(syncd::rtp::read_abs_send_time(v, ast));
  EXPECT_EQ(ast, 0x123456u);
  std::span<const uint8_t> data;
  ASSERT_TRUE(syncd::rtp::find_one_byte_extension(v, 4, data));
  EXPECT_TRUE(std::equal(data.begin(), data.end(), id16, id16 + 16));
  ASSERT_TRUE(syncd::rtp::find_one_byte_extension(v, 5, data));
  EXPECT_EQ(data.size(), 12u);
  EXPECT_EQ(v.payload.size(), 3u);
  EXPECT_EQ(v.payload[0], 0x65);
  // Without abs-send-time, the elements alone; an element out of range writes nothing.
  h.has_abs_send_time = false;
  EXPECT_EQ(syncd::rtp::rtp_header_size(h), 12u + 4 + 32);
  const uint8_t seventeen[17] = {};
  const syncd::rtp::OneByteExtension bad[] = {{4, seventeen}};
  h.extensions = bad;
  EXPECT_EQ(syncd::rtp::write_rtp_header(h, buf), 0u);
  const syncd::rtp::OneByteExtension bad_id[] = {{15, id16}};
  h.extensions = bad_id;
  EXPECT_EQ(syncd::rtp::write_rtp_header(h, buf), 0u);
}
