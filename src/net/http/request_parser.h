// HTTP/1.1 request head parser: bytes in, one request out. Pure (no sockets, clocks or logs).
//
// Built on Debian's http-parser (libhttp-parser, the parser Node.js used before llhttp, which
// Debian 12 does not package): it is incremental, bounds-checked and widely fuzzed, so syncd does
// not hand-roll request-line and header tokenising. This class adds what syncd needs on top:
// a header-size limit (431), a header-count limit, lower-cased header names, the split point
// where an Upgrade request's WebSocket bytes begin, and a refusal of every head whose framing
// two parsers could read differently (request smuggling, RFC 9112 sections 2.2, 5.2 and 6.3):
// Content-Length with Transfer-Encoding, a repeated Content-Length, obs-fold lines, a CR not
// followed by LF, and whitespace in or after a header name. Bodies: only a POST's, framed by
// Content-Length (never chunked), at most RequestLimits::max_body_bytes (0: none at all); the
// one endpoint that takes one is WHEP's SDP offer.
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
  std::string body;  // a POST's Content-Length body, whole (RequestLimits::max_body_bytes)

  // First value of a header (name lower-case), or empty.
  std::string_view header(std::string_view name) const;
  bool has_header(std::string_view name) const;
  // Path part of the target, without the query.
  std::string_view path() const;
};

enum class ParseStatus {
  kIncomplete,        // need more bytes
  kComplete,          // request() is ready; consumed() bytes belong to the head (and body)
  kBadRequest,        // malformed: answer 400
  kHeadersTooLarge,   // answer 431
  kBodyNotAllowed,    // a body on a method other than POST, chunked, or none allowed: 400
  kBodyTooLarge,      // a POST's Content-Length past max_body_bytes: 413
  kAmbiguousFraming,  // a head another parser could frame differently (see above): 400
};

struct RequestLimits {
  size_t max_header_bytes = 8192;
  size_t max_headers = 64;
  size_t max_body_bytes = 0;  // a POST's body; 0 refuses every body
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
  // Checks the raw head bytes for what Debian's http-parser (built without HTTP_PARSER_STRICT)
  // tolerates but syncd refuses: it then reads any byte as part of "HTTP/" and takes spaces in
  // header names. kComplete here means "nothing refused", not a whole head.
  ParseStatus scan_head(const char* data, size_t size);

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
  bool has_body_ = false;  // a body that is refused
  bool body_too_large_ = false;
  bool head_done_ = false;
  // scan_head state, carried across feeds.
  enum class ScanPart { kBeforeRequestLine, kRequestLine, kHeaders, kDone };
  ScanPart scan_part_ = ScanPart::kBeforeRequestLine;
  bool after_cr_ = false;
  bool line_start_ = false;  // at the first byte of a header line
  bool in_name_ = false;     // before the ':' of a header line
  char line_tail_[9] = {};   // the request line's last 9 bytes: " HTTP/d.d"
  size_t line_bytes_ = 0;
  const char* error_reason_ = "";
};

}  // namespace syncd::http
