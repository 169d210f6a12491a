// The WHIP push (whip_push.cpp) on its error paths: a URL refused at start, waiting for a
// stream, and an endpoint that refuses, answers garbage or is not there. The endpoint is a
// plain loopback HTTP server on a thread of the test; WhepService runs on a real libuv loop
// on the test's thread, and its state is read back from write_stats.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "whep_fixture.h"

using namespace syncd;
using nlohmann::json;
using syncd::test::pump;

namespace {

// A WHIP endpoint stand-in: answers every request with one canned response and keeps the
// requests it read (head and body).
class FakeEndpoint {
 public:
  explicit FakeEndpoint(std::string response) : response_(std::move(response)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::listen(listener_, 8);
    socklen_t len = sizeof addr;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeEndpoint() {
    stop_ = true;
    thread_.join();
    ::close(listener_);
  }
  uint16_t port() const { return port_; }
  std::vector<std::string> requests() {
    std::lock_guard lock(mutex_);
    return requests_;
  }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{listener_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0) continue;
      std::string request;
      char buf[4096];
      // The head, then as many body bytes as its Content-Length says.
      for (;;) {
        pollfd q{fd, POLLIN, 0};
        if (::poll(&q, 1, 2000) <= 0) break;
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        request.append(buf, size_t(n));
        const size_t end = request.find("\r\n\r\n");
        if (end == std::string::npos) continue;
        size_t length = 0;
        const size_t cl = request.find("Content-Length: ");
        if (cl != std::string::npos && cl < end) length = std::stoul(request.substr(cl + 16));
        if (request.size() >= end + 4 + length) break;
      }
      {
        std::lock_guard lock(mutex_);
        requests_.push_back(request);
      }
      ::send(fd, response_.data(), response_.size(), MSG_NOSIGNAL);
      ::close(fd);
    }
  }

  std::string response_;
  int listener_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mutex_;
  std::vector<std::string> requests_;
};

std::string http_response(int status, const std::string& reason, const std::string& body) {
  return "HTTP/1.1 " + std::to_string(status) + " " + reason +
         "\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

struct WhipPushTest : test::WhepFixture {
  // Starts the push to `url`; false (with why) when start() refuses it.
  bool start(const std::string& url, std::string& why, const std::string& token = "tok3n") {
    whep::WhepConfig config;
    whep::WhipTarget target;
    target.url = url;
    target.token = token;
    config.whip = target;
    return start_service(std::move(config), why);
  }
  json whip() { return stats()["whip"]; }
  bool whip_reaches(const std::string& state) {
    return pump(&loop, [&] { return whip()["state"] == state; });
  }
};

TEST_F(WhipPushTest, AUrlThatCannotWorkIsRefusedAtStart) {
  std::string why;
  EXPECT_FALSE(start("ftp://sfu.example/whip", why));
  EXPECT_EQ(why.rfind("--whip-to: ", 0), 0u) << why;
  EXPECT_FALSE(start("not a url", why));
  EXPECT_FALSE(start("http://user:pw@sfu.example/whip", why));
}

TEST_F(WhipPushTest, NothingIsPostedBeforeAStreamOpens) {
  FakeEndpoint endpoint(http_response(503, "Service Unavailable", ""));
  std::string why;
  ASSERT_TRUE(start("http://127.0.0.1:" + std::to_string(endpoint.port()) + "/whip", why)) << why;
  pump(
      &loop, [] { return false; }, 600);  // a couple of the push's ticks
  EXPECT_EQ(whip()["state"], "waiting_for_stream");
  EXPECT_EQ(whip()["posts"], 0);
  EXPECT_TRUE(endpoint.requests().empty());
}

TEST_F(WhipPushTest, ARefusingEndpointIsCountedAndBackedOffFrom) {
  FakeEndpoint endpoint(http_response(503, "Service Unavailable", "room full"));
  std::string why;
  ASSERT_TRUE(start("http://127.0.0.1:" + std::to_string(endpoint.port()) + "/whip", why));
  open_stream("main");
  ASSERT_TRUE(whip_reaches("backoff"));
  const json w = whip();
  EXPECT_EQ(w["posts"], 1);
  EXPECT_EQ(w["refused_status"], 1);
  EXPECT_EQ(w["last_status"], 503);
  EXPECT_EQ(w["last_error"], "the WHIP endpoint answered 503: room full");
  EXPECT_EQ(w["stream"], "main");  // the first stream opened
  EXPECT_EQ(w["session"], "");
  // What was posted: our SDP offer with the bearer token.
  const auto requests = endpoint.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].rfind("POST /whip HTTP/1.1\r\n", 0), 0u) << requests[0];
  EXPECT_NE(requests[0].find("Content-Type: application/sdp\r\n"), std::string::npos);
  EXPECT_NE(requests[0].find("Authorization: Bearer tok3n\r\n"), std::string::npos);
  EXPECT_NE(requests[0].find("\r\n\r\nv=0\r\n"), std::string::npos);
  // Backing off (2 s at first): no second POST at once.
  pump(
      &loop, [] { return false; }, 500);
  EXPECT_EQ(whip()["posts"], 1);
}

TEST_F(WhipPushTest, AnAnswerThatIsNotSdpIsABadAnswer) {
  FakeEndpoint endpoint(http_response(201, "Created", "this is not sdp"));
  std::string why;
  ASSERT_TRUE(start("http://127.0.0.1:" + std::to_string(endpoint.port()) + "/whip", why));
  open_stream("main");
  ASSERT_TRUE(whip_reaches("backoff"));
  const json w = whip();
  EXPECT_EQ(w["bad_answer"], 1);
  EXPECT_EQ(w["answered"], 0);
  EXPECT_EQ(w["last_status"], 201);
  EXPECT_EQ(w["last_error"].get<std::string>().rfind("bad answer: ", 0), 0u) << w;
}

TEST_F(WhipPushTest, AnEndpointThatIsNotThereIsAFetchFailure) {
  uint16_t port = 0;
  {
    FakeEndpoint gone(http_response(200, "OK", ""));  // a port that was free a moment ago
    port = gone.port();
  }
  std::string why;
  ASSERT_TRUE(start("http://127.0.0.1:" + std::to_string(port) + "/whip", why));
  open_stream("main");
  ASSERT_TRUE(whip_reaches("backoff"));
  EXPECT_EQ(whip()["fetch_failed"], 1);
  EXPECT_EQ(whip()["answered"], 0);
}

TEST_F(WhipPushTest, TheNamedStreamIsWaitedForAndTheUrlsQueryStaysOutOfStats) {
  FakeEndpoint endpoint(http_response(503, "Service Unavailable", ""));
  whep::WhepConfig config;
  whep::WhipTarget target;
  const std::string base = "http://127.0.0.1:" + std::to_string(endpoint.port()) + "/whip/ep";
  target.url = base + "?token=secret";
  target.stream = "second";
  config.whip = target;
  whep = std::make_unique<whep::WhepService>(config, *registry, &loop);
  std::string why;
  ASSERT_TRUE(whep->start(why)) << why;
  open_stream("first");  // not the one named
  pump(
      &loop, [] { return false; }, 600);
  EXPECT_EQ(whip()["posts"], 0);
  open_stream("second");
  ASSERT_TRUE(whip_reaches("backoff"));
  EXPECT_EQ(whip()["stream"], "second");
  // A token in the query never reaches /stats.
  EXPECT_EQ(whip()["url"], base);
  EXPECT_EQ(whip().dump().find("secret"), std::string::npos);
}

}  // namespace
