// Probes the receiver measures (src/congestion/probe_meter.h), what the delay-based estimate
// makes of them, and when the sender's rate controller asks for one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>

#include "congestion/delay_based_estimator.h"
#include "congestion/loss_based_estimator.h"
#include "congestion/probe_meter.h"

namespace syncd::congestion {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kSecond = 1'000'000'000;
constexpr uint32_t kPacket = 1236;

uint64_t ns_for(uint64_t bytes, uint64_t bps) {
  return bytes * 8 * kSecond / bps;
}

// A path for a probe: packets of kPacket bytes sent back to back at send_bps, through a
// bottleneck of bottleneck_bps (a FIFO), then 20 ms +/- jitter_ns in order.
struct Path {
  uint64_t bottleneck_bps;
  uint64_t jitter_ns = 5 * kMs;
  std::mt19937_64 rng{7};
  uint64_t free_ns = 0;  // the bottleneck is busy until then
  uint64_t last_arrival_ns = 0;

  uint64_t arrival(uint64_t send_ns, uint32_t bytes) {
    free_ns = std::max(free_ns, send_ns) + ns_for(bytes, bottleneck_bps);
    std::uniform_int_distribution<uint64_t> jitter(0, 2 * jitter_ns);
    last_arrival_ns = std::max(last_arrival_ns, free_ns + 15 * kMs + jitter(rng));
    return last_arrival_ns;
  }
};

// Sends a cluster of `padding` packets at send_bps starting at start_ns, a media packet after
// every fourth, then one media packet 40 ms after the last (which ends the cluster). Returns the
// measurement it gave.
std::optional<ProbeMeasurement> send_cluster(ProbeMeter& meter, Path& path, uint64_t start_ns,
                                             uint64_t send_bps, int padding) {
  uint64_t t = start_ns;
  std::optional<ProbeMeasurement> measured;
  auto send = [&](bool pad) {
    if (const auto m = meter.on_packet(int64_t(t), path.arrival(t, kPacket), kPacket, pad))
      measured = m;
    t += ns_for(kPacket, send_bps);
  };
  for (int i = 0; i < padding; ++i) {
    send(true);
    if (i % 4 == 3) send(false);
  }
  t += 40 * kMs;
  send(false);
  return measured;
}

TEST(CongestionProbeMeter, ABottleneckShowsItsRateUnderJitter) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    ProbeMeter meter;
    Path path{10'000'000};
    path.rng.seed(seed);
    const auto m = send_cluster(meter, path, kSecond, 20'000'000, 50);  // 30 ms at 20 Mbit/s
    ASSERT_TRUE(m.has_value()) << seed;
    EXPECT_NEAR(double(m->send_bps), 20e6, 0.5e6) << seed;
    // +/- 5 ms of jitter on a 60-ms spread: the fit is within 7 % (measured: 5.2 % at worst in
    // these seeds), where the first and last packets alone could be 17 % off.
    EXPECT_NEAR(double(m->receive_bps), 10e6, 0.7e6) << seed;
    EXPECT_GE(m->packets, 50u);
  }
}

TEST(CongestionProbeMeter, APathThatCarriesItShowsTheSendRate) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    ProbeMeter meter;
    Path path{100'000'000};
    path.rng.seed(seed);
    const auto m = send_cluster(meter, path, kSecond, 16'000'000, 60);
    ASSERT_TRUE(m.has_value()) << seed;
    EXPECT_NEAR(double(m->send_bps), 16e6, 0.4e6) << seed;
    EXPECT_GE(double(m->receive_bps), 0.9 * double(m->send_bps)) << seed;
  }
}

TEST(CongestionProbeMeter, EndsAtTheGapAndCountsWhatIsTooSmall) {
  ProbeMeter meter;
  Path path{100'000'000};
  path.jitter_ns = 0;
  // Media alone opens nothing.
  EXPECT_FALSE(meter.on_packet(0, path.arrival(0, kPacket), kPacket, false).has_value());
  EXPECT_FALSE(meter.open());
  // Five padding packets 1 ms apart: too few.
  uint64_t t = 10 * kMs;
  for (int i = 0; i < 5; ++i, t += kMs)
    meter.on_packet(int64_t(t), path.arrival(t, kPacket), kPacket, true);
  EXPECT_TRUE(meter.open());
  // A packet within the gap keeps it open; one past it ends it, unmeasured.
  t += 20 * kMs;
  EXPECT_FALSE(meter.on_packet(int64_t(t), path.arrival(t, kPacket), kPacket, false).has_value());
  EXPECT_TRUE(meter.open());
  t += 31 * kMs;
  EXPECT_FALSE(meter.on_packet(int64_t(t), path.arrival(t, kPacket), kPacket, false).has_value());
  EXPECT_FALSE(meter.open());
  EXPECT_EQ(meter.counters().too_small, 1u);
  EXPECT_EQ(meter.counters().clusters, 0u);
  EXPECT_EQ(meter.ended(), 1u);
  // A padding packet past the gap ends one cluster and begins the next.
  const auto m = send_cluster(meter, path, 200 * kMs, 16'000'000, 40);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(meter.counters().clusters, 1u);
  EXPECT_EQ(meter.counters().padding_packets, 45u);
}

TEST(CongestionProbeMeter, ResetForgetsAnOpenCluster) {
  ProbeMeter meter;
  Path path{100'000'000};
  for (uint64_t t = 0; t < 20 * kMs; t += kMs)
    meter.on_packet(int64_t(t), path.arrival(t, kPacket), kPacket, true);
  meter.reset();
  EXPECT_FALSE(meter.open());
  EXPECT_FALSE(meter.on_packet(int64_t(kSecond), path.arrival(kSecond, kPacket), kPacket, false));
  EXPECT_EQ(meter.ended(), 0u);
}

// --- What the estimate makes of a probe ---

// Media at media_bps in 1200-byte packets for `for_ns` from t (a path that carries it, 20 ms),
// fed to the estimator; returns the time after.
uint64_t feed_media(DelayBasedEstimator& e, uint64_t t, uint64_t for_ns, uint64_t media_bps) {
  const uint64_t end = t + for_ns;
  for (; t < end; t += ns_for(kPacket, media_bps)) {
    e.on_packet_send_ns(t + 20 * kMs, int64_t(t), kPacket);
  }
  return t;
}

// A probe cluster of `packets` padding packets at send_bps, arriving at receive_bps.
uint64_t feed_probe(DelayBasedEstimator& e, uint64_t t, uint64_t send_bps, uint64_t receive_bps,
                    int packets) {
  uint64_t arrival = t + 20 * kMs;
  for (int i = 0; i < packets; ++i) {
    e.on_packet_send_ns(arrival, int64_t(t), kPacket, true);
    t += ns_for(kPacket, send_bps);
    arrival += ns_for(kPacket, receive_bps);
  }
  return t;
}

TEST(CongestionDelayEstimator, ACarriedProbeRaisesTheEstimateAndSaysSoAtOnce) {
  DelayEstimatorConfig config;
  config.rate.start_bps = 5'000'000;
  DelayBasedEstimator e(config);
  uint64_t t = feed_media(e, kSecond, 2 * kSecond, 5'000'000);
  ASSERT_TRUE(e.take_remb(t).has_value());
  const uint64_t before = e.estimate_bps();
  ASSERT_LT(before, 8'000'000u);
  t = feed_probe(e, t, 16'000'000, 16'000'000, 50);
  EXPECT_EQ(e.probe_counters().clusters, 0u);  // not until a packet past the gap
  t = feed_media(e, t + 40 * kMs, 100 * kMs, 5'000'000);
  EXPECT_EQ(e.probe_counters().clusters, 1u);
  EXPECT_EQ(e.counters().probes_raised, 1u);
  EXPECT_EQ(e.counters().probes_saturated, 0u);
  EXPECT_NEAR(double(e.estimate_bps()), 0.9 * 16e6, 0.3e6);
  EXPECT_EQ(e.next_remb_ns(), 0u);  // due at once
  EXPECT_EQ(e.counters().last_probe_send_bps / 100'000, 160u);
}

TEST(CongestionDelayEstimator, ASaturatedProbeBringsTheEstimateDownToTheBottleneck) {
  DelayEstimatorConfig config;
  config.rate.start_bps = 14'000'000;
  DelayBasedEstimator e(config);
  uint64_t t = feed_media(e, kSecond, 2 * kSecond, 5'000'000);
  ASSERT_GT(e.estimate_bps(), 9'000'000u);  // floated over what a 10 Mbit/s cap carries
  t = feed_probe(e, t, 16'000'000, 10'000'000, 50);
  feed_media(e, t + 40 * kMs, 100 * kMs, 5'000'000);
  EXPECT_EQ(e.counters().probes_saturated, 1u);
  EXPECT_NEAR(double(e.estimate_bps()), 9e6, 0.2e6);
  EXPECT_NEAR(double(e.rate_control().capacity_estimate_bps()), 10e6, 0.2e6);
  // And no increase passes it: 3 s more of media at 8 Mbit/s with no delay growth, which AIMD
  // alone would take past 10 Mbit/s.
  EXPECT_NEAR(double(e.rate_control().ceiling_bps()), 9e6, 0.2e6);
  t = feed_media(e, t + 140 * kMs, 3 * kSecond, 8'000'000);
  EXPECT_LE(e.estimate_bps(), e.rate_control().ceiling_bps());
  // Until a probe is carried past it.
  t = feed_probe(e, t, 20'000'000, 20'000'000, 60);
  feed_media(e, t + 40 * kMs, 100 * kMs, 8'000'000);
  EXPECT_EQ(e.rate_control().ceiling_bps(), 0u);
  EXPECT_NEAR(double(e.estimate_bps()), 18e6, 0.5e6);

  // Under the bottleneck already: a probe stopped by it does not raise the estimate (the
  // sender's FEC and repairs ride on top of its target).
  DelayEstimatorConfig low_config;
  low_config.rate.start_bps = 5'000'000;
  DelayBasedEstimator low(low_config);
  t = feed_media(low, kSecond, 2 * kSecond, 4'000'000);
  const uint64_t before = low.estimate_bps();
  ASSERT_LT(before, 8'000'000u);
  t = feed_probe(low, t, 16'000'000, 10'000'000, 50);
  feed_media(low, t + 40 * kMs, 100 * kMs, 4'000'000);
  EXPECT_EQ(low.counters().probes_saturated, 1u);
  EXPECT_EQ(low.counters().probes_raised, 0u);
  EXPECT_LE(low.estimate_bps(), before);
}

TEST(CongestionDelayEstimator, AProbesOwnQueueIsNoDecrease) {
  DelayEstimatorConfig config;
  config.rate.start_bps = 8'000'000;
  DelayBasedEstimator e(config);
  uint64_t t = feed_media(e, kSecond, 3 * kSecond, 8'000'000);
  const uint64_t decreases = e.counters().decreases;
  // 60 ms at twice a 10 Mbit/s bottleneck: its queue grows by 30 ms, which alone is an overuse.
  t = feed_probe(e, t, 20'000'000, 10'000'000, 120);
  feed_media(e, t + 40 * kMs, 500 * kMs, 8'000'000);
  EXPECT_EQ(e.probe_counters().clusters, 1u);
  EXPECT_EQ(e.counters().decreases, decreases);
}

// --- When the sender probes ---

SendRateController delay_probing_controller() {
  SendRateConfig c;
  c.max_bps = 30'000'000;
  c.start_bps = 30'000'000;  // the loss rule's estimate too: the REMB binds
  c.delay_probes = true;
  return SendRateController(c);
}

TEST(CongestionSendRate, ProbesForAFasterPathWhileTheRembBinds) {
  SendRateConfig off;
  SendRateController plain(off);
  plain.on_remb(kSecond, 5'000'000);
  EXPECT_EQ(plain.delay_probe_bps(2 * kSecond), 0u);  // not asked for (WHEP's viewers)

  SendRateController c = delay_probing_controller();
  EXPECT_EQ(c.delay_probe_bps(kSecond), 0u);  // no REMB yet
  c.on_remb(kSecond, 5'000'000);
  EXPECT_EQ(c.delay_probe_bps(kSecond), 10'000'000u);  // twice the target
  c.on_delay_probe_sent(kSecond);
  EXPECT_EQ(c.counters().delay_probes, 1u);
  // Not raised: the next waits 2 s, each time.
  EXPECT_EQ(c.delay_probe_bps(kSecond + 1999 * kMs), 0u);
  EXPECT_EQ(c.delay_probe_bps(3 * kSecond), 10'000'000u);
  c.on_delay_probe_sent(3 * kSecond);
  EXPECT_EQ(c.delay_probe_bps(4999 * kMs), 0u);
  EXPECT_EQ(c.delay_probe_bps(5 * kSecond), 10'000'000u);
  c.on_delay_probe_sent(6 * kSecond);
  // Raised by the receiver's measurement: the next 300 ms after it, from the new target, and
  // the wait after an unraised one is 2 s again.
  c.on_remb(6 * kSecond + 100 * kMs, 9'000'000);
  EXPECT_EQ(c.counters().delay_probes_raised, 1u);
  EXPECT_EQ(c.delay_probe_bps(6 * kSecond + 299 * kMs), 0u);
  EXPECT_EQ(c.delay_probe_bps(6 * kSecond + 300 * kMs), 18'000'000u);
  c.on_delay_probe_sent(7 * kSecond);
  EXPECT_EQ(c.delay_probe_bps(8999 * kMs), 0u);
  EXPECT_EQ(c.delay_probe_bps(9 * kSecond), 18'000'000u);
  // AIMD climbing 15 % past the REMB at the last probe: the next 300 ms after that probe.
  c.on_remb(7 * kSecond + 200 * kMs, 10'000'000);
  EXPECT_EQ(c.delay_probe_bps(7 * kSecond + 250 * kMs), 0u);
  EXPECT_EQ(c.counters().delay_probes_raised, 1u);  // not by as much as a probe raises it
  c.on_remb(7 * kSecond + 250 * kMs, 10'400'000);
  EXPECT_EQ(c.delay_probe_bps(7 * kSecond + 299 * kMs), 0u);
  EXPECT_EQ(c.delay_probe_bps(7 * kSecond + 300 * kMs), 20'800'000u);
  // At the maximum, none; nor within 0.5 s of a REMB decrease.
  c.on_remb(10 * kSecond, 30'000'000);
  EXPECT_EQ(c.delay_probe_bps(20 * kSecond), 0u);
  c.on_remb(20 * kSecond, 12'000'000);
  EXPECT_EQ(c.delay_probe_bps(20 * kSecond + 499 * kMs), 0u);
  EXPECT_EQ(c.delay_probe_bps(20 * kSecond + 500 * kMs), 24'000'000u);
}

TEST(CongestionSendRate, NoDelayProbeWhileTheLossRuleBinds) {
  SendRateController c = delay_probing_controller();
  c.on_remb(kSecond, 20'000'000);
  // 20 % loss: the loss-based estimate falls under the REMB, and a probe for delay would not
  // lift the target.
  c.on_receiver_report(2 * kSecond, 51, 40 * kMs, 20'000'000);
  ASSERT_LT(c.loss_based_bps(), c.remb_bps());
  EXPECT_EQ(c.delay_probe_bps(5 * kSecond), 0u);
}

}  // namespace
}  // namespace syncd::congestion
