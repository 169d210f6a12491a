#include "telemetry/rate_bins.h"

#include <gtest/gtest.h>

#include "telemetry/stage_stats.h"

using syncd::telemetry::RateBins;
using syncd::telemetry::StageStats;

TEST(RateBins, FirstBinIsNeverComplete) {
  RateBins bins;
  for (int i = 0; i < 60; ++i) bins.record(1500 + i);  // second 1, first bin
  bins.advance(2100);
  EXPECT_EQ(bins.complete_seconds(), 0u);
}

TEST(RateBins, CountsFramesPerCompleteSecondAndLowRate) {
  RateBins bins(50);
  bins.record(999);  // first (partial) bin
  for (int s = 1; s <= 3; ++s) {
    const int frames = s == 2 ? 30 : 60;
    for (int i = 0; i < frames; ++i) bins.record(uint64_t(s) * 1000 + uint64_t(i) * 1000 / frames);
  }
  bins.advance(4000);
  EXPECT_EQ(bins.complete_seconds(), 3u);
  EXPECT_EQ(bins.low_rate_seconds(), 1u);
  EXPECT_EQ(bins.last_complete_fps(), 60u);
  EXPECT_EQ(bins.min_complete_fps(), 30u);
  EXPECT_EQ(bins.complete_frames(), 150u);
  std::vector<uint32_t> recent;
  bins.for_each_recent([&](uint32_t f) { recent.push_back(f); });
  EXPECT_EQ(recent, (std::vector<uint32_t>{60, 30, 60}));
}

TEST(RateBins, SilentSecondsAreLowRate) {
  RateBins bins;
  bins.record(500);
  for (int i = 0; i < 60; ++i) bins.record(1000 + i * 16);
  bins.advance(5000);  // seconds 2,3,4 had nothing
  EXPECT_EQ(bins.complete_seconds(), 4u);
  EXPECT_EQ(bins.low_rate_seconds(), 3u);
}

TEST(StageStats, AggregatesAreExact) {
  StageStats s;
  s.record(500);          // <= 1 us
  s.record(1'500'000);    // <= 2 ms
  s.record(900'000'000);  // +Inf
  EXPECT_EQ(s.count(), 3u);
  EXPECT_EQ(s.total_ns(), 901'500'500u);
  EXPECT_EQ(s.max_ns(), 900'000'000u);
  EXPECT_EQ(s.bucket(0), 1u);
  EXPECT_EQ(s.bucket(10), 1u);
  EXPECT_EQ(s.bucket(StageStats::kBuckets - 1), 1u);
}
