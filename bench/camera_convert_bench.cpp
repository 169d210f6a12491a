// Cost of the camera's colour conversion per frame (libyuv, src/media/publishers/camera),
// against a memcpy of the same source frame measured in the same run, interleaved frame by
// frame so both see the same machine. Then the camera publisher itself: frames offered on a
// loop, converted on its worker into a backend that discards them, with the loop's own time per
// frame (which must stay near zero: it only pins and hands off) and the worker's.
//
// Prints one JSON object: median and p99 in microseconds of each conversion and of the memcpy,
// the ratio of the medians, and the publisher's stage means.
// Usage: camera_convert_bench [frames] [width height]
#include <uv.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
  const char* name;
  PixelFormat source;
  CameraFormat target;
  std::vector<uint64_t> ns;
};

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
  FrameLayout rgba, bgra, nv12, i420;
  if (frames < 1 || !frame_layout(PixelFormat::kRgba8, width, height, rgba) ||
      !frame_layout(PixelFormat::kBgra8, width, height, bgra) ||
      !frame_layout(PixelFormat::kNv12, width, height, nv12) ||
      !frame_layout(PixelFormat::kI420, width, height, i420)) {
    std::fprintf(stderr, "camera_convert_bench: frames > 0 and an even size, please\n");
    return 2;
  }
  std::vector<uint8_t> rgb_src(rgba.bytes), yuv_src(nv12.bytes), copy_target(rgba.bytes);
  std::vector<uint8_t> out(camera_frame_bytes(CameraFormat::kYuy2, width, height));
  FrameConverter converter;
  converter.prepare(width, height);

  Arm arms[] = {
      {"rgba_to_i420", PixelFormat::kRgba8, CameraFormat::kI420, {}},
      {"rgba_to_nv12", PixelFormat::kRgba8, CameraFormat::kNv12, {}},
      {"rgba_to_yuy2", PixelFormat::kRgba8, CameraFormat::kYuy2, {}},
      {"bgra_to_i420", PixelFormat::kBgra8, CameraFormat::kI420, {}},
      {"nv12_to_nv12", PixelFormat::kNv12, CameraFormat::kNv12, {}},
      {"nv12_to_i420", PixelFormat::kNv12, CameraFormat::kI420, {}},
      {"nv12_to_yuy2", PixelFormat::kNv12, CameraFormat::kYuy2, {}},
  };
  std::vector<uint64_t> copies;
  for (int f = 0; f < frames; ++f) {
    fill(rgb_src.data(), rgb_src.size(), f);
    fill(yuv_src.data(), yuv_src.size(), f);
    // The baseline: one pass over the RGBA source frame.
    uint64_t t0 = syncd::core::monotonic_ns();
    std::memcpy(copy_target.data(), rgb_src.data(), rgb_src.size());
    copies.push_back(syncd::core::monotonic_ns() - t0);
    for (Arm& arm : arms) {
      const bool rgb = arm.source == PixelFormat::kRgba8 || arm.source == PixelFormat::kBgra8;
      const FrameLayout& layout = arm.source == PixelFormat::kRgba8   ? rgba
                                  : arm.source == PixelFormat::kBgra8 ? bgra
                                                                      : nv12;
      t0 = syncd::core::monotonic_ns();
      if (!converter.convert(layout, rgb ? rgb_src.data() : yuv_src.data(), arm.target, out.data(),
                             out.size()))
        return 1;
      arm.ns.push_back(syncd::core::monotonic_ns() - t0);
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

  const double cp50 = percentile_us(copies, 0.5);
  std::printf("{\"frames\":%d,\"width\":%u,\"height\":%u,\"source_frame_bytes\":%zu,", frames,
              width, height, rgba.bytes);
  std::printf("\"memcpy_us\":{\"median\":%.1f,\"p99\":%.1f},", cp50, percentile_us(copies, 0.99));
  for (const Arm& arm : arms) {
    const double m = percentile_us(arm.ns, 0.5);
    std::printf("\"%s\":{\"median_us\":%.1f,\"p99_us\":%.1f,\"vs_memcpy\":%.2f},", arm.name, m,
                percentile_us(arm.ns, 0.99), m / cp50);
  }
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
