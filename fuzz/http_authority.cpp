// libFuzzer target: the Host and Origin parsers (net/http/authority.h). The input is offered
// whole to both, and each verdict is checked against what the strict grammar promises, so a
// parser that accepts a value it should not (a path, userinfo, a bad port) aborts.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "net/http/authority.h"

namespace {

bool host_byte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '[' || c == ']' || c == ':';
}

void check_authority(const syncd::http::Authority& a, std::string_view whole) {
  if (a.host.empty() || a.port < -1 || a.port > 65535) std::abort();
  // The host is a view into the value parsed.
  if (a.host.data() < whole.data() || a.host.data() + a.host.size() > whole.data() + whole.size())
    std::abort();
  for (char c : a.host)
    if (!host_byte(c)) std::abort();
  if ((a.kind == syncd::http::HostKind::kIPv6) != (a.host.front() == '[')) std::abort();
  (void)syncd::http::is_loopback(a);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view value(reinterpret_cast<const char*>(data), size);
  if (const auto a = syncd::http::parse_host_header(value)) {
    check_authority(*a, value);
    (void)syncd::http::host_allowed(*a, "127.0.0.1", {"sync.lan", "box.lan:8080"});
    (void)syncd::http::host_allowed(*a, "::1", {});
  }
  if (const auto o = syncd::http::parse_origin(value)) {
    check_authority(o->authority, value);
    // A serialized origin has no path, query, fragment or userinfo, and only lower case.
    for (char c : value)
      if (c == '@' || c == '?' || c == '#' || c == '%' || (c >= 'A' && c <= 'Z')) std::abort();
    if (value.find('/', value.find("://") + 3) != std::string_view::npos) std::abort();
  }
  static const std::vector<std::string> allowed = {"https://noisedeck.app"};
  (void)syncd::http::origin_allowed(value, allowed);
  return 0;
}
