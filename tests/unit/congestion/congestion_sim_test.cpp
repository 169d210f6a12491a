// The whole loop on a simulated bottleneck (congestion_link_sim.h): receiver estimate, REMB and
// RR feedback, the sender's target, the pacer. Each test prints its figures (docs/wan.md,
// "Bandwidth estimate and pacing" quotes them); CONGESTION_SIM_CSV=<path> writes the cap-drop
// run's samples for tools/congestion_plot.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "congestion_link_sim.h"

namespace syncd::congestion::sim {
namespace {

struct WindowStats {
  double mean_target_bps = 0;
  double min_target_bps = 0;
  double mean_link_bps = 0;  // into the bottleneck, IP headers included
  double queue_p50_ms = 0;   // of the per-100-ms maxima of the bottleneck queue delay
  double queue_p95_ms = 0;
  double queue_max_ms = 0;
  double loss_binds = 0;  // fraction of samples where the loss-based estimate set the target
};

WindowStats stats(const LinkSimResult& r, double from_s, double to_s) {
  WindowStats w;
  std::vector<double> queue;
  int n = 0;
  w.min_target_bps = 1e18;
  for (const Sample& s : r.samples) {
    if (s.t_s < from_s || s.t_s >= to_s) continue;
    ++n;
    w.mean_target_bps += s.target_bps;
    w.mean_link_bps += s.link_bps;
    w.min_target_bps = std::min(w.min_target_bps, s.target_bps);
    if (s.loss_based_bps < s.remb_bps) w.loss_binds += 1;
    queue.push_back(s.queue_delay_ms);
  }
  if (n == 0) return w;
  w.mean_target_bps /= n;
  w.mean_link_bps /= n;
  w.loss_binds /= n;
  std::sort(queue.begin(), queue.end());
  w.queue_p50_ms = queue[queue.size() / 2];
  w.queue_p95_ms = queue[queue.size() * 95 / 100];
  w.queue_max_ms = queue.back();
  return w;
}

// Seconds from from_s until the target first reaches at least (or at most) bps; -1 if never.
double time_to_reach(const LinkSimResult& r, double from_s, double bps) {
  for (const Sample& s : r.samples) {
    if (s.t_s >= from_s && s.target_bps >= bps) return s.t_s - from_s;
  }
  return -1;
}
double time_to_fall(const LinkSimResult& r, double from_s, double bps) {
  for (const Sample& s : r.samples) {
    if (s.t_s >= from_s && s.target_bps <= bps) return s.t_s - from_s;
  }
  return -1;
}

void print(const char* name, const WindowStats& w, double capacity_bps) {
  std::printf(
      "[figures] %s: target mean %.2f (min %.2f) Mbit/s, link %.1f%% of capacity, queue delay "
      "p50 %.1f p95 %.1f max %.1f ms, loss-based binding %.1f%% of the time\n",
      name, w.mean_target_bps / 1e6, w.min_target_bps / 1e6, 100 * w.mean_link_bps / capacity_bps,
      w.queue_p50_ms, w.queue_p95_ms, w.queue_max_ms, 100 * w.loss_binds);
}

constexpr uint64_t kSeeds[] = {1, 2, 3};

TEST(CongestionSim, ConvergesUnderA10MbitCapFromBelowAndAbove) {
  for (uint64_t seed : kSeeds) {
    for (uint64_t start : {4'000'000ull, 8'000'000ull, 20'000'000ull}) {
      LinkSimConfig config;
      config.seed = seed;
      config.duration_ns = 30 * kSecond;
      config.capacity = {{0, 10'000'000}};
      config.start_bps = start;
      const LinkSimResult r = run_link_sim(config);
      // Converged: the target first within [80%, 100%] of the capacity.
      double converged = -1;
      for (const Sample& s : r.samples) {
        if (s.target_bps >= 8e6 && s.target_bps <= 10e6) {
          converged = s.t_s;
          break;
        }
      }
      const WindowStats w = stats(r, 5, 30);
      std::printf("[figures] 10 Mbit/s cap, start %.0f Mbit/s, seed %d: converged after %.1f s\n",
                  start / 1e6, static_cast<int>(seed), converged);
      print("  steady state 5-30 s", w, 10e6);
      EXPECT_GE(converged, 0);
      EXPECT_LE(converged, 5.0);
      // Holds near the capacity with a short queue: the pacer's per-frame burst (2.5x) alone
      // makes ~10 ms at 10 Mbit/s.
      EXPECT_GE(w.mean_target_bps, 0.78 * 10e6);
      EXPECT_LE(w.mean_target_bps, 10e6);
      EXPECT_GE(w.mean_link_bps, 0.82 * 10e6);
      EXPECT_GE(w.min_target_bps, 0.65 * 10e6);
      EXPECT_LE(w.queue_p50_ms, 20.0);
      EXPECT_LE(w.queue_p95_ms, 40.0);
      EXPECT_EQ(r.pacer.dropped_expired, 0u);
    }
  }
}

TEST(CongestionSim, CapDropsFrom20To4AndReturns) {
  for (uint64_t seed : kSeeds) {
    LinkSimConfig config;
    config.seed = seed;
    config.duration_ns = 80 * kSecond;
    config.capacity = {{0, 20'000'000}, {20 * kSecond, 4'000'000}, {40 * kSecond, 20'000'000}};
    const LinkSimResult r = run_link_sim(config);
    if (seed == 1) {
      if (const char* path = std::getenv("CONGESTION_SIM_CSV")) {
        EXPECT_TRUE(write_samples_csv(path, r.samples));
      }
    }
    const double fall = time_to_fall(r, 20, 4e6);
    const double recover = time_to_reach(r, 40, 0.9 * 20e6);
    const WindowStats before = stats(r, 10, 20);
    const WindowStats capped = stats(r, 25, 40);
    const WindowStats after = stats(r, 65, 80);
    std::printf(
        "[figures] cap 20 -> 4 -> 20 Mbit/s, seed %d: target <= 4 Mbit/s %.1f s after the drop; "
        "90%% of 20 Mbit/s %.1f s after the return; %llu packets dropped at the bottleneck\n",
        static_cast<int>(seed), fall, recover, static_cast<unsigned long long>(r.link_drops_queue));
    print("  20 Mbit/s, 10-20 s", before, 20e6);
    print("  4 Mbit/s, 25-40 s", capped, 4e6);
    print("  20 Mbit/s, 65-80 s", after, 20e6);
    EXPECT_GE(fall, 0);
    EXPECT_LE(fall, 2.0);
    EXPECT_GE(recover, 0);
    EXPECT_LE(recover, 20.0);  // measured 8-13 s; GCC's 1.08 would take ~25 s
    EXPECT_GE(capped.mean_target_bps, 0.75 * 4e6);
    EXPECT_LE(capped.queue_p95_ms, 50.0);
    EXPECT_GE(before.mean_target_bps, 0.75 * 20e6);
    EXPECT_GE(after.mean_target_bps, 0.75 * 20e6);
    EXPECT_LE(after.queue_p95_ms, 40.0);
  }
}

// The qualification's shaper (tools/qualify, relay-cap-shaper): 30 Mbit/s wanted, a 10 Mbit/s cap
// with a 100-ms queue from 15 s to 45 s, then a fast path again.
LinkSimConfig shaper_cap(uint64_t seed, bool probes) {
  LinkSimConfig config;
  config.seed = seed;
  config.duration_ns = 60 * kSecond;
  config.capacity = {{0, 100'000'000}, {15 * kSecond, 10'000'000}, {45 * kSecond, 100'000'000}};
  config.queue_limit_bytes = 125'000;  // 100 ms at 10 Mbit/s
  config.start_bps = 30'000'000;
  config.max_bps = 30'000'000;
  config.max_source_bps = 30'000'000;
  config.delay_probes = probes;
  return config;
}

TEST(CongestionSim, ProbesBringFullRateBackWithin5sOfAShapersCap) {
  for (uint64_t seed : kSeeds) {
    const LinkSimResult plain = run_link_sim(shaper_cap(seed, false));
    const LinkSimResult r = run_link_sim(shaper_cap(seed, true));
    const double back_plain = time_to_reach(plain, 45, 0.9 * 30e6);
    const double back = time_to_reach(r, 45, 0.9 * 30e6);
    const double under = time_to_fall(r, 15, 10e6);
    const WindowStats capped = stats(r, 17, 45);
    const WindowStats capped_plain = stats(plain, 17, 45);
    double over_cap = 0;
    int n = 0;
    for (const Sample& s : r.samples) {
      if (s.t_s < 15 + under || s.t_s >= 45) continue;
      ++n;
      if (s.target_bps > 10e6) over_cap += 1;
    }
    std::printf(
        "[figures] shaper 30 -> 10 (100-ms queue) -> fast, seed %d: 90%% of 30 Mbit/s %.1f s "
        "after the cap's end (%.1f without probes); under the cap %.1f s after the drop, over it "
        "in %.1f%% of the samples after; %llu probes, %llu raised the estimate\n",
        static_cast<int>(seed), back, back_plain, under, 100 * over_cap / std::max(n, 1),
        static_cast<unsigned long long>(r.sender.delay_probes),
        static_cast<unsigned long long>(r.receiver.probes_raised));
    print("  with probes, 17-45 s", capped, 10e6);
    print("  without, 17-45 s", capped_plain, 10e6);
    EXPECT_GE(back, 0);
    EXPECT_LE(back, 5.0);
    EXPECT_GE(under, 0);
    EXPECT_LE(under, 2.0);
    EXPECT_LE(over_cap / std::max(n, 1), 0.05);
    EXPECT_LE(capped.queue_p95_ms, 60.0);
  }
}

TEST(CongestionSim, OnePercentRandomLossDoesNotPullTheRateDown) {
  for (uint64_t seed : kSeeds) {
    LinkSimConfig config;
    config.seed = seed;
    config.duration_ns = 60 * kSecond;
    config.capacity = {{0, 10'000'000}};
    const WindowStats clean = stats(run_link_sim(config), 5, 60);
    config.random_loss = 0.01;
    const LinkSimResult r = run_link_sim(config);
    const WindowStats lossy = stats(r, 5, 60);
    print("10 Mbit/s, no loss, 5-60 s", clean, 10e6);
    print("10 Mbit/s, 1% random loss, 5-60 s", lossy, 10e6);
    EXPECT_GT(r.link_drops_random, 0u);
    EXPECT_EQ(r.sender.loss_decreases, 0u);
    EXPECT_EQ(lossy.loss_binds, 0.0);
    EXPECT_GE(lossy.mean_target_bps, 0.95 * clean.mean_target_bps);
    // On the wire (IP, UDP, RTP headers and the tag included) the link stays 88-89% busy (90-91%
    // without loss), with the delay-based sawtooth (beta 0.85) as the only limit.
    EXPECT_GE(lossy.mean_link_bps, 0.85 * 10e6);
  }
}

TEST(CongestionSim, FivePercentBurstLossHolds) {
  LinkSimConfig config;
  config.duration_ns = 60 * kSecond;
  config.capacity = {{0, 10'000'000}};
  config.burst_loss = 0.05;
  config.mean_burst_packets = 4;
  const LinkSimResult r = run_link_sim(config);
  const WindowStats w = stats(r, 5, 60);
  print("10 Mbit/s, 5% burst loss (mean burst 4 packets), 5-60 s", w, 10e6);
  std::printf("[figures]   loss-based: %llu decreases, %llu holds, %llu increases\n",
              static_cast<unsigned long long>(r.sender.loss_decreases),
              static_cast<unsigned long long>(r.sender.loss_holds),
              static_cast<unsigned long long>(r.sender.loss_increases));
  // RR intervals with a burst over 10% cut the rate now and then; it does not collapse.
  EXPECT_GE(w.mean_target_bps, 0.6 * 10e6);
  EXPECT_GE(w.min_target_bps, 0.3 * 10e6);
}

TEST(CongestionSim, AbsSendTimeWrapChangesNothing) {
  // The sender's clock starts 60 s in: abs-send-time wraps 4 s into the run and again at 68 s.
  // 60 s is a whole number of 2^-18 s units, so the unwrapped timeline is the same and so must
  // every decision be.
  LinkSimConfig config;
  config.duration_ns = 80 * kSecond;
  config.capacity = {{0, 20'000'000}, {20 * kSecond, 4'000'000}, {40 * kSecond, 20'000'000}};
  const LinkSimResult plain = run_link_sim(config);
  config.abs_send_time_offset_ns = 60 * kSecond;
  const LinkSimResult wrapped = run_link_sim(config);
  ASSERT_EQ(plain.samples.size(), wrapped.samples.size());
  for (size_t i = 0; i < plain.samples.size(); ++i) {
    ASSERT_EQ(plain.samples[i].target_bps, wrapped.samples[i].target_bps) << i;
  }
  EXPECT_EQ(wrapped.receiver.resets, 0u);
  EXPECT_EQ(wrapped.receiver.overuse_signals, plain.receiver.overuse_signals);
}

TEST(CongestionSim, PacerQueueBoundsHoldWhenTheSourceIgnoresTheTarget) {
  // A source that does not follow the target (part 1: the relay cannot change the encoder's rate)
  // at 12 Mbit/s into a 4 Mbit/s cap: the pacer queue grows to its time bound and drops by
  // reason instead of adding delay without end.
  LinkSimConfig config;
  config.duration_ns = 20 * kSecond;
  config.capacity = {{0, 4'000'000}};
  config.max_source_bps = 12'000'000;
  config.start_bps = 12'000'000;
  config.min_bps = 12'000'000;  // the target never falls below the source rate in the sender
  config.max_bps = 12'000'000;
  config.pacer.max_queue_delay_ns = 100 * kMs;
  const LinkSimResult r = run_link_sim(config);
  // The pacer sends at 2.5 x 12 Mbit/s, faster than the source: it never holds packets long;
  // the bottleneck drops instead. Now pace at the real capacity through a low target.
  EXPECT_EQ(r.pacer.dropped_expired, 0u);
  EXPECT_GT(r.link_drops_queue, 0u);

  config.min_bps = 300'000;
  config.max_bps = 25'000'000;
  config.start_bps = 8'000'000;
  config.pacer.pacing_factor = 1.0;
  const LinkSimResult paced = run_link_sim(config);
  double worst_pacer_delay_ms = 0;
  for (const Sample& s : paced.samples) {
    worst_pacer_delay_ms = std::max(worst_pacer_delay_ms, s.pacer_delay_ms);
  }
  std::printf(
      "[figures] source at 12 Mbit/s into a 4 Mbit/s cap, pacer at 1.0 x target: "
      "%llu packets dropped in the pacer (older than 100 ms), worst wait %.1f ms\n",
      static_cast<unsigned long long>(paced.pacer.dropped_expired), worst_pacer_delay_ms);
  EXPECT_GT(paced.pacer.dropped_expired, 0u);
  EXPECT_LE(worst_pacer_delay_ms, 100.0 + 0.25);  // one timer step of slack
}

}  // namespace
}  // namespace syncd::congestion::sim
