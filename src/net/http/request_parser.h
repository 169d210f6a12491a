// HTTP/1.1 request head parser: bytes in, one request out. Pure (no sockets, clocks or logs).
//
// Built on Debian's http-parser (libhttp-parser, the parser Node.js used before llhttp, which
// Debian 12 does not package): it is incremental, bounds-checked and widely fuzzed, so syncd does
// not hand-roll request-line and header tokenising. This class adds what syncd needs on top:
// a header-size limit (431), a header-count limit, lower-cased header names, and the split point
// where an Upgrade request's WebSocket bytes begin.
//
// One parser per connection; not thread-safe (the loop thread owns it).
#pragma once

#include <http_parser.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace syncd::http {

struct Request {
  std::string method;
  std::string target;  // request-target as sent (path and query)
  unsigned http_major = 1;
  unsigned http_minor = 1;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  bool upgrade = false;  // Connection: upgrade + Upgrade header present
  bool keep_alive = false;

  // First value of a header (name lower-case), or empty.
  std::string_view header(std::string_view name) const;
  bool has_header(std::string_view name) const;
  // Path part of the target, without the query.
  std::string_view path() const;
};

enum class ParseStatus {
  kIncomplete,       // need more bytes
  kComplete,         // request() is ready; consumed() bytes belong to the head (and body)
  kBadRequest,       // malformed: answer 400
  kHeadersTooLarge,  // answer 431
  kBodyNotAllowed,   // a request with a body on an endpoint that takes none: 400
};

struct RequestLimits {
  size_t max_header_bytes = 8192;
  size_t max_headers = 64;
};

class RequestParser {
 public:
  explicit RequestParser(RequestLimits limits = {});
  RequestParser(const RequestParser&) = delete;
  RequestParser& operator=(const RequestParser&) = delete;

  // Feeds bytes. After kComplete, bytes past consumed() (e.g. the first WebSocket frames after an
  // Upgrade) are the caller's; feed() must not be called again before reset().
  ParseStatus feed(const char* data, size_t size);
  size_t consumed() const { return consumed_; }
  const Request& request() const { return request_; }
  // Human-readable reason for the last failure (static string).
  const char* error_reason() const { return error_reason_; }
  void reset();

 private:
  static int on_url(http_parser* p, const char* at, size_t n);
  static int on_header_field(http_parser* p, const char* at, size_t n);
  static int on_header_value(http_parser* p, const char* at, size_t n);
  static int on_headers_complete(http_parser* p);
  static int on_body(http_parser* p, const char* at, size_t n);
  static int on_message_complete(http_parser* p);

  RequestLimits limits_;
  http_parser parser_;
  http_parser_settings settings_;
  Request request_;
  size_t head_bytes_ = 0;
  size_t consumed_ = 0;
  bool in_value_ = false;
  bool complete_ = false;
  bool too_large_ = false;
  bool has_body_ = false;
  const char* error_reason_ = "";
};

}  // namespace syncd::http
