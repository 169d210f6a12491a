// H.264 packetize and depacketize of 1080p-sized access units (RFC 6184, FU-A at the relay's
// 1112-byte payload budget), against memcpy of the same bytes, measured in the same run.
//
// 60 KB is a typical 1080p60 P frame at ~20 Mbit/s; 250 KB a key frame (SPS, PPS and 4 IDR
// slices). Each packetizer or depacketizer pass touches every byte once, like memcpy, plus the
// per-packet work (Annex B scan, headers, bookkeeping), so the ratio to memcpy is the overhead.
//
// Run e.g.: rtp_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "rtp/h264_depacketizer.h"
#include "rtp/h264_packetizer.h"
#include "rtp/rtp_packet.h"

namespace {

using namespace syncd::rtp;

constexpr size_t kPFrameBytes = 60 * 1000;
constexpr size_t kKeyFrameBytes = 250 * 1000;

void append_nal(std::vector<uint8_t>& au, std::mt19937& rng, uint8_t header, size_t size) {
  au.insert(au.end(), {0, 0, 0, 1, header});
  for (size_t i = 1; i < size; ++i) {
    uint8_t b = static_cast<uint8_t>(rng());
    const size_t n = au.size();
    // Emulation prevention (H.264 7.4.1): never 00 00 0x with x <= 3 inside a NAL.
    if (au[n - 1] == 0 && au[n - 2] == 0 && b <= 3) b = 3;
    au.push_back(b);
  }
  if (au.back() == 0) au.back() = 0x80;
}

// An access unit of about total bytes: a key frame's parameter sets and 4 slices, or 1 slice.
std::vector<uint8_t> make_access_unit(size_t total) {
  std::mt19937 rng(static_cast<uint32_t>(total));
  std::vector<uint8_t> au;
  au.reserve(total + 64);
  if (total >= kKeyFrameBytes) {
    append_nal(au, rng, 0x67, 12);  // SPS
    append_nal(au, rng, 0x68, 4);   // PPS
    for (int slice = 0; slice < 4; ++slice) append_nal(au, rng, 0x65, (total - 40) / 4);
  } else {
    append_nal(au, rng, 0x41, total - 4);
  }
  return au;
}

struct Fixture {
  std::vector<uint8_t> au;
  std::vector<uint8_t> packets;  // packet i at i * kSlot
  std::vector<size_t> sizes;
  std::vector<RtpPacketView> views;
  std::vector<uint8_t> out;
  static constexpr size_t kSlot = 1200;

  explicit Fixture(size_t total) : au(make_access_unit(total)) {
    H264Packetizer packetizer;
    packetizer.begin(au);
    packets.resize(packetizer.packet_count() * kSlot);
    RtpHeader header = rtp_header(0);
    for (size_t i = 0; packetizer.has_next(); ++i) {
      header.sequence = static_cast<uint16_t>(i);
      sizes.push_back(packetizer.write_next(header, {packets.data() + i * kSlot, kSlot}));
    }
    views.resize(sizes.size());
    for (size_t i = 0; i < sizes.size(); ++i) {
      parse_rtp({packets.data() + i * kSlot, sizes[i]}, views[i]);
    }
    out.resize(au.size());
  }
  static RtpHeader rtp_header(uint16_t sequence) {
    RtpHeader header;
    header.payload_type = 96;
    header.ssrc = 0x5EED;
    header.timestamp = 90000;
    header.sequence = sequence;
    header.has_abs_send_time = true;
    return header;
  }
};

Fixture& fixture(size_t total) {
  static Fixture p_frame(kPFrameBytes);
  static Fixture key_frame(kKeyFrameBytes);
  return total == kPFrameBytes ? p_frame : key_frame;
}

void BM_Memcpy(benchmark::State& state) {
  Fixture& f = fixture(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    std::memcpy(f.out.data(), f.au.data(), f.au.size());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * f.au.size()));
}

void BM_Packetize(benchmark::State& state) {
  Fixture& f = fixture(static_cast<size_t>(state.range(0)));
  H264Packetizer packetizer;
  for (auto _ : state) {
    packetizer.begin(f.au);
    RtpHeader header = Fixture::rtp_header(0);
    for (size_t i = 0; packetizer.has_next(); ++i) {
      header.sequence = static_cast<uint16_t>(i);
      benchmark::DoNotOptimize(
          packetizer.write_next(header, {f.packets.data() + i * Fixture::kSlot, Fixture::kSlot}));
    }
    benchmark::ClobberMemory();
  }
  state.counters["packets"] = static_cast<double>(f.sizes.size());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * f.au.size()));
}

void BM_Depacketize(benchmark::State& state) {
  Fixture& f = fixture(static_cast<size_t>(state.range(0)));
  H264Depacketizer depacketizer;
  for (auto _ : state) {
    depacketizer.begin(f.out);
    for (const auto& view : f.views) depacketizer.push(view);
    benchmark::DoNotOptimize(depacketizer.finish());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * f.au.size()));
}

// The receiver's whole path after SRTP: parse each datagram, then depacketize.
void BM_ParseAndDepacketize(benchmark::State& state) {
  Fixture& f = fixture(static_cast<size_t>(state.range(0)));
  H264Depacketizer depacketizer;
  for (auto _ : state) {
    depacketizer.begin(f.out);
    for (size_t i = 0; i < f.sizes.size(); ++i) {
      RtpPacketView view;
      parse_rtp({f.packets.data() + i * Fixture::kSlot, f.sizes[i]}, view);
      depacketizer.push(view);
    }
    benchmark::DoNotOptimize(depacketizer.finish());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * f.au.size()));
}

BENCHMARK(BM_Memcpy)->Arg(kPFrameBytes)->Arg(kKeyFrameBytes);
BENCHMARK(BM_Packetize)->Arg(kPFrameBytes)->Arg(kKeyFrameBytes);
BENCHMARK(BM_Depacketize)->Arg(kPFrameBytes)->Arg(kKeyFrameBytes);
BENCHMARK(BM_ParseAndDepacketize)->Arg(kPFrameBytes)->Arg(kKeyFrameBytes);

// Prints the usual table, then each benchmark's CPU time as a ratio to memcpy of the same AU
// (the median when repetitions are on, else the single run). CPU time, not wall time: on these
// shared machines wall time includes preemption by other work.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& run : runs) {
      const bool median = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      if (run.run_type == Run::RT_Iteration || median) {
        std::string name = run.run_name.str();
        times_[name] = run.GetAdjustedCPUTime();
        wall_[name] = run.GetAdjustedRealTime();
        if (median) medians_ = true;
        if (median || !medians_) order_.push_back(name);
      }
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf("\nratio to memcpy of the same access unit (CPU time / memcpy CPU time):\n");
    std::vector<std::string> seen;
    for (const auto& name : order_) {
      if (std::find(seen.begin(), seen.end(), name) != seen.end()) continue;
      seen.push_back(name);
      const auto slash = name.find('/');
      const std::string size = name.substr(slash);
      const auto base = times_.find("BM_Memcpy" + size);
      if (base == times_.end() || name.rfind("BM_Memcpy", 0) == 0) continue;
      const double memcpy_wall = wall_["BM_Memcpy" + size];
      std::printf("  %-30s %6.2fx  (CPU %6.1f us vs %5.1f us; wall ratio %5.2fx)\n", name.c_str(),
                  times_[name] / base->second, times_[name] / 1000, base->second / 1000,
                  wall_[name] / memcpy_wall);
    }
  }

 private:
  std::map<std::string, double> times_;
  std::map<std::string, double> wall_;
  std::vector<std::string> order_;
  bool medians_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
