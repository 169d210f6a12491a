// Reed-Solomon FEC (src/fec) on a 1080p frame's worth of packets: 200 RTP packets of 1100 bytes,
// k = 20, m = 4 (10 blocks), against memcpy of the same 220,000 bytes packet by packet.
//   - encode: 200 packets into the encoder (each copied into its block) and 40 repair payloads
//   - decode, 4 losses per block: 160 sources + 40 repairs in, 40 packets rebuilt
//   - decode, no loss: 200 sources + 40 repairs in (the receiver's cost when nothing is lost)
// After the runs it prints each case's time per frame as a ratio to memcpy's in the same run.
//
// Run: fec_bench --benchmark_min_time=1 --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "fec/decoder.h"
#include "fec/encoder.h"
#include "fec/payload.h"
#include "mean_times_reporter.h"

namespace {

using namespace syncd::fec;

constexpr int kPackets = 200;
constexpr size_t kPacketBytes = 1100;
constexpr uint8_t kK = 20;
constexpr uint8_t kM = 4;
constexpr uint32_t kSsrc = 0x12345678;
constexpr int kBlocks = kPackets / kK;

std::vector<std::vector<uint8_t>> make_frame() {
  std::mt19937 rng(1);
  std::vector<std::vector<uint8_t>> packets(kPackets, std::vector<uint8_t>(kPacketBytes));
  for (int i = 0; i < kPackets; ++i) {
    auto& p = packets[i];
    for (auto& b : p) b = static_cast<uint8_t>(rng());
    p[0] = 0x80;
    p[1] = static_cast<uint8_t>(96 | (i == kPackets - 1 ? 0x80 : 0));
    store_be16(&p[2], static_cast<uint16_t>(i));
    store_be32(&p[8], kSsrc);
  }
  return packets;
}

EncoderConfig encoder_config() {
  EncoderConfig config;
  config.media_ssrc = kSsrc;
  config.initial_shape = {kK, kM};
  return config;
}

struct Frame {
  std::vector<std::vector<uint8_t>> sources = make_frame();
  std::vector<std::vector<uint8_t>> repairs;  // kBlocks * kM, block-major
  size_t repair_bytes = 0;
  Frame() {
    Encoder encoder(encoder_config());
    std::vector<uint8_t> buffers(size_t{kM} * kMaxRepairPayloadBytes);
    uint8_t* out[kM];
    for (int r = 0; r < kM; ++r) out[r] = buffers.data() + r * kMaxRepairPayloadBytes;
    for (int i = 0; i < kPackets; ++i) {
      if (encoder.add_source(static_cast<uint16_t>(i), sources[i]) == AddStatus::kBlockReady) {
        repair_bytes = encoder.ready_payload_bytes();
        encoder.emit_repairs(out);
        for (int r = 0; r < kM; ++r) repairs.emplace_back(out[r], out[r] + repair_bytes);
      }
    }
  }
};

const Frame& frame() {
  static const Frame f;
  return f;
}

void BM_Memcpy(benchmark::State& state) {
  const auto& f = frame();
  std::vector<uint8_t> destination(size_t{kPackets} * kMaxPacketBytes);
  for (auto _ : state) {
    for (int i = 0; i < kPackets; ++i) {
      std::memcpy(destination.data() + static_cast<size_t>(i) * kMaxPacketBytes,
                  f.sources[i].data(), kPacketBytes);
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kPackets * kPacketBytes);
}

void BM_Encode(benchmark::State& state) {
  const auto& f = frame();
  Encoder encoder(encoder_config());
  std::vector<uint8_t> buffers(size_t{kM} * kMaxRepairPayloadBytes);
  uint8_t* out[kM];
  for (int r = 0; r < kM; ++r) out[r] = buffers.data() + r * kMaxRepairPayloadBytes;
  uint16_t sequence = 0;
  for (auto _ : state) {
    for (int i = 0; i < kPackets; ++i) {
      if (encoder.add_source(sequence++, f.sources[i]) == AddStatus::kBlockReady) {
        encoder.emit_repairs(out);
      }
    }
    benchmark::ClobberMemory();
  }
  if (encoder.counters().repairs_emitted !=
      static_cast<uint64_t>(state.iterations()) * kBlocks * kM) {
    state.SkipWithError("wrong repair count");
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kPackets * kPacketBytes);
}

struct CountingSink : RecoverySink {
  uint64_t recovered = 0;
  void on_recovered(uint16_t, std::span<const uint8_t> packet) override {
    benchmark::DoNotOptimize(packet.data());
    ++recovered;
  }
};

void run_decode(benchmark::State& state, bool with_losses) {
  const auto& f = frame();
  DecoderConfig config;
  config.media_ssrc = kSsrc;
  Decoder decoder(config);
  CountingSink sink;
  for (auto _ : state) {
    decoder.reset(kSsrc);
    for (int b = 0; b < kBlocks; ++b) {
      for (int j = 0; j < kK; ++j) {
        // m losses per block, spread: indices 2, 7, 12, 17.
        if (with_losses && j % 5 == 2) continue;
        const int i = b * kK + j;
        decoder.add_source(static_cast<uint16_t>(i), f.sources[i], 0, sink);
      }
      for (int r = 0; r < kM; ++r) decoder.add_repair(f.repairs[b * kM + r], 0, sink);
    }
  }
  const uint64_t expected = with_losses ? uint64_t{kBlocks} * kM : 0;
  if (sink.recovered != static_cast<uint64_t>(state.iterations()) * expected)
    state.SkipWithError("wrong recovery");
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kPackets * kPacketBytes);
}

void BM_DecodeMLosses(benchmark::State& state) {
  run_decode(state, true);
}
void BM_DecodeNoLoss(benchmark::State& state) {
  run_decode(state, false);
}

BENCHMARK(BM_Memcpy)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Encode)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodeMLosses)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodeNoLoss)->Unit(benchmark::kMicrosecond);

// Prints the usual table, then each benchmark's mean real time per frame over memcpy's.
class RatioReporter : public syncd::bench::MeanTimesReporter {
 public:
  void Finalize() override {
    ConsoleReporter::Finalize();
    // CPU time too: on a shared machine the wall time also counts the other processes' turns.
    const Times base = at("BM_Memcpy");
    std::printf("\nper frame (%d x %zu B, k=%d m=%d), mean of runs, vs memcpy of the same bytes:\n",
                kPackets, kPacketBytes, kK, kM);
    std::printf("  %-18s %10s %8s %10s %8s\n", "case", "real us", "ratio", "cpu us", "ratio");
    for (const auto& [name, t] : times_) {
      if (t.runs == 0 || base.runs == 0) continue;
      std::printf("  %-18s %10.1f %7.2fx %10.1f %7.2fx\n", name.c_str(), t.mean_real(),
                  t.mean_real() / base.mean_real(), t.mean_cpu(), t.mean_cpu() / base.mean_cpu());
    }
  }

 protected:
  std::string key(const Run& run) const override { return run.run_name.function_name; }
};

}  // namespace

int main(int argc, char** argv) {
  RatioReporter reporter;
  return syncd::bench::run_benchmarks(argc, argv, reporter);
}
