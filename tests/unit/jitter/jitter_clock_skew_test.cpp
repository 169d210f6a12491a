// ClockSkewEstimator: NTP conversion, the rate of a skewed sender through jittered reports, and
// the RTP-to-local mapping over a simulated 30 minutes.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "jitter/clock_skew.h"
#include "jitter_test_support.h"

namespace syncd::jitter {
namespace {

using testing::kMs;

TEST(ClockSkew, NtpToNanoseconds) {
  EXPECT_EQ(ntp_to_ns(0), 0u);
  EXPECT_EQ(ntp_to_ns(uint64_t{1} << 32), 1'000'000'000u);
  EXPECT_EQ(ntp_to_ns((uint64_t{3} << 32) | 0x80000000u), 3'500'000'000u);
  EXPECT_EQ(ntp_to_ns(0x40000000u), 250'000'000u);
  EXPECT_EQ(ntp_to_ns(1), 0u);                        // 0.23 ns rounds down
  EXPECT_EQ(ntp_to_ns(0xffffffffu), 1'000'000'000u);  // rounds up to the next second
}

// A sender whose clock runs `ppm` fast, reporting every 500 ms (local time) over a path of
// 15 ms + uniform 0-10 ms, with one report in 20 held up by a further 50-150 ms.
struct SkewedPath {
  double ppm;
  std::mt19937_64 rng{7};
  uint64_t sender_origin_ns = 3'900'000'000'000'000'000ull / 1000;  // some NTP-like epoch
  uint32_t rtp_origin = 123456789;

  uint64_t sender_ns(uint64_t local_ns) const {
    return sender_origin_ns + static_cast<uint64_t>(std::llround(local_ns * (1 + ppm * 1e-6)));
  }
  uint32_t rtp(uint64_t local_ns) const {
    const double ticks = (sender_ns(local_ns) - sender_origin_ns) * 90000.0 / 1e9;
    return rtp_origin + static_cast<uint32_t>(static_cast<uint64_t>(std::llround(ticks)));
  }
  uint64_t delay() {
    uint64_t d = 15 * kMs + std::uniform_int_distribution<uint64_t>(0, 10 * kMs)(rng);
    if (rng() % 20 == 0) d += std::uniform_int_distribution<uint64_t>(50 * kMs, 150 * kMs)(rng);
    return d;
  }
};

void check_skew(double ppm) {
  SkewedPath path{ppm};
  ClockSkewEstimator estimator;
  const uint64_t start = 5'000 * kMs;
  double worst_ppm_error = 0;
  double worst_mapping_error_ns = 0;
  for (int report = 0; report < 3600; ++report) {  // 30 minutes
    const uint64_t sent = start + report * 500 * kMs;
    ASSERT_TRUE(
        estimator.on_sender_report(path.sender_ns(sent), path.rtp(sent), sent + path.delay()));
    if (report == 600) {
      // After 5 minutes of reports the estimate is within a few ppm.
      EXPECT_NEAR(estimator.skew_ppm(), ppm, 3.0) << "after 600 reports";
    }
    if (report >= 600) {
      worst_ppm_error = std::max(worst_ppm_error, std::fabs(estimator.skew_ppm() - ppm));
    }
    if (report >= 1) {
      // The mapping of a timestamp 100 ms ahead lands on its lowest-delay arrival (15 ms after
      // its send) within a couple of milliseconds, all along.
      const uint64_t ahead = sent + 100 * kMs;
      const double error = static_cast<double>(estimator.local_ns_for_rtp(path.rtp(ahead))) -
                           static_cast<double>(ahead + 15 * kMs);
      worst_mapping_error_ns = std::max(worst_mapping_error_ns, std::fabs(error));
    }
  }
  EXPECT_LT(worst_ppm_error, 3.0);
  EXPECT_LT(worst_mapping_error_ns, 2.0 * kMs);
  EXPECT_NEAR(estimator.local_ns_per_tick(), 1e9 / 90000 / (1 + ppm * 1e-6), 11111.1 * 3e-6);
  std::printf("skew %+.0f ppm: worst ppm error after 5 min %.2f, worst mapping error %.3f ms\n",
              ppm, worst_ppm_error, worst_mapping_error_ns / 1e6);
}

TEST(ClockSkew, SenderHundredPpmFast) {
  check_skew(100);
}
TEST(ClockSkew, SenderFiftyPpmSlow) {
  check_skew(-50);
}
TEST(ClockSkew, SameRate) {
  check_skew(0);
}

TEST(ClockSkew, WithoutSkewCorrectionTheMappingDrifts) {
  // The reason for the estimate: at 100 ppm a fixed nominal mapping is 180 ms off after 30 min.
  SkewedPath path{100};
  const uint64_t sent = 1'800'000 * kMs;
  const double nominal_ticks = static_cast<uint32_t>(path.rtp(sent) - path.rtp(0));
  const double nominal_local_ns = nominal_ticks * 1e9 / 90000;
  EXPECT_NEAR(static_cast<double>(sent) - nominal_local_ns, -180.0 * kMs, 1.0 * kMs);
}

TEST(ClockSkew, RefusesReportsOutOfOrder) {
  ClockSkewEstimator estimator;
  EXPECT_FALSE(estimator.valid());
  EXPECT_TRUE(estimator.on_sender_report(10'000 * kMs, 0, 1'000 * kMs));
  EXPECT_TRUE(estimator.valid());
  EXPECT_FALSE(estimator.on_sender_report(10'000 * kMs, 0, 1'500 * kMs));
  EXPECT_FALSE(estimator.on_sender_report(9'000 * kMs, 0, 1'500 * kMs));
  EXPECT_EQ(estimator.counters().refused_out_of_order, 2u);
  EXPECT_EQ(estimator.skew_ppm(), 0.0);
  // The mapping before any rate: the lowest delay seen.
  EXPECT_EQ(estimator.local_ns_for_sender_ns(10'500 * kMs), 1'500 * kMs);
  EXPECT_EQ(estimator.local_ns_for_rtp(90000 / 2), 1'500 * kMs);
}

TEST(ClockSkew, AnHourLongJumpRestartsTheWindow) {
  ClockSkewEstimator estimator;
  for (int i = 0; i < 100; ++i) {
    estimator.on_sender_report(10'000 * kMs + i * 500 * kMs, 0, 1'000 * kMs + i * 501 * kMs);
  }
  // Delay grows 1 ms per 500 ms (our clock 2000 ppm fast), clamped to the 500 ppm limit.
  EXPECT_NEAR(estimator.skew_ppm(), -499.75, 0.01);
  EXPECT_TRUE(estimator.on_sender_report(10'000'000 * kMs, 0, 1'100'000 * kMs));
  EXPECT_EQ(estimator.counters().refused_jump, 1u);
  EXPECT_EQ(estimator.skew_ppm(), 0.0);
}

}  // namespace
}  // namespace syncd::jitter
