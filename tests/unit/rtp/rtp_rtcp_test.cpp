#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "rtp/rtcp.h"

namespace syncd::rtp {
namespace {

using Bytes = std::vector<uint8_t>;

// Records every event as plain values.
struct RecordingSink : RtcpSink {
  std::vector<std::string> order;
  std::vector<SenderReport> srs;
  std::vector<std::vector<ReportBlock>> sr_blocks;
  std::vector<uint32_t> rr_senders;
  std::vector<std::vector<ReportBlock>> rr_blocks;
  std::vector<std::pair<uint32_t, std::string>> cnames;
  std::vector<std::vector<uint32_t>> byes;
  std::vector<std::string> bye_reasons;
  std::vector<uint16_t> nack_lost;
  uint32_t nack_events = 0;
  uint32_t nack_media = 0;
  std::vector<std::pair<uint32_t, uint32_t>> plis;
  std::vector<uint64_t> remb_bitrates;
  std::vector<uint32_t> remb_ssrcs;

  void on_sender_report(const SenderReport& r) override {
    order.push_back("SR");
    srs.push_back(r);
    sr_blocks.emplace_back(r.blocks.begin(), r.blocks.end());
  }
  void on_receiver_report(const ReceiverReport& r) override {
    order.push_back("RR");
    rr_senders.push_back(r.sender_ssrc);
    rr_blocks.emplace_back(r.blocks.begin(), r.blocks.end());
  }
  void on_cname(uint32_t ssrc, std::string_view cname) override {
    order.push_back("SDES");
    cnames.emplace_back(ssrc, std::string(cname));
  }
  void on_goodbye(const Goodbye& b) override {
    order.push_back("BYE");
    byes.emplace_back(b.ssrcs.begin(), b.ssrcs.end());
    bye_reasons.emplace_back(b.reason);
  }
  void on_nack(const Nack& n) override {
    order.push_back("NACK");
    ++nack_events;
    nack_media = n.media_ssrc;
    nack_lost.insert(nack_lost.end(), n.lost.begin(), n.lost.end());
  }
  void on_pli(uint32_t sender, uint32_t media) override {
    order.push_back("PLI");
    plis.emplace_back(sender, media);
  }
  void on_remb(const Remb& r) override {
    order.push_back("REMB");
    remb_bitrates.push_back(r.bitrate_bps);
    remb_ssrcs.assign(r.ssrcs.begin(), r.ssrcs.end());
  }
  std::vector<std::vector<uint8_t>> apps;
  void on_application(std::span<const uint8_t> packet) override {
    order.push_back("APP");
    apps.emplace_back(packet.begin(), packet.end());
  }
};

// RFC 3550 section 6.4.1's worked example: SR sent with NTP 46853.125 s (LSR 0xb705:2000), RR
// sent back after DLSR 5.250 s (0x0005:4000), arriving at 46864.500 s (0xb710:8000): the round
// trip is 6.125 s (0x0006:2000).
TEST(RtpRtcp, RoundTripTimeRfc3550Example) {
  const auto rtt = round_trip_ns(0xb7108000, 0xb7052000, 0x00054000);
  ASSERT_TRUE(rtt.has_value());
  EXPECT_EQ(*rtt, 6'125'000'000u);
  EXPECT_FALSE(round_trip_ns(0xb7108000, 0, 0x00054000).has_value());  // no SR yet
  EXPECT_FALSE(round_trip_ns(0xb7050000, 0xb7052000, 0).has_value());  // negative
  // Across the wrap of the compact clock.
  EXPECT_EQ(*round_trip_ns(0x00010000, 0xFFFF8000, 0x00008000), 1'000'000'000u);
}

TEST(RtpRtcp, NtpConversions) {
  EXPECT_EQ(ntp_from_ns(1'500'000'000), (uint64_t{1} << 32) | 0x80000000u);
  EXPECT_EQ(ns_from_ntp((uint64_t{46853} << 32) | 0x20000000u), 46853'125'000'000u);
  EXPECT_EQ(ntp_compact((uint64_t{0xb705} << 32) | 0x20000000u), 0xb7052000u);
  EXPECT_EQ(compact_from_ns(5'250'000'000), 0x00054000u);
  EXPECT_EQ(ns_from_compact(0x00062000), 6'125'000'000u);
  EXPECT_EQ(compact_from_ns(70'000'000'000'000), UINT32_MAX);  // saturates past 65536 s
  std::mt19937_64 rng(1);
  // NTP seconds are 32 bits: exact for times below 2^32 s (136 years).
  for (int i = 0; i < 100000; ++i) {
    const uint64_t ns = rng() % (uint64_t{0xFFFFFFFF} * 1'000'000'000);
    ASSERT_EQ(ns_from_ntp(ntp_from_ns(ns)), ns) << ns;
  }
}

TEST(RtpRtcp, NackBlpExpansionRfc4585) {
  // PID 100, BLP bits 0, 2 and 15: 101, 103 and 116 lost too.
  uint16_t out[17];
  const size_t n = expand_nack_item({100, 0x8005}, out);
  EXPECT_EQ(std::vector<uint16_t>(out, out + n), (std::vector<uint16_t>{100, 101, 103, 116}));
  // Across the 16-bit wrap.
  const size_t m = expand_nack_item({65534, 0x0007}, out);
  EXPECT_EQ(std::vector<uint16_t>(out, out + m), (std::vector<uint16_t>{65534, 65535, 0, 1}));
  EXPECT_EQ(expand_nack_item({7, 0xFFFF}, out), 17u);

  NackItem items[4];
  const uint16_t lost[] = {100, 101, 103, 116, 117};
  ASSERT_EQ(pack_nack_items(lost, items), 2u);
  EXPECT_EQ(items[0].pid, 100);
  EXPECT_EQ(items[0].blp, 0x8005);
  EXPECT_EQ(items[1].pid, 117);
  EXPECT_EQ(items[1].blp, 0);
  const uint16_t wrapped[] = {65535, 0, 15};
  ASSERT_EQ(pack_nack_items(wrapped, items), 1u);
  EXPECT_EQ(items[0].pid, 65535);
  EXPECT_EQ(items[0].blp, (1 << 0) | (1 << 15));
  // Room for fewer items than needed: the count says how many were needed.
  const uint16_t spread[] = {0, 100, 200, 300, 400, 500};
  EXPECT_EQ(pack_nack_items(spread, std::span<NackItem>(items, 2)), 6u);
}

TEST(RtpRtcp, NackPackExpandRoundTripRandomSets) {
  std::mt19937 rng(8);
  for (int round = 0; round < 2000; ++round) {
    // Ascending lost numbers starting anywhere (so many runs cross the wrap), random gaps.
    std::vector<uint16_t> lost;
    uint16_t s = static_cast<uint16_t>(rng());
    const size_t count = 1 + rng() % 200;
    for (size_t i = 0; i < count; ++i) {
      lost.push_back(s);
      s = static_cast<uint16_t>(s + 1 + (rng() % 4 == 0 ? rng() % 40 : rng() % 3));
    }
    if (round % 3 == 0) std::shuffle(lost.begin(), lost.end(), rng);  // any order still works
    Bytes buffer(4096);
    RtcpWriter writer(buffer);
    ASSERT_TRUE(writer.add_receiver_report(1));
    ASSERT_TRUE(writer.add_nack(1, 2, lost));
    RecordingSink sink;
    ASSERT_EQ(parse_rtcp(writer.packet(), sink), RtcpParseError::kOk);
    EXPECT_EQ(sink.nack_media, 2u);
    std::set<uint16_t> want(lost.begin(), lost.end());
    std::set<uint16_t> got(sink.nack_lost.begin(), sink.nack_lost.end());
    EXPECT_EQ(got, want);
    EXPECT_EQ(sink.nack_lost.size(), got.size());  // no number reported twice
    if (round % 3 != 0) {
      // Sorted input packs densely: at most one FCI per started 17-number window.
      NackItem items[256];
      const size_t items_needed = pack_nack_items(lost, items);
      const uint16_t span = static_cast<uint16_t>(lost.back() - lost.front());
      EXPECT_LE(items_needed, std::min<size_t>(lost.size(), span / 17u + 1 + lost.size() / 2));
    }
  }
}

TEST(RtpRtcp, RembMantissaExponentRoundTrip) {
  const RembBitrate one_mbps = encode_remb_bitrate(1'000'000);
  EXPECT_EQ(one_mbps.exponent, 2);
  EXPECT_EQ(one_mbps.mantissa, 250000u);
  EXPECT_EQ(decode_remb_bitrate(one_mbps), 1'000'000u);
  EXPECT_EQ(encode_remb_bitrate(0x3FFFF).exponent, 0);
  EXPECT_EQ(encode_remb_bitrate(0x40000).exponent, 1);
  EXPECT_EQ(decode_remb_bitrate({63, 0x3FFFF}), UINT64_MAX);  // saturates
  EXPECT_EQ(decode_remb_bitrate({46, 0x3FFFF}), uint64_t{0x3FFFF} << 46);
  std::mt19937_64 rng(2);
  for (int i = 0; i < 100000; ++i) {
    const uint64_t bitrate = rng() >> (rng() % 64);
    const RembBitrate v = encode_remb_bitrate(bitrate);
    ASSERT_LE(v.mantissa, 0x3FFFFu);
    ASSERT_LE(v.exponent, 63);
    const uint64_t back = decode_remb_bitrate(v);
    ASSERT_LE(back, bitrate);  // never announces more than estimated
    ASSERT_LT(bitrate - back, uint64_t{1} << v.exponent);
    // The smallest exponent: one less would not fit 18 bits.
    if (v.exponent > 0) {
      ASSERT_GT(bitrate >> (v.exponent - 1), 0x3FFFFu);
    }
  }
}

// REMB as libwebrtc sends it, built byte by byte from draft-alvestrand-rmcat-remb-03 2.2, behind
// an empty RR: 1,000,000 bps (exp 2, mantissa 250000 = 0x3D090) for SSRC 0x11223344.
TEST(RtpRtcp, ParsesRembFromBytes) {
  const Bytes packet = {
      0x80, 0xC9, 0x00, 0x01, 0x00, 0x00, 0x00, 0x07,  // RR, no blocks
      0x8F, 0xCE, 0x00, 0x05,                          // PSFB FMT 15, 6 words
      0x00, 0x00, 0x00, 0x07,                          // sender SSRC
      0x00, 0x00, 0x00, 0x00,                          // media SSRC 0
      'R',  'E',  'M',  'B',  0x01, 0x0B, 0xD0, 0x90,  // 1 SSRC, exp 2 (000010), mantissa 0x3D090
      0x11, 0x22, 0x33, 0x44};
  RecordingSink sink;
  ASSERT_EQ(parse_rtcp(packet, sink), RtcpParseError::kOk);
  ASSERT_EQ(sink.remb_bitrates.size(), 1u);
  EXPECT_EQ(sink.remb_bitrates[0], 1'000'000u);
  EXPECT_EQ(sink.remb_ssrcs, std::vector<uint32_t>{0x11223344});
  // And the writer produces the same bytes.
  Bytes out(64);
  RtcpWriter writer(out);
  ASSERT_TRUE(writer.add_receiver_report(7));
  const uint32_t ssrc = 0x11223344;
  ASSERT_TRUE(writer.add_remb(7, 1'000'000, {&ssrc, 1}));
  EXPECT_EQ(Bytes(writer.packet().begin(), writer.packet().end()), packet);
}

Bytes full_compound() {
  Bytes buffer(1500);
  RtcpWriter writer(buffer);
  SenderInfo info{(uint64_t{0xb705} << 32) | 0x20000000, 123456, 1000, 1200000};
  ReportBlock blocks[2];
  blocks[0] = {0xAAAA0001, 25, 1234, 0x0001FFFF, 300, 0xb7052000, 0x00054000};
  blocks[1] = {0xAAAA0002, 0, -5, 70000, 0, 0, 0};
  EXPECT_TRUE(writer.add_sender_report(0x5EED, info, blocks));
  EXPECT_TRUE(writer.add_cname(0x5EED, "syncd@sender"));
  const uint16_t lost[] = {65535, 0, 2, 40};
  EXPECT_TRUE(writer.add_nack(0x5EED, 0xAAAA0001, lost));
  EXPECT_TRUE(writer.add_pli(0x5EED, 0xAAAA0001));
  const uint32_t remb_ssrcs[] = {0xAAAA0001, 0xAAAA0002};
  EXPECT_TRUE(writer.add_remb(0x5EED, 12'345'678, remb_ssrcs));
  const uint32_t bye[] = {0x5EED};
  EXPECT_TRUE(writer.add_goodbye(bye, "done"));
  return Bytes(writer.packet().begin(), writer.packet().end());
}

TEST(RtpRtcp, CompoundWriteParseRoundTrip) {
  const Bytes packet = full_compound();
  EXPECT_EQ(packet.size() % 4, 0u);
  RecordingSink sink;
  uint32_t skipped = 0;
  ASSERT_EQ(parse_rtcp(packet, sink, {}, &skipped), RtcpParseError::kOk);
  EXPECT_EQ(skipped, 0u);
  EXPECT_EQ(sink.order, (std::vector<std::string>{"SR", "SDES", "NACK", "PLI", "REMB", "BYE"}));
  ASSERT_EQ(sink.srs.size(), 1u);
  EXPECT_EQ(sink.srs[0].sender_ssrc, 0x5EEDu);
  EXPECT_EQ(sink.srs[0].info.ntp_timestamp, (uint64_t{0xb705} << 32) | 0x20000000);
  EXPECT_EQ(sink.srs[0].info.rtp_timestamp, 123456u);
  EXPECT_EQ(sink.srs[0].info.packet_count, 1000u);
  EXPECT_EQ(sink.srs[0].info.octet_count, 1200000u);
  ASSERT_EQ(sink.sr_blocks[0].size(), 2u);
  const ReportBlock& b = sink.sr_blocks[0][0];
  EXPECT_EQ(b.source_ssrc, 0xAAAA0001u);
  EXPECT_EQ(b.fraction_lost, 25);
  EXPECT_EQ(b.cumulative_lost, 1234);
  EXPECT_EQ(b.extended_highest_sequence, 0x0001FFFFu);
  EXPECT_EQ(b.jitter, 300u);
  EXPECT_EQ(b.last_sr, 0xb7052000u);
  EXPECT_EQ(b.delay_since_last_sr, 0x00054000u);
  EXPECT_EQ(sink.sr_blocks[0][1].cumulative_lost, -5);  // signed 24-bit survives
  ASSERT_EQ(sink.cnames.size(), 1u);
  EXPECT_EQ(sink.cnames[0].first, 0x5EEDu);
  EXPECT_EQ(sink.cnames[0].second, "syncd@sender");
  EXPECT_EQ(sink.nack_lost, (std::vector<uint16_t>{65535, 0, 2, 40}));
  EXPECT_EQ(sink.plis, (std::vector<std::pair<uint32_t, uint32_t>>{{0x5EED, 0xAAAA0001}}));
  ASSERT_EQ(sink.remb_bitrates.size(), 1u);
  // 12,345,678 = 0b1011_1100_0110_0001_0100_1110: exp 6, mantissa 192901 -> 12,345,664.
  EXPECT_EQ(sink.remb_bitrates[0], 12'345'664u);
  EXPECT_EQ(sink.remb_ssrcs, (std::vector<uint32_t>{0xAAAA0001, 0xAAAA0002}));
  EXPECT_EQ(sink.byes, (std::vector<std::vector<uint32_t>>{{0x5EED}}));
  EXPECT_EQ(sink.bye_reasons, std::vector<std::string>{"done"});
}

TEST(RtpRtcp, CumulativeLostClampsToSigned24Bits) {
  Bytes buffer(64);
  RtcpWriter writer(buffer);
  ReportBlock blocks[2];
  blocks[0].cumulative_lost = 50'000'000;
  blocks[1].cumulative_lost = -50'000'000;
  ASSERT_TRUE(writer.add_receiver_report(1, blocks));
  RecordingSink sink;
  ASSERT_EQ(parse_rtcp(writer.packet(), sink), RtcpParseError::kOk);
  EXPECT_EQ(sink.rr_blocks[0][0].cumulative_lost, kMaxCumulativeLost);
  EXPECT_EQ(sink.rr_blocks[0][1].cumulative_lost, kMinCumulativeLost);
}

// Every prefix of a compound: valid exactly at packet boundaries (a shorter compound), refused
// elsewhere, and a refused one reports no event at all.
TEST(RtpRtcp, TruncationAtEveryOffset) {
  const Bytes packet = full_compound();
  std::set<size_t> boundaries;
  for (size_t offset = 0; offset < packet.size();) {
    offset += (size_t{packet[offset + 2]} << 8 | packet[offset + 3]) * 4 + 4;
    boundaries.insert(offset);
  }
  ASSERT_EQ(boundaries.size(), 6u);
  RtcpParseCounters counters;
  for (size_t n = 0; n < packet.size(); ++n) {
    RecordingSink sink;
    const RtcpParseError error = parse_rtcp(std::span(packet).first(n), sink);
    counters.count(error);
    if (boundaries.count(n)) {
      EXPECT_EQ(error, RtcpParseError::kOk) << n;
    } else {
      EXPECT_NE(error, RtcpParseError::kOk) << n;
      EXPECT_TRUE(sink.order.empty()) << n;
    }
  }
  EXPECT_EQ(counters.accepted, 5u);
}

// Rewrites the length field of the packet at offset so that it claims words - 1.
void set_length(Bytes& packet, size_t offset, uint16_t field) {
  packet[offset + 2] = static_cast<uint8_t>(field >> 8);
  packet[offset + 3] = static_cast<uint8_t>(field);
}

TEST(RtpRtcp, RefusalsWithReasons) {
  using E = RtcpParseError;
  RecordingSink sink;
  const Bytes rr = {0x80, 0xC9, 0x00, 0x01, 0, 0, 0, 1};
  EXPECT_EQ(parse_rtcp(rr, sink), E::kOk);
  EXPECT_EQ(parse_rtcp(Bytes{0x80, 0xC9, 0x00}, sink), E::kTooShort);

  Bytes bad = rr;
  bad[0] = 0x40;
  EXPECT_EQ(parse_rtcp(bad, sink), E::kBadVersion);

  bad = rr;
  set_length(bad, 0, 2);
  EXPECT_EQ(parse_rtcp(bad, sink), E::kLengthOverrun);

  bad = rr;
  bad[0] = 0x81;  // RC 1, but no room for a block
  EXPECT_EQ(parse_rtcp(bad, sink), E::kReportBlocksOverrun);

  // Padding: valid on the last packet only, count within the body.
  Bytes padded = {0x80, 0xC9, 0x00, 0x01, 0, 0, 0, 1, 0xA0, 0xCE, 0x00, 0x03, 0,
                  0,    0,    1,    0,    0, 0, 2, 0, 0,    0,    4};  // PLI + 4 bytes of padding
  EXPECT_EQ(parse_rtcp(padded, sink), E::kOk);
  padded[23] = 0;
  EXPECT_EQ(parse_rtcp(padded, sink), E::kBadPadding);
  padded[23] = 13;
  EXPECT_EQ(parse_rtcp(padded, sink), E::kBadPadding);
  padded[23] = 8;  // eats into the PLI's SSRCs: too short a feedback packet
  EXPECT_EQ(parse_rtcp(padded, sink), E::kFeedbackMalformed);
  Bytes padded_first = rr;
  padded_first[0] = 0xA0;
  padded_first.insert(padded_first.end(), rr.begin(), rr.end());
  EXPECT_EQ(parse_rtcp(padded_first, sink), E::kPaddingNotLast);

  const Bytes pli_only = {0x81, 0xCE, 0x00, 0x02, 0, 0, 0, 1, 0, 0, 0, 2};
  EXPECT_EQ(parse_rtcp(pli_only, sink), E::kFirstNotReport);
  EXPECT_EQ(parse_rtcp(pli_only, sink, RtcpParseOptions{true}), E::kOk);

  Bytes sdes = rr;  // SDES with SC 1 and a CNAME item whose length overruns
  sdes.insert(sdes.end(), {0x81, 0xCA, 0x00, 0x02, 0, 0, 0, 9, 0x01, 0x09, 'a', 0});
  EXPECT_EQ(parse_rtcp(sdes, sink), E::kSdesMalformed);
  sdes[sdes.size() - 3] = 0x01;  // length 1, then the null item: valid
  EXPECT_EQ(parse_rtcp(sdes, sink), E::kOk);
  sdes[8] = 0x82;  // SC 2: the second chunk is missing
  EXPECT_EQ(parse_rtcp(sdes, sink), E::kSdesMalformed);

  Bytes bye = rr;
  bye.insert(bye.end(), {0x82, 0xCB, 0x00, 0x01, 0, 0, 0, 9});  // SC 2, room for 1
  EXPECT_EQ(parse_rtcp(bye, sink), E::kByeMalformed);
  bye = rr;
  bye.insert(bye.end(), {0x81, 0xCB, 0x00, 0x02, 0, 0, 0, 9, 0x05, 'a', 'b', 'c'});
  EXPECT_EQ(parse_rtcp(bye, sink), E::kByeMalformed);  // reason of 5 in 3 bytes

  Bytes nack = rr;
  nack.insert(nack.end(), {0x81, 0xCD, 0x00, 0x02, 0, 0, 0, 1, 0, 0, 0, 2});  // no FCI
  EXPECT_EQ(parse_rtcp(nack, sink), E::kFeedbackMalformed);

  Bytes remb = rr;
  remb.insert(
      remb.end(),
      {0x8F, 0xCE, 0x00, 0x04, 0,   0,    0,    1,    0,   0, 0,
       0,    'R',  'E',  'M',  'B', 0x02, 0x00, 0x00, 0x01});  // 2 SSRCs announced, none present
  EXPECT_EQ(parse_rtcp(remb, sink), E::kRembMalformed);
  remb[24] = 0;
  EXPECT_EQ(parse_rtcp(remb, sink), E::kOk);
  remb[20] = 'X';  // another application-layer feedback: skipped, not refused
  uint32_t skipped = 0;
  EXPECT_EQ(parse_rtcp(remb, sink, {}, &skipped), E::kOk);
  EXPECT_EQ(skipped, 1u);
}

TEST(RtpRtcp, RefusedCompoundReportsNoEvents) {
  Bytes packet = full_compound();
  packet[packet.size() - 16] = 0x41;  // version 1 in the last packet (BYE: 16 bytes)
  RecordingSink sink;
  EXPECT_NE(parse_rtcp(packet, sink), RtcpParseError::kOk);
  EXPECT_TRUE(sink.order.empty());
}

TEST(RtpRtcp, WriterKeepsReportFirstAndWritesNothingThatDoesNotFit) {
  Bytes buffer(20, 0xEE);
  RtcpWriter writer(buffer);
  EXPECT_FALSE(writer.add_pli(1, 2));  // RFC 3550 6.1: SR or RR first
  EXPECT_EQ(writer.size(), 0u);
  ASSERT_TRUE(writer.add_receiver_report(1));
  EXPECT_FALSE(writer.add_cname(1, "a-name-that-is-too-long"));
  EXPECT_EQ(writer.size(), 8u);
  EXPECT_EQ(buffer[8], 0xEE);
  ASSERT_TRUE(writer.add_pli(1, 2));
  EXPECT_EQ(writer.size(), 20u);
  EXPECT_FALSE(writer.add_pli(1, 2));
  EXPECT_FALSE(writer.add_nack(1, 2, {}));
  ReportBlock too_many[32];
  Bytes big(2000);
  RtcpWriter other(big);
  EXPECT_FALSE(other.add_receiver_report(1, too_many));
  EXPECT_TRUE(other.add_receiver_report(1, std::span(too_many).first(31)));
}

TEST(RtpRtcp, LongNackArrivesInSeveralEvents) {
  std::vector<uint16_t> lost;
  for (uint16_t s = 0; s < 2000; s += 2) lost.push_back(s);  // 1000 numbers, 118 FCIs
  Bytes buffer(1500);
  RtcpWriter writer(buffer);
  ASSERT_TRUE(writer.add_receiver_report(1));
  ASSERT_TRUE(writer.add_nack(1, 2, lost));
  RecordingSink sink;
  ASSERT_EQ(parse_rtcp(writer.packet(), sink), RtcpParseError::kOk);
  EXPECT_EQ(sink.nack_lost, lost);
  EXPECT_GT(sink.nack_events, 1u);
}

// APP packets are the application's: written whole, handed back whole, in place in the compound.
TEST(RtpRtcp, ApplicationPacketsGoThroughWhole) {
  const uint8_t app[16] = {0x80, 204, 0, 3, 1, 2, 3, 4, 'S', 'Y', 'N', 'C', 9, 8, 7, 6};
  uint8_t buf[128];
  RtcpWriter w(buf);
  EXPECT_FALSE(w.add_application(app));  // a report must come first
  ASSERT_TRUE(w.add_receiver_report(0x1234));
  ASSERT_TRUE(w.add_application(app));
  uint8_t bad[16];
  std::memcpy(bad, app, 16);
  bad[3] = 4;  // length says 20 bytes
  EXPECT_FALSE(w.add_application(bad));
  bad[3] = 3;
  bad[1] = 203;  // a BYE
  EXPECT_FALSE(w.add_application(bad));
  EXPECT_FALSE(w.add_application(std::span(app).first(8)));
  RecordingSink sink;
  ASSERT_EQ(parse_rtcp(w.packet(), sink), RtcpParseError::kOk);
  ASSERT_EQ(sink.order, (std::vector<std::string>{"RR", "APP"}));
  EXPECT_EQ(sink.apps[0], std::vector<uint8_t>(app, app + 16));
  // An APP packet too short for its SSRC and name is refused with the compound.
  uint8_t short_app[12] = {0x80, 201, 0, 1, 0, 0, 0, 1, 0x80, 204, 0, 0};
  EXPECT_EQ(parse_rtcp(short_app, sink), RtcpParseError::kTooShort);
}

}  // namespace
}  // namespace syncd::rtp
