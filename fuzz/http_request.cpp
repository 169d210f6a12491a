// libFuzzer target: the HTTP request parser (head and a POST's Content-Length body), fed in
// chunks chosen by the input's first byte.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "net/http/request_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 64;
  syncd::http::RequestParser parser(syncd::http::RequestLimits{512, 16, 256});
  const char* p = reinterpret_cast<const char*>(data + 1);
  size_t left = size - 1;
  while (left > 0) {
    const size_t n = left < chunk ? left : chunk;
    const auto status = parser.feed(p, n);
    if (status == syncd::http::ParseStatus::kComplete) {
      // Whatever completed must respect the limits and be self-consistent.
      if (parser.request().headers.size() > 16) std::abort();
      if (parser.consumed() > size) std::abort();
      // A body only on a POST, and never past its limit.
      const auto& body = parser.request().body;
      if (body.size() > 256 || (!body.empty() && parser.request().method != "POST")) std::abort();
      // Smuggling-prone heads never complete: no header name holds whitespace.
      for (const auto& [name, value] : parser.request().headers)
        if (name.find_first_of(" \t\r\n") != std::string::npos) std::abort();
      // Nor does one whose request line held a line break.
      if (parser.request().target.find_first_of(" \r\n") != std::string::npos) std::abort();
      (void)parser.request().path();
      break;
    }
    if (status != syncd::http::ParseStatus::kIncomplete) break;
    p += n;
    left -= n;
  }
  return 0;
}
