// The HTTP client (src/net/http_client): URLs, request bytes, the response parser (lengths,
// chunked, close-framed, limits, ambiguous framing, every split point), and whole exchanges
// against servers this test runs on real sockets: plain HTTP, a server that never answers, a
// refused connection, and HTTPS with a self-signed certificate (taken only without
// verification). fetch_async's callback runs on the loop thread.
#include "net/http_client/http_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "net/http_client/http_response.h"
#include "secure/certificate.h"

namespace syncd::http {
namespace {

TEST(HttpUrl, ParsesWhatWhipEndpointsLookLike) {
  Url u;
  std::string why;
  ASSERT_TRUE(parse_url("http://127.0.0.1:8080/whip/room?x=1", u, why)) << why;
  EXPECT_EQ(u.scheme, "http");
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.port, 8080);
  EXPECT_EQ(u.path, "/whip/room?x=1");
  ASSERT_TRUE(parse_url("HTTPS://sfu.example", u, why));
  EXPECT_EQ(u.scheme, "https");
  EXPECT_EQ(u.port, 443);
  EXPECT_EQ(u.path, "/");
  ASSERT_TRUE(parse_url("http://[::1]:9/w", u, why));
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, 9);
  ASSERT_TRUE(parse_url("http://h?q", u, why));
  EXPECT_EQ(u.path, "/?q");
  for (const char* bad : {"ftp://h/", "h:80/x", "http://user:pw@h/", "http://h/#frag",
                          "http://h:0/", "http://h:70000/", "http://h:8x/", "http:///x",
                          "http://h/a b", "http://[::1/", "http://h:/"}) {
    why.clear();
    EXPECT_FALSE(parse_url(bad, u, why)) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
}

TEST(HttpRequest, HostPortLengthAndClose) {
  Url u;
  std::string why;
  ASSERT_TRUE(parse_url("http://[::1]:8080/whip", u, why));
  const std::string r = write_request("POST", u, {{"Content-Type", "application/sdp"}}, "v=0\r\n");
  EXPECT_EQ(r,
            "POST /whip HTTP/1.1\r\nHost: [::1]:8080\r\nContent-Type: application/sdp\r\n"
            "Content-Length: 5\r\nConnection: close\r\n\r\nv=0\r\n");
  ASSERT_TRUE(parse_url("https://sfu.example/x", u, why));
  EXPECT_EQ(write_request("DELETE", u, {}, {}),
            "DELETE /x HTTP/1.1\r\nHost: sfu.example\r\nConnection: close\r\n\r\n");
}

ResponseStatus feed_all(ResponseParser& p, std::string_view bytes, bool close) {
  ResponseStatus s = p.feed(bytes.data(), bytes.size());
  if (s == ResponseStatus::kIncomplete && close) s = p.finish();
  return s;
}

TEST(HttpResponse, LengthChunkedAndCloseFramedBodies) {
  const std::string created =
      "HTTP/1.1 201 Created\r\nContent-Type: application/sdp\r\nLOCATION: /whip/1\r\n"
      "Content-Length: 5\r\n\r\nv=0\r\n";
  // Whole, and split at every byte.
  for (size_t split = 0; split <= created.size(); ++split) {
    ResponseParser p;
    ResponseStatus s = p.feed(created.data(), split);
    if (s == ResponseStatus::kIncomplete)
      s = p.feed(created.data() + split, created.size() - split);
    ASSERT_EQ(s, ResponseStatus::kComplete) << split;
    EXPECT_EQ(p.response().status, 201);
    EXPECT_EQ(p.response().header("location"), "/whip/1");
    EXPECT_EQ(p.response().body, "v=0\r\n");
  }
  ResponseParser chunked;
  ASSERT_EQ(
      feed_all(
          chunked,
          "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
          false),
      ResponseStatus::kComplete);
  EXPECT_EQ(chunked.response().body, "abcde");
  // Trailer fields after a chunked body are dropped, not merged into the headers.
  ResponseParser trailers;
  ASSERT_EQ(feed_all(trailers,
                     "HTTP/1.1 200 OK\r\nTransfer-Encoding: "
                     "chunked\r\n\r\n2\r\nab\r\n0\r\nX-Trailer: t\r\n\r\n",
                     false),
            ResponseStatus::kComplete);
  EXPECT_EQ(trailers.response().body, "ab");
  EXPECT_EQ(trailers.response().headers.size(), 1u);
  EXPECT_TRUE(trailers.response().header("x-trailer").empty());
  ResponseParser closed;
  ASSERT_EQ(feed_all(closed, "HTTP/1.0 503 Busy\r\n\r\nuntil the close", true),
            ResponseStatus::kComplete);
  EXPECT_EQ(closed.response().status, 503);
  EXPECT_EQ(closed.response().body, "until the close");
  ResponseParser empty;
  ASSERT_EQ(feed_all(empty, "HTTP/1.1 204 No Content\r\n\r\n", false), ResponseStatus::kComplete);
  // An interim 100 Continue is read past to the final response.
  ResponseParser interim;
  ASSERT_EQ(feed_all(interim,
                     "HTTP/1.1 100 Continue\r\nX-A: 1\r\n\r\nHTTP/1.1 201 "
                     "Created\r\nContent-Length: 2\r\n\r\nok",
                     false),
            ResponseStatus::kComplete);
  EXPECT_EQ(interim.response().status, 201);
  EXPECT_EQ(interim.response().body, "ok");
  EXPECT_TRUE(interim.response().header("x-a").empty());
}

TEST(HttpResponse, RefusesWithAReason) {
  auto refused = [](std::string_view bytes, bool close, size_t limit = 1024) {
    ResponseParser p(limit);
    const ResponseStatus s = feed_all(p, bytes, close);
    return s == ResponseStatus::kError ? p.error() : std::string();
  };
  EXPECT_NE(
      refused("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", false),
      "");
  EXPECT_NE(refused("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", false),
            "");
  EXPECT_NE(refused("HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n", false), "");
  EXPECT_NE(refused("HTTP/1.1 200 OK\r\n\r\n" + std::string(2000, 'x'), true), "");
  EXPECT_NE(refused("HTTP/1.1 200 OK\r\nX: " + std::string(20000, 'y') + "\r\n\r\n", false), "");
  EXPECT_NE(refused("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", true), "");
  EXPECT_NE(refused("", true), "");
  EXPECT_NE(refused("SSH-2.0-OpenSSH\r\n", false), "");
  EXPECT_NE(refused("HTTP/1.1 2 OK\r\nContent-Length: 0\r\n\r\n", false), "");  // found by fuzzing
  EXPECT_NE(refused("HTTP/1.1 700 What\r\nContent-Length: 0\r\n\r\n", false), "");
  std::string many = "HTTP/1.1 200 OK\r\n";
  for (int i = 0; i < 70; ++i) many.append("X").append(std::to_string(i)).append(": v\r\n");
  EXPECT_NE(refused(many + "\r\n", false), "");
}

// A one-connection server on a loopback port, answering with `reply` (or never, or over TLS).
struct TestServer {
  int listener = -1;
  uint16_t port = 0;
  std::thread thread;
  std::string request;  // what the client sent (as far as the server read it)
  SSL_CTX* tls = nullptr;
  std::atomic<bool> stop{false};

  explicit TestServer(std::string reply, bool answer = true, SSL_CTX* tls_context = nullptr)
      : tls(tls_context) {
    listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(listener, 4);
    socklen_t n = sizeof a;
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &n);
    port = ntohs(a.sin_port);
    thread = std::thread([this, reply = std::move(reply), answer] {
      const int fd = ::accept(listener, nullptr, nullptr);
      if (fd < 0) return;
      SSL* ssl = nullptr;
      if (tls) {
        ssl = SSL_new(tls);
        SSL_set_fd(ssl, fd);
        if (SSL_accept(ssl) != 1) {
          SSL_free(ssl);
          ::close(fd);
          return;
        }
      }
      char buffer[4096];
      while (request.find("\r\n\r\n") == std::string::npos) {
        const int got =
            ssl ? SSL_read(ssl, buffer, sizeof buffer) : int(::recv(fd, buffer, sizeof buffer, 0));
        if (got <= 0) break;
        request.append(buffer, size_t(got));
      }
      if (answer) {
        if (ssl)
          SSL_write(ssl, reply.data(), int(reply.size()));
        else
          ::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
      } else {
        while (!stop) usleep(10'000);
      }
      if (ssl) {
        SSL_shutdown(ssl);
        SSL_free(ssl);
      }
      ::close(fd);
    });
  }
  ~TestServer() {
    stop = true;
    ::shutdown(listener, SHUT_RDWR);
    ::close(listener);
    if (thread.joinable()) thread.join();
  }
  std::string url(const char* scheme = "http") const {
    return std::string(scheme) + "://127.0.0.1:" + std::to_string(port) + "/whip/room";
  }
};

TEST(HttpFetch, PostsAndReadsACreatedAnswer) {
  TestServer server(
      "HTTP/1.1 201 Created\r\nLocation: /whip/s/1\r\nContent-Type: application/sdp\r\n"
      "Content-Length: 10\r\n\r\nv=0\r\ns=-\r\n");
  ClientRequest request;
  request.method = "POST";
  request.url = server.url();
  request.headers = {{"Content-Type", "application/sdp"}, {"Authorization", "Bearer t0k3n"}};
  request.body = "v=0\r\n";
  const ClientResponse r = fetch_blocking(request);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.header("location"), "/whip/s/1");
  EXPECT_EQ(r.body, "v=0\r\ns=-\r\n");
  server.thread.join();
  server.thread = std::thread();
  EXPECT_NE(server.request.find("POST /whip/room HTTP/1.1\r\n"), std::string::npos);
  EXPECT_NE(server.request.find("Authorization: Bearer t0k3n\r\n"), std::string::npos);
}

TEST(HttpFetch, TimeoutRefusedAndBadUrl) {
  {
    TestServer silent("", /*answer=*/false);
    ClientRequest request;
    request.url = silent.url();
    request.timeout_ms = 300;
    const auto t0 = std::chrono::steady_clock::now();
    const ClientResponse r = fetch_blocking(request);
    EXPECT_EQ(r.error, "timeout");
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  }
  uint16_t closed_port = 0;
  {
    TestServer gone("");
    closed_port = gone.port;
    ::shutdown(gone.listener, SHUT_RDWR);
  }
  ClientRequest request;
  request.url = "http://127.0.0.1:" + std::to_string(closed_port) + "/";
  EXPECT_EQ(fetch_blocking(request).error.rfind("connect: ", 0), 0u);
  request.url = "ftp://x/";
  EXPECT_EQ(fetch_blocking(request).error.rfind("bad_url: ", 0), 0u);
  request.url = "http://no-such-host.invalid/";
  EXPECT_EQ(fetch_blocking(request).error.rfind("resolve: ", 0), 0u);
}

TEST(HttpFetch, HttpsWithASelfSignedCertificateOnlyWithoutVerification) {
  secure::Identity id;
  ASSERT_TRUE(secure::generate_identity(id).ok());
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  ASSERT_TRUE(ctx);
  ASSERT_EQ(SSL_CTX_use_certificate(ctx, id.certificate.get()), 1);
  ASSERT_EQ(SSL_CTX_use_PrivateKey(ctx, id.key.get()), 1);
  const std::string reply = "HTTP/1.1 201 Created\r\nLocation: /s\r\nContent-Length: 2\r\n\r\nok";
  {
    TestServer server(reply, true, ctx);
    ClientRequest request;
    request.method = "POST";
    request.url = server.url("https");
    request.verify_tls = false;
    const ClientResponse r = fetch_blocking(request);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.status, 201);
    EXPECT_EQ(r.body, "ok");
  }
  {
    TestServer server(reply, true, ctx);
    ClientRequest request;
    request.url = server.url("https");
    const ClientResponse r = fetch_blocking(request);
    EXPECT_EQ(r.error.rfind("tls: ", 0), 0u) << r.error;
  }
  SSL_CTX_free(ctx);
}

TEST(HttpFetch, AsyncCallsBackOnTheLoopThread) {
  TestServer server("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi");
  uv_loop_t loop;
  uv_loop_init(&loop);
  ClientRequest request;
  request.url = server.url();
  bool called = false;
  const std::thread::id loop_thread = std::this_thread::get_id();
  fetch_async(&loop, request, [&](ClientResponse r) {
    called = true;
    EXPECT_EQ(std::this_thread::get_id(), loop_thread);
    EXPECT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.body, "hi");
  });
  uv_run(&loop, UV_RUN_DEFAULT);  // returns once the callback ran (the work kept it alive)
  EXPECT_TRUE(called);
  uv_loop_close(&loop);
}

}  // namespace
}  // namespace syncd::http
