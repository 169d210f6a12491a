// Cost of handing a frame to a worker thread and getting it back (core::WorkerHandoff with a
// pinned pool slot, as the test publisher and the camera use it), against a memcpy of the same
// frame measured in the same run: the hand-off must cost a small fraction of touching the frame
// once. The worker does no work on the frame, so what is timed is the hand-off itself: pin,
// SPSC push, futex wake, worker pop and push, uv_async, the loop's pop and unpin.
//
// Prints one JSON object: median and p99 of the round trip and of the memcpy, and their ratios.
// Usage: handoff_bench [frames] [width height]
#include <uv.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/clock.h"
#include "core/worker_handoff.h"
#include "media/frame_pool.h"

namespace {

using syncd::media::FramePool;
using syncd::media::FrameSlot;

struct Job {
  FrameSlot* slot;
  uint64_t submitted_ns;
};

struct Loop {
  std::vector<uint64_t> round_trips;
  bool done = false;
};

void work(Job&, void*) {}

void done(Job& job, void* context) {
  auto* l = static_cast<Loop*>(context);
  l->round_trips.push_back(syncd::core::monotonic_ns() - job.submitted_ns);
  FramePool::unpin(job.slot);
  l->done = true;
}

double percentile(std::vector<uint64_t> v, double q) {
  std::sort(v.begin(), v.end());
  return double(v[size_t(q * double(v.size() - 1))]) / 1e3;
}

}  // namespace

int main(int argc, char** argv) {
  const int frames = argc > 1 ? std::atoi(argv[1]) : 2000;
  const uint32_t width = argc > 3 ? uint32_t(std::atoi(argv[2])) : 1920;
  const uint32_t height = argc > 3 ? uint32_t(std::atoi(argv[3])) : 1080;
  const size_t bytes = size_t(width) * height * 4;

  uv_loop_t uv;
  uv_loop_init(&uv);
  FramePool* pool = FramePool::create(bytes, 4);
  if (!pool) {
    std::fprintf(stderr, "handoff_bench: no memory for the pool\n");
    return 1;
  }
  Loop loop;
  loop.round_trips.reserve(size_t(frames));
  syncd::core::WorkerHandoff<Job, 8> handoff(&work, &done, &loop);
  if (handoff.start(&uv) != 0) return 1;

  std::vector<uint8_t> copy_target(bytes);
  std::vector<uint64_t> copies;
  copies.reserve(size_t(frames));
  for (int i = 0; i < frames; ++i) {
    FrameSlot* slot = pool->acquire();
    slot->info.bytes = bytes;
    // The baseline, on the same slot: one pass over the frame.
    const uint64_t c0 = syncd::core::monotonic_ns();
    std::memcpy(copy_target.data(), slot->pixels, bytes);
    copies.push_back(syncd::core::monotonic_ns() - c0);

    loop.done = false;
    FramePool::try_pin(slot);
    handoff.submit(Job{slot, syncd::core::monotonic_ns()});
    FramePool::release(slot);
    while (!loop.done) uv_run(&uv, UV_RUN_ONCE);
  }
  handoff.stop();
  uv_run(&uv, UV_RUN_DEFAULT);
  pool->drop_ref();
  uv_loop_close(&uv);

  const double rt50 = percentile(loop.round_trips, 0.5), rt99 = percentile(loop.round_trips, 0.99);
  const double cp50 = percentile(copies, 0.5), cp99 = percentile(copies, 0.99);
  std::printf(
      "{\"frames\":%d,\"frame_bytes\":%zu,\"handoff_round_trip_us\":{\"median\":%.2f,\"p99\":%.2f},"
      "\"memcpy_us\":{\"median\":%.2f,\"p99\":%.2f},\"ratio_median\":%.4f,\"ratio_p99\":%.4f}\n",
      frames, bytes, rt50, rt99, cp50, cp99, rt50 / cp50, rt99 / cp99);
  return 0;
}
