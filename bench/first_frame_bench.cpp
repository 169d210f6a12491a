// The first frame written into each slot of a new pool, against the same write once the slot has
// been used: what FramePool::prefault() buys, in one run (docs/benchmarks.md, "First frames").
//
// Three pools of 8 slots of a 1080p RGBA frame each: one only mapped, one populated by the
// kernel (MADV_POPULATE_WRITE, what prefault() did alone before), one prefaulted by
// FramePool::prefault(). For each, a memcpy of a frame into every slot (the first write), then
// again (the warm write). Prints ms per frame and the first/warm ratio; 1.0x means the first
// frames cost what later ones do.
//
// Usage: first_frame_bench [rounds]
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "media/frame_pool.h"

using syncd::media::FramePool;
using syncd::media::FrameSlot;

namespace {
constexpr size_t kFrameBytes = 1920 * 1080 * 4;
constexpr uint32_t kSlots = 8;

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

struct Result {
  double first_ms = 0, warm_ms = 0;
};

// Writes a frame into every slot twice; returns mean ms a frame of each pass.
Result write_twice(const std::vector<uint8_t*>& slots, const std::vector<uint8_t>& frame) {
  Result r;
  for (int pass = 0; pass < 2; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    for (uint8_t* s : slots) std::memcpy(s, frame.data(), frame.size());
    (pass == 0 ? r.first_ms : r.warm_ms) = ms_since(t0) / double(slots.size());
  }
  return r;
}

std::vector<uint8_t*> slots_of(FramePool* pool) {
  std::vector<FrameSlot*> taken;
  std::vector<uint8_t*> pixels;
  while (FrameSlot* s = pool->acquire()) taken.push_back(s);
  for (FrameSlot* s : taken) pixels.push_back(s->pixels);
  for (FrameSlot* s : taken) FramePool::release(s);
  return pixels;
}
}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  std::vector<uint8_t> frame(kFrameBytes, 0x5a);
  const size_t stride = (kFrameBytes + 4095) / 4096 * 4096;
  std::vector<Result> mapped, populated, prefaulted;
  for (int round = 0; round < rounds; ++round) {
    for (int kind = 0; kind < 3; ++kind) {
      if (kind == 2) {
        FramePool* pool = FramePool::create(kFrameBytes, kSlots);  // prefault() included
        prefaulted.push_back(write_twice(slots_of(pool), frame));
        pool->drop_ref();
        continue;
      }
      void* raw = ::mmap(nullptr, stride * kSlots, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (raw == MAP_FAILED) return 1;
      auto* base = static_cast<uint8_t*>(raw);
      if (kind == 1) ::madvise(base, stride * kSlots, MADV_POPULATE_WRITE);
      std::vector<uint8_t*> slots;
      for (uint32_t i = 0; i < kSlots; ++i) slots.push_back(base + i * stride);
      (kind == 0 ? mapped : populated).push_back(write_twice(slots, frame));
      ::munmap(raw, stride * kSlots);
    }
  }
  auto report = [](const char* name, std::vector<Result> rs) {
    auto median = [&](auto field) {
      std::vector<double> v;
      for (const Result& r : rs) v.push_back(r.*field);
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    const double first = median(&Result::first_ms), warm = median(&Result::warm_ms);
    std::printf("%-28s first %6.2f ms  warm %5.2f ms  first/warm %5.1fx\n", name, first, warm,
                first / warm);
  };
  std::printf("1080p RGBA frame into each of %u slots of a new pool, median of %d rounds\n", kSlots,
              rounds);
  report("mapped only", mapped);
  report("MADV_POPULATE_WRITE only", populated);
  report("FramePool::prefault()", prefaulted);
  return 0;
}
