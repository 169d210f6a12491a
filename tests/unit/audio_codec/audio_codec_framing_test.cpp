// Framing around the Opus codec (src/audio_codec): the accumulator cuts exact frames out of odd
// capture block sizes with the right timestamps, channel groups, and the group header.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "audio_codec/channel_groups.h"
#include "audio_codec/frame_accumulator.h"

namespace syncd::audio_codec {
namespace {

// Sample (frame n, channel c) = n * channels + c, exact in float below 2^24 (docs/audio.md).
float sample(uint64_t n, uint32_t channels, uint32_t c) {
  return float(n * channels + c);
}

void check_exact_frames(uint32_t channels, uint32_t frame_samples,
                        const std::vector<size_t>& blocks) {
  FrameAccumulator acc(channels, frame_samples);
  uint64_t next = 0;  // absolute index of the next capture frame
  uint64_t frames_out = 0;
  std::vector<float> block;
  for (size_t b : blocks) {
    block.resize(b * channels);
    for (size_t i = 0; i < b; ++i)
      for (uint32_t c = 0; c < channels; ++c)
        block[i * channels + c] = sample(next + i, channels, c);
    const float* p = block.data();
    size_t left = b;
    uint64_t index = next;
    while (left > 0) {
      const size_t taken = acc.append(p, left, index);
      ASSERT_GT(taken, 0u);
      p += taken * channels, left -= taken, index += taken;
      if (!acc.full()) continue;
      ASSERT_EQ(acc.frame_index(), frames_out * frame_samples);
      for (uint32_t i = 0; i < frame_samples; ++i)
        for (uint32_t c = 0; c < channels; ++c)
          ASSERT_EQ(acc.frame()[i * channels + c], sample(acc.frame_index() + i, channels, c));
      EXPECT_EQ(acc.append(p, left, index), 0u) << "a full accumulator takes nothing";
      acc.clear();
      ++frames_out;
    }
    next += b;
  }
  EXPECT_EQ(frames_out, next / frame_samples);
  EXPECT_EQ(acc.held_frames(), next % frame_samples);
  EXPECT_EQ(acc.counters().frames_completed, frames_out);
  EXPECT_EQ(acc.counters().frames_appended, next);
  EXPECT_EQ(acc.counters().discontinuities, 0u);
}

TEST(FrameAccumulator, CutsExactFramesFromOddBlocks) {
  check_exact_frames(32, 480, {1, 7, 256, 333, 479, 480, 481, 1000, 2, 959, 961, 13});
  check_exact_frames(3, 960, {255, 1, 1, 1, 2000, 7});
}

TEST(FrameAccumulator, CutsExactFramesFromRandomBlocks) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<size_t> size(1, 1500);
  std::vector<size_t> blocks(300);
  for (auto& b : blocks) b = size(rng);
  check_exact_frames(32, 480, blocks);
}

TEST(FrameAccumulator, ShortGapBecomesSilenceLongGapRestarts) {
  FrameAccumulator acc(2, 480);
  std::vector<float> ones(2 * 480, 1.0f);
  EXPECT_EQ(acc.append(ones.data(), 100, 0), 100u);
  // Frames 100..149 never captured: silence, then the rest of the frame from index 150.
  EXPECT_EQ(acc.append(ones.data(), 480, 150), 330u);
  ASSERT_TRUE(acc.full());
  EXPECT_EQ(acc.frame_index(), 0u);
  EXPECT_EQ(acc.frame()[99 * 2], 1.0f);
  EXPECT_EQ(acc.frame()[100 * 2], 0.0f);
  EXPECT_EQ(acc.frame()[149 * 2 + 1], 0.0f);
  EXPECT_EQ(acc.frame()[150 * 2], 1.0f);
  acc.clear();
  EXPECT_EQ(acc.append(ones.data(), 10, 480), 10u);
  // A gap past the end of the held frame: the partial frame is discarded, a new one starts.
  EXPECT_EQ(acc.append(ones.data(), 10, 5000), 10u);
  EXPECT_EQ(acc.frame_index(), 5000u);
  EXPECT_EQ(acc.held_frames(), 10u);
  EXPECT_EQ(acc.counters().discontinuities, 2u);
}

TEST(ChannelGroups, DefaultRateNeedsTwoGroupsForThirtyTwoChannels) {
  // 32 kbit/s x 10 ms = 40 bytes, x1.5 + 2 = 62 bytes a channel: 17 fit 1100 bytes.
  EXPECT_EQ(channels_per_group(32000, 10), 17u);
  const GroupPlan plan = plan_groups(32, 17);
  ASSERT_EQ(plan.count, 2);
  EXPECT_EQ(plan.groups[0], (ChannelGroup{0, 16}));
  EXPECT_EQ(plan.groups[1], (ChannelGroup{16, 16}));
  // 20 ms doubles the bytes a channel (80 x 1.5 + 2 = 122): 9 fit, 32 channels take 4 groups
  // of 8.
  EXPECT_EQ(channels_per_group(32000, 20), 9u);
  const GroupPlan twenty = plan_groups(32, 9);
  ASSERT_EQ(twenty.count, 4);
  EXPECT_EQ(twenty.groups[3], (ChannelGroup{24, 8}));
  // Uneven split: sizes differ by at most one and cover every channel once.
  const GroupPlan odd = plan_groups(33, 10);
  ASSERT_EQ(odd.count, 4);
  uint32_t next = 0;
  for (const auto& g : odd.span()) {
    EXPECT_EQ(g.first_channel, next);
    EXPECT_TRUE(g.channels == 8 || g.channels == 9);
    next += g.channels;
  }
  EXPECT_EQ(next, 33u);
  EXPECT_EQ(plan_groups(0, 10).count, 0);
  EXPECT_EQ(plan_groups(32, 0).count, 0);
  EXPECT_EQ(plan_groups(255, 1).count, 0) << "more than kMaxGroups groups";
  EXPECT_EQ(plan_groups(1, 1).count, 1);
}

TEST(ChannelGroups, HeaderRoundTripAndRefusals) {
  const GroupHeader header{1, 2, {16, 16}};
  uint8_t payload[8] = {};
  write_group_header(header, payload);
  payload[4] = 0xf8;  // an Opus TOC
  GroupHeader parsed;
  std::span<const uint8_t> opus;
  ASSERT_EQ(parse_group_header(payload, parsed, opus), HeaderStatus::kOk);
  EXPECT_EQ(parsed, header);
  EXPECT_EQ(opus.data(), payload + 4);
  EXPECT_EQ(opus.size(), 4u);

  const GroupPlan plan = plan_groups(32, 17);
  EXPECT_TRUE(header_matches_plan(parsed, plan));
  EXPECT_FALSE(header_matches_plan({0, 2, {16, 16}}, plan)) << "group 0 is channels 0..15";
  EXPECT_FALSE(header_matches_plan({1, 2, {16, 15}}, plan));
  EXPECT_FALSE(header_matches_plan({1, 3, {16, 16}}, plan)) << "the sender planned 3 groups";
  EXPECT_FALSE(header_matches_plan({1, 2, {16, 16}}, plan_groups(32, 8)));

  EXPECT_EQ(parse_group_header(std::span(payload, 4), parsed, opus), HeaderStatus::kTooShort);
  uint8_t bad_index[5] = {2, 2, 0, 1, 0xf8};
  EXPECT_EQ(parse_group_header(bad_index, parsed, opus), HeaderStatus::kBadIndex);
  uint8_t no_groups[5] = {0, 0, 0, 1, 0xf8};
  EXPECT_EQ(parse_group_header(no_groups, parsed, opus), HeaderStatus::kBadIndex);
  uint8_t no_channels[5] = {0, 1, 0, 0, 0xf8};
  EXPECT_EQ(parse_group_header(no_channels, parsed, opus), HeaderStatus::kBadChannels);
  uint8_t past_255[5] = {0, 1, 250, 6, 0xf8};
  EXPECT_EQ(parse_group_header(past_255, parsed, opus), HeaderStatus::kBadChannels);
}

}  // namespace
}  // namespace syncd::audio_codec
