#include <gtest/gtest.h>

#include <string>

#include "net/http/request_parser.h"

using syncd::http::ParseStatus;
using syncd::http::RequestLimits;
using syncd::http::RequestParser;

namespace {
ParseStatus feed_all(RequestParser& p, const std::string& s) {
  return p.feed(s.data(), s.size());
}
}  // namespace

TEST(HttpRequestParser, ParsesGetWithHeaders) {
  RequestParser p;
  ASSERT_EQ(feed_all(p, "GET /stats?x=1 HTTP/1.1\r\nHost: a\r\nX-Thing:  v \r\n\r\n"),
            ParseStatus::kComplete);
  EXPECT_EQ(p.request().method, "GET");
  EXPECT_EQ(p.request().path(), "/stats");
  EXPECT_EQ(p.request().header("host"), "a");
  EXPECT_EQ(p.request().header("x-thing"), "v ");  // http-parser strips leading space only
  EXPECT_FALSE(p.request().upgrade);
}

TEST(HttpRequestParser, ByteAtATimeEqualsWhole) {
  const std::string req =
      "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
  RequestParser p;
  ParseStatus st = ParseStatus::kIncomplete;
  for (size_t i = 0; i < req.size(); ++i) {
    ASSERT_EQ(st, ParseStatus::kIncomplete) << i;
    st = p.feed(&req[i], 1);
  }
  ASSERT_EQ(st, ParseStatus::kComplete);
  EXPECT_TRUE(p.request().upgrade);
  EXPECT_EQ(p.request().header("sec-websocket-version"), "13");
}

TEST(HttpRequestParser, UpgradeLeavesFollowingBytes) {
  const std::string head =
      "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
  const std::string all = head + "\x81\x85rest";
  RequestParser p;
  ASSERT_EQ(feed_all(p, all), ParseStatus::kComplete);
  EXPECT_EQ(p.consumed(), head.size());
}

TEST(HttpRequestParser, MalformedIsBadRequest) {
  RequestParser p;
  EXPECT_EQ(feed_all(p, "GARBAGE\x01\r\n\r\n"), ParseStatus::kBadRequest);
  RequestParser q;
  EXPECT_EQ(feed_all(q, "GET / HTTP/1.1\r\nBad Header\r\n\r\n"), ParseStatus::kBadRequest);
}

TEST(HttpRequestParser, OversizedHeadIs431) {
  RequestParser p(RequestLimits{256, 64});
  std::string req = "GET / HTTP/1.1\r\nX-Big: " + std::string(400, 'a') + "\r\n\r\n";
  EXPECT_EQ(feed_all(p, req), ParseStatus::kHeadersTooLarge);
}

TEST(HttpRequestParser, OversizedHeadAcrossReadsIs431) {
  RequestParser p(RequestLimits{256, 64});
  EXPECT_EQ(feed_all(p, "GET / HTTP/1.1\r\n"), ParseStatus::kIncomplete);
  ParseStatus st = ParseStatus::kIncomplete;
  for (int i = 0; i < 100 && st == ParseStatus::kIncomplete; ++i)
    st = feed_all(p, "X-A: bbbbbbbb\r\n");
  EXPECT_EQ(st, ParseStatus::kHeadersTooLarge);
}

TEST(HttpRequestParser, TooManyHeadersIs431) {
  RequestParser p(RequestLimits{8192, 4});
  std::string req = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 6; ++i) req += "X-" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(feed_all(p, req + "\r\n"), ParseStatus::kHeadersTooLarge);
}

TEST(HttpRequestParser, BodyIsRefused) {
  RequestParser p;
  EXPECT_EQ(feed_all(p, "POST /stats HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"),
            ParseStatus::kBodyNotAllowed);
}

TEST(HttpRequestParser, ResetParsesAgain) {
  RequestParser p;
  ASSERT_EQ(feed_all(p, "GET /a HTTP/1.1\r\n\r\n"), ParseStatus::kComplete);
  p.reset();
  ASSERT_EQ(feed_all(p, "GET /b HTTP/1.1\r\n\r\n"), ParseStatus::kComplete);
  EXPECT_EQ(p.request().path(), "/b");
}
