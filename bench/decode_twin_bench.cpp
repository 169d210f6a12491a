// The loop thread's cost of a decoded twin (src/decode/decode_publisher.h), per access unit of an
// encoded stream at 720p and 1080p (8 Mbit/s, moving content, an IDR every 60 frames): a
// producer's frame committed into a registry that has the DecodePublisher, decoding into the
// stream's twin, against the same commit into a registry without it, measured in the same run.
// The twin's cost on the loop is the copy of the access unit, the hand-off to the worker, and the
// commit of the decoded picture into the twin's lease when it comes back; the decode itself runs
// on the worker (video_codec_bench measures it). Time is the loop thread's CPU time (Google
// Benchmark's default: the thread that runs the benchmark); the loop blocks in epoll, using no
// CPU, while it waits for the worker. After the runs it prints each case's time per frame and
// the twin's extra cost per frame.
//
// Run: decode_twin_bench --benchmark_min_time=2
#include <benchmark/benchmark.h>
#include <uv.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "core/clock.h"
#include "decode/decode_publisher.h"
#include "mean_times_reporter.h"
#include "media/frame_header.h"
#include "media/stream_registry.h"
#include "video_codec/h264_encoder.h"
#include "video_codec_pictures.h"

namespace {

using namespace syncd;
using video_codec::testing::I420Frame;
using video_codec::testing::MovingPicture;

constexpr uint32_t kClipFrames = 60;  // one GOP: the clip starts over at its IDR

uint32_t width_for(uint32_t height) {
  return height == 1080 ? 1920 : 1280;
}

// kClipFrames access units, encoded once per size, each picture with its column marker.
const std::vector<std::vector<uint8_t>>& clip(uint32_t height) {
  static std::map<uint32_t, std::vector<std::vector<uint8_t>>> clips;
  auto& units = clips[height];
  if (units.empty()) {
    const uint32_t width = width_for(height);
    video_codec::H264Encoder encoder;
    video_codec::EncoderConfig c;
    c.width = width;
    c.height = height;
    c.bitrate_kbps = 8000;
    c.keyframe_interval = kClipFrames;
    if (encoder.open(c) != video_codec::OpenStatus::kOk) std::abort();
    MovingPicture picture(width, height, 4);
    I420Frame frame(width, height);
    std::vector<uint8_t> out(4 << 20);
    for (uint32_t i = 0; i < kClipFrames; ++i) {
      picture.draw(frame, i, uint16_t(i + 1));
      const video_codec::EncodeResult r =
          encoder.encode(frame.input(), uint64_t(i) * 16'666'667, i == 0, out);
      if (r.status != video_codec::EncodeStatus::kOk) std::abort();
      units.emplace_back(out.begin(), out.begin() + long(r.bytes));
    }
  }
  return units;
}

void BM_CommitAccessUnit(benchmark::State& state) {
  const auto height = uint32_t(state.range(0));
  const bool twin = state.range(1) != 0;
  const auto& units = clip(height);
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    media::StreamRegistry registry;
    decode::DecodePublisher* decoder = nullptr;
    if (twin) {
      decode::DecodePublisherConfig config;
      config.pixel_publishers = true;
      auto p = std::make_unique<decode::DecodePublisher>(&loop, registry, config);
      decoder = p.get();
      registry.add_publisher(std::move(p));
    }
    media::StreamConfig c;
    c.name = "page";
    c.width = width_for(height);
    c.height = height;
    c.format = media::PixelFormat::kH264;
    c.slots = 4;
    media::OpenError error;
    media::Stream* stream = registry.open(c, 1, error);
    if (!stream) std::abort();
    uint64_t sequence = 0;
    for (auto _ : state) {
      const std::vector<uint8_t>& au = units[sequence % kClipFrames];
      media::IngestRequest r;
      r.stream_id = stream->id();
      r.owner = 1;
      r.flags = media::frame_flag::kColumnMarker;
      r.sequence = ++sequence;
      r.payload_bytes = au.size();
      r.start_ns = core::monotonic_ns();
      media::IngestRefusal refusal;
      media::SlotLease lease = registry.begin(r, refusal);
      if (!lease) std::abort();
      std::memcpy(lease.pixels(), au.data(), au.size());
      if (!lease.commit(au.size(), core::monotonic_ns())) std::abort();
      // The decoded pictures come back through the loop: take what is there, and block (no CPU)
      // while the worker holds half its depth, so none is dropped as worker_busy.
      if (decoder) {
        const decode::DecodeStage* stage = decoder->stage(stream->id());
        uv_run(&loop, UV_RUN_NOWAIT);
        while (stage && stage->counters().in_flight >= decode::DecodeStage::kMaxDepth / 2)
          uv_run(&loop, UV_RUN_ONCE);
      }
    }
    if (decoder) {
      const decode::DecodeStage* stage = decoder->stage(stream->id());
      while (stage && stage->counters().in_flight > 0) uv_run(&loop, UV_RUN_ONCE);
      const decode::DecodeStageCounters& d = stage->counters();
      if (d.dropped_total() != 0) state.SkipWithError("the decode stage dropped frames");
      state.counters["decoded"] = double(d.decoded);
    }
    registry.close(stream);
    registry.stop_publishers();
  }
  uv_run(&loop, UV_RUN_NOWAIT);
  uv_loop_close(&loop);
}
BENCHMARK(BM_CommitAccessUnit)
    ->ArgsProduct({{720, 1080}, {0, 1}})
    ->ArgNames({"height", "twin"})
    ->Unit(benchmark::kMicrosecond);

class RatioReporter : public syncd::bench::MeanTimesReporter {
 public:
  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf("\nloop thread CPU per access unit (mean), the decoded twin against none:\n");
    for (int height : {720, 1080}) {
      const std::string name = "BM_CommitAccessUnit/height:" + std::to_string(height);
      const Times none = at(name + "/twin:0");
      const Times twin = at(name + "/twin:1");
      if (!none.runs || !twin.runs) continue;
      std::printf("  %4dp: without %.2f us, with the twin %.2f us (%.2fx; %.2f us more a frame)\n",
                  height, none.mean_cpu(), twin.mean_cpu(), twin.mean_cpu() / none.mean_cpu(),
                  twin.mean_cpu() - none.mean_cpu());
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  RatioReporter reporter;
  return syncd::bench::run_benchmarks(argc, argv, reporter);
}
