// syncd's HTTP/1.1 client, for its control plane only: the WHIP push (docs/whep.md, "WHIP")
// POSTs an SDP offer to an SFU and DELETEs the session's resource. A handful of requests per
// session, so the simplest shape that cannot block the loop: one blocking exchange per request
// (connect, TLS for https, write, read to the end; Connection: close), run on libuv's thread
// pool, its result handed back on the loop thread. No keep-alive, redirects, proxies, cookies
// or compression; a response body of at most 256 KiB.
//
// https: OpenSSL 3, TLS 1.2 or later, the system's trust store, the URL's host checked against
// the certificate (and sent as SNI). verify_tls = false skips the check (a lab SFU with a
// self-signed certificate: --whip-insecure), and is never the default.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "net/http_client/http_response.h"

namespace syncd::http {

struct ClientRequest {
  std::string method = "GET";
  std::string url;
  Headers headers;
  std::string body;
  // Connect, TLS, write and read together. The name lookup before them is the system
  // resolver's (getaddrinfo), bounded by its own timeouts, not by this.
  uint32_t timeout_ms = 10000;
  bool verify_tls = true;
};

struct ClientResponse {
  int status = 0;
  Headers headers;  // names lower-cased
  std::string body;
  // Empty on success; otherwise "<code>: <detail>", code one of bad_url, resolve, connect,
  // timeout, tls, io, bad_response.
  std::string error;
  bool ok() const { return error.empty(); }
  std::string_view header(std::string_view lower_name) const;
};

// One exchange, blocking the calling thread for at most about timeout_ms. Any thread but the
// loop's (it blocks); fetch_async runs it on the thread pool.
ClientResponse fetch_blocking(const ClientRequest& request);

// Runs fetch_blocking on libuv's thread pool and calls done on the loop thread with the result.
// The loop stays alive until done has run. Loop thread.
void fetch_async(uv_loop_t* loop, ClientRequest request, std::function<void(ClientResponse)> done);

}  // namespace syncd::http
