// libFuzzer target: the HTTP client's response parser (net/http_client/http_response.h), fed in
// chunks chosen by the input's first byte, then the end of the stream; and parse_url on the same
// bytes. A complete response must respect the limits; a URL that parses must be well-formed.
#include "net/http_client/http_response.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 64;
  syncd::http::ResponseParser parser(512);
  const char* p = reinterpret_cast<const char*>(data + 1);
  size_t left = size - 1;
  syncd::http::ResponseStatus status = syncd::http::ResponseStatus::kIncomplete;
  while (left > 0 && status == syncd::http::ResponseStatus::kIncomplete) {
    const size_t n = left < chunk ? left : chunk;
    status = parser.feed(p, n);
    p += n;
    left -= n;
  }
  if (status == syncd::http::ResponseStatus::kIncomplete) status = parser.finish();
  if (status == syncd::http::ResponseStatus::kComplete) {
    const auto& r = parser.response();
    if (r.body.size() > 512) std::abort();
    if (r.headers.size() > syncd::http::ResponseParser::kMaxHeaders) std::abort();
    if (r.status < 100 || r.status > 999) std::abort();
    for (const auto& [name, value] : r.headers)
      for (char c : name)
        if (c >= 'A' && c <= 'Z') std::abort();  // names are lower-cased
  } else if (status == syncd::http::ResponseStatus::kError && parser.error().empty()) {
    std::abort();  // a refusal always says why
  }

  syncd::http::Url url;
  std::string why;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (syncd::http::parse_url(text, url, why)) {
    if (url.scheme != "http" && url.scheme != "https") std::abort();
    if (url.host.empty() || url.port == 0 || url.path.empty() || url.path[0] != '/') std::abort();
    // The request line and Host header it makes carry no line break.
    const std::string request = syncd::http::write_request("GET", url, {}, {});
    if (request.find("\r\n") < request.find(" HTTP/1.1\r\n")) std::abort();
  } else if (why.empty()) {
    std::abort();
  }
  return 0;
}
