// Opus multistream (src/audio_codec) on the relay's 32-channel capture, 20 ms of audio per
// iteration (two 10 ms frames, or one 20 ms frame), in the relay's two groups of 16 channels:
//   - Encode/<application>/<complexity>/<frame ms>: both groups' encoders
//   - Decode/<application>/<frame ms>: both groups' decoders, into the full-width frame
//   - Conceal: PLC for both groups (a loss costs this instead of a decode)
// Baselines in the same run, on the same 20 ms of samples: memcpy, and float -> int16 (what any
// consumer of the samples pays at least). After the runs it prints CPU per 20 ms of audio, as a
// share of real time (20 ms) and as a ratio to the int16 conversion.
//
// Signal: a different sine per channel plus white noise 30 dB below (pure sines are unusually
// cheap for the encoder's analysis).
//
// Run: audio_codec_bench --benchmark_min_time=1 --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "audio_codec/channel_groups.h"
#include "audio_codec/opus_decoder.h"
#include "audio_codec/opus_encoder.h"
#include "mean_times_reporter.h"

namespace {

using namespace syncd::audio_codec;

constexpr uint32_t kChannels = 32;
constexpr size_t kFrames = 960;          // 20 ms at 48 kHz
constexpr size_t kSignalFrames = 48000;  // 1 s of signal, cycled

const std::vector<float>& signal() {
  static const std::vector<float> s = [] {
    std::vector<float> v(kSignalFrames * kChannels);
    std::mt19937 rng(3);
    std::normal_distribution<float> noise(0.0f, 0.006f);
    for (size_t n = 0; n < kSignalFrames; ++n)
      for (uint32_t c = 0; c < kChannels; ++c)
        v[n * kChannels + c] =
            float(0.2 * std::sin(2 * M_PI * (300.0 + 130.0 * c) * double(n) / 48000.0)) +
            noise(rng);
    return v;
  }();
  return s;
}

GroupPlan relay_plan(uint32_t frame_ms) {
  return plan_groups(kChannels, channels_per_group(32000, frame_ms));
}

EncoderConfig config_for(int64_t application, int64_t complexity, int64_t frame_ms) {
  EncoderConfig c;
  c.input_channels = kChannels;
  c.application = application == 0 ? Application::kAudio : Application::kRestrictedLowDelay;
  c.complexity = int(complexity);
  c.frame_ms = uint32_t(frame_ms);
  return c;
}

void BM_Memcpy(benchmark::State& state) {
  const auto& s = signal();
  std::vector<float> out(kFrames * kChannels);
  size_t pos = 0;
  for (auto _ : state) {
    std::memcpy(out.data(), s.data() + pos * kChannels, out.size() * sizeof(float));
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
    pos = (pos + kFrames) % (kSignalFrames - kFrames);
  }
}
BENCHMARK(BM_Memcpy)->Unit(benchmark::kMicrosecond);

void BM_ToInt16(benchmark::State& state) {
  const auto& s = signal();
  std::vector<int16_t> out(kFrames * kChannels);
  size_t pos = 0;
  for (auto _ : state) {
    const float* in = s.data() + pos * kChannels;
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = int16_t(std::lrintf(std::fmin(std::fmax(in[i], -1.0f), 1.0f) * 32767.0f));
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
    pos = (pos + kFrames) % (kSignalFrames - kFrames);
  }
}
BENCHMARK(BM_ToInt16)->Unit(benchmark::kMicrosecond);

void BM_Encode(benchmark::State& state) {
  const auto frame_ms = state.range(2);
  const GroupPlan plan = relay_plan(uint32_t(frame_ms));
  std::vector<OpusMultistreamEncoder> encoders(plan.count);
  for (size_t g = 0; g < plan.count; ++g) {
    EncoderConfig c = config_for(state.range(0), state.range(1), frame_ms);
    c.group = plan.groups[g];
    if (encoders[g].open(c) != EncoderStatus::kOk) return state.SkipWithError("open");
  }
  const uint32_t frame = encoders[0].frame_samples();
  const auto& s = signal();
  uint8_t buf[1500];
  size_t pos = 0, bytes = 0;
  for (auto _ : state) {
    for (size_t f = 0; f < kFrames; f += frame) {
      for (auto& e : encoders)
        bytes += e.encode(s.data() + (pos + f) * kChannels, frame, buf).bytes;
    }
    pos = (pos + kFrames) % (kSignalFrames - kFrames);
  }
  state.counters["kbit/s"] = double(bytes) * 8 / (double(state.iterations()) * 20.0);
}
// application (0 AUDIO, 1 RESTRICTED_LOWDELAY) x complexity x frame ms
BENCHMARK(BM_Encode)
    ->ArgsProduct({{0, 1}, {0, 5, 10}, {10}})
    ->Args({0, 5, 20})
    ->Args({1, 5, 20})
    ->Unit(benchmark::kMicrosecond);

// Packets of 20 ms of audio for both groups, encoded once.
struct EncodedRun {
  GroupPlan plan;
  uint32_t frame = 0;
  std::vector<std::vector<uint8_t>> packets;  // [frame][group] flattened
};

EncodedRun encode_second(int64_t application, int64_t frame_ms) {
  EncodedRun run;
  run.plan = relay_plan(uint32_t(frame_ms));
  std::vector<OpusMultistreamEncoder> encoders(run.plan.count);
  for (size_t g = 0; g < run.plan.count; ++g) {
    EncoderConfig c = config_for(application, 5, frame_ms);
    c.group = run.plan.groups[g];
    encoders[g].open(c);
  }
  run.frame = encoders[0].frame_samples();
  uint8_t buf[1500];
  for (size_t pos = 0; pos + run.frame <= kSignalFrames; pos += run.frame)
    for (auto& e : encoders) {
      const EncodeResult r = e.encode(signal().data() + pos * kChannels, run.frame, buf);
      run.packets.emplace_back(buf, buf + r.bytes);
    }
  return run;
}

void BM_Decode(benchmark::State& state) {
  const EncodedRun run = encode_second(state.range(0), state.range(1));
  std::vector<OpusMultistreamDecoder> decoders(run.plan.count);
  for (size_t g = 0; g < run.plan.count; ++g)
    if (!decoders[g].open({kChannels, run.plan.groups[g], 960})) return state.SkipWithError("open");
  std::vector<float> out(kFrames * kChannels);
  size_t next = 0;
  for (auto _ : state) {
    for (size_t f = 0; f < kFrames; f += run.frame) {
      for (size_t g = 0; g < run.plan.count; ++g) {
        const DecodeResult r =
            decoders[g].decode(run.packets[next++], out.data() + f * kChannels, kFrames - f);
        if (!r.ok()) return state.SkipWithError(to_string(r.refusal));
      }
      if (next == run.packets.size()) next = 0;
    }
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_Decode)->Args({0, 10})->Args({1, 10})->Args({0, 20})->Unit(benchmark::kMicrosecond);

void BM_Conceal(benchmark::State& state) {
  const EncodedRun run = encode_second(0, 10);
  std::vector<OpusMultistreamDecoder> decoders(run.plan.count);
  for (size_t g = 0; g < run.plan.count; ++g)
    decoders[g].open({kChannels, run.plan.groups[g], 960});
  std::vector<float> out(kFrames * kChannels);
  // Prime the decoders with real audio so concealment has something to extend.
  for (size_t k = 0; k < 20; ++k)
    decoders[k % run.plan.count].decode(run.packets[k], out.data(), kFrames);
  for (auto _ : state) {
    for (size_t f = 0; f < kFrames; f += run.frame)
      for (auto& d : decoders) d.conceal(run.frame, out.data() + f * kChannels, kFrames - f);
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_Conceal)->Unit(benchmark::kMicrosecond);

// Prints the usual table, then each case's mean CPU time per 20 ms of audio, as a share of the
// 20 ms it covers and as a ratio to the int16 conversion of the same samples.
class RatioReporter : public syncd::bench::MeanTimesReporter {
 public:
  void Finalize() override {
    ConsoleReporter::Finalize();
    const Times base = at("BM_ToInt16");
    if (base.runs == 0) return;
    const double base_cpu = base.mean_cpu();
    std::printf("\n32 channels, 20 ms of audio per iteration, mean of runs (CPU time):\n");
    std::printf("  %-24s %10s %10s %12s\n", "case", "cpu us", "real time", "vs int16");
    for (const auto& [name, t] : times_) {
      if (t.runs == 0) continue;
      const double cpu = t.mean_cpu();
      std::printf("  %-24s %10.1f %9.2f%% %11.1fx\n", name.c_str(), cpu, cpu / 20000.0 * 100.0,
                  cpu / base_cpu);
    }
  }

 protected:
  std::string key(const Run& run) const override {
    return run.run_name.function_name + (run.run_name.args.empty() ? "" : "/" + run.run_name.args);
  }
};

}  // namespace

int main(int argc, char** argv) {
  RatioReporter reporter;
  return syncd::bench::run_benchmarks(argc, argv, reporter);
}
