// No allocation per frame in steady state (src/audio_codec): counts every malloc, calloc and
// realloc in the process, libopus's included (it is a shared library, so the executable's
// definitions interpose on its calls too), while 32 channels are accumulated, encoded, decoded,
// concealed and recovered. Only in builds without AddressSanitizer, which owns malloc itself.
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "audio_codec/frame_accumulator.h"
#include "audio_codec/opus_decoder.h"
#include "audio_codec/opus_encoder.h"
#include "audio_codec_test_signal.h"

#if defined(__SANITIZE_ADDRESS__)
#define SYNC_COUNTS_MALLOC 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SYNC_COUNTS_MALLOC 0
#endif
#endif
#ifndef SYNC_COUNTS_MALLOC
#define SYNC_COUNTS_MALLOC 1
#endif

#if SYNC_COUNTS_MALLOC
namespace {
size_t g_allocations = 0;
}
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* malloc(size_t n) {
  ++g_allocations;
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t size) {
  ++g_allocations;
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t n) {
  ++g_allocations;
  return __libc_realloc(p, n);
}
}
#endif

namespace syncd::audio_codec {
namespace {

TEST(AudioCodecAllocation, NoneInSteadyState) {
#if !SYNC_COUNTS_MALLOC
  GTEST_SKIP() << "malloc belongs to the sanitizer in this build";
#else
  constexpr uint32_t kChannels = 32;
  const auto input = testing::make_sines(kChannels, 48000);
  const GroupPlan plan = plan_groups(kChannels, channels_per_group(32000, 10));
  const size_t before_open = g_allocations;
  OpusMultistreamEncoder encoders[2];
  OpusMultistreamDecoder decoders[2];
  for (size_t g = 0; g < 2; ++g) {
    EncoderConfig c;
    c.group = plan.groups[g];
    ASSERT_EQ(encoders[g].open(c), EncoderStatus::kOk);
    ASSERT_TRUE(decoders[g].open({kChannels, plan.groups[g], 960}));
  }
  // The counter sees libopus: creating its states allocated (opus_*_create call malloc).
  EXPECT_GE(g_allocations - before_open, 4u);
  FrameAccumulator acc(kChannels, 480);
  std::vector<float> out(480 * kChannels);
  uint8_t packets[2][2][1500];
  const size_t before = g_allocations;
  size_t frames = 0;
  for (size_t pos = 0; pos + 256 <= 48000; pos += 256) {
    const float* p = input.data() + pos * kChannels;
    size_t left = 256;
    uint64_t index = pos;
    while (left > 0) {
      const size_t taken = acc.append(p, left, index);
      p += taken * kChannels, left -= taken, index += taken;
      if (!acc.full()) continue;
      const size_t slot = frames % 2;
      for (size_t g = 0; g < 2; ++g) {
        const EncodeResult e = encoders[g].encode(acc.frame(), 480, packets[slot][g]);
        ASSERT_EQ(e.status, EncoderStatus::kOk);
        // Every 7th frame is "lost": recover it from this one; every 11th is concealed.
        const bool recover = frames % 7 == 1, conceal = frames % 11 == 5;
        if (recover) {
          ASSERT_TRUE(decoders[g]
                          .recover_from_next({packets[slot][g], e.bytes}, 480, out.data(), 480)
                          .ok());
        }
        if (conceal) {
          ASSERT_TRUE(decoders[g].conceal(480, out.data(), 480).ok());
        }
        ASSERT_TRUE(decoders[g].decode({packets[slot][g], e.bytes}, out.data(), 480).ok());
      }
      encoders[0].set_bitrate_per_channel(frames % 2 ? 32000 : 40000);
      acc.clear();
      ++frames;
    }
  }
  EXPECT_EQ(g_allocations - before, 0u) << "allocations during " << frames << " frames";
  EXPECT_GE(frames, 99u);
#endif
}

}  // namespace
}  // namespace syncd::audio_codec
