// The pure half of syncd's HTTP/1.1 client (http_client.h): URLs, the request bytes, and an
// incremental response parser. Bytes in, a response out; no sockets, clocks or logs, so the
// same code is unit-tested and fuzzed (fuzz/http_response.cpp).
//
// The parser is Debian's http-parser in response mode (the server side's parser, see
// net/http/request_parser.h): status, headers (names lower-cased), and a body framed by
// Content-Length, chunked transfer coding, or the connection's close. Refused with a reason: a
// head over kMaxHeadBytes, a body over max_body_bytes, a status code outside 100-599, and framing
// another parser could read differently (Content-Length with Transfer-Encoding, differing
// repeated Content-Lengths). Interim 1xx responses are read past to the final one.
//
// Any thread; one parser per response, not shared.
#pragma once

#include <http_parser.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace syncd::http {

struct Url {
  std::string scheme;  // "http" or "https"
  std::string host;    // a name, an IPv4 literal, or an IPv6 literal without brackets
  uint16_t port = 0;   // the URL's, or the scheme's default
  std::string path;    // path and query, "/" when the URL has none
};

// http://host[:port][/path[?query]] and https://...; [v6] hosts. Refuses other schemes, user
// information, fragments, an empty host, a bad port, and control bytes or spaces, saying why.
bool parse_url(std::string_view text, Url& out, std::string& why);

using Headers = std::vector<std::pair<std::string, std::string>>;

// "METHOD path HTTP/1.1", Host (with the port when it is not the scheme's default), the
// caller's headers, Content-Length when there is a body (or the method is POST/PUT/PATCH),
// Connection: close, then the body.
std::string write_request(std::string_view method, const Url& url, const Headers& headers,
                          std::string_view body);

struct Response {
  int status = 0;
  Headers headers;  // names lower-cased, in order
  std::string body;
  // The first value of a header (lower-case name), or empty.
  std::string_view header(std::string_view lower_name) const;
};

enum class ResponseStatus {
  kIncomplete,  // more bytes (or the end of the stream) needed
  kComplete,    // response() is whole
  kError,       // error() says why; the response cannot be read
};

class ResponseParser {
 public:
  static constexpr size_t kMaxHeadBytes = 16 * 1024;
  static constexpr size_t kMaxHeaders = 64;
  explicit ResponseParser(size_t max_body_bytes = 256 * 1024);
  ResponseParser(const ResponseParser&) = delete;
  ResponseParser& operator=(const ResponseParser&) = delete;

  // Bytes as they arrive. Bytes after a complete response are ignored (we send Connection:
  // close and read one response).
  ResponseStatus feed(const char* data, size_t size);
  // The peer closed the connection: completes a body framed by the close.
  ResponseStatus finish();
  const Response& response() const { return response_; }
  Response take() { return std::move(response_); }
  const std::string& error() const { return error_; }

 private:
  static int on_status(http_parser* p, const char* at, size_t n);
  static int on_header_field(http_parser* p, const char* at, size_t n);
  static int on_header_value(http_parser* p, const char* at, size_t n);
  static int on_headers_complete(http_parser* p);
  static int on_body(http_parser* p, const char* at, size_t n);
  static int on_message_complete(http_parser* p);
  ResponseStatus fail(std::string why);

  size_t max_body_bytes_;
  http_parser parser_;
  http_parser_settings settings_;
  Response response_;
  size_t head_bytes_ = 0;
  bool in_value_ = false;
  bool head_done_ = false;
  bool complete_ = false;
  bool interim_ = false;     // the message being read is a 1xx
  std::string limit_error_;  // set by a callback that stops the parser
  std::string error_;
  bool failed_ = false;
};

}  // namespace syncd::http
