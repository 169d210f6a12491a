// ASCII text helpers for the protocol parsers (HTTP headers, SDP, the head tracker's replay
// files): their tokens compare case-insensitively in ASCII, never by locale, and their optional
// whitespace is a few known characters.
//
// Pure: any thread.
#pragma once

#include <string_view>

namespace syncd::core {

constexpr char ascii_lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

// a and b equal but for ASCII letter case.
constexpr bool equals_ignore_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  return true;
}

// s without the leading and trailing characters in `blanks`: by default space and tab, HTTP's
// optional whitespace (RFC 9110 section 5.6.3).
constexpr std::string_view trim(std::string_view s, std::string_view blanks = " \t") {
  const size_t first = s.find_first_not_of(blanks);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(blanks) - first + 1);
}

}  // namespace syncd::core
