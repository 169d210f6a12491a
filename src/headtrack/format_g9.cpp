#include "headtrack/format_g9.h"

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <system_error>

namespace syncd::headtrack {
namespace {

__extension__ typedef unsigned __int128 uint128;  // GCC and Clang; x86-64 and arm64

constexpr auto kPow10 = [] {
  std::array<uint64_t, 20> powers{};
  uint64_t p = 1;
  for (uint64_t& v : powers) {
    v = p;
    p *= 10;  // wraps once, after 10^19, harmlessly (unsigned)
  }
  return powers;
}();

// Nine significant digits of |v| (a positive normal double below 2^52) rounded half-to-even on
// the exact binary value, and the decimal exponent of the first: |v| ~ digits * 10^(exp10 - 8).
// False outside the exact range (exp10 must stay in [-11, 8] so that 10^(8 - exp10) fits 64 bits).
bool nine_digits(uint64_t bits, uint32_t& digits, int& exp10) {
  const int biased = int(bits >> 52);
  const uint64_t m = (bits & ((uint64_t{1} << 52) - 1)) | (uint64_t{1} << 52);
  const int shift = 1075 - biased;  // |v| = m * 2^-shift
  if (shift <= 0 || shift >= 127) return false;
  // floor(log10(2^(biased - 1023))): the exponent is this or one more.
  int e = ((biased - 1023) * 78913) >> 18;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const int k = 8 - e;
    if (k < 0 || k > 19) return false;
    const uint128 scaled = static_cast<uint128>(m) * kPow10[k];
    const uint128 whole = scaled >> shift;
    if (whole >= kPow10[9]) {
      ++e;
      continue;
    }
    if (whole < kPow10[8]) {
      --e;
      continue;
    }
    const uint128 rest = scaled & ((static_cast<uint128>(1) << shift) - 1);
    const uint128 half = static_cast<uint128>(1) << (shift - 1);
    uint64_t d = uint64_t(whole);
    if (rest > half || (rest == half && (d & 1))) ++d;
    if (d == kPow10[9]) {  // 999999999.5 and up: one digit more, renormalised
      d = kPow10[8];
      ++e;
      if (e > 8) return false;
    }
    digits = uint32_t(d);
    exp10 = e;
    return true;
  }
  return false;
}

}  // namespace

std::to_chars_result to_chars_g9(char* first, char* last, double v) {
  const uint64_t bits = std::bit_cast<uint64_t>(v);
  const bool negative = bits >> 63;
  const uint64_t magnitude = bits & ~(uint64_t{1} << 63);
  uint32_t digits = 0;
  int e = 0;
  if (magnitude == 0) {
    const size_t n = negative ? 2 : 1;
    if (size_t(last - first) < n) return {last, std::errc::value_too_large};
    std::memcpy(first, "-0", 2);
    if (!negative) *first = '0';
    return {first + n, std::errc{}};
  }
  if ((magnitude >> 52) == 0 || !nine_digits(magnitude, digits, e))
    return std::to_chars(first, last, v, std::chars_format::general, 9);

  // The nine digits, then trailing zeros dropped (%g without '#').
  char d[9];
  for (int i = 8; i >= 0; --i) {
    d[i] = char('0' + digits % 10);
    digits /= 10;
  }
  int n = 9;
  while (n > 1 && d[n - 1] == '0') --n;

  // Longest output: "-0.0000" + 9 digits, or "-d.dddddddde-11"; both under 24.
  char out[24];
  char* p = out;
  if (negative) *p++ = '-';
  if (e >= -4 && e < 9) {  // fixed: %g with precision 9 and exponent -4 <= X < 9
    if (e >= 0) {
      const int whole = e + 1;
      for (int i = 0; i < whole; ++i) *p++ = i < n ? d[i] : '0';
      if (n > whole) {
        *p++ = '.';
        for (int i = whole; i < n; ++i) *p++ = d[i];
      }
    } else {
      *p++ = '0';
      *p++ = '.';
      for (int i = 0; i < -e - 1; ++i) *p++ = '0';
      for (int i = 0; i < n; ++i) *p++ = d[i];
    }
  } else {  // exponential; the exact range leaves only -11 <= X <= -5 here
    *p++ = d[0];
    if (n > 1) {
      *p++ = '.';
      for (int i = 1; i < n; ++i) *p++ = d[i];
    }
    *p++ = 'e';
    *p++ = e < 0 ? '-' : '+';
    const int x = e < 0 ? -e : e;
    *p++ = char('0' + x / 10);
    *p++ = char('0' + x % 10);
  }
  const size_t len = size_t(p - out);
  if (size_t(last - first) < len) return {last, std::errc::value_too_large};
  std::memcpy(first, out, len);
  return {first + len, std::errc{}};
}

}  // namespace syncd::headtrack
