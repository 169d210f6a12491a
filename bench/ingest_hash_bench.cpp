// The ingest's per-window work on a verified 1080p RGBA frame, as syncd does it: each 256-KiB
// window lands in the slot (a memcpy stands in for the kernel's recv copy, which leaves it in
// cache), then is unmasked and hashed. Two ways, in the same run:
//   two passes  ws::unmask, then core::ContentHasher (libxxhash's dispatched XXH3)
//   fused       core::UnmaskingHasher, one pass per window (each kernel the CPU has)
// and the landing copy alone, so what unmasking and hashing add on top of it shows. Prints
// microseconds per frame (median of rounds) and each way's ratio to the two-pass baseline.
//
// Run: ingest_hash_bench [frames per round, default 200]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "core/content_hash.h"
#include "core/unmasking_hasher.h"
#include "net/ws/unmask.h"

namespace {

using syncd::core::UnmaskingHasher;
constexpr size_t kFrameBytes = 1920 * 1080 * 4;
constexpr size_t kWindow = 256 * 1024;
constexpr uint32_t kMaskKey = 0x9badf00d;
constexpr int kRounds = 5;

struct Buffers {
  uint8_t* wire;  // the masked frame as it arrives
  uint8_t* slot;
};

template <typename PerWindow, typename AtEnd>
double time_frames(const Buffers& b, int frames, PerWindow per_window, AtEnd at_end) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int f = 0; f < frames; ++f) {
    for (size_t at = 0; at < kFrameBytes; at += kWindow) {
      const size_t n = std::min(kWindow, kFrameBytes - at);
      std::memcpy(b.slot + at, b.wire + at, n);
      per_window(b.slot + at, n, at);
    }
    at_end();
  }
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / frames;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int frames = argc > 1 ? std::max(1, std::atoi(argv[1])) : 200;
  auto* wire = static_cast<uint8_t*>(std::aligned_alloc(4096, kFrameBytes));
  auto* slot = static_cast<uint8_t*>(std::aligned_alloc(4096, kFrameBytes));
  std::mt19937_64 rng(1);
  for (size_t i = 0; i < kFrameBytes; ++i) wire[i] = uint8_t(rng());
  const Buffers b{wire, slot};

  // The expected digest: the frame unmasked, hashed whole.
  std::vector<uint8_t> plain(wire, wire + kFrameBytes);
  syncd::ws::unmask(plain.data(), plain.size(), kMaskKey, 0);
  const uint64_t expected = syncd::core::content_hash(plain.data(), plain.size());

  struct Way {
    const char* name;
    UnmaskingHasher::Kernel kernel;  // kBest marks the two-pass way
    std::vector<double> us;
  };
  std::vector<Way> ways = {{"two passes (unmask, then XXH3)", UnmaskingHasher::Kernel::kBest, {}},
                           {"fused, portable", UnmaskingHasher::Kernel::kPortable, {}},
                           {"fused, avx2", UnmaskingHasher::Kernel::kAvx2, {}},
                           {"fused, avx512", UnmaskingHasher::Kernel::kAvx512, {}}};
  std::vector<double> copy_us;
  bool ok = true;
  for (int round = 0; round < kRounds; ++round) {
    copy_us.push_back(time_frames(
        b, frames, [](uint8_t*, size_t, size_t) {}, [] {}));
    for (Way& way : ways) {
      if (way.kernel != UnmaskingHasher::Kernel::kBest && !UnmaskingHasher::supported(way.kernel))
        continue;
      uint64_t digest = 0;
      if (way.kernel == UnmaskingHasher::Kernel::kBest) {
        syncd::core::ContentHasher hasher;
        way.us.push_back(time_frames(
            b, frames,
            [&](uint8_t* p, size_t n, size_t at) {
              syncd::ws::unmask(p, n, kMaskKey, at);
              hasher.update(p, n);
            },
            [&] {
              digest = hasher.digest();
              hasher.reset();
            }));
      } else {
        UnmaskingHasher hasher(way.kernel);
        hasher.begin(slot);
        way.us.push_back(time_frames(
            b, frames, [&](uint8_t* p, size_t n, size_t at) { hasher.update(p, n, kMaskKey, at); },
            [&] {
              digest = hasher.digest();
              hasher.begin(slot);
            }));
      }
      if (digest != expected) {
        std::printf("%s: wrong digest %016llx, expected %016llx\n", way.name,
                    static_cast<unsigned long long>(digest),
                    static_cast<unsigned long long>(expected));
        ok = false;
      }
    }
  }
  const double copy = median(copy_us);
  const double base = median(ways[0].us) - copy;
  std::printf(
      "1920x1080 RGBA in %zu-KiB windows, %d frames x %d rounds (median); landing copy "
      "%.1f us/frame, not counted below\n",
      kWindow / 1024, frames, kRounds, copy);
  std::printf("%-32s %12s %10s\n", "unmask + hash", "us/frame", "ratio");
  for (const Way& way : ways) {
    if (way.us.empty()) continue;
    const double us = median(way.us) - copy;
    std::printf("%-32s %12.1f %9.2fx\n", way.name, us, us / base);
  }
  std::printf("fused kernel in use: %s\n", UnmaskingHasher::best_kernel_name());
  std::free(wire);
  std::free(slot);
  return ok ? 0 : 1;
}
