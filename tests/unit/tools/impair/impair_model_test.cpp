// The impairment model of sync-impair (tools/impair/model.h), over 10^6 packets: measured loss
// and burst lengths against the configured ones, the delay distribution, FIFO order, explicit
// reordering, duplication, the rate cap, and reproducibility from the seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "impair/model.h"

namespace syncd::impair {
namespace {

constexpr int kPackets = 1'000'000;
constexpr uint64_t kMs = 1'000'000;

struct LossStats {
  double loss_percent = 0;
  double mean_burst = 0;  // mean run of consecutive drops
  uint64_t bursts = 0;
};

LossStats run_losses(const ChainConfig& config, uint64_t seed) {
  ImpairmentChain chain(config, seed);
  uint64_t lost = 0, bursts = 0;
  bool in_burst = false;
  for (int i = 0; i < kPackets; ++i) {
    const Decision d = chain.on_packet(uint64_t(i) * 100'000, 1200);  // 10,000 packets/s
    const bool dropped = d.copies == 0;
    lost += dropped;
    if (dropped && !in_burst) ++bursts;
    in_burst = dropped;
  }
  return {100.0 * double(lost) / kPackets, bursts ? double(lost) / double(bursts) : 0, bursts};
}

TEST(ImpairModel, RandomLossMatchesTheSetting) {
  for (double percent : {0.0, 1.0, 5.0, 20.0}) {
    ChainConfig config;
    config.loss_percent = percent;
    const LossStats s = run_losses(config, 1);
    // Binomial sd at 10^6 packets is <= 0.04 percentage points; 5 sd.
    EXPECT_NEAR(s.loss_percent, percent, 0.2) << percent;
    if (percent > 0 && percent < 10) {
      // Independent losses: mean run 1 / (1 - p).
      EXPECT_NEAR(s.mean_burst, 1 / (1 - percent / 100), 0.02) << percent;
    }
  }
}

TEST(ImpairModel, GilbertElliottTargetLossAndBurstLength) {
  const std::pair<double, double> targets[] = {{1, 1}, {5, 3}, {5, 8}, {10, 2}, {2, 4}};
  for (auto [loss, burst] : targets) {
    ChainConfig config;
    ASSERT_TRUE(set_gilbert_elliott_from_target(config, loss, burst));
    const LossStats s = run_losses(config, 7);
    EXPECT_NEAR(s.loss_percent, loss, 0.1 * loss + 0.1) << loss << "% burst " << burst;
    EXPECT_NEAR(s.mean_burst, burst, 0.05 * burst + 0.05) << loss << "% burst " << burst;
  }
  ChainConfig config;
  EXPECT_FALSE(set_gilbert_elliott_from_target(config, 0, 3));
  EXPECT_FALSE(set_gilbert_elliott_from_target(config, 100, 3));
  EXPECT_FALSE(set_gilbert_elliott_from_target(config, 5, 0.5));
  EXPECT_EQ(config.ge_p, 0);
}

// p and r given directly, with losses in both states: stationary loss
// pi_bad * h_bad + pi_good * h_good, pi_bad = p / (p + r).
TEST(ImpairModel, GilbertElliottFromPAndR) {
  ChainConfig config;
  config.ge_p = 0.02;
  config.ge_r = 0.25;
  config.ge_bad_loss_percent = 60;
  config.ge_good_loss_percent = 0.5;
  const double pi_bad = 0.02 / 0.27;
  const double expected = 100 * (pi_bad * 0.6 + (1 - pi_bad) * 0.005);
  const LossStats s = run_losses(config, 9);
  EXPECT_NEAR(s.loss_percent, expected, 0.05 * expected);
}

struct DelayStats {
  double mean_ms = 0, sd_ms = 0, min_ms = 1e9, max_ms = 0;
  uint64_t inversions = 0;  // deliveries earlier than the previous packet's
  std::vector<double> delays;
};

DelayStats run_delays(const ChainConfig& config, uint64_t spacing_ns, int packets = kPackets) {
  ImpairmentChain chain(config, 3);
  DelayStats s;
  double sum = 0, sum2 = 0;
  uint64_t previous = 0;
  for (int i = 0; i < packets; ++i) {
    const uint64_t t = uint64_t(i) * spacing_ns;
    const Decision d = chain.on_packet(t, 1000);
    if (d.copies == 0) continue;
    const double ms = double(d.deliver_at_ns[0] - t) / kMs;
    s.delays.push_back(ms);
    sum += ms;
    sum2 += ms * ms;
    s.min_ms = std::min(s.min_ms, ms);
    s.max_ms = std::max(s.max_ms, ms);
    if (d.deliver_at_ns[0] < previous) ++s.inversions;
    previous = d.deliver_at_ns[0];
  }
  const double n = double(s.delays.size());
  s.mean_ms = sum / n;
  s.sd_ms = std::sqrt(std::max(0.0, sum2 / n - s.mean_ms * s.mean_ms));
  return s;
}

TEST(ImpairModel, UniformJitterDistribution) {
  ChainConfig config;
  config.delay_ms = 20;
  config.jitter_ms = 5;
  config.allow_reorder = true;
  const DelayStats s = run_delays(config, 100'000);
  EXPECT_NEAR(s.mean_ms, 20, 0.02);
  EXPECT_NEAR(s.sd_ms, 5 / std::sqrt(3.0), 0.02);  // uniform over 10 ms
  EXPECT_GE(s.min_ms, 15);
  EXPECT_LE(s.max_ms, 25);
  // Each 1-ms bin of [15, 25) holds ~10 %.
  std::vector<int> bins(10);
  for (double d : s.delays) ++bins[std::min(9, int(d - 15))];
  for (int b : bins) EXPECT_NEAR(b / double(s.delays.size()), 0.1, 0.003);
  EXPECT_GT(s.inversions, 0u);  // packets 0.1 ms apart with 10 ms of jitter do cross
}

TEST(ImpairModel, NormalJitterDistribution) {
  ChainConfig config;
  config.delay_ms = 30;
  config.jitter_ms = 4;
  config.jitter_distribution = JitterDistribution::kNormal;
  config.allow_reorder = true;
  const DelayStats s = run_delays(config, 100'000);
  EXPECT_NEAR(s.mean_ms, 30, 0.02);
  EXPECT_NEAR(s.sd_ms, 4, 0.05);  // cut at 3 sd: 0.986 sd
  EXPECT_GE(s.min_ms, 30 - 12);
  EXPECT_LE(s.max_ms, 30 + 12);
  // ~68.3 % within one sd.
  const auto within = std::count_if(s.delays.begin(), s.delays.end(),
                                    [](double d) { return std::abs(d - 30) < 4; });
  EXPECT_NEAR(within / double(s.delays.size()), 0.683, 0.005);
}

// Without --reorder, jitter never reorders: delivery times never go back, and a packet is never
// delivered before its own arrival + (delay - jitter).
TEST(ImpairModel, DelayKeepsOrderUnlessReorderIsAllowed) {
  ChainConfig config;
  config.delay_ms = 20;
  config.jitter_ms = 5;
  const DelayStats s = run_delays(config, 100'000);
  EXPECT_EQ(s.inversions, 0u);
  EXPECT_GE(s.min_ms, 15);
  // Packets 0.1 ms apart bunch behind the slowest recent draw: the mean rises towards the max.
  EXPECT_GT(s.mean_ms, 20);
  EXPECT_LE(s.max_ms, 25.0 + 0.001);
  // At 20 ms spacing nothing bunches: the distribution is the uniform one.
  const DelayStats sparse = run_delays(config, 20 * kMs, 100'000);
  EXPECT_EQ(sparse.inversions, 0u);
  EXPECT_NEAR(sparse.mean_ms, 20, 0.05);
}

TEST(ImpairModel, ExplicitReorderingAndDuplication) {
  ChainConfig config;
  config.delay_ms = 10;
  config.reorder_percent = 2;
  config.reorder_gap_ms = 5;
  config.duplicate_percent = 3;
  ImpairmentChain chain(config, 11);
  uint64_t reordered = 0, duplicated = 0, overtaken = 0;
  uint64_t held_until = 0;
  for (int i = 0; i < kPackets; ++i) {
    const uint64_t t = uint64_t(i) * kMs;  // 1 ms apart: a 5-ms hold is overtaken by 4-5 packets
    const Decision d = chain.on_packet(t, 500);
    ASSERT_GE(d.copies, 1);
    if (d.reordered) {
      ++reordered;
      EXPECT_EQ(d.deliver_at_ns[0], t + 15 * kMs);
      held_until = d.deliver_at_ns[0];
    } else if (d.deliver_at_ns[0] < held_until) {
      ++overtaken;
    }
    if (d.fate == Fate::kDuplicated) {
      ++duplicated;
      EXPECT_EQ(d.copies, 2);
    }
  }
  EXPECT_NEAR(100.0 * reordered / kPackets, 2, 0.1);
  EXPECT_NEAR(100.0 * duplicated / kPackets, 3, 0.1);
  // A 5-ms hold at 1-ms spacing is overtaken by the next 4 packets (fewer when holds overlap).
  EXPECT_GT(double(overtaken), 3.5 * double(reordered));
  EXPECT_LE(overtaken, 4 * reordered);
  EXPECT_EQ(chain.counters().duplicated, duplicated);
  EXPECT_EQ(chain.counters().packets_out, kPackets + duplicated);
}

// Offered 2x the cap: delivered throughput is the cap, the rest is tail-dropped and counted, and
// no packet waits longer than the queue takes to drain.
TEST(ImpairModel, RateCapWithTailDrop) {
  ChainConfig config;
  config.rate_kbps = 8000;            // 1,000,000 bytes/s
  config.queue_limit_bytes = 50'000;  // 50 ms at the rate
  ImpairmentChain chain(config, 5);
  const size_t bytes = 1000;
  const uint64_t spacing = 500'000;  // 2000 packets/s of 1000 B: 2 MB/s offered
  uint64_t delivered = 0, last_delivery = 0, max_wait = 0;
  for (int i = 0; i < kPackets; ++i) {
    const uint64_t t = uint64_t(i) * spacing;
    const Decision d = chain.on_packet(t, bytes);
    if (d.copies == 0) {
      EXPECT_EQ(d.fate, Fate::kDropRate);
      continue;
    }
    ++delivered;
    max_wait = std::max(max_wait, d.deliver_at_ns[0] - t);
    last_delivery = d.deliver_at_ns[0];
  }
  const double seconds = double(last_delivery) / 1e9;
  EXPECT_NEAR(double(delivered) * bytes / seconds, 1e6, 1e6 * 0.01);
  EXPECT_NEAR(double(chain.counters().dropped_rate) / kPackets, 0.5, 0.01);
  EXPECT_LE(max_wait, 51 * kMs);
  EXPECT_GE(max_wait, 45 * kMs);
  // Under the cap nothing is dropped and nothing waits beyond one packet's serialisation.
  ChainConfig light = config;
  ImpairmentChain under(light, 5);
  for (int i = 0; i < 100'000; ++i) {
    const uint64_t t = uint64_t(i) * 2 * kMs;  // 0.5 MB/s
    const Decision d = under.on_packet(t, bytes);
    ASSERT_EQ(d.copies, 1);
    ASSERT_LE(d.deliver_at_ns[0] - t, kMs);
  }
  EXPECT_EQ(under.counters().dropped_rate, 0u);
}

// A path whose capacity changes mid-run (--fwd-rate-schedule): offered 2 MB/s, delivered at
// 1 MB/s, then 0.25 MB/s after the cap drops, then everything once the cap is lifted.
TEST(ImpairModel, TheRateCapCanChangeDuringARun) {
  ChainConfig config;
  config.rate_kbps = 8000;
  ImpairmentChain chain(config, 5);
  const size_t bytes = 1000;
  auto deliver = [&](uint64_t from, uint64_t to) {
    uint64_t delivered = 0;
    for (uint64_t t = from; t < to; t += 500'000) delivered += chain.on_packet(t, bytes).copies;
    return delivered;
  };
  const uint64_t kSecond = 1'000'000'000;
  EXPECT_NEAR(double(deliver(0, kSecond)), 1000, 120);  // 1 MB/s (and the queue's 100 ms)
  chain.set_rate(2000);
  EXPECT_EQ(chain.config().queue_limit_bytes, 25'000u);          // 100 ms at the new rate
  EXPECT_NEAR(double(deliver(kSecond, 3 * kSecond)), 500, 130);  // 0.25 MB/s for 2 s
  chain.set_rate(0);
  EXPECT_EQ(deliver(3 * kSecond, 4 * kSecond), 2000u);  // no cap: all of it
  // A chain made without a cap takes one later.
  ImpairmentChain uncapped(ChainConfig{}, 5);
  uncapped.set_rate(800);
  uint64_t delivered = 0;
  for (uint64_t t = 0; t < kSecond; t += 500'000) delivered += uncapped.on_packet(t, bytes).copies;
  EXPECT_NEAR(double(delivered), 100 + 10, 15);  // 0.1 MB/s and 100 ms of queue
}

// The token bucket lets a burst of bucket_bytes through at once, then paces.
TEST(ImpairModel, TokenBucketBurst) {
  ChainConfig config;
  config.rate_kbps = 800;  // 100 bytes/ms
  config.bucket_bytes = 5000;
  config.queue_limit_bytes = 100'000;
  ImpairmentChain chain(config, 5);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(chain.on_packet(0, 1000).deliver_at_ns[0], 0u) << i;
  EXPECT_EQ(chain.on_packet(0, 1000).deliver_at_ns[0], 10 * kMs);
  EXPECT_EQ(chain.on_packet(0, 1000).deliver_at_ns[0], 20 * kMs);
}

TEST(ImpairModel, SameSeedSameFatesAndStagesDoNotShareDraws) {
  ChainConfig config;
  config.loss_percent = 2;
  ASSERT_TRUE(set_gilbert_elliott_from_target(config, 3, 3));
  config.delay_ms = 20;
  config.jitter_ms = 5;
  config.duplicate_percent = 1;
  config.reorder_percent = 1;
  auto run = [](const ChainConfig& c, uint64_t seed) {
    ImpairmentChain chain(c, seed);
    std::vector<std::pair<Fate, uint64_t>> fates;
    for (int i = 0; i < 100'000; ++i) {
      const Decision d = chain.on_packet(uint64_t(i) * kMs, 100 + i % 1000);
      fates.emplace_back(d.fate, d.copies ? d.deliver_at_ns[0] : 0);
    }
    return fates;
  };
  const auto a = run(config, 42);
  EXPECT_EQ(a, run(config, 42));
  EXPECT_NE(a, run(config, 43));
  // Turning on the rate cap (generous) and changing the delay leaves the loss fates alone.
  ChainConfig other = config;
  other.rate_kbps = 1e6;
  other.delay_ms = 50;
  const auto b = run(other, 42);
  for (size_t i = 0; i < a.size(); ++i) {
    const bool a_lost = a[i].first == Fate::kDropRandom || a[i].first == Fate::kDropBurst;
    const bool b_lost = b[i].first == Fate::kDropRandom || b[i].first == Fate::kDropBurst;
    ASSERT_EQ(a_lost, b_lost) << i;
  }
}

}  // namespace
}  // namespace syncd::impair
