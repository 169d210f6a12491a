// core::UnmaskingHasher against libxxhash: the digest of bytes unmasked in place, window by
// window, must equal content_hash() of the unmasked whole, for every kernel, length, split, key
// and phase; and the bytes left in the buffer must be the unmasked ones.
#include "core/unmasking_hasher.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/content_hash.h"

namespace {

using syncd::core::UnmaskingHasher;
using Kernel = UnmaskingHasher::Kernel;

std::vector<uint8_t> random_bytes(size_t size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> bytes(size);
  for (auto& b : bytes) b = uint8_t(rng());
  return bytes;
}

uint8_t key_byte(uint32_t mask_key, uint64_t offset) {
  return uint8_t(mask_key >> (8 * (offset & 3)));
}

// Masks `plain` as a WebSocket client would, with a payload that starts `phase0` bytes into the
// masked frame, then feeds it to the hasher in the windows given and checks both results.
void check(Kernel kernel, const std::vector<uint8_t>& plain, const std::vector<size_t>& windows,
           uint32_t mask_key, uint64_t phase0, size_t misalign) {
  std::vector<uint8_t> storage(plain.size() + 64);
  uint8_t* frame = storage.data() + misalign;
  for (size_t i = 0; i < plain.size(); ++i) frame[i] = plain[i] ^ key_byte(mask_key, phase0 + i);
  UnmaskingHasher hasher(kernel);
  hasher.begin(frame);
  size_t at = 0;
  for (size_t w = 0; at < plain.size(); ++w) {
    const size_t n = std::min(windows[w % windows.size()], plain.size() - at);
    hasher.update(frame + at, n, mask_key, phase0 + at);
    at += n;
  }
  ASSERT_EQ(hasher.bytes_so_far(), plain.size());
  ASSERT_EQ(hasher.digest(), syncd::core::content_hash(plain.data(), plain.size()))
      << "kernel " << int(kernel) << " size " << plain.size() << " first window " << windows[0]
      << " key " << mask_key << " phase " << phase0 << " misalign " << misalign;
  ASSERT_TRUE(plain.empty() || std::memcmp(frame, plain.data(), plain.size()) == 0)
      << "bytes not unmasked";
}

std::vector<Kernel> kernels() {
  std::vector<Kernel> out;
  for (Kernel k : {Kernel::kPortable, Kernel::kAvx2, Kernel::kAvx512}) {
    if (UnmaskingHasher::supported(k)) out.push_back(k);
  }
  return out;
}

TEST(UnmaskingHasher, EveryLengthUpToThreeBlocksInOneWindowAndInPieces) {
  const auto bytes = random_bytes(3 * 1024 + 130, 1);
  for (Kernel kernel : kernels()) {
    for (size_t size = 0; size <= bytes.size(); ++size) {
      const std::vector<uint8_t> plain(bytes.begin(), bytes.begin() + ptrdiff_t(size));
      check(kernel, plain, {size ? size : 1}, 0x9A3C51E7u, 0, 0);
      check(kernel, plain, {37, 64, 1, 200}, 0x9A3C51E7u, 2, 3);
    }
  }
}

TEST(UnmaskingHasher, WindowsOnEveryStripeAndBlockBoundary) {
  // A window that ends exactly where a stripe (64 bytes) or a block (1 KiB) ends is the case
  // where the last stripe must wait for the next window's first byte.
  const auto plain = random_bytes(16 * 1024 + 64, 2);
  for (Kernel kernel : kernels()) {
    for (size_t window : {size_t{64}, size_t{128}, size_t{1024}, size_t{1024 + 64}, size_t{4096},
                          size_t{63}, size_t{65}}) {
      check(kernel, plain, {window}, 0x01020304u, 0, 0);
    }
    for (size_t total : {size_t{241}, size_t{1024}, size_t{1025}, size_t{2048}, size_t{8192}}) {
      const std::vector<uint8_t> part(plain.begin(), plain.begin() + ptrdiff_t(total));
      check(kernel, part, {total - 1, 1}, 0xDEADBEEFu, 1, 0);
      check(kernel, part, {total / 2, total}, 0xDEADBEEFu, 3, 5);
    }
  }
}

TEST(UnmaskingHasher, ARandomFrameInRandomWindowsWithRandomKeysAndPhases) {
  std::mt19937_64 rng(3);
  for (Kernel kernel : kernels()) {
    for (int round = 0; round < 40; ++round) {
      const size_t size = 241 + rng() % (300 * 1024);
      const auto plain = random_bytes(size, rng());
      std::vector<size_t> windows;
      for (int i = 0; i < 8; ++i) windows.push_back(1 + rng() % (size / 3 + 1));
      check(kernel, plain, windows, uint32_t(rng()), rng() % 4, rng() % 64);
    }
  }
}

TEST(UnmaskingHasher, AZeroKeyLeavesTheBytesAndStillHashesThem) {
  const auto plain = random_bytes(1920 * 4 * 3 + 17, 4);
  for (Kernel kernel : kernels()) check(kernel, plain, {4096, 333}, 0, 0, 0);
}

TEST(UnmaskingHasher, AHasherStartsOverForTheNextFrame) {
  const auto first = random_bytes(5000, 5);
  const auto second = random_bytes(70000, 6);
  std::vector<uint8_t> buffer(second);
  UnmaskingHasher hasher;
  std::vector<uint8_t> scratch(first);
  hasher.begin(scratch.data());
  hasher.update(scratch.data(), scratch.size(), 0, 0);
  hasher.begin(buffer.data());
  hasher.update(buffer.data(), 1000, 0, 0);
  hasher.update(buffer.data() + 1000, buffer.size() - 1000, 0, 0);
  EXPECT_EQ(hasher.digest(), syncd::core::content_hash(second.data(), second.size()));
}

TEST(UnmaskingHasher, TheWidestKernelIsChosen) {
  const std::string best = UnmaskingHasher::best_kernel_name();
  if (UnmaskingHasher::supported(Kernel::kAvx512)) {
    EXPECT_EQ(best, "avx512");
  } else if (UnmaskingHasher::supported(Kernel::kAvx2)) {
    EXPECT_EQ(best, "avx2");
  } else {
    EXPECT_EQ(best, "portable");
  }
}

}  // namespace
