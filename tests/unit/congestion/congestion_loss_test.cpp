// The sender's loss-based estimate and target rate (src/congestion/loss_based_estimator.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "congestion/loss_based_estimator.h"

namespace syncd::congestion {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kSecond = 1'000'000'000;
constexpr uint64_t kRtt = 40 * kMs;

// RFC 3550 section 6.4.1: fraction lost = lost x 256 / expected.
uint8_t q8(double fraction) {
  return static_cast<uint8_t>(fraction * 256);
}

struct RuleCase {
  uint8_t fraction_lost_q8;
  LossUpdate update;
};

TEST(CongestionLossEstimator, GccRuleTable) {
  // draft-ietf-rmcat-gcc-02 section 6: < 2% up 8%, 2-10% hold, > 10% x (1 - 0.5 p), with p as
  // the RR carries it (x / 256): 5/256 = 1.95% is below 2%, 26/256 = 10.2% above 10%.
  const RuleCase cases[] = {
      {0, LossUpdate::kIncreased},   {3, LossUpdate::kIncreased},  {5, LossUpdate::kIncreased},
      {6, LossUpdate::kHeld},        {13, LossUpdate::kHeld},      {25, LossUpdate::kHeld},
      {26, LossUpdate::kDecreased},  {64, LossUpdate::kDecreased}, {128, LossUpdate::kDecreased},
      {255, LossUpdate::kDecreased},
  };
  for (const RuleCase& c : cases) {
    LossEstimatorConfig config;
    config.start_bps = 10'000'000;
    LossBasedEstimator estimator(config);
    const LossUpdate update = estimator.on_report(kSecond, c.fraction_lost_q8, kRtt, 10'000'000);
    EXPECT_EQ(update, c.update) << int{c.fraction_lost_q8};
    const double p = c.fraction_lost_q8 / 256.0;
    const double factor = update == LossUpdate::kIncreased ? 1.08
                          : update == LossUpdate::kHeld    ? 1.0
                                                           : 1 - 0.5 * p;
    EXPECT_NEAR(static_cast<double>(estimator.estimate_bps()), 10e6 * factor, 2)
        << int{c.fraction_lost_q8};
  }
}

TEST(CongestionLossEstimator, AtMostOneChangePerInterval) {
  LossEstimatorConfig config;
  config.start_bps = 10'000'000;
  LossBasedEstimator estimator(config);
  EXPECT_EQ(estimator.on_report(0, q8(0.3), kRtt, 10'000'000), LossUpdate::kDecreased);
  const uint64_t after = estimator.estimate_bps();
  // The next RRs still count losses from before the decrease: ignored for 300 ms.
  EXPECT_EQ(estimator.on_report(100 * kMs, q8(0.3), kRtt, after), LossUpdate::kTooSoon);
  EXPECT_EQ(estimator.on_report(200 * kMs, 0, kRtt, after), LossUpdate::kTooSoon);
  EXPECT_EQ(estimator.estimate_bps(), after);
  EXPECT_EQ(estimator.on_report(300 * kMs, q8(0.3), kRtt, after), LossUpdate::kDecreased);
  // A long RTT stretches the interval to 2 x RTT.
  const uint64_t rtt = 400 * kMs;
  EXPECT_EQ(estimator.on_report(900 * kMs, 0, rtt, after), LossUpdate::kTooSoon);
  EXPECT_EQ(estimator.on_report(1'100 * kMs, 0, rtt, after), LossUpdate::kIncreased);
}

TEST(CongestionLossEstimator, DecreaseStartsFromWhatWasSent) {
  LossEstimatorConfig config;
  config.start_bps = 30'000'000;  // far above what the REMB let the sender send
  LossBasedEstimator estimator(config);
  estimator.on_report(0, q8(0.2), kRtt, 4'000'000);
  EXPECT_NEAR(static_cast<double>(estimator.estimate_bps()), 4e6 * (1 - 0.5 * q8(0.2) / 256.0), 2);
}

// A policer at 10 Mbit/s: what is sent above it is lost, and nothing else shows it (no queue,
// no delay). Its throughput is the same whatever is sent above it, which marks it: the estimate
// then goes just under it, climbs back to 95 % of it and stays for the hold, then probes; a
// probe past it losing 2-10 % is a decrease (it would hold there, losing, otherwise). No
// see-saw. When the cap lifts, the estimate climbs past the ceiling and forgets it.
TEST(CongestionLossEstimator, UnderAPolicerTheEstimateSettlesUnderItAndProbesWithoutSeeSaw) {
  LossEstimatorConfig config;
  config.start_bps = 30'000'000;
  config.max_bps = 40'000'000;
  LossBasedEstimator estimator(config);
  constexpr double kCap = 10e6;
  bool capped = true;
  auto lost = [&](uint64_t sent) {
    return capped && double(sent) > kCap ? (double(sent) - kCap) / double(sent) : 0.0;
  };
  double low = 1e18, high = 0, settled_at = -1;
  uint64_t t = 0;
  for (; t < 30 * kSecond; t += 100 * kMs) {
    const uint64_t sent = estimator.estimate_bps();
    estimator.on_report(t, q8(lost(sent)), kRtt, sent);
    if (settled_at < 0 && double(estimator.estimate_bps()) <= kCap) settled_at = t / 1e9;
    if (t >= 3 * kSecond) {
      low = std::min(low, double(estimator.estimate_bps()));
      high = std::max(high, double(estimator.estimate_bps()));
    }
  }
  std::printf(
      "[figures] 10 Mbit/s policer from 30 Mbit/s: under it after %.1f s, then "
      "%.2f-%.2f Mbit/s\n",
      settled_at, low / 1e6, high / 1e6);
  EXPECT_GE(settled_at, 0);
  EXPECT_LE(settled_at, 2.0);
  EXPECT_NE(estimator.ceiling_bps(), 0u);
  EXPECT_GE(low, 0.85 * kCap);
  EXPECT_LE(high, 1.12 * kCap);  // one 8 % probe past the 95 % margin at most
  // The cap lifts: the estimate climbs past the ceiling, forgets it, and keeps climbing.
  capped = false;
  const uint64_t lifted = t;
  for (; estimator.estimate_bps() < 24'000'000 && t < lifted + 20 * kSecond; t += 100 * kMs)
    estimator.on_report(t, 0, kRtt, estimator.estimate_bps());
  std::printf("[figures] cap lifted: 24 Mbit/s %.1f s later\n", double(t - lifted) / 1e9);
  EXPECT_LE(t - lifted, 6 * kSecond);
  EXPECT_EQ(estimator.ceiling_bps(), 0u);
}

TEST(CongestionLossEstimator,
     WithPaddingProbesTheEstimateStaysUnderTheCeilingAndAProbeFindsItGone) {
  // The relay's way (padding_probes): the estimate never goes past the margin itself; a probe
  // is due probe_after_ns after the last decrease, and one the path carried forgets the
  // ceiling and climbs back to the rate before the cap by recovery_factor a report.
  LossEstimatorConfig config;
  config.start_bps = 30'000'000;
  config.max_bps = 40'000'000;
  config.padding_probes = true;
  LossBasedEstimator estimator(config);
  constexpr double kCap = 10e6;
  auto lost = [&](uint64_t sent) {
    return double(sent) > kCap ? (double(sent) - kCap) / double(sent) : 0.0;
  };
  uint64_t t = 0, high = 0, probes_due = 0;
  for (; t < 20 * kSecond; t += 100 * kMs) {
    const uint64_t sent = estimator.estimate_bps();
    estimator.on_report(t, q8(lost(sent)), kRtt, sent);
    if (t >= 3 * kSecond) high = std::max(high, estimator.estimate_bps());
    if (const uint64_t probe = estimator.probe_bps(t)) {
      ++probes_due;
      EXPECT_GT(double(probe), kCap);              // past the ceiling, or it tells nothing
      estimator.on_probe_result(t, probe, false);  // the cap is still there
      EXPECT_EQ(estimator.probe_bps(t), 0u);       // the next one waits
    }
  }
  ASSERT_NE(estimator.ceiling_bps(), 0u);
  EXPECT_LE(double(high), config.ceiling_margin * 1.05 * kCap);  // never past it by itself
  EXPECT_GE(probes_due, 5u);
  EXPECT_LE(probes_due, 14u);  // one every probe_after_ns, not every report
  // The cap lifts; the next probe is carried: back to 30 Mbit/s within a few reports.
  uint64_t probe = 0;
  for (; probe == 0; t += 100 * kMs) probe = estimator.probe_bps(t);
  estimator.on_probe_result(t, probe, true);
  EXPECT_EQ(estimator.ceiling_bps(), 0u);
  EXPECT_GE(estimator.estimate_bps(), probe);
  const uint64_t carried = t;
  for (; estimator.estimate_bps() < 29'000'000 && t < carried + 10 * kSecond; t += 100 * kMs)
    estimator.on_report(t, 0, kRtt, estimator.estimate_bps());
  std::printf("[figures] padding probes: carried probe to 29 Mbit/s in %.1f s\n",
              double(t - carried) / 1e9);
  EXPECT_LE(t - carried, 2 * kSecond);
}

// The relay's estimator: it probes past a policer's ceiling with padding.
LossEstimatorConfig padding_config(uint64_t start_bps) {
  LossEstimatorConfig config;
  config.start_bps = start_bps;
  config.padding_probes = true;
  return config;
}

// Two lossy reports, `step` apart, whose throughputs agree at rates 20 % apart: a policer with
// a ceiling of 10 Mbit/s. Leaves t at the second.
void find_a_10_mbit_policer(LossBasedEstimator& estimator, uint64_t& t, uint64_t step) {
  estimator.on_report(t, q8(0.5), kRtt, 20'000'000);
  t += step;
  estimator.on_report(t, q8(1 - 10.0 / 16.0), kRtt, 16'000'000);
}

TEST(CongestionLossEstimator, LossThatCameWithAQueueIsNoPolicer) {
  // The same two reports, each after the receiver's REMB fell: a shaper's queue overflowing.
  LossBasedEstimator estimator(padding_config(20'000'000));
  estimator.on_report(0, q8(0.5), kRtt, 20'000'000, true);
  estimator.on_report(kSecond, q8(1 - 10.0 / 16.0), kRtt, 16'000'000, true);
  EXPECT_EQ(estimator.ceiling_bps(), 0u);
  // Through the controller: a REMB decrease within 2 s of the loss.
  SendRateConfig config;
  config.start_bps = 30'000'000;
  config.loss.padding_probes = true;
  SendRateController shaped(config);
  shaped.on_remb(0, 30'000'000);
  shaped.on_remb(kSecond, 12'000'000);
  shaped.on_receiver_report(kSecond + 100 * kMs, q8(0.5), kRtt, 20'000'000);
  shaped.on_receiver_report(kSecond + 500 * kMs, q8(1 - 10.0 / 16.0), kRtt, 16'000'000);
  EXPECT_EQ(shaped.ceiling_bps(), 0u);
  // With the REMB steady, as under a policer, the same loss finds one.
  SendRateController policed(config);
  policed.on_remb(0, 30'000'000);
  policed.on_receiver_report(kSecond + 100 * kMs, q8(0.5), kRtt, 20'000'000);
  policed.on_receiver_report(kSecond + 500 * kMs, q8(1 - 10.0 / 16.0), kRtt, 16'000'000);
  EXPECT_NE(policed.ceiling_bps(), 0u);
}

TEST(CongestionLossEstimator, LossWellUnderTheCeilingForgetsAPolicer) {
  // A policer loses nothing well under its ceiling: loss there means the ceiling was a chance
  // agreement of random loss, and it is forgotten.
  LossBasedEstimator estimator(padding_config(20'000'000));
  uint64_t t = 0;
  find_a_10_mbit_policer(estimator, t, kSecond);
  ASSERT_NE(estimator.ceiling_bps(), 0u);
  t += kSecond;
  estimator.on_report(t, q8(0.05), kRtt, 6'000'000);  // lossy at 0.6 of it
  EXPECT_EQ(estimator.ceiling_bps(), 0u);
}

TEST(CongestionLossEstimator, TheCeilingIsTheEpisodesLowestThroughput) {
  // A cap's onset as measured against a 10 Mbit/s policer with a 32-KB bucket: throughputs of
  // 10.3-11.7 Mbit/s, the higher ones carrying some of the bucket. The pair that agrees is
  // 11.6 and 11.2; the ceiling is the episode's lowest, 10.3.
  LossBasedEstimator estimator(padding_config(30'000'000));
  uint64_t t = 0;
  const double samples[][2] = {{38.2, 10.3}, {28.5, 11.0}, {17.6, 11.6}, {13.3, 11.2}};
  for (const auto& [sent, through] : samples) {
    estimator.on_report(t, q8(1 - through / sent), kRtt, uint64_t(sent * 1e6));
    t += 300 * kMs;
  }
  ASSERT_NE(estimator.ceiling_bps(), 0u);
  // (10.45: the reports' fraction lost is in 256ths.)
  EXPECT_NEAR(double(estimator.ceiling_bps()), 10.3e6, 0.2e6);
  EXPECT_LE(estimator.estimate_bps(), 10'000'000u);
}

TEST(CongestionLossEstimator, APolicerIsNotForgottenOnTheLossOfTheRateBeforeADecrease) {
  // The sample after a decrease holds packets sent at the rate before it: its loss, at an
  // average rate well under the ceiling, is not the path's own.
  LossBasedEstimator estimator(padding_config(20'000'000));
  uint64_t t = 0;
  find_a_10_mbit_policer(estimator, t, 300 * kMs);
  ASSERT_NE(estimator.ceiling_bps(), 0u);
  t += 300 * kMs;
  estimator.on_report(t, q8(0.05), kRtt, 7'000'000);  // within a second of the decrease
  EXPECT_NE(estimator.ceiling_bps(), 0u);
  t += 2 * kSecond;
  estimator.on_report(t, q8(0.05), kRtt, 7'000'000);  // later: the path's own loss
  EXPECT_EQ(estimator.ceiling_bps(), 0u);
}

// Random loss scales with the rate: its throughputs never agree across rates, so no ceiling is
// taken and the band holds as GCC says.
TEST(CongestionLossEstimator, RandomLossIsNotTakenForAPolicer) {
  LossEstimatorConfig config;
  config.start_bps = 20'000'000;
  LossBasedEstimator estimator(config);
  std::mt19937 rng(4);
  std::uniform_real_distribution<double> loss(0.0, 0.16);  // 8 % on average, some above 10 %
  for (uint64_t t = 0; t < 60 * kSecond; t += 100 * kMs)
    estimator.on_report(t, q8(loss(rng)), kRtt, estimator.estimate_bps());
  EXPECT_EQ(estimator.ceiling_bps(), 0u);
}

TEST(CongestionLossEstimator, StaysWithinBounds) {
  LossEstimatorConfig config;
  config.min_bps = 1'000'000;
  config.max_bps = 5'000'000;
  config.start_bps = 2'000'000;
  LossBasedEstimator estimator(config);
  uint64_t t = 0;
  for (int i = 0; i < 100; ++i, t += kSecond) estimator.on_report(t, 0, kRtt, 0);
  EXPECT_EQ(estimator.estimate_bps(), 5'000'000u);
  for (int i = 0; i < 100; ++i, t += kSecond) estimator.on_report(t, 255, kRtt, 0);
  EXPECT_EQ(estimator.estimate_bps(), 1'000'000u);
}

TEST(CongestionLossEstimator, OnePercentRandomLossNeverDecreases) {
  // RRs every 100 ms over 60 s at 1% random loss (before repair), 100 packets per interval: the
  // fraction lost of single intervals scatters to 3% and more (then the rule holds) but the
  // estimate never goes down, since > 10% of 100 packets at p = 1% (P ~ 1e-8) does not happen.
  std::mt19937_64 rng(1);
  std::bernoulli_distribution lost(0.01);
  SendRateConfig config;
  config.start_bps = 8'000'000;
  SendRateController controller(config);
  uint64_t t = 0;
  uint64_t peak = 0;
  for (int report = 0; report < 600; ++report) {
    t += 100 * kMs;
    int losses = 0;
    for (int i = 0; i < 100; ++i) losses += lost(rng) ? 1 : 0;
    controller.on_remb(t, 8'000'000);
    const uint8_t fraction = static_cast<uint8_t>(losses * 256 / 100);
    EXPECT_NE(controller.on_receiver_report(t, fraction, kRtt), LossUpdate::kDecreased);
    peak = std::max(peak, controller.loss_based_bps());
  }
  EXPECT_EQ(controller.counters().loss_decreases, 0u);
  EXPECT_GT(controller.counters().loss_holds, 0u);  // some intervals did see 2% or more
  EXPECT_EQ(controller.target_bps(), 8'000'000u);   // the REMB binds, not loss
}

TEST(CongestionSendRate, TargetIsTheLowerOfRembAndLossWithinBounds) {
  SendRateConfig config;
  config.min_bps = 500'000;
  config.max_bps = 20'000'000;
  config.start_bps = 8'000'000;
  SendRateController controller(config);
  EXPECT_EQ(controller.target_bps(), 8'000'000u);  // start rate before any feedback
  // No REMB yet: the loss rule alone does not lift the target above the start rate.
  controller.on_receiver_report(0, 0, kRtt);
  EXPECT_EQ(controller.target_bps(), 8'000'000u);
  controller.on_remb(kMs, 6'000'000);
  EXPECT_EQ(controller.target_bps(), 6'000'000u);
  controller.on_remb(2 * kMs, 50'000'000);
  EXPECT_EQ(controller.target_bps(), controller.loss_based_bps());
  controller.on_receiver_report(kSecond, q8(0.5), kRtt);  // loss-based now binds
  EXPECT_NEAR(static_cast<double>(controller.target_bps()), 8e6 * 1.08 * 0.75, 2);
  EXPECT_EQ(controller.target_bps(), controller.loss_based_bps());
  controller.on_remb(kSecond, 0);  // a zero REMB is the floor
  EXPECT_EQ(controller.target_bps(), 500'000u);
  EXPECT_EQ(controller.counters().rembs, 3u);
  EXPECT_EQ(controller.counters().reports, 2u);
}

}  // namespace
}  // namespace syncd::congestion
