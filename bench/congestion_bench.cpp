// Per-packet cost of the receiver's delay-based estimate and of the sender's pacer, each next to
// a baseline measured in the same run: storing the same packet information in a ring (what the
// relay must do for every packet anyway), and a ring push plus pop for the pacer's queue.
//
// The estimator replays a 64 s trace (the abs-send-time period, so the replay loops seamlessly):
// 16 Mbit/s of 60 fps frames in 1,236-byte packets, paced at 2.5x, through a 20 Mbit/s
// bottleneck with 20 ms +/- 5 ms of delay. The pacer takes one packet in and one out per
// iteration at its pacing rate.
//
// Run: build/rel/bench/congestion_bench --benchmark_repetitions=5
//        --benchmark_report_aggregates_only=true
// The last lines print each ratio from the medians of CPU time (or the single runs).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "congestion/abs_send_time.h"
#include "congestion/delay_based_estimator.h"
#include "congestion/loss_based_estimator.h"
#include "congestion/pacer.h"

namespace {

using namespace syncd::congestion;

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kSecond = 1'000'000'000;

struct TracePacket {
  uint64_t arrival_ns;
  uint32_t abs_send_time;
  uint32_t size_bytes;
};

// 64 s of packets, arrivals relative to the trace's start.
const std::vector<TracePacket>& trace() {
  static const std::vector<TracePacket> packets = [] {
    std::vector<TracePacket> out;
    std::mt19937_64 rng(16);
    std::uniform_real_distribution<double> unit(0, 1);
    constexpr double kSourceBps = 16e6, kPacingBps = 40e6, kLinkBps = 20e6;
    constexpr uint32_t kPacket = 1236;
    double pacer_free = 0, link_free = 0, last_arrival = 0;
    for (uint64_t frame = 0; frame * kSecond / 60 < 64 * kSecond; ++frame) {
      const double frame_start = static_cast<double>(frame * kSecond / 60);
      const double bytes = kSourceBps / 8 / 60 * (0.8 + 0.4 * unit(rng));
      for (double left = bytes; left > 0; left -= kPacket) {
        const double send = std::max(pacer_free, frame_start);
        pacer_free = send + kPacket * 8e9 / kPacingBps;
        if (send >= 64e9) break;
        const double depart = std::max(link_free, send) + kPacket * 8e9 / kLinkBps;
        link_free = depart;
        const double arrival = std::max(last_arrival, depart + 20e6 + (unit(rng) * 2 - 1) * 5e6);
        last_arrival = arrival;
        out.push_back(TracePacket{static_cast<uint64_t>(arrival),
                                  abs_send_time_from_ns(static_cast<uint64_t>(send)), kPacket});
      }
    }
    return out;
  }();
  return packets;
}

// The baseline: what keeping each packet's (arrival, send time, size) in a ring costs.
void BM_RingStore(benchmark::State& state) {
  const std::vector<TracePacket>& packets = trace();
  std::vector<TracePacket> ring(4096);
  size_t i = 0, slot = 0;
  uint64_t lap = 0;
  for (auto _ : state) {
    TracePacket p = packets[i];
    p.arrival_ns += lap;
    ring[slot] = p;
    slot = (slot + 1) & 4095;
    benchmark::DoNotOptimize(ring.data());
    if (++i == packets.size()) {
      i = 0;
      lap += 64 * kSecond;
    }
  }
  benchmark::ClobberMemory();
}

void run_estimator(benchmark::State& state, bool with_remb) {
  const std::vector<TracePacket>& packets = trace();
  DelayEstimatorConfig config;
  config.rate.start_bps = 16'000'000;
  DelayBasedEstimator estimator(config);
  size_t i = 0;
  uint64_t lap = kSecond;
  uint64_t rembs = 0;
  for (auto _ : state) {
    const TracePacket& p = packets[i];
    const uint64_t arrival = p.arrival_ns + lap;
    benchmark::DoNotOptimize(estimator.on_packet(arrival, p.abs_send_time, p.size_bytes));
    if (with_remb && estimator.take_remb(arrival)) ++rembs;
    if (++i == packets.size()) {
      i = 0;
      lap += 64 * kSecond;
    }
  }
  benchmark::DoNotOptimize(rembs);
  state.counters["estimate_Mbps"] = static_cast<double>(estimator.estimate_bps()) / 1e6;
  if (estimator.counters().resets != 0) state.SkipWithError("the replay reset the estimator");
}

void BM_DelayEstimator(benchmark::State& state) {
  run_estimator(state, false);
}
void BM_DelayEstimatorAndRemb(benchmark::State& state) {
  run_estimator(state, true);
}

// The pacer's baseline: a packet record pushed into a ring and popped again.
void BM_RingPushPop(benchmark::State& state) {
  struct Entry {
    uint64_t id, enqueued_ns;
    uint32_t size;
  };
  std::vector<Entry> ring(4096);
  size_t head = 0, count = 0;
  uint64_t id = 0, t = 0, bytes = 0;
  for (auto _ : state) {
    ring[(head + count) & 4095] = Entry{id++, t, 1236};
    ++count;
    benchmark::DoNotOptimize(ring.data());
    const Entry& e = ring[head];
    bytes += e.size;
    head = (head + 1) & 4095;
    --count;
    t += 400'000;
  }
  benchmark::DoNotOptimize(bytes);
}

void BM_PacerEnqueueAndPop(benchmark::State& state) {
  PacerConfig config;
  config.initial_target_bps = 16'000'000;  // paced at 40 Mbit/s: 1,236 bytes per 247.2 us
  Pacer pacer(config);
  PacedPacket out[4];
  uint64_t id = 0, t = kSecond, sent = 0;
  for (auto _ : state) {
    pacer.enqueue(t, id++, 1236);
    sent += pacer.pop_due(t, out);
    t += 247'200;
  }
  benchmark::DoNotOptimize(sent);
  if (pacer.counters().dropped_expired != 0) state.SkipWithError("the pacer dropped packets");
}

void BM_SendRateFeedback(benchmark::State& state) {
  SendRateController controller;
  uint64_t t = 0;
  for (auto _ : state) {
    t += 100 * kMs;
    controller.on_remb(t, 12'000'000 + (t / kMs) % 1000);
    benchmark::DoNotOptimize(controller.on_receiver_report(t, 2, 40 * kMs));
  }
  benchmark::DoNotOptimize(controller.target_bps());
}

BENCHMARK(BM_RingStore);
BENCHMARK(BM_DelayEstimator);
BENCHMARK(BM_DelayEstimatorAndRemb);
BENCHMARK(BM_RingPushPop);
BENCHMARK(BM_PacerEnqueueAndPop);
BENCHMARK(BM_SendRateFeedback);

// Keeps each benchmark's per-iteration CPU time (the median when repeated) to print the ratios:
// CPU time, because the machine is shared and wall time then counts other processes' slices.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      const std::string name = run.benchmark_name();
      const std::string suffix = "_median";
      const bool median = name.size() > suffix.size() &&
                          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
      if (run.run_type == Run::RT_Aggregate && !median) continue;
      const std::string base = median ? name.substr(0, name.size() - suffix.size()) : name;
      if (!median && medians_.count(base)) continue;
      if (median) medians_[base] = true;
      cpu_ns_[base] = run.GetAdjustedCPUTime();  // per iteration = per packet
    }
  }
  void print_ratio(const char* what, const char* name, const char* baseline) const {
    const auto a = cpu_ns_.find(name), b = cpu_ns_.find(baseline);
    if (a == cpu_ns_.end() || b == cpu_ns_.end() || b->second <= 0) return;
    std::printf("%-36s %6.1f ns/packet (CPU) vs %-15s %5.2f ns: %5.1fx\n", what, a->second,
                baseline, b->second, a->second / b->second);
  }
  void print_share(const char* what, const char* name, double packets_per_second) const {
    const auto a = cpu_ns_.find(name);
    if (a == cpu_ns_.end()) return;
    std::printf("%-36s at %.0f packets/s (20 Mbit/s of 1,236-byte packets): %.4f%% of a core\n",
                what, packets_per_second, a->second * packets_per_second / 1e9 * 100);
  }

 private:
  std::map<std::string, double> cpu_ns_;
  std::map<std::string, bool> medians_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf("\n");
  reporter.print_ratio("delay-based estimate", "BM_DelayEstimator", "BM_RingStore");
  reporter.print_ratio("delay-based estimate + REMB check", "BM_DelayEstimatorAndRemb",
                       "BM_RingStore");
  reporter.print_ratio("pacer enqueue + pop_due", "BM_PacerEnqueueAndPop", "BM_RingPushPop");
  constexpr double kPacketsPerSecond = 20e6 / 8 / 1236;
  reporter.print_share("delay-based estimate + REMB check", "BM_DelayEstimatorAndRemb",
                       kPacketsPerSecond);
  reporter.print_share("pacer enqueue + pop_due", "BM_PacerEnqueueAndPop", kPacketsPerSecond);
  benchmark::Shutdown();
  return 0;
}
