// core/text.h: the ASCII helpers the protocol parsers share.
#include "core/text.h"

#include <gtest/gtest.h>

namespace syncd::core {
namespace {

TEST(Text, EqualsIgnoreCaseIsAsciiOnly) {
  EXPECT_TRUE(equals_ignore_case("WebSocket", "websocket"));
  EXPECT_TRUE(equals_ignore_case("", ""));
  EXPECT_FALSE(equals_ignore_case("websocket", "websockets"));
  EXPECT_FALSE(equals_ignore_case("[", "{"));  // 0x5b and 0x7b differ by the case bit, not letters
  EXPECT_FALSE(equals_ignore_case("\xc3\x89", "\xc3\xa9"));  // É and é: bytes, not letters
  static_assert(equals_ignore_case("H264", "h264"));
}

TEST(Text, TrimTakesTheGivenBlanksFromBothEnds) {
  EXPECT_EQ(trim(" \tkeep-alive \t"), "keep-alive");
  EXPECT_EQ(trim("a b"), "a b");
  EXPECT_EQ(trim(" \t "), "");
  EXPECT_EQ(trim(""), "");
  EXPECT_EQ(trim("\tx ", " "), "\tx");  // SDP's: spaces only
  EXPECT_EQ(trim("line\r", " \t\r"), "line");
}

}  // namespace
}  // namespace syncd::core
