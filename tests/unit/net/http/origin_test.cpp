// The Host and Origin parsers (net/http/authority.h), by table.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "net/http/authority.h"

using syncd::http::host_allowed;
using syncd::http::HostKind;
using syncd::http::is_loopback;
using syncd::http::origin_allowed;
using syncd::http::parse_host_header;
using syncd::http::parse_origin;

TEST(Origin, SerializedOriginsParse) {
  struct Case {
    const char* value;
    const char* scheme;
    const char* host;
    HostKind kind;
    int port;
  };
  const Case cases[] = {
      {"http://localhost", "http", "localhost", HostKind::kName, -1},
      {"http://localhost:8080", "http", "localhost", HostKind::kName, 8080},
      {"https://127.0.0.1", "https", "127.0.0.1", HostKind::kIPv4, -1},
      {"http://127.1.2.3:0", "http", "127.1.2.3", HostKind::kIPv4, 0},
      {"https://[::1]:3000", "https", "[::1]", HostKind::kIPv6, 3000},
      {"http://[0:0:0:0:0:0:0:1]", "http", "[0:0:0:0:0:0:0:1]", HostKind::kIPv6, -1},
      {"https://noisedeck.app", "https", "noisedeck.app", HostKind::kName, -1},
      {"http://localhost:65535", "http", "localhost", HostKind::kName, 65535},
      {"chrome-extension://abcdef", "chrome-extension", "abcdef", HostKind::kName, -1},
  };
  for (const Case& c : cases) {
    const auto o = parse_origin(c.value);
    ASSERT_TRUE(o) << c.value;
    EXPECT_EQ(o->scheme, c.scheme) << c.value;
    EXPECT_EQ(o->authority.host, c.host) << c.value;
    EXPECT_EQ(o->authority.kind, c.kind) << c.value;
    EXPECT_EQ(o->authority.port, c.port) << c.value;
  }
}

TEST(Origin, EverythingElseIsRefused) {
  const char* refused[] = {
      "null",
      "",
      "http://",
      "http://[::1]evil.example",          // bytes after the IPv6 literal
      "http://127.0.0.1:80@evil.example",  // userinfo-like
      "http://user@localhost",
      "http://localhost:80:80",
      "http://localhost:abc",
      "http://localhost:",
      "http://localhost:65536",
      "http://localhost:123456",
      "http://localhost:+80",
      "http://localhost:-1",
      "http://localhost/",
      "http://localhost/path",
      "http://localhost?x",
      "http://localhost#x",
      "HTTP://localhost",
      "Http://localhost",
      "http://LOCALHOST",
      "http://[::1",
      "http://[::C]:1",  // a serialized origin's IPv6 address is lower-case too
      "http://[::1]]",
      "http://[::g]",
      "http://[fe80::1%25eth0]",
      "http://[v1.x]",
      "http://[]",
      "http:/localhost",
      "://localhost",
      "1http://localhost",
      "http://local host",
      "http://localhost\t",
      " http://localhost",
      "http://localhost ",
      "http://loc%61lhost",
      "http://localhost\r\n",
      "http://xn--\xc3\xa9.example",
  };
  for (const char* value : refused) EXPECT_FALSE(parse_origin(value)) << value;
  // A NUL inside the brackets ends inet_pton's reading early (found by fuzz_http_authority).
  using namespace std::string_view_literals;
  EXPECT_FALSE(parse_origin("https://[::1\0\0\0\0\xff\xff\xff\xff]"sv));
  EXPECT_FALSE(parse_host_header("[::1\0evil]"sv));
}

TEST(Origin, AllowedAreLoopbackHttpOrListed) {
  const std::vector<std::string> listed = {"https://noisedeck.app", "null"};
  EXPECT_TRUE(origin_allowed("http://localhost:8080", listed));
  EXPECT_TRUE(origin_allowed("http://127.0.0.1", listed));
  EXPECT_TRUE(origin_allowed("https://[::1]:3000", listed));
  EXPECT_TRUE(origin_allowed("https://noisedeck.app", listed));
  EXPECT_FALSE(origin_allowed("https://noisedeck.app:443", listed));  // exact match only
  EXPECT_FALSE(origin_allowed("null", listed));                       // never, even when listed
  EXPECT_FALSE(origin_allowed("https://evil.example", listed));
  EXPECT_FALSE(origin_allowed("http://127.0.0.1.evil.example", listed));
  EXPECT_FALSE(origin_allowed("http://localhost.evil.example", listed));
  EXPECT_FALSE(origin_allowed("http://[::1]evil.example", listed));
  EXPECT_FALSE(origin_allowed("http://127.0.0.1:80@evil.example", listed));
  EXPECT_FALSE(origin_allowed("http://localhost:80:80", listed));
  EXPECT_FALSE(origin_allowed("http://localhost:abc", listed));
  EXPECT_FALSE(origin_allowed("ftp://localhost", listed));
  EXPECT_FALSE(origin_allowed("http://[::ffff:127.0.0.1]", listed));
  EXPECT_FALSE(origin_allowed("http://0.0.0.0", listed));
}

TEST(Host, HeaderValuesParse) {
  struct Case {
    const char* value;
    const char* host;
    HostKind kind;
    int port;
    bool loopback;
  };
  const Case cases[] = {
      {"localhost", "localhost", HostKind::kName, -1, true},
      {"LocalHost:54997", "LocalHost", HostKind::kName, 54997, true},
      {"127.0.0.1:54997", "127.0.0.1", HostKind::kIPv4, 54997, true},
      {"127.255.255.254", "127.255.255.254", HostKind::kIPv4, -1, true},
      {"[::1]:54997", "[::1]", HostKind::kIPv6, 54997, true},
      {" [::1] ", "[::1]", HostKind::kIPv6, -1, true},
      {"evil.example:54997", "evil.example", HostKind::kName, 54997, false},
      {"127.0.0.01", "127.0.0.01", HostKind::kName, -1, false},  // not a dotted quad
      {"127.1", "127.1", HostKind::kName, -1, false},
      {"128.0.0.1", "128.0.0.1", HostKind::kIPv4, -1, false},
      {"localhost.", "localhost.", HostKind::kName, -1, false},
      {"[::2]", "[::2]", HostKind::kIPv6, -1, false},
  };
  for (const Case& c : cases) {
    const auto a = parse_host_header(c.value);
    ASSERT_TRUE(a) << c.value;
    EXPECT_EQ(a->host, c.host) << c.value;
    EXPECT_EQ(a->kind, c.kind) << c.value;
    EXPECT_EQ(a->port, c.port) << c.value;
    EXPECT_EQ(is_loopback(*a), c.loopback) << c.value;
  }
  const char* refused[] = {"",
                           ":80",
                           "localhost:",
                           "localhost:80:80",
                           "[::1]x",
                           "[::1",
                           "a@localhost",
                           "localhost/x",
                           "local host",
                           "localhost:99999",
                           "[fe80::1%eth0]",
                           "h\x01"};
  for (const char* value : refused) EXPECT_FALSE(parse_host_header(value)) << value;
}

TEST(Host, AllowedAreLoopbackTheBoundAddressOrListed) {
  const std::vector<std::string> none;
  const std::vector<std::string> listed = {"sync.lan", "box.lan:8080"};
  auto allowed = [](const char* value, const char* bound, const std::vector<std::string>& l) {
    const auto a = parse_host_header(value);
    return a && host_allowed(*a, bound, l);
  };
  EXPECT_TRUE(allowed("localhost:54997", "127.0.0.1", none));
  EXPECT_TRUE(allowed("127.0.0.1", "127.0.0.1", none));
  EXPECT_TRUE(allowed("[::1]:1", "127.0.0.1", none));
  EXPECT_FALSE(allowed("evil.example:54997", "127.0.0.1", none));
  EXPECT_FALSE(allowed("localhost.evil.example", "127.0.0.1", none));
  EXPECT_TRUE(allowed("192.168.1.5:54997", "192.168.1.5", none));  // the bound address
  EXPECT_FALSE(allowed("192.168.1.6", "192.168.1.5", none));
  EXPECT_TRUE(allowed("[fd00::5]:54997", "fd00::5", none));
  EXPECT_FALSE(allowed("0.0.0.0", "0.0.0.0", none));  // a wildcard names nothing
  EXPECT_TRUE(allowed("sync.lan", "127.0.0.1", listed));
  EXPECT_TRUE(allowed("SYNC.lan:54997", "127.0.0.1", listed));
  EXPECT_TRUE(allowed("box.lan:8080", "127.0.0.1", listed));
  EXPECT_FALSE(allowed("box.lan:8081", "127.0.0.1", listed));
  EXPECT_FALSE(allowed("box.lan", "127.0.0.1", listed));
}

TEST(Origin, CorsIsForListedOriginsAndLoopbackOnlyWhenAskedFor) {
  using syncd::http::cors_origin_allowed;
  const std::vector<std::string> listed = {"https://noisedeck.app"};
  EXPECT_TRUE(cors_origin_allowed("https://noisedeck.app", listed, false));
  EXPECT_FALSE(cors_origin_allowed("https://noisedeck.app:8443", listed, false));
  EXPECT_FALSE(cors_origin_allowed("http://noisedeck.app", listed, true));
  // Loopback pages may act (origin_allowed) but read responses only with --cors-loopback.
  EXPECT_TRUE(origin_allowed("http://localhost:5173", listed));
  EXPECT_FALSE(cors_origin_allowed("http://localhost:5173", listed, false));
  EXPECT_TRUE(cors_origin_allowed("http://localhost:5173", listed, true));
  EXPECT_TRUE(cors_origin_allowed("http://127.0.0.1:5173", {}, true));
  EXPECT_TRUE(cors_origin_allowed("https://[::1]:3000", {}, true));
  EXPECT_FALSE(cors_origin_allowed("http://evil.example", listed, true));
  EXPECT_FALSE(cors_origin_allowed("null", listed, true));
  EXPECT_FALSE(cors_origin_allowed("chrome-extension://localhost", {}, true));
  EXPECT_FALSE(cors_origin_allowed("http://localhost:5173/", {}, true));  // not serialized
}
