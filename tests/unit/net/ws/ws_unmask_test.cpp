#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string_view>
#include <vector>

#include "net/ws/unmask.h"

namespace syncd::ws {
namespace {

// Straight from RFC 6455 section 5.3: octet i is XORed with key octet (i mod 4), where i counts
// from the start of the payload (hence the phase).
void reference_unmask(uint8_t* data, size_t size, uint32_t mask_key, uint64_t phase) {
  for (size_t i = 0; i < size; ++i)
    data[i] ^= static_cast<uint8_t>(mask_key >> (8 * ((phase + i) % 4)));
}

struct NamedKernel {
  const char* name;
  UnmaskFn fn;
};

std::vector<NamedKernel> available_kernels() {
  std::vector<NamedKernel> kernels = {{"scalar", unmask_scalar}, {"dispatched", unmask}};
  if (UnmaskFn fn = unmask_avx2_kernel()) kernels.push_back({"avx2", fn});
  if (UnmaskFn fn = unmask_neon_kernel()) kernels.push_back({"neon", fn});
  return kernels;
}

std::vector<uint8_t> random_bytes(std::mt19937_64& rng, size_t n) {
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

// Runs every kernel on the same bytes placed `offset` bytes into a fresh buffer, with guard bytes
// on both sides so writes outside [data, data+size) are caught.
void expect_all_kernels_match(std::mt19937_64& rng, size_t size, size_t offset, uint32_t key,
                              uint64_t phase) {
  constexpr size_t kGuard = 64;
  const std::vector<uint8_t> input = random_bytes(rng, size);
  std::vector<uint8_t> expected = input;
  reference_unmask(expected.data(), size, key, phase);

  for (const NamedKernel& kernel : available_kernels()) {
    std::vector<uint8_t> buffer(offset + size + kGuard, 0xA5);
    std::copy(input.begin(), input.end(), buffer.begin() + offset);
    kernel.fn(buffer.data() + offset, size, key, phase);
    ASSERT_TRUE(std::equal(expected.begin(), expected.end(), buffer.begin() + offset))
        << kernel.name << " size=" << size << " offset=" << offset << " phase=" << phase;
    for (size_t i = 0; i < offset; ++i) ASSERT_EQ(buffer[i], 0xA5) << kernel.name;
    for (size_t i = 0; i < kGuard; ++i) ASSERT_EQ(buffer[offset + size + i], 0xA5) << kernel.name;
  }
}

TEST(WsUnmask, KernelNameMatchesCpu) {
  const std::string_view name = unmask_kernel_name();
  if (unmask_avx2_kernel()) {
    EXPECT_EQ(name, "avx2");
  } else if (unmask_neon_kernel()) {
    EXPECT_EQ(name, "neon");
  } else {
    EXPECT_EQ(name, "scalar");
  }
#if defined(__aarch64__)
  EXPECT_NE(unmask_neon_kernel(), nullptr);
#endif
}

TEST(WsUnmask, RfcExample) {
  // RFC 6455 section 5.7: a masked "Hello" with key 37 fa 21 3d.
  uint8_t payload[] = {0x7f, 0x9f, 0x4d, 0x51, 0x58};
  const uint32_t key = 0x3d21fa37;
  unmask(payload, sizeof payload, key, 0);
  EXPECT_EQ(std::string_view(reinterpret_cast<char*>(payload), sizeof payload), "Hello");
}

TEST(WsUnmask, EverySmallSizeOffsetAndPhase) {
  std::mt19937_64 rng(1);
  for (size_t size = 0; size <= 300; ++size) {
    for (size_t offset = 0; offset < 64; offset += (size < 40 ? 1 : 7)) {
      for (uint64_t phase = 0; phase < 4; ++phase) {
        expect_all_kernels_match(rng, size, offset, static_cast<uint32_t>(rng()), phase);
      }
    }
  }
}

TEST(WsUnmask, RandomSizesAlignmentsAndPhases) {
  std::mt19937_64 rng(2);
  for (int iter = 0; iter < 3000; ++iter) {
    const size_t size = rng() % 5001;
    const size_t offset = rng() % 64;
    // Phases beyond 4 and beyond 32 bits: only phase mod 4 may matter.
    const uint64_t phase = (iter % 3 == 0) ? rng() : rng() % 8;
    expect_all_kernels_match(rng, size, offset, static_cast<uint32_t>(rng()), phase);
  }
}

TEST(WsUnmask, LargeBuffers) {
  std::mt19937_64 rng(3);
  const size_t k1080pRgba = 1920 * 1080 * 4;
  for (size_t size : {size_t{65536}, size_t{1} << 20, k1080pRgba, k1080pRgba + 13}) {
    expect_all_kernels_match(rng, size, rng() % 64, static_cast<uint32_t>(rng()), rng() % 4);
  }
}

TEST(WsUnmask, PiecewiseWithRunningPhaseEqualsWhole) {
  // How the decoder uses it: one payload arriving in reads of arbitrary size.
  std::mt19937_64 rng(4);
  for (const NamedKernel& kernel : available_kernels()) {
    for (int iter = 0; iter < 50; ++iter) {
      const std::vector<uint8_t> input = random_bytes(rng, 1 + rng() % 20000);
      const uint32_t key = static_cast<uint32_t>(rng());
      std::vector<uint8_t> whole = input;
      reference_unmask(whole.data(), whole.size(), key, 0);
      std::vector<uint8_t> pieces = input;
      for (size_t done = 0; done < pieces.size();) {
        const size_t n = std::min<size_t>(pieces.size() - done, 1 + rng() % 700);
        kernel.fn(pieces.data() + done, n, key, done);
        done += n;
      }
      ASSERT_EQ(pieces, whole) << kernel.name;
    }
  }
}

TEST(WsUnmask, UnmaskingTwiceRestoresInput) {
  std::mt19937_64 rng(5);
  const std::vector<uint8_t> input = random_bytes(rng, 4099);
  for (const NamedKernel& kernel : available_kernels()) {
    std::vector<uint8_t> data = input;
    kernel.fn(data.data() + 1, data.size() - 1, 0xdeadbeef, 3);
    kernel.fn(data.data() + 1, data.size() - 1, 0xdeadbeef, 3);
    EXPECT_EQ(data, input) << kernel.name;
  }
}

}  // namespace
}  // namespace syncd::ws
