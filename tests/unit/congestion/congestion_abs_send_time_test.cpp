// abs-send-time conversion and unwrapping (src/congestion/abs_send_time.h).
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include "congestion/abs_send_time.h"

namespace syncd::congestion {
namespace {

constexpr uint64_t kSecond = 1'000'000'000;

TEST(CongestionAbsSendTime, FromNanosecondsTable) {
  // 6.18 fixed point: one second is 1 << 18; the 6 integer bits wrap at 64 s.
  EXPECT_EQ(abs_send_time_from_ns(0), 0u);
  EXPECT_EQ(abs_send_time_from_ns(kSecond), 0x040000u);
  EXPECT_EQ(abs_send_time_from_ns(kSecond / 2), 0x020000u);
  EXPECT_EQ(abs_send_time_from_ns(63 * kSecond), 63u << 18);
  EXPECT_EQ(abs_send_time_from_ns(64 * kSecond), 0u);
  EXPECT_EQ(abs_send_time_from_ns(65 * kSecond + kSecond / 4), 0x050000u);
  // One unit is 3.814697 us: 3 us rounds to one unit, 1 us to none, 2 us to one.
  EXPECT_EQ(abs_send_time_from_ns(3'000), 1u);
  EXPECT_EQ(abs_send_time_from_ns(1'000), 0u);
  EXPECT_EQ(abs_send_time_from_ns(2'000), 1u);
  // The last unit before a wrap rounds up into the wrap.
  EXPECT_EQ(abs_send_time_from_ns(64 * kSecond - 1), 0u);
  EXPECT_EQ(abs_send_time_from_ns(64 * kSecond - 4'000), 0xFFFFFFu);
  // Large clocks (CLOCK_MONOTONIC after years) do not overflow.
  EXPECT_EQ(abs_send_time_from_ns(UINT64_C(1) << 62) & ~kAbsSendTimeMask, 0u);
}

TEST(CongestionAbsSendTime, UnitsToNanoseconds) {
  EXPECT_EQ(abs_send_time_units_to_ns(0), 0);
  EXPECT_EQ(abs_send_time_units_to_ns(1 << 18), 1'000'000'000);
  EXPECT_EQ(abs_send_time_units_to_ns(1), 3'815);  // 3814.697 rounds up
  EXPECT_EQ(abs_send_time_units_to_ns(-(1 << 18)), -1'000'000'000);
  EXPECT_EQ(abs_send_time_units_to_ns(-1), -3'815);
  // Ten days of units: no overflow.
  const int64_t ten_days_units = int64_t{10} * 86'400 << 18;
  EXPECT_EQ(abs_send_time_units_to_ns(ten_days_units), int64_t{10} * 86'400 * 1'000'000'000);
}

TEST(CongestionAbsSendTime, UnwrapAcrossTheWrap) {
  AbsSendTimeUnwrapper unwrapper;
  const uint64_t start = 63 * kSecond + 900'000'000;  // 100 ms before the wrap
  const int64_t first = unwrapper.unwrap_ns(abs_send_time_from_ns(start));
  for (uint64_t t = start; t < start + 3 * kSecond; t += 5'000'000) {
    const int64_t unwrapped = unwrapper.unwrap_ns(abs_send_time_from_ns(t));
    EXPECT_LE(std::llabs(unwrapped - first - static_cast<int64_t>(t - start)), 4'000) << t;
  }
}

TEST(CongestionAbsSendTime, UnwrapReorderedAcrossTheWrap) {
  AbsSendTimeUnwrapper unwrapper;
  const uint64_t after = 64 * kSecond + 2'000'000;   // just after the wrap
  const uint64_t before = 64 * kSecond - 3'000'000;  // sent earlier, arrives later
  const int64_t a = unwrapper.unwrap_ns(abs_send_time_from_ns(after));
  const int64_t b = unwrapper.unwrap_ns(abs_send_time_from_ns(before));
  EXPECT_NEAR(static_cast<double>(a - b), 5e6, 4e3);
  // And forward again past the first.
  const int64_t c = unwrapper.unwrap_ns(abs_send_time_from_ns(after + 10'000'000));
  EXPECT_NEAR(static_cast<double>(c - a), 10e6, 4e3);
}

TEST(CongestionAbsSendTime, UnwrapSeededRandomWalkOverMinutes) {
  // Steps up to 30 s either way (the unwrapper's contract is < 32 s) over many wraps: the
  // unwrapped time tracks the true one within a unit's rounding.
  std::mt19937_64 rng(16);
  std::uniform_int_distribution<int64_t> step(-2 * static_cast<int64_t>(kSecond),
                                              30 * static_cast<int64_t>(kSecond));
  AbsSendTimeUnwrapper unwrapper;
  int64_t truth = 1'000 * static_cast<int64_t>(kSecond);
  const int64_t origin = truth;
  const int64_t first = unwrapper.unwrap_ns(abs_send_time_from_ns(static_cast<uint64_t>(truth)));
  for (int i = 0; i < 10'000; ++i) {
    truth += step(rng);
    const int64_t unwrapped =
        unwrapper.unwrap_ns(abs_send_time_from_ns(static_cast<uint64_t>(truth)));
    ASSERT_LE(std::llabs((unwrapped - first) - (truth - origin)), 4'000) << i;
  }
}

TEST(CongestionAbsSendTime, HighBitsIgnored) {
  AbsSendTimeUnwrapper a, b;
  EXPECT_EQ(a.unwrap_ns(0x123456), b.unwrap_ns(0xFF123456));
}

}  // namespace
}  // namespace syncd::congestion
