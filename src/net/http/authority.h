// Parsers for the two headers that say where a request is going and where it comes from: Host
// (RFC 9110 section 7.2, `uri-host [":" port]`) and Origin (RFC 6454 section 6.2, the serialized
// origin `scheme "://" host [":" port]`). Pure: bytes in, a verdict out; no sockets, no name
// lookups, no allocation. Strict on purpose: a value another parser might read differently
// (`http://127.0.0.1:80@evil.example`, `http://[::1]evil.example`) is refused, not guessed at.
//
// Thread: any (pure functions). The string_views returned point into the value parsed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace syncd::http {

enum class HostKind {
  kName,  // reg-name: letters, digits, '-', '.', '_'
  kIPv4,  // dotted quad, four decimal octets 0-255 without leading zeros
  kIPv6,  // "[" IPv6address "]"; no zone, no IPvFuture
};

struct Authority {
  std::string_view host;  // as sent; an IPv6 address keeps its brackets
  HostKind kind = HostKind::kName;
  int port = -1;  // 0-65535, or -1 when none was given
};

struct Origin {
  std::string_view scheme;  // lower-case
  Authority authority;
};

// A Host header value (surrounding spaces and tabs ignored), or nullopt when malformed. Host names
// may use any case; a port is 1-5 digits, at most 65535.
std::optional<Authority> parse_host_header(std::string_view value);

// An Origin header value when it is a serialized tuple origin, else nullopt ("null", a path,
// userinfo, an upper-case scheme or host, a bad port or IPv6 address, trailing bytes).
std::optional<Origin> parse_origin(std::string_view value);

// localhost (any case), 127.0.0.0/8, or the IPv6 loopback address.
bool is_loopback(const Authority& a);

// Whether a Host names this daemon: a loopback host, the address it is bound to (`bound_host`,
// as given to --host; a wildcard binds no name), or one of `allowed` (--allow-host values: a name
// matches on any port, NAME:PORT on that port only). Case-insensitive.
bool host_allowed(const Authority& a, std::string_view bound_host,
                  const std::vector<std::string>& allowed);

// Whether an Origin header value may act on this daemon: a serialized http(s) origin on a loopback
// host, or a serialized origin equal to one of `allowed` (--allow-origin values).
bool origin_allowed(std::string_view origin, const std::vector<std::string>& allowed);

// Whether responses to a page of this Origin carry CORS headers (docs/security.md, "CORS"):
// an origin listed in `allowed` (--allow-origin), or, only when `loopback_dev` (--cors-loopback,
// for a dev server on another loopback port), a serialized http(s) origin on a loopback host.
// Being allowed to act (origin_allowed) is not enough to read responses: loopback pages may
// open /ws, but reading a stream's bytes or importing /web/sync.js from another origin needs
// the user's opt-in.
bool cors_origin_allowed(std::string_view origin, const std::vector<std::string>& allowed,
                         bool loopback_dev);

}  // namespace syncd::http
