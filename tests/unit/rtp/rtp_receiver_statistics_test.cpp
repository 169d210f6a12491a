#include <gtest/gtest.h>

#include <random>

#include "rtp/receiver_statistics.h"

namespace syncd::rtp {
namespace {

constexpr uint32_t kVideoClock = 90000;
constexpr uint64_t kMs = 1'000'000;

ReceiverStatisticsConfig accept_first() {
  ReceiverStatisticsConfig config;
  config.min_sequential = 1;
  return config;
}

TEST(RtpReceiverStatistics, ProbationNeedsTwoInSequence) {
  // RFC 3550 A.1 with MIN_SEQUENTIAL 2: the first packet only starts probation; the second, in
  // sequence, makes the source valid and is the first one counted (base_seq).
  ReceiverStatistics stats(kVideoClock);
  EXPECT_FALSE(stats.on_packet(1000, 0, 0));
  EXPECT_FALSE(stats.valid());
  EXPECT_FALSE(stats.on_packet(1005, 0, 1));  // out of sequence: probation restarts
  EXPECT_TRUE(stats.on_packet(1006, 0, 2));
  EXPECT_TRUE(stats.valid());
  EXPECT_EQ(stats.received(), 1u);
  EXPECT_EQ(stats.expected(), 1u);
  EXPECT_EQ(stats.counters().probation, 2u);
}

TEST(RtpReceiverStatistics, LossAndFractionLostPerInterval) {
  ReceiverStatistics stats(kVideoClock, accept_first());
  // 200 packets, every 10th lost (but not the first or last).
  for (uint16_t s = 0; s < 200; ++s) {
    if (s % 10 == 5) continue;
    stats.on_packet(s, s * 3000u, s * 33 * kMs);
  }
  EXPECT_EQ(stats.expected(), 200u);
  EXPECT_EQ(stats.received(), 180u);
  EXPECT_EQ(stats.cumulative_lost(), 20);
  ReportBlock block = stats.make_report_block(0x1234, 0);
  EXPECT_EQ(block.source_ssrc, 0x1234u);
  EXPECT_EQ(block.fraction_lost, 25);  // 20 / 200 * 256 = 25.6, truncated (A.3)
  EXPECT_EQ(block.cumulative_lost, 20);
  EXPECT_EQ(block.extended_highest_sequence, 199u);
  // Next interval: 100 packets, none lost.
  for (uint16_t s = 200; s < 300; ++s) stats.on_packet(s, s * 3000u, s * 33 * kMs);
  block = stats.make_report_block(0x1234, 0);
  EXPECT_EQ(block.fraction_lost, 0);
  EXPECT_EQ(block.cumulative_lost, 20);
  // 300, 302, ..., 398 and 400: 51 of 101 expected, 50 lost: 50 * 256 / 101 = 126.7 -> 126.
  for (uint16_t s = 300; s < 400; s += 2) stats.on_packet(s, s * 3000u, s * 33 * kMs);
  stats.on_packet(400, 400 * 3000u, 400 * 33 * kMs);
  block = stats.make_report_block(0x1234, 0);
  EXPECT_EQ(block.fraction_lost, 126);
  EXPECT_EQ(block.cumulative_lost, 70);
}

TEST(RtpReceiverStatistics, ExtendedSequenceAcrossWrap) {
  ReceiverStatistics stats(kVideoClock, accept_first());
  uint16_t s = 65500;
  for (int i = 0; i < 100; ++i) stats.on_packet(s++, 0, 0);
  EXPECT_EQ(stats.extended_highest_sequence(), 65536u + 63);
  EXPECT_EQ(stats.expected(), 100u);
  EXPECT_EQ(stats.cumulative_lost(), 0);
  // A late packet from before the wrap is counted (A.1) and does not move the highest.
  EXPECT_TRUE(stats.on_packet(65530, 0, 0));
  EXPECT_EQ(stats.extended_highest_sequence(), 65536u + 63);
  EXPECT_EQ(stats.cumulative_lost(), -1);  // a duplicate makes it negative
  EXPECT_EQ(stats.counters().late, 1u);
  ReportBlock block = stats.make_report_block(1, 0);
  EXPECT_EQ(block.cumulative_lost, -1);
  EXPECT_EQ(block.fraction_lost, 0);
}

TEST(RtpReceiverStatistics, RestartAfterTwoPacketsAgree) {
  ReceiverStatistics stats(kVideoClock, accept_first());
  for (uint16_t s = 10; s < 20; ++s) stats.on_packet(s, 0, 0);
  EXPECT_FALSE(stats.on_packet(40000, 0, 0));  // a jump: not believed yet
  EXPECT_EQ(stats.counters().bad_jump, 1u);
  EXPECT_TRUE(stats.on_packet(40001, 0, 0));  // the next follows it: the source restarted
  EXPECT_EQ(stats.counters().restarts, 1u);
  EXPECT_EQ(stats.received(), 1u);
  EXPECT_EQ(stats.extended_highest_sequence(), 40001u);
  // A gap under MAX_DROPOUT is loss, not a restart.
  EXPECT_TRUE(stats.on_packet(42000, 0, 0));
  EXPECT_EQ(stats.cumulative_lost(), 1998);
}

TEST(RtpReceiverStatistics, JitterZeroForConstantTransit) {
  ReceiverStatistics stats(kVideoClock, accept_first());
  for (uint16_t s = 0; s < 500; ++s) {
    stats.on_packet(s, 5000 + s * 1500u, 7 * kMs + s * (1500 * 1'000'000'000ull / kVideoClock));
  }
  EXPECT_EQ(stats.jitter(), 0u);
}

// A.8: with transit alternating by D, |D(i-1, i)| = D every packet, and J converges to D.
TEST(RtpReceiverStatistics, JitterConvergesToAlternatingOffset) {
  ReceiverStatistics stats(kVideoClock, accept_first());
  const uint64_t period_ns = 20 * kMs;  // 1800 ticks
  for (uint16_t s = 0; s < 2000; ++s) {
    const uint64_t arrival = 1'000 * kMs + s * period_ns + (s % 2 ? 2 * kMs : 0);  // D = 180
    stats.on_packet(s, static_cast<uint32_t>(0xFFFFF000u + s * 1800u), arrival);   // ts wraps
  }
  EXPECT_NEAR(stats.jitter(), 180.0, 1.0);
  EXPECT_NEAR(static_cast<double>(stats.jitter_ns()), 2e6, 12e3);
}

TEST(RtpReceiverStatistics, JitterMatchesFloatingPointReference) {
  std::mt19937 rng(12);
  ReceiverStatistics stats(kVideoClock, accept_first());
  double reference = 0;
  int64_t last_transit = 0;
  for (uint16_t s = 0; s < 3000; ++s) {
    const uint32_t ts = s * 1500u;
    const uint64_t arrival_ns = s * 16'666'667ull + rng() % (5 * kMs);
    stats.on_packet(s, ts, arrival_ns);
    const auto arrival_ticks = static_cast<int64_t>(arrival_ns * 9 / 100'000);
    const int64_t transit = arrival_ticks - ts;
    if (s > 0) {
      const double d = static_cast<double>(std::llabs(transit - last_transit));
      reference += (d - reference) / 16;
    }
    last_transit = transit;
  }
  EXPECT_NEAR(stats.jitter(), reference, reference * 0.02 + 1);
}

TEST(RtpReceiverStatistics, LastSrAndDelaySinceLastSr) {
  ReceiverStatistics stats(kVideoClock, accept_first());
  stats.on_packet(1, 0, 0);
  ReportBlock block = stats.make_report_block(9, 5 * kMs);
  EXPECT_EQ(block.last_sr, 0u);  // no SR yet
  EXPECT_EQ(block.delay_since_last_sr, 0u);
  const uint64_t ntp = (uint64_t{0xb705} << 32) | 0x20000000u;
  stats.on_sender_report(ntp, 100 * kMs);
  block = stats.make_report_block(9, 100 * kMs + 5'250 * kMs);
  EXPECT_EQ(block.last_sr, 0xb7052000u);
  EXPECT_EQ(block.delay_since_last_sr, 0x00054000u);  // 5.25 s in 1/65536 s
}

}  // namespace
}  // namespace syncd::rtp
