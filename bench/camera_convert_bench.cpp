// Cost of the camera's colour conversion per frame (src/media/publishers/camera), for
// every stream format (RGBA, BGRA, I420, NV12) into every camera format (YUY2, I420, NV12),
// against a memcpy of the same source frame measured in the same run, interleaved frame by frame
// so both see the same machine. Then the camera publisher itself: frames offered on a loop,
// converted on its worker into a backend that discards them, with the loop's own time per frame
// (which must stay near zero: it only pins and hands off) and the worker's.
//
// Prints one JSON object on stdout: per source format the memcpy's median and p99 in
// microseconds; per pair the conversion's median and p99, its ratio (of the medians) to the
// memcpy of its own source frame and to the memcpy of the RGBA frame (8.3 MB at 1080p, the
// baseline of docs/benchmarks.md); and the publisher's stage means. The same figures as a table
// on stderr.
// Usage: camera_convert_bench [frames] [width height]
#include <uv.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "media/publishers/camera/camera_publisher.h"
#include "media/stream.h"

namespace {

using namespace syncd::media;

double percentile_us(std::vector<uint64_t> v, double q) {
  std::sort(v.begin(), v.end());
  return double(v[size_t(q * double(v.size() - 1))]) / 1e3;
}

// A moving gradient, so no conversion sees a flat frame.
void fill(uint8_t* p, size_t bytes, int frame) {
  for (size_t i = 0; i < bytes; ++i) p[i] = uint8_t((i * 7) ^ (i >> 11) ^ size_t(frame));
}

struct Arm {
  PixelFormat source;
  CameraFormat target;
  std::vector<uint64_t> ns;
};

constexpr PixelFormat kSources[] = {PixelFormat::kRgba8, PixelFormat::kBgra8, PixelFormat::kI420,
                                    PixelFormat::kNv12};
constexpr CameraFormat kTargets[] = {CameraFormat::kYuy2, CameraFormat::kI420, CameraFormat::kNv12};

// Takes every frame and drops it: what is timed is the conversion and the hand-off.
class DiscardBackend final : public CameraBackend {
 public:
  std::string_view kind() const override { return "discard"; }
  std::string_view target() const override { return "none"; }
  bool open(std::string&) override { return true; }
  bool configure(uint32_t w, uint32_t h, CameraFormat f, std::string&) override {
    buffer_.assign(camera_frame_bytes(f, w, h), 0);
    return true;
  }
  std::span<uint8_t> dequeue() override { return buffer_; }
  bool queue(uint64_t, uint64_t) override { return true; }
  void close() override {}

 private:
  std::vector<uint8_t> buffer_;
};

}  // namespace

int main(int argc, char** argv) {
  const int frames = argc > 1 ? std::atoi(argv[1]) : 300;
  const uint32_t width = argc > 3 ? uint32_t(std::atoi(argv[2])) : 1920;
  const uint32_t height = argc > 3 ? uint32_t(std::atoi(argv[3])) : 1080;
  FrameLayout layouts[std::size(kSources)];
  bool sized = frames > 0;
  for (size_t i = 0; i < std::size(kSources); ++i)
    sized = sized && frame_layout(kSources[i], width, height, layouts[i]);
  if (!sized) {
    std::fprintf(stderr, "camera_convert_bench: frames > 0 and an even size, please\n");
    return 2;
  }
  const FrameLayout& rgba = layouts[0];
  // One source frame per format (RGBA and BGRA are the same bytes read two ways, as are I420
  // and NV12), refilled each frame; each memcpy copies its own source frame.
  std::vector<uint8_t> rgb_src(rgba.bytes), yuv_src(layouts[2].bytes), copy_target(rgba.bytes);
  std::vector<uint8_t> out(camera_frame_bytes(CameraFormat::kYuy2, width, height));
  FrameConverter converter;
  converter.prepare(width, height);

  std::vector<Arm> arms;
  for (PixelFormat source : kSources)
    for (CameraFormat target : kTargets) arms.push_back({source, target, {}});
  std::vector<uint64_t> copies[std::size(kSources)];
  for (int f = 0; f < frames; ++f) {
    fill(rgb_src.data(), rgb_src.size(), f);
    fill(yuv_src.data(), yuv_src.size(), f);
    for (size_t i = 0; i < std::size(kSources); ++i) {
      const bool rgb = i < 2;
      const uint8_t* src = rgb ? rgb_src.data() : yuv_src.data();
      // The baseline: one pass over this source frame, just before its conversions.
      uint64_t t0 = syncd::core::monotonic_ns();
      std::memcpy(copy_target.data(), src, layouts[i].bytes);
      copies[i].push_back(syncd::core::monotonic_ns() - t0);
      for (Arm& arm : arms) {
        if (arm.source != kSources[i]) continue;
        t0 = syncd::core::monotonic_ns();
        if (!converter.convert(layouts[i], src, arm.target, out.data(), out.size())) return 1;
        arm.ns.push_back(syncd::core::monotonic_ns() - t0);
      }
    }
  }

  // The publisher: frames offered one at a time on a loop, each converted (RGBA to YUY2, the
  // v4l2loopback default) on the camera's worker before the next is offered.
  uv_loop_t loop;
  uv_loop_init(&loop);
  StreamConfig config{"bench", width, height, PixelFormat::kRgba8, 60.0, 4};
  Stream stream(1, config, rgba, 1, FramePool::create(rgba.bytes, 4));
  CameraConfig camera_config;
  camera_config.format = CameraFormat::kYuy2;
  CameraPublisher camera(&loop, camera_config, std::make_unique<DiscardBackend>());
  camera.on_stream_open(stream);
  std::vector<uint64_t> loop_cpu_ns;
  for (int f = 0; f < frames; ++f) {
    FrameSlot* slot = stream.pool()->acquire();
    fill(slot->pixels, rgba.bytes, f);
    slot->info.bytes = rgba.bytes;
    slot->info.sequence = uint64_t(f);
    const uint64_t cpu0 = syncd::core::thread_cpu_ns();
    camera.on_frame(stream, *slot);
    loop_cpu_ns.push_back(syncd::core::thread_cpu_ns() - cpu0);
    FramePool::release(slot);
    while (camera.counters(1)->converting != 0) uv_run(&loop, UV_RUN_ONCE);
  }
  camera.stop();
  uv_run(&loop, UV_RUN_DEFAULT);
  const CameraCounters& c = *camera.counters(1);
  auto mean_us = [](const syncd::telemetry::StageStats& s) {
    return s.count() ? double(s.total_ns()) / double(s.count()) / 1e3 : 0.0;
  };

  std::printf("{\"frames\":%d,\"width\":%u,\"height\":%u,\"memcpy_us\":{", frames, width, height);
  double copy_median[std::size(kSources)];
  for (size_t i = 0; i < std::size(kSources); ++i) {
    copy_median[i] = percentile_us(copies[i], 0.5);
    std::printf("%s\"%s\":{\"bytes\":%zu,\"median\":%.1f,\"p99\":%.1f}", i ? "," : "",
                pixel_format_name(kSources[i]), layouts[i].bytes, copy_median[i],
                percentile_us(copies[i], 0.99));
  }
  std::printf("},\"conversions\":[");
  std::fprintf(stderr,
               "| conversion | median | p99 | vs memcpy of its source | vs memcpy of RGBA |\n");
  std::fprintf(stderr, "|---|---|---|---|---|\n");
  for (size_t i = 0; i < std::size(kSources); ++i)
    std::fprintf(stderr, "| memcpy of the %s frame | %.0f us | %.0f us | 1.00x | %.2fx |\n",
                 pixel_format_name(kSources[i]), copy_median[i], percentile_us(copies[i], 0.99),
                 copy_median[i] / copy_median[0]);
  for (size_t a = 0; a < arms.size(); ++a) {
    const Arm& arm = arms[a];
    const size_t s = size_t(std::find(std::begin(kSources), std::end(kSources), arm.source) -
                            std::begin(kSources));
    const double m = percentile_us(arm.ns, 0.5), p99 = percentile_us(arm.ns, 0.99);
    std::printf(
        "%s{\"source\":\"%s\",\"camera\":\"%s\",\"median_us\":%.1f,\"p99_us\":%.1f,"
        "\"vs_memcpy_source\":%.2f,\"vs_memcpy_rgba\":%.2f}",
        a ? "," : "", pixel_format_name(arm.source), camera_format_name(arm.target), m, p99,
        m / copy_median[s], m / copy_median[0]);
    std::fprintf(stderr, "| %s -> %s | %.0f us | %.0f us | %.2fx | %.2fx |\n",
                 pixel_format_name(arm.source), camera_format_name(arm.target), m, p99,
                 m / copy_median[s], m / copy_median[0]);
  }
  std::printf("],");
  std::printf(
      "\"publisher_rgba_to_yuy2\":{\"delivered\":%llu,\"dropped\":%llu,\"loop_us_mean\":%.2f,"
      "\"loop_us_max\":%.2f,\"loop_cpu_us_median\":%.2f,\"loop_cpu_us_p99\":%.2f,\"worker_convert_"
      "us_mean\":%.1f,\"handoff_us_mean\":%.1f}}\n",
      (unsigned long long)c.delivered, (unsigned long long)c.dropped_total(), mean_us(c.loop),
      double(c.loop.max_ns()) / 1e3, percentile_us(loop_cpu_ns, 0.5),
      percentile_us(loop_cpu_ns, 0.99), mean_us(c.convert), mean_us(c.handoff));
  uv_loop_close(&loop);
  return 0;
}
