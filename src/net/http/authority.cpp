#include "net/http/authority.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

#include "core/text.h"

namespace syncd::http {

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_lower(char c) {
  return c >= 'a' && c <= 'z';
}
bool is_upper(char c) {
  return c >= 'A' && c <= 'Z';
}

using core::trim;
constexpr auto ieq = core::equals_ignore_case;

// 1-5 digits, at most 65535; -1 when not.
int parse_port(std::string_view text) {
  if (text.empty() || text.size() > 5) return -1;
  int port = 0;
  for (char c : text) {
    if (!is_digit(c)) return -1;
    port = port * 10 + (c - '0');
  }
  return port <= 65535 ? port : -1;
}

// RFC 3986 dec-octet x4: no leading zeros, which some resolvers read as octal.
bool parse_ipv4(std::string_view text, uint8_t out[4]) {
  int part = 0;
  size_t digits = 0;
  int value = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '.') {
      if (digits == 0 || part > 3) return false;
      out[part++] = uint8_t(value);
      digits = 0;
      value = 0;
      continue;
    }
    if (!is_digit(text[i]) || (digits == 1 && value == 0) || digits == 3) return false;
    value = value * 10 + (text[i] - '0');
    if (value > 255) return false;
    ++digits;
  }
  return part == 4;
}

// "[" IPv6address "]": the inside is what inet_pton(AF_INET6) accepts, which has no zone ids.
bool parse_ipv6(std::string_view bracketed, in6_addr* out) {
  if (bracketed.size() < 4 || bracketed.size() > 2 + INET6_ADDRSTRLEN - 1 ||
      bracketed.front() != '[' || bracketed.back() != ']')
    return false;
  char text[INET6_ADDRSTRLEN];
  const std::string_view inside = bracketed.substr(1, bracketed.size() - 2);
  // inet_pton stops at a NUL: check every byte, so "[::1\0evil]" is not "[::1]".
  for (char c : inside)
    if (!(is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' || c == '.'))
      return false;
  std::memcpy(text, inside.data(), inside.size());
  text[inside.size()] = '\0';
  return ::inet_pton(AF_INET6, text, out) == 1;
}

// host [":" port] after the scheme or as a whole Host value. `lower_only` is the RFC 6454 rule
// that a serialized origin's host is lower-case.
std::optional<Authority> parse_authority(std::string_view text, bool lower_only) {
  Authority a;
  std::string_view port_text;
  bool has_port = false;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    a.host = text.substr(0, close + 1);
    const std::string_view after = text.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return std::nullopt;  // "[::1]evil.example"
      has_port = true;
      port_text = after.substr(1);
    }
    in6_addr addr;
    if (!parse_ipv6(a.host, &addr)) return std::nullopt;
    if (lower_only)
      for (char c : a.host)
        if (is_upper(c)) return std::nullopt;
    a.kind = HostKind::kIPv6;
  } else {
    const size_t colon = text.find(':');
    a.host = text.substr(0, colon);
    if (colon != std::string_view::npos) {
      has_port = true;
      port_text = text.substr(colon + 1);  // a second ':' fails the digit check
    }
    if (a.host.empty() || a.host.size() > 253) return std::nullopt;
    for (char c : a.host) {
      const bool ok = is_lower(c) || is_digit(c) || c == '-' || c == '.' || c == '_' ||
                      (!lower_only && is_upper(c));
      if (!ok) return std::nullopt;  // '@', '/', '%', spaces, controls, non-ASCII
    }
    uint8_t octets[4];
    a.kind = parse_ipv4(a.host, octets) ? HostKind::kIPv4 : HostKind::kName;
  }
  if (has_port && (a.port = parse_port(port_text)) < 0) return std::nullopt;
  return a;
}

}  // namespace

std::optional<Authority> parse_host_header(std::string_view value) {
  return parse_authority(trim(value), false);
}

std::optional<Origin> parse_origin(std::string_view value) {
  const size_t sep = value.find("://");
  if (sep == std::string_view::npos || sep == 0) return std::nullopt;
  Origin o;
  o.scheme = value.substr(0, sep);
  // RFC 3986 scheme, lower-case as RFC 6454 serializes it.
  if (!is_lower(o.scheme.front())) return std::nullopt;
  for (char c : o.scheme)
    if (!(is_lower(c) || is_digit(c) || c == '+' || c == '-' || c == '.')) return std::nullopt;
  const auto a = parse_authority(value.substr(sep + 3), true);
  if (!a) return std::nullopt;
  o.authority = *a;
  return o;
}

bool is_loopback(const Authority& a) {
  switch (a.kind) {
    case HostKind::kName:
      return ieq(a.host, "localhost");
    case HostKind::kIPv4:
      return a.host.substr(0, 4) == "127.";
    case HostKind::kIPv6: {
      in6_addr addr;
      return parse_ipv6(a.host, &addr) && std::memcmp(&addr, &in6addr_loopback, sizeof addr) == 0;
    }
  }
  return false;
}

bool host_allowed(const Authority& a, std::string_view bound_host,
                  const std::vector<std::string>& allowed) {
  if (is_loopback(a)) return true;
  // --host takes an IPv6 address without brackets; a Host header carries them.
  const bool bound_v6 = bound_host.find(':') != std::string_view::npos;
  const std::string_view host =
      a.kind == HostKind::kIPv6 && bound_v6 ? a.host.substr(1, a.host.size() - 2) : a.host;
  if (bound_host != "0.0.0.0" && bound_host != "::" && !bound_host.empty() &&
      (a.kind == HostKind::kIPv6) == bound_v6 && ieq(host, bound_host))
    return true;
  for (const std::string& entry : allowed) {
    const auto e = parse_host_header(entry);
    if (e && ieq(e->host, a.host) && (e->port < 0 || e->port == a.port)) return true;
  }
  return false;
}

bool origin_allowed(std::string_view origin, const std::vector<std::string>& allowed) {
  const auto o = parse_origin(origin);
  if (!o) return false;
  for (const std::string& a : allowed)
    if (origin == a) return true;
  return (o->scheme == "http" || o->scheme == "https") && is_loopback(o->authority);
}

bool cors_origin_allowed(std::string_view origin, const std::vector<std::string>& allowed,
                         bool loopback_dev) {
  const auto o = parse_origin(origin);
  if (!o) return false;
  for (const std::string& a : allowed)
    if (origin == a) return true;
  return loopback_dev && (o->scheme == "http" || o->scheme == "https") && is_loopback(o->authority);
}

}  // namespace syncd::http
