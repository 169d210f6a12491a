// Jitter buffer cost per packet: insert plus release of an in-order 60 fps stream at 2,000
// packets/s (33 packets a frame, 500 us apart), against a plain std::map<sequence, packet>
// doing the same: insert each key, and when a frame's marker comes, walk and erase its packets.
// The ratio of the two is printed at the end; both run in the same process, one after the other.
//
// Run e.g.: jitter_bench --benchmark_min_time=1 --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "jitter/jitter_buffer.h"
#include "jitter/nack_scheduler.h"

namespace {

using namespace syncd::jitter;

constexpr int kPacketsPerFrame = 33;  // 2,000 packets/s at 60 fps
constexpr uint64_t kPacketNs = 500'000;
constexpr uint32_t kTicksPerFrame = 1500;
constexpr int kBatch = 3300;  // packets per timed loop: 100 frames

class CountingSink : public FrameSink {
 public:
  uint64_t frames = 0;
  uint64_t packets = 0;
  void on_frame(const FrameEvent& frame) override {
    ++frames;
    packets += frame.packets.size();
  }
  void on_drop(const DropEvent&) override {}
};

PacketIn packet_at(uint64_t index) {
  PacketIn packet;
  packet.sequence = static_cast<uint16_t>(index);
  const uint64_t frame = index / kPacketsPerFrame;
  packet.rtp_timestamp = static_cast<uint32_t>(frame * kTicksPerFrame);
  packet.marker = index % kPacketsPerFrame == kPacketsPerFrame - 1;
  packet.starts_frame = index % kPacketsPerFrame == 0;
  packet.arrival_ns = 1'000'000'000 + index * kPacketNs;
  packet.handle = static_cast<uint32_t>(index);
  packet.length = 1200;
  return packet;
}

void run_insert_release(benchmark::State& state, ReleaseMode mode) {
  JitterBufferConfig config;
  config.mode = mode;
  JitterBuffer buffer(config);
  CountingSink sink;
  uint64_t index = 0;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i, ++index) {
      const PacketIn packet = packet_at(index);
      benchmark::DoNotOptimize(buffer.insert(packet, packet.arrival_ns, sink));
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kBatch);
  state.counters["released"] = static_cast<double>(sink.packets) / static_cast<double>(index);
}

void BM_JitterBufferPlayout(benchmark::State& state) {
  run_insert_release(state, ReleaseMode::kPlayout);
}

void BM_JitterBufferWhenComplete(benchmark::State& state) {
  run_insert_release(state, ReleaseMode::kWhenComplete);
}

void BM_JitterBufferWithNack(benchmark::State& state) {
  // The whole receive side: buffer, NACK bookkeeping per packet, a NACK collect per frame.
  JitterBuffer buffer;
  NackScheduler nack;
  CountingSink sink;
  uint16_t out[64];
  uint64_t index = 0;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i, ++index) {
      const PacketIn packet = packet_at(index);
      buffer.insert(packet, packet.arrival_ns, sink);
      nack.on_packet(buffer.last_extended_sequence(), packet.arrival_ns);
      if (packet.marker) {
        benchmark::DoNotOptimize(nack.collect(packet.arrival_ns, 40'000'000, buffer, out));
      }
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kBatch);
}

void BM_StdMapInsertErase(benchmark::State& state) {
  std::map<uint64_t, PacketRef> held;
  std::vector<PacketRef> frame;
  frame.reserve(kPacketsPerFrame);
  uint64_t index = 0;
  uint64_t released = 0;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i, ++index) {
      const PacketIn packet = packet_at(index);
      held.emplace(index, PacketRef{index, packet.handle, packet.length});
      if (packet.marker) {
        frame.clear();
        for (auto it = held.begin(); it != held.end();) {
          frame.push_back(it->second);
          it = held.erase(it);
        }
        released += frame.size();
        benchmark::DoNotOptimize(frame.data());
      }
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kBatch);
  benchmark::DoNotOptimize(released);
}

BENCHMARK(BM_StdMapInsertErase);
BENCHMARK(BM_JitterBufferPlayout);
BENCHMARK(BM_JitterBufferWhenComplete);
BENCHMARK(BM_JitterBufferWithNack);

// Remembers the mean time per packet of each run, to print the ratios at the end.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> ns_per_packet;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.run_type != Run::RT_Iteration || run.iterations == 0) continue;
      const double ns =
          run.GetAdjustedCPUTime() * 1e9 / benchmark::GetTimeUnitMultiplier(run.time_unit) / kBatch;
      auto& slot = ns_per_packet[run.benchmark_name()];
      slot = slot == 0 ? ns : std::min(slot, ns);  // best of the repetitions
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  const double baseline = reporter.ns_per_packet["BM_StdMapInsertErase"];
  if (baseline > 0) {
    std::printf("\nCPU per packet (best repetition), ratio to std::map insert+erase:\n");
    for (const auto& [name, ns] : reporter.ns_per_packet) {
      std::printf("  %-45s %8.1f ns  %5.2fx\n", name.c_str(), ns, ns / baseline);
    }
  }
  benchmark::Shutdown();
  return 0;
}
