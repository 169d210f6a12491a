// The relay encoder's bitrate and resolution from the bandwidth estimate (src/relay/
// encode_ladder.h): the share, the clamps, the steps down at once and up after a hold.
#include "egress/encode_ladder.h"

#include <gtest/gtest.h>

namespace syncd::egress {
namespace {

constexpr uint64_t kSecond = 1'000'000'000;

TEST(EncodeLadder, TheEncoderGetsItsShareWithinItsBounds) {
  EncodeLadder ladder(1920, 1080, 60);
  EXPECT_EQ(ladder.on_estimate(0, 10'000'000).bitrate_kbps, 8000u);    // 0.8 of it
  EXPECT_EQ(ladder.on_estimate(0, 100'000'000).bitrate_kbps, 20000u);  // the max
  EXPECT_EQ(ladder.on_estimate(0, 100'000).bitrate_kbps, 300u);        // the min
}

// 1080p60 needs 0.05 bit/pixel (6.2 Mbit/s) to stay; 720p60 2.8; below that 540p.
TEST(EncodeLadder, TheSendersMeasuredShareReplacesTheConfiguredOne) {
  // The relay's sender measures what of its target went to access units (FEC, RTX and headers
  // off): the encoder spends that, within its bounds, and falls back to media_share without it.
  EncodeLadder ladder(1920, 1080, 60);
  EXPECT_EQ(ladder.on_estimate(0, 10'000'000, 6'300'000).bitrate_kbps, 6300u);
  EXPECT_EQ(ladder.on_estimate(0, 10'000'000, 0).bitrate_kbps, 8000u);            // 0.8 of it
  EXPECT_EQ(ladder.on_estimate(0, 30'000'000, 28'000'000).bitrate_kbps, 20000u);  // max_kbps
  EXPECT_EQ(ladder.on_estimate(0, 1'000'000, 100'000).bitrate_kbps, 300u);        // min_kbps
}

TEST(EncodeLadder, ADropStepsDownAtOnceAsFarAsNeeded) {
  EncodeLadder ladder(1920, 1080, 60);
  EncodeTarget t = ladder.on_estimate(0, 20'000'000);
  EXPECT_EQ(t.width, 1920u);
  EXPECT_EQ(t.height, 1080u);
  t = ladder.on_estimate(kSecond, 5'000'000);  // 4 Mbit/s for the encoder
  EXPECT_EQ(t.width, 1280u);
  EXPECT_EQ(t.height, 720u);
  EXPECT_EQ(t.step, 1u);
  t = ladder.on_estimate(2 * kSecond, 2'000'000);  // 1.6 Mbit/s: 540p in one go from 720p
  EXPECT_EQ(t.width, 960u);
  EXPECT_EQ(t.height, 540u);
  EncodeLadder fresh(1920, 1080, 60);
  t = fresh.on_estimate(0, 2'000'000);  // two steps at once
  EXPECT_EQ(t.step, 2u);
  EXPECT_EQ(fresh.steps_down(), 2u);
  t = fresh.on_estimate(kSecond, 300'000);  // there is no step below the last
  EXPECT_EQ(t.step, 2u);
}

TEST(EncodeLadder, ItStepsUpOneAtATimeAfterTheRateHeldForTwoSeconds) {
  EncodeLadder ladder(1920, 1080, 60);
  ladder.on_estimate(0, 1'000'000);
  ASSERT_EQ(ladder.target().step, 2u);
  // 720p60 needs 0.07 bit/pixel to come back: 3.9 Mbit/s for the encoder, 4.9 estimated.
  ladder.on_estimate(1 * kSecond, 6'000'000);
  EXPECT_EQ(ladder.target().step, 2u);
  ladder.on_estimate(2 * kSecond, 6'000'000);
  EXPECT_EQ(ladder.target().step, 2u);  // 1 s held
  ladder.on_estimate(3 * kSecond, 6'000'000);
  EXPECT_EQ(ladder.target().step, 1u);  // 2 s held: 720p
  // 1080p60 needs 8.7 Mbit/s for the encoder: 6 Mbit/s estimated is not enough.
  ladder.on_estimate(10 * kSecond, 6'000'000);
  EXPECT_EQ(ladder.target().step, 1u);
  // A dip below the next step's need restarts the hold.
  ladder.on_estimate(11 * kSecond, 12'000'000);
  ladder.on_estimate(12 * kSecond, 9'000'000);
  ladder.on_estimate(13 * kSecond, 12'000'000);
  ladder.on_estimate(14 * kSecond, 12'000'000);
  EXPECT_EQ(ladder.target().step, 1u);
  ladder.on_estimate(15 * kSecond, 12'000'000);
  EXPECT_EQ(ladder.target().step, 0u);
  EXPECT_EQ(ladder.target().width, 1920u);
  EXPECT_EQ(ladder.steps_up(), 2u);
}

TEST(EncodeLadder, StepsKeepEvenSidesForAnySource) {
  EncodeLadder ladder(642, 362, 30, EncodeLadderConfig{.min_kbps = 50});
  const EncodeTarget& t = ladder.on_estimate(0, 1);  // 50 kbit/s: the last step
  EXPECT_EQ(t.step, 2u);
  EXPECT_EQ(t.width % 2, 0u);
  EXPECT_EQ(t.height % 2, 0u);
  EXPECT_EQ(t.width, 320u);
  EXPECT_EQ(t.height, 180u);
}

TEST(EncodeLadder, AnEncoderThatFallsBehindStepsDownAndComesBackWhenTheSmallerSizeHasRoom) {
  EncodeLadder ladder(1920, 1080, 60);
  constexpr uint64_t kS = 1'000'000'000;
  EXPECT_EQ(ladder.target().height, 1080u);
  // 1080p at 95 % of the wall clock: one step down (720p).
  EXPECT_EQ(ladder.on_encoder_load(1 * kS, 0.95).height, 720u);
  EXPECT_EQ(ladder.load_steps_down(), 1u);
  // Still over within the hold (the re-open and its IDR): no second step yet.
  EXPECT_EQ(ladder.on_encoder_load(1 * kS + 500'000'000, 0.9).height, 720u);
  // Past it, 720p still at 90 %: 540p.
  EXPECT_EQ(ladder.on_encoder_load(3 * kS, 0.9).height, 540u);
  EXPECT_EQ(ladder.load_steps_down(), 2u);
  // 540p at 40 %: 720p would be 40 % x 16/9 = 71 %, over 60 %: stay.
  for (uint64_t t = 4; t < 12; ++t) EXPECT_EQ(ladder.on_encoder_load(t * kS, 0.4).height, 540u);
  // At 30 % (53 % predicted) for 5 s: back to 720p; then 720p at 30 % predicts 68 % for 1080p.
  uint64_t t = 12;
  for (; t < 17; ++t) EXPECT_EQ(ladder.on_encoder_load(t * kS, 0.3).height, 540u) << t;
  EXPECT_EQ(ladder.on_encoder_load(t * kS, 0.3).height, 720u);
  EXPECT_EQ(ladder.load_steps_up(), 1u);
  for (++t; t < 30; ++t) EXPECT_EQ(ladder.on_encoder_load(t * kS, 0.3).height, 720u);
  // The bandwidth's step and the load's: the larger wins.
  EXPECT_EQ(ladder.on_estimate(30 * kS, 2'000'000).height, 540u);  // 1.6 Mbit/s: 540p
  EXPECT_EQ(ladder.load_step(), 1u);
}

}  // namespace
}  // namespace syncd::egress
