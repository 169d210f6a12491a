#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "net/ws/utf8.h"

namespace syncd::ws {
namespace {

uint32_t validate(std::string_view s, uint32_t state = kUtf8Accept) {
  return utf8_validate(state, reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

bool inside_sequence(uint32_t state) {
  return state != kUtf8Accept && state != kUtf8Reject;
}

// Independent reference: decodes code points arithmetically. A truncated final sequence is
// "incomplete" only if some continuation could still make it a valid scalar value, which is
// exactly when a fail-fast validator must not reject yet.
enum class Verdict { kValid, kIncomplete, kInvalid };

Verdict reference_verdict(const uint8_t* s, size_t n) {
  size_t i = 0;
  while (i < n) {
    const uint8_t lead = s[i];
    if (lead < 0x80) {
      ++i;
      continue;
    }
    int length;
    uint32_t code_point;
    uint32_t smallest;
    if ((lead & 0xE0) == 0xC0) {
      length = 2, code_point = lead & 0x1F, smallest = 0x80;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3, code_point = lead & 0x0F, smallest = 0x800;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4, code_point = lead & 0x07, smallest = 0x10000;
    } else {
      return Verdict::kInvalid;
    }
    int have = 1;
    for (; have < length && i + have < n; ++have) {
      const uint8_t next = s[i + have];
      if ((next & 0xC0) != 0x80) return Verdict::kInvalid;
      code_point = code_point << 6 | (next & 0x3F);
    }
    const int missing_bits = 6 * (length - have);
    const uint32_t lowest = code_point << missing_bits;
    const uint32_t highest = lowest | ((1u << missing_bits) - 1);
    auto overlaps = [&](uint32_t from, uint32_t to) {
      return std::max(lowest, from) <= std::min(highest, to);
    };
    if (!overlaps(smallest, 0xD7FF) && !overlaps(std::max(smallest, 0xE000u), 0x10FFFF)) {
      return Verdict::kInvalid;
    }
    if (have < length) return Verdict::kIncomplete;
    i += length;
  }
  return Verdict::kValid;
}

Verdict verdict_of(uint32_t state) {
  if (state == kUtf8Accept) return Verdict::kValid;
  if (state == kUtf8Reject) return Verdict::kInvalid;
  return Verdict::kIncomplete;
}

std::string encode_utf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | cp >> 6);
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | cp >> 12);
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | cp >> 18);
    out += static_cast<char>(0x80 | (cp >> 12 & 0x3F));
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

const std::vector<std::string> kValid = {
    "",
    "plain ASCII text, 0123456789 and punctuation!",
    std::string("\0embedded NUL", 13),
    "\xC2\x80",                                      // U+0080, smallest 2-byte
    "\xDF\xBF",                                      // U+07FF
    "\xE0\xA0\x80",                                  // U+0800, smallest 3-byte
    "\xED\x9F\xBF",                                  // U+D7FF, just below the surrogates
    "\xEE\x80\x80",                                  // U+E000, just above the surrogates
    "\xEF\xBF\xBF",                                  // U+FFFF
    "\xF0\x90\x80\x80",                              // U+10000, smallest 4-byte
    "\xF4\x8F\xBF\xBF",                              // U+10FFFF, the largest code point
    "\xCE\xBA\xE1\xBD\xB9\xCF\x83\xCE\xBC\xCE\xB5",  // "kosme" in Greek
    "Hello-\xC2\xB5@\xC3\x9F\xC3\xB6\xC3\xA4\xC3\xBC-UTF-8!! \xF0\x9F\x98\x80 long ASCII tail",
};

const std::vector<std::string> kOverlong = {
    "\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xE0\x9F\xBF", "\xF0\x80\x80\x80", "\xF0\x8F\xBF\xBF",
};

const std::vector<std::string> kSurrogates = {
    "\xED\xA0\x80",                 // U+D800
    "\xED\xBF\xBF",                 // U+DFFF
    "\xED\xA0\x80\xED\xB0\x80",     // a surrogate pair, CESU-8 style
    "ok so far \xED\xAF\xBF then",  // U+DBFF in the middle of text
};

const std::vector<std::string> kBeyondMax = {
    "\xF4\x90\x80\x80",          // U+110000
    "\xF5\x80\x80\x80",          // lead byte only usable above U+10FFFF
    "\xF7\xBF\xBF\xBF",          // U+1FFFFF
    "\xF8\x88\x80\x80\x80",      // 5-byte form
    "\xFC\x84\x80\x80\x80\x80",  // 6-byte form
    "\xFE",
    "\xFF",
};

const std::vector<std::string> kMalformed = {
    "\x80",
    "a\xBF"
    "b",
    "\xC2"
    "A",
    "\xE1\x80"
    "A",
    "\xF1\x80\x80"
    "A",
    "\xC2\xC2\x80",
};

const std::vector<std::string> kTruncated = {
    "\xC2", "\xE2\x82", "\xE0\xA0", "\xF0\x9F\x98", "\xF4\x8F\xBF", "abc\xE2",
};

TEST(WsUtf8, AcceptsValidText) {
  for (const auto& s : kValid) EXPECT_EQ(validate(s), kUtf8Accept) << testing::PrintToString(s);
}

TEST(WsUtf8, RejectsOverlongEncodings) {
  for (const auto& s : kOverlong) EXPECT_EQ(validate(s), kUtf8Reject) << testing::PrintToString(s);
}

TEST(WsUtf8, RejectsSurrogates) {
  for (const auto& s : kSurrogates) {
    EXPECT_EQ(validate(s), kUtf8Reject) << testing::PrintToString(s);
  }
}

TEST(WsUtf8, RejectsCodePointsAboveMax) {
  for (const auto& s : kBeyondMax) EXPECT_EQ(validate(s), kUtf8Reject) << testing::PrintToString(s);
}

TEST(WsUtf8, RejectsMalformedSequences) {
  for (const auto& s : kMalformed) EXPECT_EQ(validate(s), kUtf8Reject) << testing::PrintToString(s);
}

TEST(WsUtf8, TruncatedSequenceIsPendingNotAcceptedOrRejected) {
  for (const auto& s : kTruncated) {
    EXPECT_TRUE(inside_sequence(validate(s))) << testing::PrintToString(s);
  }
  EXPECT_EQ(validate("\xAC", validate("\xE2\x82")), kUtf8Accept);
  EXPECT_EQ(validate("A", validate("\xE2\x82")), kUtf8Reject);
}

TEST(WsUtf8, RejectIsSticky) {
  uint32_t state = validate("\xFF");
  ASSERT_EQ(state, kUtf8Reject);
  EXPECT_EQ(validate("perfectly fine ASCII after the error", state), kUtf8Reject);
  EXPECT_EQ(validate("", state), kUtf8Reject);
}

TEST(WsUtf8, AnySplitOfValidTextGivesTheSameResult) {
  for (const auto& s : kValid) {
    for (size_t cut = 0; cut <= s.size(); ++cut) {
      uint32_t state = validate(std::string_view(s).substr(0, cut));
      ASSERT_NE(state, kUtf8Reject);
      EXPECT_EQ(validate(std::string_view(s).substr(cut), state), kUtf8Accept) << cut;
    }
    // One byte per call, as when every byte arrives in its own read.
    uint32_t state = kUtf8Accept;
    for (char c : s) state = validate(std::string_view(&c, 1), state);
    EXPECT_EQ(state, kUtf8Accept);
  }
}

TEST(WsUtf8, EveryScalarValueIsAcceptedAndEverySurrogateRejected) {
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    const uint32_t expected = (cp >= 0xD800 && cp <= 0xDFFF) ? kUtf8Reject : kUtf8Accept;
    ASSERT_EQ(validate(encode_utf8(cp)), expected) << std::hex << cp;
  }
}

TEST(WsUtf8, MatchesReferenceOnEveryStringUpToThreeBytes) {
  uint8_t buf[3];
  for (uint32_t n = 1; n <= 3; ++n) {
    const uint32_t count = 1u << (8 * n);
    for (uint32_t v = 0; v < count; ++v) {
      for (uint32_t i = 0; i < n; ++i) buf[i] = static_cast<uint8_t>(v >> (8 * i));
      ASSERT_EQ(verdict_of(utf8_validate(kUtf8Accept, buf, n)), reference_verdict(buf, n))
          << "length " << n << " value " << std::hex << v;
    }
  }
}

TEST(WsUtf8, MatchesReferenceOnRandomStrings) {
  std::mt19937_64 rng(6455);
  // Bias towards bytes that form sequences, so long strings are not all rejected early.
  const uint8_t interesting[] = {'a',  0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF,
                                 0xC2, 0xDF, 0xE0, 0xE1, 0xED, 0xEF, 0xF0, 0xF4};
  std::vector<uint8_t> s;
  for (int iter = 0; iter < 200000; ++iter) {
    s.resize(rng() % 24);
    for (auto& b : s) {
      b = (rng() & 1) ? interesting[rng() % sizeof interesting] : static_cast<uint8_t>(rng());
    }
    ASSERT_EQ(verdict_of(utf8_validate(kUtf8Accept, s.data(), s.size())),
              reference_verdict(s.data(), s.size()));
  }
}

TEST(WsUtf8, LongAsciiRunsAroundMultiByteCharacters) {
  // Exercises the 8-bytes-at-a-time ASCII skip at every alignment of the non-ASCII byte.
  for (size_t prefix = 0; prefix < 40; ++prefix) {
    std::string s(prefix, 'x');
    s += "\xE2\x82\xAC";
    s += std::string(17, 'y');
    EXPECT_EQ(validate(s), kUtf8Accept) << prefix;
    std::string bad(prefix, 'x');
    bad += '\xC0';
    bad += std::string(17, 'y');
    EXPECT_EQ(validate(bad), kUtf8Reject) << prefix;
  }
}

}  // namespace
}  // namespace syncd::ws
