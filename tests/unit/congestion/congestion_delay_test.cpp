// The receiver's delay-based estimate, piece by piece: packet groups, the trendline detector,
// the incoming rate, AIMD, and the estimator with its REMB schedule (src/congestion).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "congestion/aimd_rate_control.h"
#include "congestion/delay_based_estimator.h"
#include "congestion/incoming_rate.h"
#include "congestion/inter_arrival.h"
#include "congestion/trendline.h"

namespace syncd::congestion {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kSecond = 1'000'000'000;

// --- InterArrival ---

TEST(CongestionInterArrival, GroupsBySendTimeBurst) {
  InterArrival groups;
  // Three frames 16 ms apart, each 4 packets sent 1 ms apart; arrivals 20 ms later.
  std::vector<GroupDelta> deltas;
  for (int frame = 0; frame < 3; ++frame) {
    for (int i = 0; i < 4; ++i) {
      const int64_t send = frame * 16 * static_cast<int64_t>(kMs) + i * static_cast<int64_t>(kMs);
      const GroupResult r = groups.add(send, static_cast<uint64_t>(send) + 20 * kMs, 1000);
      EXPECT_EQ(r.verdict, i == 0 ? GroupVerdict::kStartedGroup : GroupVerdict::kAddedToGroup);
      if (r.has_delta) deltas.push_back(r.delta);
    }
  }
  // The third frame's first packet completes the second group: one delta (groups 1 and 2).
  ASSERT_EQ(deltas.size(), 1u);
  EXPECT_EQ(deltas[0].send_delta_ns, static_cast<int64_t>(16 * kMs));
  EXPECT_EQ(deltas[0].arrival_delta_ns, static_cast<int64_t>(16 * kMs));
  EXPECT_EQ(deltas[0].size_delta_bytes, 0);
  EXPECT_EQ(deltas[0].arrival_ns, 16 * kMs + 3 * kMs + 20 * kMs);
}

TEST(CongestionInterArrival, DelayGrowthShowsInTheDelta) {
  InterArrival groups;
  GroupResult last;
  // Each group's packets arrive 2 ms later than the last group's did, relative to send.
  for (int g = 0; g < 3; ++g) {
    const int64_t send = g * 10 * static_cast<int64_t>(kMs);
    last = groups.add(send, static_cast<uint64_t>(send) + 20 * kMs + g * 2 * kMs, 1200);
  }
  ASSERT_TRUE(last.has_delta);
  EXPECT_EQ(last.delta.arrival_delta_ns - last.delta.send_delta_ns, static_cast<int64_t>(2 * kMs));
}

TEST(CongestionInterArrival, ReorderedPacketIgnored) {
  InterArrival groups;
  groups.add(10 * kMs, 30 * kMs, 1000);
  groups.add(20 * kMs, 40 * kMs, 1000);  // starts a second group
  const GroupResult r = groups.add(12 * kMs, 41 * kMs, 1000);
  EXPECT_EQ(r.verdict, GroupVerdict::kReordered);
  EXPECT_FALSE(r.has_delta);
}

TEST(CongestionInterArrival, BurstArrivingTogetherJoinsTheGroup) {
  InterArrival groups;
  groups.add(0, 20 * kMs, 1000);
  // Sent 8 ms later (beyond the 5 ms send burst) but arrived 1 ms after: queued behind it.
  const GroupResult r = groups.add(8 * kMs, 21 * kMs, 1000);
  EXPECT_EQ(r.verdict, GroupVerdict::kAddedToGroup);
  // Sent 8 ms later again, arrived 8 ms later: a new group.
  EXPECT_EQ(groups.add(16 * kMs, 29 * kMs, 1000).verdict, GroupVerdict::kStartedGroup);
}

TEST(CongestionInterArrival, OffsetJumpResets) {
  InterArrival groups;
  groups.add(0, 20 * kMs, 1000);
  groups.add(10 * kMs, 30 * kMs, 1000);
  // The third group arrives 5 s late: a clock jump or a restart, not a queue. It shows when
  // that group completes.
  EXPECT_TRUE(groups.add(20 * kMs, 5 * kSecond, 1000).has_delta);
  const GroupResult r = groups.add(30 * kMs, 5 * kSecond + 10 * kMs, 1000);
  EXPECT_EQ(r.verdict, GroupVerdict::kReset);
  EXPECT_FALSE(r.has_delta);
  // Grouping starts again: the next two groups make no delta yet, the third does.
  EXPECT_FALSE(groups.add(40 * kMs, 5 * kSecond + 20 * kMs, 1000).has_delta);
  EXPECT_TRUE(groups.add(50 * kMs, 5 * kSecond + 30 * kMs, 1000).has_delta);
}

// --- TrendlineDetector ---

// Feeds groups every spacing_ns whose one-way delay grows by delay_step_us per group.
BandwidthUsage feed_ramp(TrendlineDetector& detector, int groups, double delay_step_us, uint64_t* t,
                         double* delay_ns, uint64_t spacing_ns = 10 * kMs) {
  BandwidthUsage usage = BandwidthUsage::kNormal;
  for (int i = 0; i < groups; ++i) {
    const double next_delay = std::max(0.0, *delay_ns + delay_step_us * 1e3);
    GroupDelta delta;
    delta.send_delta_ns = static_cast<int64_t>(spacing_ns);
    delta.arrival_delta_ns = static_cast<int64_t>(spacing_ns) +
                             static_cast<int64_t>(std::llround(next_delay - *delay_ns));
    *delay_ns = next_delay;
    *t += static_cast<uint64_t>(delta.arrival_delta_ns);
    delta.arrival_ns = *t;
    usage = detector.update(delta);
  }
  return usage;
}

TEST(CongestionTrendline, SteadyDelayIsNormal) {
  TrendlineDetector detector;
  uint64_t t = kSecond;
  double delay = 0;
  EXPECT_EQ(feed_ramp(detector, 200, 0, &t, &delay), BandwidthUsage::kNormal);
  EXPECT_NEAR(detector.slope(), 0.0, 1e-9);
  // A quiet path lowers the threshold to its floor.
  EXPECT_NEAR(detector.threshold_ms(), 6.0, 1e-9);
}

TEST(CongestionTrendline, GrowingQueueIsOveruseAndDrainingIsUnderuse) {
  TrendlineDetector detector;
  uint64_t t = kSecond;
  double delay = 0;
  feed_ramp(detector, 60, 0, &t, &delay);
  // A queue growing 1 ms per 10 ms (a 10% overload).
  EXPECT_EQ(feed_ramp(detector, 40, 1000, &t, &delay), BandwidthUsage::kOverusing);
  EXPECT_GT(detector.slope(), 0.05);
  // Draining at the same pace.
  EXPECT_EQ(feed_ramp(detector, 40, -1000, &t, &delay), BandwidthUsage::kUnderusing);
  EXPECT_LT(detector.slope(), -0.05);
}

TEST(CongestionTrendline, SingleSpikeIsNotOveruse) {
  TrendlineDetector detector;
  uint64_t t = kSecond;
  double delay = 0;
  feed_ramp(detector, 60, 0, &t, &delay);
  // One group 8 ms late, then back: a jitter spike, not a growing queue.
  feed_ramp(detector, 1, 8'000, &t, &delay);
  BandwidthUsage worst = BandwidthUsage::kNormal;
  for (int i = 0; i < 40; ++i) {
    const BandwidthUsage u = feed_ramp(detector, 1, i == 0 ? -8'000 : 0, &t, &delay);
    if (u == BandwidthUsage::kOverusing) worst = u;
  }
  EXPECT_NE(worst, BandwidthUsage::kOverusing);
}

TEST(CongestionTrendline, ThresholdFollowsTheTrend) {
  TrendlineDetector detector;
  uint64_t t = kSecond;
  double delay = 0;
  feed_ramp(detector, 200, 0, &t, &delay);
  ASSERT_NEAR(detector.threshold_ms(), 6.0, 1e-9);
  // A slow ramp, 0.375 ms per 10 ms group: m settles near 60 x 0.034 x 4 = 8 ms, above the
  // floor but within 15 ms of gamma, so gamma climbs towards it (k_up) ...
  feed_ramp(detector, 100, 375, &t, &delay);
  EXPECT_GT(detector.modified_trend_ms(), 6.0);
  EXPECT_GT(detector.threshold_ms(), 7.0);
  // ... and comes back down (k_down) once the path is steady again.
  feed_ramp(detector, 300, 0, &t, &delay);
  EXPECT_NEAR(detector.threshold_ms(), 6.0, 1e-9);
}

TEST(CongestionTrendline, HeavyJitterKeepsEverythingFiniteAndBounded) {
  TrendlineDetector detector;
  std::mt19937_64 rng(7);
  // One-way delay 0 to 40 ms drawn afresh per 10 ms group (arrivals even overtake each other).
  std::uniform_real_distribution<double> delay_us(0, 40'000);
  uint64_t t = kSecond;
  double delay = 0;
  for (int i = 0; i < 3000; ++i) {
    feed_ramp(detector, 1, delay_us(rng) - delay / 1e3, &t, &delay);
    ASSERT_GE(detector.threshold_ms(), 6.0);
    ASSERT_LE(detector.threshold_ms(), 600.0);
    ASSERT_TRUE(std::isfinite(detector.modified_trend_ms()));
    ASSERT_TRUE(std::isfinite(detector.slope()));
  }
}

TEST(CongestionTrendline, AllPointsAtOneArrivalTimeKeepTheSlopeFinite) {
  TrendlineDetector detector;
  GroupDelta delta{10 * static_cast<int64_t>(kMs), 0, 0, kSecond};
  for (int i = 0; i < 50; ++i) detector.update(delta);
  EXPECT_TRUE(std::isfinite(detector.slope()));
  EXPECT_TRUE(std::isfinite(detector.threshold_ms()));
}

// --- IncomingRate ---

TEST(CongestionIncomingRate, ConstantStream) {
  IncomingRate rate(500 * kMs);
  uint64_t t = 0;
  std::optional<uint64_t> measured;
  // 1000 bytes every 1 ms: 8 Mbit/s.
  for (int i = 0; i < 2000; ++i, t += kMs) {
    rate.add(t, 1000);
    if (i == 100) {
      EXPECT_FALSE(rate.rate_bps(t).has_value());  // less than one window yet
    }
    measured = rate.rate_bps(t);
  }
  ASSERT_TRUE(measured.has_value());
  EXPECT_NEAR(static_cast<double>(*measured), 8e6, 8e6 * 0.02);
}

TEST(CongestionIncomingRate, SilenceEmptiesTheWindow) {
  IncomingRate rate(500 * kMs);
  for (uint64_t t = 0; t < kSecond; t += kMs) rate.add(t, 1000);
  EXPECT_EQ(rate.rate_bps(10 * kSecond), 0u);
  // Days of silence are cleared in bounded work, and counting starts again.
  rate.add(86'400 * kSecond, 500);
  EXPECT_EQ(rate.rate_bps(86'400 * kSecond), 500u * 8 * 2);
}

// --- AimdRateControl ---

TEST(CongestionAimd, DecreaseToBetaTimesIncoming) {
  AimdRateControl aimd;  // start 8 Mbit/s
  aimd.update(0, BandwidthUsage::kOverusing, 6'000'000);
  EXPECT_NEAR(static_cast<double>(aimd.estimate_bps()), 5.1e6, 1);  // 0.85 x 6 Mbit/s
  EXPECT_EQ(aimd.state(), AimdState::kHold);
  EXPECT_TRUE(aimd.near_convergence());
  // A second overuse within the reduction interval (RTT, 100 ms by default) does not cut again.
  aimd.update(50 * kMs, BandwidthUsage::kOverusing, 5'000'000);
  EXPECT_NEAR(static_cast<double>(aimd.estimate_bps()), 5.1e6, 1);
  aimd.update(150 * kMs, BandwidthUsage::kOverusing, 5'000'000);
  EXPECT_NEAR(static_cast<double>(aimd.estimate_bps()), 4.25e6, 1);
  EXPECT_EQ(aimd.decreases(), 2u);
}

TEST(CongestionAimd, MultiplicativeIncreaseFarFromConvergence) {
  AimdConfig config;
  config.start_bps = 4'000'000;
  AimdRateControl aimd(config);
  uint64_t t = 0;
  aimd.update(t, BandwidthUsage::kNormal, 4'000'000);
  // One second of normal signals every 10 ms with plenty of incoming rate: x1.25.
  for (int i = 0; i < 100; ++i) {
    t += 10 * kMs;
    aimd.update(t, BandwidthUsage::kNormal, aimd.estimate_bps());
  }
  EXPECT_NEAR(static_cast<double>(aimd.estimate_bps()), 4e6 * 1.25, 4e6 * 0.01);
}

TEST(CongestionAimd, AdditiveIncreaseNearConvergence) {
  AimdConfig config;
  config.start_bps = 20'000'000;
  AimdRateControl aimd(config);
  uint64_t t = 0;
  aimd.update(t, BandwidthUsage::kOverusing, 10'000'000);  // congestion point 10 Mbit/s
  const uint64_t after_decrease = aimd.estimate_bps();
  EXPECT_NEAR(static_cast<double>(after_decrease), 8.5e6, 1);
  for (int i = 0; i < 100; ++i) {
    t += 10 * kMs;
    aimd.update(t, BandwidthUsage::kNormal, aimd.estimate_bps());
  }
  // One 1200-byte packet per response time (100 ms RTT + 100 ms): 48 kbit/s per second.
  EXPECT_NEAR(static_cast<double>(aimd.estimate_bps() - after_decrease), 48'000, 1'000);
}

TEST(CongestionAimd, FasterPathDropsTheCongestionPoint) {
  AimdRateControl aimd;
  uint64_t t = 0;
  aimd.update(t, BandwidthUsage::kOverusing, 4'000'000);
  ASSERT_TRUE(aimd.near_convergence());
  t += 10 * kMs;
  aimd.update(t, BandwidthUsage::kNormal, 6'000'000);  // far above 4 Mbit/s + 3 sigma
  EXPECT_FALSE(aimd.near_convergence());
}

TEST(CongestionAimd, SlowerPathRestartsTheCongestionPoint) {
  AimdRateControl aimd;
  aimd.update(0, BandwidthUsage::kOverusing, 16'000'000);
  aimd.update(kSecond, BandwidthUsage::kOverusing, 4'000'000);
  EXPECT_NEAR(static_cast<double>(aimd.capacity_estimate_bps()), 4e6, 1e3);
}

TEST(CongestionAimd, NeverAboveHeadroomOverIncomingAndWithinBounds) {
  AimdConfig config;
  config.min_bps = 500'000;
  config.max_bps = 12'000'000;
  config.start_bps = 2'000'000;
  AimdRateControl aimd(config);
  uint64_t t = 0;
  for (int i = 0; i < 1000; ++i) {
    t += 10 * kMs;
    aimd.update(t, BandwidthUsage::kNormal, 1'000'000);  // the sender only uses 1 Mbit/s
  }
  EXPECT_EQ(aimd.estimate_bps(), 2'000'000u);  // 1.5 x 1 Mbit/s + 10 k < start: held, not cut
  for (int i = 0; i < 3000; ++i) {
    t += 10 * kMs;
    aimd.update(t, BandwidthUsage::kNormal, aimd.estimate_bps());
  }
  EXPECT_EQ(aimd.estimate_bps(), 12'000'000u);
  for (int i = 0; i < 100; ++i) {
    t += kSecond;
    aimd.update(t, BandwidthUsage::kOverusing, 100'000);
  }
  EXPECT_EQ(aimd.estimate_bps(), 500'000u);
}

TEST(CongestionAimd, NoIncomingRateHolds) {
  AimdRateControl aimd;
  aimd.update(0, BandwidthUsage::kOverusing, std::nullopt);
  aimd.update(kSecond, BandwidthUsage::kNormal, std::nullopt);
  EXPECT_EQ(aimd.estimate_bps(), 8'000'000u);
}

// --- DelayBasedEstimator ---

TEST(CongestionDelayEstimator, RefusesBadPacketsWithReasons) {
  DelayBasedEstimator estimator;
  EXPECT_EQ(estimator.on_packet(kSecond, 0, 0), PacketVerdict::kEmpty);
  EXPECT_EQ(estimator.on_packet(kSecond, 0, 65'536), PacketVerdict::kTooLarge);
  EXPECT_EQ(estimator.on_packet(kSecond, 0, 65'535), PacketVerdict::kAccepted);  // the largest
  EXPECT_EQ(estimator.on_packet(kSecond - 1, 10, 1200), PacketVerdict::kArrivalBackwards);
  const DelayEstimatorCounters& c = estimator.counters();
  EXPECT_EQ(c.refused_empty, 1u);
  EXPECT_EQ(c.refused_too_large, 1u);
  EXPECT_EQ(c.refused_arrival_backwards, 1u);
  EXPECT_EQ(c.packets, 1u);
}

TEST(CongestionDelayEstimator, RembEvery100MsAndAtOnceOnADecrease) {
  DelayBasedEstimator estimator;
  EXPECT_FALSE(estimator.take_remb(0).has_value());  // nothing received yet
  EXPECT_EQ(estimator.next_remb_ns(), UINT64_MAX);
  uint64_t t = kSecond;
  int64_t send = 0;
  int rembs = 0;
  // 8 Mbit/s in 1000-byte packets on a steady path for 2 s: one REMB per 100 ms.
  for (int i = 0; i < 2000; ++i) {
    t += kMs;
    send += static_cast<int64_t>(kMs);
    estimator.on_packet_send_ns(t, send, 1000);
    if (estimator.take_remb(t)) ++rembs;
  }
  EXPECT_NEAR(rembs, 20, 1);
  EXPECT_EQ(estimator.counters().rembs_immediate, 0u);
  // Now the path's queue grows 1 ms per 5 ms: overuse, a decrease, and a REMB at once.
  bool immediate = false;
  uint64_t delay = 0;
  for (int i = 0; i < 1000 && !immediate; ++i) {
    t += kMs;
    send += static_cast<int64_t>(kMs);
    if (i % 5 == 0) delay += kMs;
    estimator.on_packet_send_ns(t + delay, send, 1000);
    if (estimator.next_remb_ns() <= t + delay && estimator.counters().decreases > 0) {
      immediate = estimator.take_remb(t + delay).has_value();
    }
  }
  EXPECT_TRUE(immediate);
  EXPECT_EQ(estimator.counters().rembs_immediate, 1u);
  EXPECT_LT(estimator.estimate_bps(), 8'000'000u);
}

TEST(CongestionDelayEstimator, NextRembTimeForTheTimer) {
  DelayBasedEstimator estimator;
  estimator.on_packet_send_ns(kSecond, 0, 1000);
  EXPECT_EQ(estimator.next_remb_ns(), 0u);  // the first is due at once
  ASSERT_TRUE(estimator.take_remb(kSecond).has_value());
  EXPECT_EQ(estimator.next_remb_ns(), kSecond + 100 * kMs);
  EXPECT_FALSE(estimator.take_remb(kSecond + 100 * kMs - 1).has_value());
  EXPECT_EQ(estimator.take_remb(kSecond + 100 * kMs), estimator.estimate_bps());
  EXPECT_EQ(estimator.counters().rembs, 2u);
}

TEST(CongestionDelayEstimator, AbsSendTimeWrapIsSeamless) {
  // A steady 8 Mbit/s path across the 64 s wrap: no reset, no overuse, estimate not cut.
  DelayEstimatorConfig config;
  DelayBasedEstimator estimator(config);
  const uint64_t sender_start = 60 * kSecond;  // the sender's clock wraps 4 s in
  uint64_t arrival = 5 * kSecond;
  for (uint64_t s = 0; s < 8 * kSecond; s += kMs) {
    arrival += kMs;
    ASSERT_EQ(estimator.on_packet(arrival, abs_send_time_from_ns(sender_start + s), 1000),
              PacketVerdict::kAccepted);
  }
  EXPECT_EQ(estimator.counters().resets, 0u);
  EXPECT_EQ(estimator.counters().overuse_signals, 0u);
  EXPECT_EQ(estimator.counters().decreases, 0u);
  EXPECT_GE(estimator.estimate_bps(), 8'000'000u);
  EXPECT_GT(estimator.counters().groups, 1000u);
}

}  // namespace
}  // namespace syncd::congestion
