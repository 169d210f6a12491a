// The relay receiver's audio playout buffer (src/audio_codec/playout_buffer.h): ordering,
// fixed-target timing, the decode / FEC-recover / conceal choice per group, and the accounting
// of every frame once (played + recovered + concealed by reason).
#include <gtest/gtest.h>

#include <vector>

#include "audio_codec/playout_buffer.h"

namespace syncd::audio_codec {
namespace {

constexpr uint64_t kMs = 1'000'000;

std::vector<uint8_t> packet(uint8_t tag) {
  return std::vector<uint8_t>(20, tag);
}

PlayoutConfig two_groups() {
  PlayoutConfig c;
  c.groups = 2;
  c.frame_samples = 480;
  c.capacity_frames = 16;
  c.target_ns = 40 * kMs;
  return c;
}

TEST(PlayoutBuffer, PlaysInOrderAfterTheTarget) {
  PlayoutBuffer buffer(two_groups());
  const uint32_t ts0 = 0xFFFFF000u;  // wraps inside the test
  for (uint32_t f = 0; f < 10; ++f)
    for (uint32_t g = 0; g < 2; ++g)
      ASSERT_TRUE(buffer.insert(ts0 + f * 480, g, packet(uint8_t(f)), 1000 * kMs + f * 10 * kMs));
  PlayoutFrame out;
  EXPECT_FALSE(buffer.pop(1000 * kMs + 39 * kMs, out));  // the target is 40 ms
  for (uint32_t f = 0; f < 10; ++f) {
    ASSERT_TRUE(buffer.pop(1040 * kMs + f * 10 * kMs, out)) << f;
    EXPECT_EQ(uint32_t(out.capture_index), ts0 + f * 480);
    for (uint32_t g = 0; g < 2; ++g) {
      EXPECT_EQ(out.action[g], GroupAction::kDecode);
      ASSERT_EQ(out.packet[g].size(), 20u);
      EXPECT_EQ(out.packet[g][0], uint8_t(f));
    }
  }
  EXPECT_EQ(buffer.counters().frames_played, 10u);
  EXPECT_EQ(buffer.counters().frames_total(), 10u);
}

TEST(PlayoutBuffer, ReorderedPacketsWithinTheTargetCostNothing) {
  PlayoutBuffer buffer(two_groups());
  const uint64_t t0 = 5000 * kMs;
  // Frame 0 arrives first (sets the anchor); frames 1..5 arrive in reverse, 30 ms late.
  for (uint32_t g = 0; g < 2; ++g) ASSERT_TRUE(buffer.insert(0, g, packet(0), t0));
  for (int f = 5; f >= 1; --f)
    for (uint32_t g = 0; g < 2; ++g)
      ASSERT_TRUE(buffer.insert(uint32_t(f) * 480, g, packet(uint8_t(f)), t0 + 80 * kMs));
  PlayoutFrame out;
  uint64_t now = t0;
  int popped = 0;
  while (popped < 6) {
    now += kMs;
    while (popped < 6 && buffer.pop(now, out)) {
      EXPECT_EQ(out.capture_index, uint64_t(popped) * 480);
      ++popped;
    }
    if (now > t0 + 200 * kMs) break;
  }
  EXPECT_EQ(popped, 6);
  EXPECT_EQ(buffer.counters().frames_played, 6u);
  EXPECT_EQ(buffer.counters().frames_concealed_lost + buffer.counters().frames_concealed_underflow,
            0u);
}

TEST(PlayoutBuffer, ALossIsRecoveredFromTheNextPacketOrConcealed) {
  PlayoutBuffer buffer(two_groups());
  const uint64_t t0 = 0;
  // Frame 1 lost in group 0 (frame 2 holds its FEC); frames 3 and 4 lost in both groups: frame
  // 3 is concealed (a later frame is held, so the reason is loss), frame 4 rebuilt from 5.
  for (uint32_t f = 0; f < 8; ++f)
    for (uint32_t g = 0; g < 2; ++g) {
      if ((f == 1 && g == 0) || f == 3 || f == 4) continue;
      ASSERT_TRUE(buffer.insert(f * 480, g, packet(uint8_t(f)), t0 + f * 10 * kMs));
    }
  PlayoutFrame out;
  std::vector<GroupAction> group0;
  for (uint32_t f = 0; f < 8; ++f) {
    ASSERT_TRUE(buffer.pop(t0 + 40 * kMs + f * 10 * kMs, out));
    group0.push_back(out.action[0]);
    if (f == 1) {
      EXPECT_EQ(out.action[1], GroupAction::kDecode);
      EXPECT_EQ(out.packet[0][0], 2);  // the next frame's packet carries the FEC
    }
  }
  EXPECT_EQ(group0[1], GroupAction::kRecover);
  EXPECT_EQ(group0[3], GroupAction::kConceal);
  EXPECT_EQ(group0[4], GroupAction::kRecover);
  const PlayoutCounters& c = buffer.counters();
  EXPECT_EQ(c.frames_played, 5u);
  EXPECT_EQ(c.frames_recovered, 2u);
  EXPECT_EQ(c.frames_concealed_lost, 1u);
  EXPECT_EQ(c.frames_concealed_underflow, 0u);
  EXPECT_EQ(c.underflows, 0u);
  EXPECT_EQ(c.frames_total(), 8u);
}

TEST(PlayoutBuffer, AnEmptyBufferAtPlayoutIsAnUnderflowAndLatePacketsAreDropped) {
  PlayoutBuffer buffer(two_groups());
  for (uint32_t g = 0; g < 2; ++g) ASSERT_TRUE(buffer.insert(0, g, packet(0), 0));
  PlayoutFrame out;
  ASSERT_TRUE(buffer.pop(40 * kMs, out));
  // The sender stalls: frames 1 and 2 are due with nothing held.
  ASSERT_TRUE(buffer.pop(50 * kMs, out));
  EXPECT_EQ(out.action[0], GroupAction::kConceal);
  ASSERT_TRUE(buffer.pop(60 * kMs, out));
  EXPECT_FALSE(buffer.pop(65 * kMs, out));
  // Frame 1 turns up after it was concealed: late.
  EXPECT_FALSE(buffer.insert(480, 0, packet(1), 66 * kMs));
  const PlayoutCounters& c = buffer.counters();
  EXPECT_EQ(c.frames_concealed_underflow, 2u);
  EXPECT_EQ(c.underflows, 1u);  // one run
  EXPECT_EQ(c.packets_late, 1u);
  EXPECT_EQ(c.frames_total(), 3u);
}

TEST(PlayoutBuffer, PlayoutStopsWhenNothingComesAndRestartsOnTheNextPacket) {
  PlayoutConfig config = two_groups();
  config.max_underflow_frames = 5;
  PlayoutBuffer buffer(config);
  for (uint32_t g = 0; g < 2; ++g) ASSERT_TRUE(buffer.insert(0, g, packet(0), 0));
  PlayoutFrame out;
  int popped = 0;
  for (uint64_t t = 40 * kMs; t < 400 * kMs; t += 10 * kMs)
    while (buffer.pop(t, out)) ++popped;
  EXPECT_EQ(popped, 1 + 5);  // the frame, then 5 concealed before playout stops
  EXPECT_EQ(buffer.counters().stalls, 1u);
  // The sender comes back 10 s of capture later: playout restarts from its packet.
  const uint32_t later = 480u * 1000;
  for (uint32_t g = 0; g < 2; ++g) ASSERT_TRUE(buffer.insert(later, g, packet(9), 500 * kMs));
  ASSERT_TRUE(buffer.pop(540 * kMs, out));
  EXPECT_EQ(out.capture_index, later);
  EXPECT_EQ(out.action[0], GroupAction::kDecode);
  const PlayoutCounters& c = buffer.counters();
  EXPECT_EQ(c.restarts, 1u);
  EXPECT_EQ(c.frames_played, 2u);
  EXPECT_EQ(c.frames_concealed_underflow, 5u);
  EXPECT_EQ(c.frames_total(), 7u);
}

TEST(PlayoutBuffer, RefusesWhatItCannotPlace) {
  PlayoutBuffer buffer(two_groups());
  EXPECT_FALSE(buffer.insert(0, 2, packet(0), 0));                      // no such group
  EXPECT_FALSE(buffer.insert(0, 0, {}, 0));                             // empty
  EXPECT_FALSE(buffer.insert(0, 0, std::vector<uint8_t>(1300, 1), 0));  // too large
  ASSERT_TRUE(buffer.insert(0, 0, packet(0), 0));
  EXPECT_FALSE(buffer.insert(0, 0, packet(0), 0));         // duplicate
  EXPECT_FALSE(buffer.insert(100, 0, packet(0), 0));       // not on the frame grid
  EXPECT_FALSE(buffer.insert(16 * 480, 0, packet(0), 0));  // beyond the capacity
  const PlayoutCounters& c = buffer.counters();
  EXPECT_EQ(c.packets_refused, 3u);
  EXPECT_EQ(c.packets_duplicate, 1u);
  EXPECT_EQ(c.packets_misaligned, 1u);
  EXPECT_EQ(c.packets_overflow, 1u);
}

}  // namespace
}  // namespace syncd::audio_codec
