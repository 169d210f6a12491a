#include "net/http_client/http_client.h"

#include <fcntl.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>

namespace syncd::http {

namespace {

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? int(left) : 0;
}

// Waits for `events` on fd until the deadline; false on timeout or error.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, remaining_ms(deadline));
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}

std::string tls_error(const char* what) {
  const unsigned long e = ERR_get_error();
  char text[256] = "";
  if (e) ERR_error_string_n(e, text, sizeof text);
  return std::string("tls: ") + what + (e ? std::string(": ") + text : "");
}

struct Connection {
  int fd = -1;
  SSL_CTX* ctx = nullptr;
  SSL* ssl = nullptr;
  ~Connection() {
    if (ssl) SSL_free(ssl);
    if (ctx) SSL_CTX_free(ctx);
    if (fd >= 0) ::close(fd);
  }
};

// Non-blocking connect to the first address that answers before the deadline.
std::string connect_to(const Url& url, Clock::time_point deadline, Connection& c) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  const std::string port = std::to_string(url.port);
  if (const int r = ::getaddrinfo(url.host.c_str(), port.c_str(), &hints, &list); r != 0)
    return "resolve: " + url.host + ": " + gai_strerror(r);
  std::string error = "connect: no address for " + url.host;
  for (addrinfo* a = list; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      error = std::string("connect: ") + std::strerror(errno);
      ::close(fd);
      continue;
    }
    if (!wait_for(fd, POLLOUT, deadline)) {
      error = "timeout";
      ::close(fd);
      break;
    }
    int so_error = 0;
    socklen_t n = sizeof so_error;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &n);
    if (so_error != 0) {
      error = std::string("connect: ") + std::strerror(so_error);
      ::close(fd);
      continue;
    }
    c.fd = fd;
    error.clear();
    break;
  }
  ::freeaddrinfo(list);
  return error;
}

// Drives one non-blocking TLS call to completion or the deadline.
template <typename Call>
int tls_call(SSL* ssl, int fd, Clock::time_point deadline, Call call, std::string& error) {
  for (;;) {
    const int r = call();
    if (r > 0) return r;
    const int e = SSL_get_error(ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
      if (!wait_for(fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline)) {
        error = "timeout";
        return -1;
      }
      continue;
    }
    if (e == SSL_ERROR_ZERO_RETURN) return 0;
    error = tls_error("I/O failed");
    return -1;
  }
}

std::string start_tls(const Url& url, bool verify, Clock::time_point deadline, Connection& c) {
  c.ctx = SSL_CTX_new(TLS_client_method());
  if (!c.ctx) return tls_error("no context");
  SSL_CTX_set_min_proto_version(c.ctx, TLS1_2_VERSION);
  if (verify) {
    SSL_CTX_set_verify(c.ctx, SSL_VERIFY_PEER, nullptr);
    if (SSL_CTX_set_default_verify_paths(c.ctx) != 1) return tls_error("no trust store");
  }
  c.ssl = SSL_new(c.ctx);
  if (!c.ssl) return tls_error("no session");
  SSL_set_fd(c.ssl, c.fd);
  const bool literal = url.host.find(':') != std::string::npos ||
                       url.host.find_first_not_of("0123456789.") == std::string::npos;
  if (!literal) SSL_set_tlsext_host_name(c.ssl, url.host.c_str());  // SNI names hosts only
  if (verify) {
    const int ok = literal ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c.ssl), url.host.c_str())
                           : SSL_set1_host(c.ssl, url.host.c_str());
    if (ok != 1) return tls_error("cannot check the host name");
  }
  std::string error;
  if (tls_call(
          c.ssl, c.fd, deadline, [&c] { return SSL_connect(c.ssl); }, error) <= 0) {
    if (error == "timeout") return error;
    const long verdict = SSL_get_verify_result(c.ssl);
    if (verify && verdict != X509_V_OK)
      return std::string("tls: certificate refused: ") + X509_verify_cert_error_string(verdict);
    return error.empty() ? tls_error("handshake failed") : error;
  }
  return {};
}

std::string send_all(Connection& c, std::string_view bytes, Clock::time_point deadline) {
  while (!bytes.empty()) {
    if (c.ssl) {
      std::string error;
      const int n = tls_call(
          c.ssl, c.fd, deadline,
          [&] {
            return SSL_write(c.ssl, bytes.data(), int(std::min<size_t>(bytes.size(), 1 << 20)));
          },
          error);
      if (n <= 0) return error.empty() ? "io: the connection closed" : error;
      bytes.remove_prefix(size_t(n));
      continue;
    }
    const ssize_t n = ::send(c.fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes.remove_prefix(size_t(n));
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!wait_for(c.fd, POLLOUT, deadline)) return "timeout";
    } else {
      return std::string("io: ") + std::strerror(errno);
    }
  }
  return {};
}

// Reads until the response is complete, the peer closes, or the deadline.
std::string read_response(Connection& c, Clock::time_point deadline, ResponseParser& parser) {
  char buffer[16384];
  for (;;) {
    ssize_t n = 0;
    if (c.ssl) {
      std::string error;
      n = tls_call(
          c.ssl, c.fd, deadline, [&] { return SSL_read(c.ssl, buffer, sizeof buffer); }, error);
      if (n < 0) {
        // A peer that closes without close_notify ends a close-framed body all the same.
        if (error == "timeout") return error;
        n = 0;
        ERR_clear_error();
      }
    } else {
      n = ::recv(c.fd, buffer, sizeof buffer, 0);
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) {
          if (!wait_for(c.fd, POLLIN, deadline)) return "timeout";
          continue;
        }
        return std::string("io: ") + std::strerror(errno);
      }
    }
    const ResponseStatus s = n == 0 ? parser.finish() : parser.feed(buffer, size_t(n));
    if (s == ResponseStatus::kComplete) return {};
    if (s == ResponseStatus::kError) return "bad_response: " + parser.error();
  }
}

}  // namespace

std::string_view ClientResponse::header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers)
    if (name == lower_name) return value;
  return {};
}

ClientResponse fetch_blocking(const ClientRequest& request) {
  ClientResponse out;
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(request.timeout_ms);
  Url url;
  std::string why;
  if (!parse_url(request.url, url, why)) {
    out.error = "bad_url: " + why;
    return out;
  }
  Connection c;
  if (std::string e = connect_to(url, deadline, c); !e.empty()) {
    out.error = std::move(e);
    return out;
  }
  if (url.scheme == "https") {
    if (std::string e = start_tls(url, request.verify_tls, deadline, c); !e.empty()) {
      out.error = std::move(e);
      return out;
    }
  }
  const std::string bytes = write_request(request.method, url, request.headers, request.body);
  if (std::string e = send_all(c, bytes, deadline); !e.empty()) {
    out.error = std::move(e);
    return out;
  }
  ResponseParser parser;
  if (std::string e = read_response(c, deadline, parser); !e.empty()) {
    out.error = std::move(e);
    return out;
  }
  Response r = parser.take();
  out.status = r.status;
  out.headers = std::move(r.headers);
  out.body = std::move(r.body);
  return out;
}

namespace {

struct Job {
  uv_work_t work{};
  ClientRequest request;
  ClientResponse response;
  std::function<void(ClientResponse)> done;
};

}  // namespace

void fetch_async(uv_loop_t* loop, ClientRequest request, std::function<void(ClientResponse)> done) {
  auto* job = new Job;
  job->work.data = job;
  job->request = std::move(request);
  job->done = std::move(done);
  const int r = uv_queue_work(
      loop, &job->work,
      [](uv_work_t* w) {
        auto* j = static_cast<Job*>(w->data);
        j->response = fetch_blocking(j->request);
      },
      [](uv_work_t* w, int status) {
        std::unique_ptr<Job> j(static_cast<Job*>(w->data));
        if (status == UV_ECANCELED) j->response.error = "io: cancelled";
        if (j->done) j->done(std::move(j->response));
      });
  if (r != 0) {
    std::unique_ptr<Job> j(job);
    ClientResponse failed;
    failed.error = std::string("io: ") + uv_strerror(r);
    if (j->done) j->done(std::move(failed));
  }
}

}  // namespace syncd::http
