#include <gtest/gtest.h>

#include <random>

#include "rtp/sequence.h"

namespace syncd::rtp {
namespace {

TEST(RtpSequence, DiffAndNewerAcross16BitWrap) {
  EXPECT_EQ(sequence_diff(0, 65535), 1);
  EXPECT_EQ(sequence_diff(65535, 0), -1);
  EXPECT_EQ(sequence_diff(10, 65530), 16);
  EXPECT_EQ(sequence_diff(100, 100), 0);
  EXPECT_TRUE(sequence_newer(0, 65535));
  EXPECT_FALSE(sequence_newer(65535, 0));
  EXPECT_FALSE(sequence_newer(7, 7));
  EXPECT_TRUE(sequence_newer(0x7FFF, 0));
  // Exactly half a circle: one of the two, never both.
  EXPECT_NE(sequence_newer(0x8000, 0), sequence_newer(0, 0x8000));
  EXPECT_NE(sequence_newer(0x9000, 0x1000), sequence_newer(0x1000, 0x9000));
}

TEST(RtpSequence, TimestampDiffAcross32BitWrap) {
  EXPECT_EQ(timestamp_diff(0, 0xFFFFFFFF), 1);
  EXPECT_EQ(timestamp_diff(0xFFFFFFFF, 0), -1);
  EXPECT_EQ(timestamp_diff(1500, 0xFFFFFC18), 2500);
}

TEST(RtpSequence, UnwrapsForwardAndBackAcrossWrap) {
  SequenceUnwrapper unwrapper;
  const uint64_t first = unwrapper.unwrap(65534);
  EXPECT_EQ(unwrapper.unwrap(65535), first + 1);
  EXPECT_EQ(unwrapper.unwrap(0), first + 2);
  EXPECT_EQ(unwrapper.unwrap(1), first + 3);
  // A late packet from before the wrap.
  EXPECT_EQ(unwrapper.unwrap(65533), first - 1);
  EXPECT_EQ(unwrapper.unwrap(2), first + 4);
  EXPECT_EQ(unwrapper.peek(3), first + 5);
  EXPECT_EQ(unwrapper.unwrap(2), first + 4);  // peek did not move the reference
}

TEST(RtpSequence, UnwrapRandomWalkMatchesTrueCounter) {
  std::mt19937 rng(11);
  SequenceUnwrapper unwrapper;
  int64_t truth = 40000;
  const uint64_t origin = unwrapper.unwrap(static_cast<uint16_t>(truth));
  for (int i = 0; i < 200000; ++i) {
    // Mostly forward, sometimes back (reordering), steps well under half the circle.
    truth += static_cast<int64_t>(rng() % 3000) - 900;
    ASSERT_EQ(unwrapper.unwrap(static_cast<uint16_t>(truth)),
              origin + static_cast<uint64_t>(truth - 40000))
        << i;
  }
}

TEST(RtpSequence, TimestampUnwrapRandomWalkMatchesTrueClock) {
  std::mt19937_64 rng(5);
  TimestampUnwrapper unwrapper;
  int64_t truth = 0xFFFF0000;
  const uint64_t origin = unwrapper.unwrap(static_cast<uint32_t>(truth));
  for (int i = 0; i < 100000; ++i) {
    truth += static_cast<int64_t>(rng() % 200'000'000) - 50'000'000;
    ASSERT_EQ(unwrapper.unwrap(static_cast<uint32_t>(truth)),
              origin + static_cast<uint64_t>(truth - 0xFFFF0000))
        << i;
  }
}

}  // namespace
}  // namespace syncd::rtp
