// H.264 encode and decode (src/video_codec) at 720p and 1080p, per frame, against baselines
// measured in the same run:
//   - encode (I420 input, 8 Mbit/s, moving content) for presets ultrafast and superfast, with 1
//     and 2 sliced threads, against libyuv's RGBA -> I420 conversion of the same frame;
//   - encode from RGBA (the conversion included), ultrafast, 1 thread;
//   - decode (1 and 2 slice threads, the copy into the caller's I420 buffer included) against a
//     memcpy of the I420 frame, and the copy out alone (libyuv I420Copy);
//   - resize(): re-opening the encoder 1080p <-> 720p.
// CPU time is the process's (x264's and libavcodec's slice threads count). After the runs it
// prints each case's time per frame and its ratio to its baseline.
//
// Run: video_codec_bench --benchmark_min_time=2
#include <benchmark/benchmark.h>
#include <libyuv.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "mean_times_reporter.h"
#include "video_codec/h264_decoder.h"
#include "video_codec/h264_encoder.h"
#include "video_codec_pictures.h"

// Counts heap allocations, to show per frame what the codec libraries allocate: this binary's
// malloc family interposes glibc's for every library in the process (x264 and libavcodec
// included) and forwards to glibc's own entry points.
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
}
namespace {
std::atomic<uint64_t> g_allocations{0};
}
extern "C" {
void* malloc(size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_realloc(p, n);
}
void* memalign(size_t alignment, size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_memalign(alignment, n);
}
int posix_memalign(void** out, size_t alignment, size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  *out = __libc_memalign(alignment, n);
  return *out == nullptr ? ENOMEM : 0;
}
void* aligned_alloc(size_t alignment, size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_memalign(alignment, n);
}
}

namespace {

using namespace syncd::video_codec;
using syncd::video_codec::testing::ConvertedFrame;
using syncd::video_codec::testing::I420Frame;
using syncd::video_codec::testing::MovingPicture;

constexpr uint32_t kClipFrames = 16;
const char* const kPresets[] = {"ultrafast", "superfast"};

uint32_t width_for(int64_t height) {
  return height == 1080 ? 1920 : 1280;
}

// kClipFrames frames of moving content, drawn once per size.
const std::vector<I420Frame>& clip(uint32_t height) {
  static std::map<uint32_t, std::vector<I420Frame>> clips;
  auto& frames = clips[height];
  if (frames.empty()) {
    const uint32_t width = width_for(height);
    MovingPicture moving(width, height, 4);
    for (uint32_t i = 0; i < kClipFrames; ++i) {
      frames.emplace_back(width, height);
      moving.draw(frames.back(), i, static_cast<uint16_t>(i));
    }
  }
  return frames;
}

EncoderConfig config_for(uint32_t height, const char* preset, uint32_t threads) {
  EncoderConfig config;
  config.width = width_for(height);
  config.height = height;
  config.bitrate_kbps = 8000;
  config.preset = preset;
  config.threads = threads;
  return config;
}

void BM_RgbaToI420(benchmark::State& state) {
  const auto height = static_cast<uint32_t>(state.range(0));
  const uint32_t width = width_for(height);
  const ConvertedFrame rgba(clip(height)[0], PixelFormat::kRgba8);
  I420Frame out(width, height);
  for (auto _ : state) {
    libyuv::ABGRToI420(rgba.plane0.data(), static_cast<int>(width * 4), out.y.data(),
                       static_cast<int>(width), out.u.data(), static_cast<int>(width / 2),
                       out.v.data(), static_cast<int>(width / 2), static_cast<int>(width),
                       static_cast<int>(height));
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_RgbaToI420)
    ->Arg(720)
    ->Arg(1080)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime();

void BM_MemcpyI420(benchmark::State& state) {
  const auto height = static_cast<uint32_t>(state.range(0));
  const I420Frame& frame = clip(height)[0];
  std::vector<uint8_t> out(frame.y.size() * 3 / 2);
  for (auto _ : state) {
    std::memcpy(out.data(), frame.y.data(), frame.y.size());
    std::memcpy(out.data() + frame.y.size(), frame.u.data(), frame.u.size());
    std::memcpy(out.data() + frame.y.size() + frame.u.size(), frame.v.data(), frame.v.size());
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_MemcpyI420)
    ->Arg(720)
    ->Arg(1080)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime();

// Args: height, preset index, threads.
void BM_Encode(benchmark::State& state) {
  const auto height = static_cast<uint32_t>(state.range(0));
  H264Encoder encoder;
  if (encoder.open(config_for(height, kPresets[state.range(1)],
                              static_cast<uint32_t>(state.range(2)))) != OpenStatus::kOk) {
    state.SkipWithError("open failed");
    return;
  }
  const auto& frames = clip(height);
  std::vector<uint8_t> au(8 << 20);
  uint64_t i = 0, bytes = 0;
  // Past the first frames (x264 fills its pools), count what steady state allocates.
  for (; i < 4; ++i) encoder.encode(frames[i % kClipFrames].input(), i, false, au);
  const uint64_t allocations_before = g_allocations.load();
  const uint64_t first = i;
  for (auto _ : state) {
    const EncodeResult r = encoder.encode(frames[i % kClipFrames].input(), i, false, au);
    if (r.status != EncodeStatus::kOk) state.SkipWithError("encode failed");
    bytes += r.bytes;
    ++i;
  }
  state.counters["kbit_per_frame"] =
      static_cast<double>(bytes) * 8 / 1000 / static_cast<double>(i - first);
  state.counters["allocs_per_frame"] =
      static_cast<double>(g_allocations.load() - allocations_before) /
      static_cast<double>(i - first);
}
BENCHMARK(BM_Encode)
    ->ArgsProduct({{720, 1080}, {0, 1}, {1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

void BM_EncodeRgba(benchmark::State& state) {
  const auto height = static_cast<uint32_t>(state.range(0));
  H264Encoder encoder;
  if (encoder.open(config_for(height, "ultrafast", 1)) != OpenStatus::kOk) {
    state.SkipWithError("open failed");
    return;
  }
  std::vector<ConvertedFrame> frames;
  for (const I420Frame& f : clip(height)) frames.emplace_back(f, PixelFormat::kRgba8);
  std::vector<uint8_t> au(8 << 20);
  uint64_t i = 0;
  for (auto _ : state) {
    if (encoder.encode(frames[i % kClipFrames].picture, i, false, au).status != EncodeStatus::kOk) {
      state.SkipWithError("encode failed");
    }
    ++i;
  }
}
BENCHMARK(BM_EncodeRgba)
    ->Arg(720)
    ->Arg(1080)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

// 120 access units (IDR every 60) of the clip at 8 Mbit/s.
const std::vector<std::vector<uint8_t>>& stream(uint32_t height) {
  static std::map<uint32_t, std::vector<std::vector<uint8_t>>> streams;
  auto& aus = streams[height];
  if (aus.empty()) {
    H264Encoder encoder;
    EncoderConfig config = config_for(height, "ultrafast", 1);
    config.keyframe_interval = 60;
    encoder.open(config);
    std::vector<uint8_t> au(8 << 20);
    for (uint32_t i = 0; i < 120; ++i) {
      const EncodeResult r = encoder.encode(clip(height)[i % kClipFrames].input(), i, false, au);
      aus.emplace_back(au.begin(), au.begin() + static_cast<long>(r.bytes));
    }
  }
  return aus;
}

// Args: height, threads.
void BM_Decode(benchmark::State& state) {
  const auto height = static_cast<uint32_t>(state.range(0));
  const auto& aus = stream(height);
  H264Decoder decoder;
  DecoderConfig config;
  config.threads = static_cast<uint32_t>(state.range(1));
  decoder.open(config);
  I420Frame out(width_for(height), height);
  size_t i = 0;
  for (; i < 4; ++i) decoder.decode(aus[i], out.output());
  const uint64_t allocations_before = g_allocations.load();
  const size_t first = i;
  for (auto _ : state) {
    if (decoder.decode(aus[i % aus.size()], out.output()).status != DecodeStatus::kPicture) {
      state.SkipWithError("decode failed");
    }
    ++i;
  }
  state.counters["allocs_per_frame"] =
      static_cast<double>(g_allocations.load() - allocations_before) /
      static_cast<double>(i - first);
}
BENCHMARK(BM_Decode)
    ->ArgsProduct({{720, 1080}, {1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

// The decoder's copy out of libavcodec's picture into the caller's buffer.
void BM_I420CopyOut(benchmark::State& state) {
  const auto height = static_cast<uint32_t>(state.range(0));
  const I420Frame& frame = clip(height)[0];
  I420Frame out(frame.width, height);
  const int w = static_cast<int>(frame.width);
  for (auto _ : state) {
    libyuv::I420Copy(frame.y.data(), w, frame.u.data(), w / 2, frame.v.data(), w / 2, out.y.data(),
                     w, out.u.data(), w / 2, out.v.data(), w / 2, w, static_cast<int>(height));
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_I420CopyOut)
    ->Arg(720)
    ->Arg(1080)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime();

// A resolution step: resize() closes and re-opens x264 (1080p <-> 720p alternately).
void BM_Resize(benchmark::State& state) {
  H264Encoder encoder;
  encoder.open(config_for(1080, "ultrafast", 1));
  bool small = false;
  for (auto _ : state) {
    small = !small;
    if (encoder.resize(small ? 1280 : 1920, small ? 720 : 1080) != OpenStatus::kOk) {
      state.SkipWithError("resize failed");
    }
  }
}
BENCHMARK(BM_Resize)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();

// Prints the usual table, then each case's mean time per frame over its baseline's at the same
// height (RGBA -> I420 for encode, memcpy of the I420 frame for decode and the copy out).
class RatioReporter : public syncd::bench::MeanTimesReporter {
 public:
  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf("\nper frame, mean of runs (ms), vs the baseline at the same height:\n");
    std::printf("  %-40s %9s %9s %9s %9s\n", "case", "real ms", "ratio", "cpu ms", "ratio");
    for (const auto& [name, t] : times_) {
      const bool is_1080 = name.find("/1080") != std::string::npos;
      const bool encode =
          name.find("Encode") != std::string::npos || name.find("RgbaToI420") != std::string::npos;
      std::string base_name = encode ? "BM_RgbaToI420/" : "BM_MemcpyI420/";
      base_name += is_1080 ? "1080" : "720";
      if (name.find("Resize") != std::string::npos) base_name.clear();
      // Run names carry suffixes ("/process_time"): the baseline is the first name under it.
      auto base = base_name.empty() ? times_.end() : times_.lower_bound(base_name + "/");
      if (base != times_.end() && base->first.rfind(base_name + "/", 0) != 0) base = times_.end();
      const double real = t.mean_real(), cpu = t.mean_cpu();
      if (base == times_.end() || base->second.runs == 0) {
        std::printf("  %-40s %9.3f %9s %9.3f %9s\n", name.c_str(), real, "-", cpu, "-");
        continue;
      }
      const double base_real = base->second.mean_real();
      const double base_cpu = base->second.mean_cpu();
      std::printf("  %-40s %9.3f %8.2fx %9.3f %8.2fx\n", name.c_str(), real, real / base_real, cpu,
                  cpu / base_cpu);
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  RatioReporter reporter;
  return syncd::bench::run_benchmarks(argc, argv, reporter);
}
