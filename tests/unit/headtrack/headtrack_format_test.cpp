// to_chars_g9 against both definitions of "%.9g" it replaces: std::to_chars(general, 9) and
// snprintf. Random values over the whole fast range and beyond it, exact ties, and the
// neighbours of every power of ten where the exponent and the rounding carry change.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "headtrack/format_g9.h"

namespace syncd::headtrack {
namespace {

std::string fast(double v) {
  char buf[64];
  auto r = to_chars_g9(buf, buf + sizeof(buf), v);
  EXPECT_EQ(r.ec, std::errc{});
  return std::string(buf, r.ptr);
}

std::string std_g9(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::general, 9);
  return std::string(buf, r.ptr);
}

std::string printf_g9(double v) {
  char buf[64];
  const int n = std::snprintf(buf, sizeof(buf), "%.9g", v);
  return std::string(buf, size_t(n));
}

void expect_same(double v) {
  const std::string want = std_g9(v);
  ASSERT_EQ(fast(v), want) << std::hexfloat << v;
  ASSERT_EQ(printf_g9(v), want) << std::hexfloat << v;
}

TEST(FormatG9, FixedExamples) {
  EXPECT_EQ(fast(0.0), "0");
  EXPECT_EQ(fast(-0.0), "-0");
  EXPECT_EQ(fast(1.0), "1");
  EXPECT_EQ(fast(-179.999999), "-179.999999");
  EXPECT_EQ(fast(0.70710678118654757), "0.707106781");
  EXPECT_EQ(fast(1.5e-5), "1.5e-05");
  EXPECT_EQ(fast(123456789.5), "123456790");  // tie, 9 is odd: up
  EXPECT_EQ(fast(123456788.5), "123456788");  // tie, 8 is even: stays
  EXPECT_EQ(fast(999999999.5), "1e+09");      // carries past the fast range: to_chars
  EXPECT_EQ(fast(0.0001), "0.0001");
  EXPECT_EQ(fast(0.00001), "1e-05");
}

TEST(FormatG9, RandomBitPatternsAcrossMagnitudes) {
  std::mt19937_64 rng(20261202);
  std::uniform_real_distribution<double> exponent(-14.0, 11.0);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  for (int i = 0; i < 400'000; ++i) {
    expect_same(std::pow(10.0, exponent(rng)) * (rng() & 1 ? 1 : -1));
    expect_same(unit(rng));          // quaternion components
    expect_same(unit(rng) * 180.0);  // degrees
    expect_same(unit(rng) * 1e-6);   // small rates, exponential form
  }
}

TEST(FormatG9, ExactTiesAndShortMantissas) {
  // Values with few mantissa bits land exactly halfway at nine digits: ties to even.
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200'000; ++i) {
    const double whole = double(rng() % 2'000'000'000ull);
    expect_same(whole + 0.5);
    expect_same((whole + 0.5) / 1024.0);
    expect_same(std::ldexp(double(rng() % 4096), -int(rng() % 60)));
  }
}

TEST(FormatG9, NeighboursOfPowersOfTen) {
  for (int k = -15; k <= 12; ++k) {
    const double p = std::pow(10.0, k);
    double lo = p, hi = p;
    for (int i = 0; i < 64; ++i) {
      expect_same(lo);
      expect_same(hi);
      expect_same(-lo);
      lo = std::nextafter(lo, 0.0);
      hi = std::nextafter(hi, 1e300);
    }
    // Just below a power of ten, where nine nines round up and the exponent moves.
    expect_same(p * 0.99999999949999);
    expect_same(p * 0.9999999995);
    expect_same(p * 0.99999999950001);
  }
}

TEST(FormatG9, OutsideTheFastRangeFallsBack) {
  for (double v : {1e9, 1e300, 5e-324, 2.2250738585072014e-308, 1e-12, -3.4e38, 4.5e15}) {
    expect_same(v);
  }
}

TEST(FormatG9, NoRoomIsReported) {
  char buf[4];
  auto r = to_chars_g9(buf, buf + sizeof(buf), 0.123456789);
  EXPECT_EQ(r.ec, std::errc::value_too_large);
  r = to_chars_g9(buf, buf + 1, -0.0);
  EXPECT_EQ(r.ec, std::errc::value_too_large);
  r = to_chars_g9(buf, buf + 1, 7.0);
  EXPECT_EQ(r.ec, std::errc{});
  EXPECT_EQ(std::string(buf, r.ptr), "7");
}

}  // namespace
}  // namespace syncd::headtrack
