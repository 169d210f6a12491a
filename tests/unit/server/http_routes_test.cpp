// server::HttpRoutes against its documented contract (docs/protocol.md "HTTP endpoints",
// docs/security.md "Cross-site access"): a real Server on a loopback port, driven by raw HTTP
// requests from plain sockets; counters are read back from the server's own /stats document.
#include <gtest/gtest.h>

#include <string>

#include "live_server.h"
#include "whep_offer.h"

using namespace syncd;
using namespace syncd::test;

namespace {

struct HttpRoutesTest : ::testing::Test {
  std::unique_ptr<LiveServer> live;

  void start(server::ServerConfig cfg = test_config()) {
    live = std::make_unique<LiveServer>(std::move(cfg));
    ASSERT_TRUE(live->started());
  }
  HttpResponse exchange(std::string_view request) { return http_exchange(*live, request); }
  HttpResponse get(std::string_view target, std::string_view headers = {}) {
    return exchange(request_text("GET", target, headers));
  }
  uint64_t counter(const char* name) { return live->stats()["server"][name].get<uint64_t>(); }
  // A stream owned by `owner` and a ticket for it (uses 1).
  std::string open_stream_with_ticket(WsClient& owner, const std::string& name) {
    EXPECT_EQ(owner.hello()["type"], "welcome");
    const auto opened = owner.open_stream({{"name", name}, {"width", 16}, {"height", 16}});
    EXPECT_EQ(opened["type"], "stream.opened") << opened;
    const auto ticket =
        owner.request({{"type", "ticket.create"}, {"stream", opened["stream"]}, {"uses", 1}});
    EXPECT_EQ(ticket["type"], "ticket") << ticket;
    return ticket.value("ticket", "");
  }
};

TEST_F(HttpRoutesTest, HealthzAnswersOkAndClosesTheConnection) {
  start();
  const HttpResponse r = get("/healthz");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok");
  EXPECT_EQ(r.header("connection"), "close");
}

TEST_F(HttpRoutesTest, StatsAndMetricsAnswerTheirDocuments) {
  start();
  const HttpResponse stats = get("/stats");
  EXPECT_EQ(stats.status, 200);
  EXPECT_EQ(stats.header("content-type"), "application/json");
  const auto doc = nlohmann::json::parse(stats.body);
  EXPECT_TRUE(doc["server"].contains("http_not_found"));
  const HttpResponse metrics = get("/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("syncd_http_errors_total{status=\"404\"}"), std::string::npos);
}

TEST_F(HttpRoutesTest, AnUnknownPathIs404AndCounted) {
  start();
  EXPECT_EQ(get("/no/such/thing").status, 404);
  EXPECT_EQ(get("/streams/").status, 404);  // an empty name is no stream's resource
  EXPECT_EQ(counter("http_not_found"), 2u);
}

TEST_F(HttpRoutesTest, AnotherMethodOnAKnownResourceIs405WithThatResourcesAllow) {
  start();
  struct Case {
    const char* method;
    const char* path;
    const char* allow;
  };
  // The Allow names only the methods of the resource's shape (docs/protocol.md).
  const Case cases[] = {{"POST", "/healthz", "GET"},
                        {"DELETE", "/streams/main", "GET"},
                        {"GET", "/streams/main/credit", "POST"},
                        {"GET", "/whep/main", "POST"},
                        {"POST", "/whep/main/0123456789abcdef", "DELETE"},
                        {"PUT", "/ws", "GET"}};
  for (const Case& c : cases) {
    const HttpResponse r = exchange(request_text(c.method, c.path));
    EXPECT_EQ(r.status, 405) << c.method << " " << c.path;
    EXPECT_EQ(r.header("allow"), c.allow) << c.method << " " << c.path;
  }
  EXPECT_EQ(counter("http_method_not_allowed"), std::size(cases));
  EXPECT_EQ(counter("http_not_found"), 0u);
}

TEST_F(HttpRoutesTest, AHostThatIsNotLoopbackIsMisdirected) {
  start();
  const HttpResponse r = exchange("GET /healthz HTTP/1.1\r\nHost: evil.example:54997\r\n\r\n");
  EXPECT_EQ(r.status, 421);
  EXPECT_EQ(r.body, "Host not served here\n");
  EXPECT_EQ(counter("http_host_refused"), 1u);
  // Loopback names in any case, with or without a port, are served.
  EXPECT_EQ(exchange("GET /healthz HTTP/1.1\r\nHost: LocalHost:1\r\n\r\n").status, 200);
  EXPECT_EQ(exchange("GET /healthz HTTP/1.1\r\nHost: [::1]\r\n\r\n").status, 200);
}

TEST_F(HttpRoutesTest, AMissingRepeatedOrMalformedHostIs400ButHttp10MayOmitIt) {
  start();
  EXPECT_EQ(exchange("GET /healthz HTTP/1.1\r\n\r\n").status, 400);
  EXPECT_EQ(exchange("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: 127.0.0.1\r\n\r\n").status,
            400);
  EXPECT_EQ(exchange("GET /healthz HTTP/1.1\r\nHost: user@127.0.0.1\r\n\r\n").status, 400);
  EXPECT_EQ(counter("http_host_invalid"), 3u);
  EXPECT_EQ(exchange("GET /healthz HTTP/1.0\r\n\r\n").status, 200);
}

TEST_F(HttpRoutesTest, AnAllowedHostNameIsServed) {
  server::ServerConfig cfg = test_config();
  cfg.allowed_hosts = {"studio.lan"};
  start(cfg);
  EXPECT_EQ(exchange("GET /healthz HTTP/1.1\r\nHost: studio.lan:8080\r\n\r\n").status, 200);
  EXPECT_EQ(exchange("GET /healthz HTTP/1.1\r\nHost: other.lan\r\n\r\n").status, 421);
}

TEST_F(HttpRoutesTest, TheWebSocketUpgradeIsRefusedByRule) {
  start();
  const std::string key = "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
  const std::string upgrade = "Upgrade: websocket\r\nConnection: Upgrade\r\n";
  // No Upgrade header: 400.
  EXPECT_EQ(get("/ws", "Sec-WebSocket-Version: 13\r\n" + key).status, 400);
  // Another version: 426 naming the one served.
  const HttpResponse version = get("/ws", upgrade + "Sec-WebSocket-Version: 12\r\n" + key);
  EXPECT_EQ(version.status, 426);
  EXPECT_EQ(version.header("sec-websocket-version"), "13");
  EXPECT_EQ(counter("version_refused"), 1u);
  // A key that is not 16 bytes of base64: 400.
  EXPECT_EQ(
      get("/ws", upgrade + "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: short==\r\n").status,
      400);
  EXPECT_EQ(counter("http_bad_requests"), 2u);
}

TEST_F(HttpRoutesTest, AForeignOrNullOriginCannotOpenTheWebSocket) {
  start();
  WsClient foreign(*live, "Origin: http://evil.example\r\n");
  EXPECT_FALSE(foreign.upgraded());
  WsClient null_origin(*live, "Origin: null\r\n");
  EXPECT_FALSE(null_origin.upgraded());
  WsClient forged(*live, "Origin: http://127.0.0.1:80@evil.example\r\n");
  EXPECT_FALSE(forged.upgraded());
  EXPECT_EQ(counter("origin_refused"), 3u);
  // A loopback page and a native client (no Origin) are let in.
  WsClient page(*live, "Origin: http://localhost:5173\r\n");
  EXPECT_TRUE(page.upgraded());
  WsClient native(*live);
  EXPECT_TRUE(native.upgraded());
}

TEST_F(HttpRoutesTest, CorsHeadersNameOnlyListedOriginsUnlessLoopbackIsOptedIn) {
  server::ServerConfig cfg = test_config();
  cfg.allowed_origins = {"https://app.example"};
  start(cfg);
  const HttpResponse listed = get("/healthz", "Origin: https://app.example\r\n");
  EXPECT_EQ(listed.status, 200);
  EXPECT_EQ(listed.header("access-control-allow-origin"), "https://app.example");
  EXPECT_EQ(listed.header("vary"), "Origin");
  // A loopback page may act but not read: no CORS header without --cors-loopback.
  const HttpResponse loopback = get("/healthz", "Origin: http://localhost:5173\r\n");
  EXPECT_EQ(loopback.status, 200);
  EXPECT_FALSE(loopback.has_header("Access-Control-Allow-Origin"));
}

TEST_F(HttpRoutesTest, CorsLoopbackNamesLoopbackOrigins) {
  server::ServerConfig cfg = test_config();
  cfg.cors_loopback = true;
  start(cfg);
  const HttpResponse r = get("/healthz", "Origin: http://localhost:5173\r\n");
  EXPECT_EQ(r.header("access-control-allow-origin"), "http://localhost:5173");
}

TEST_F(HttpRoutesTest, PreflightsAreApprovedOnlyForCorsOriginsAndTheirHeaders) {
  server::ServerConfig cfg = test_config();
  cfg.allowed_origins = {"https://app.example"};
  start(cfg);
  const HttpResponse ok = exchange(request_text("OPTIONS", "/whep/main",
                                                "Origin: https://app.example\r\n"
                                                "Access-Control-Request-Method: POST\r\n"
                                                "Access-Control-Request-Headers: content-type, "
                                                "authorization\r\n"));
  EXPECT_EQ(ok.status, 204);
  EXPECT_EQ(ok.header("access-control-allow-methods"), "GET, POST, DELETE");
  EXPECT_EQ(ok.header("access-control-allow-origin"), "https://app.example");
  // Sync-Client is what tells a native client from a page: never approved.
  const HttpResponse sync_client = exchange(request_text("OPTIONS", "/streams/main/credit",
                                                         "Origin: https://app.example\r\n"
                                                         "Access-Control-Request-Method: POST\r\n"
                                                         "Access-Control-Request-Headers: "
                                                         "Sync-Client\r\n"));
  EXPECT_EQ(sync_client.status, 403);
  // A refusal approves nothing: no Access-Control-Allow-* at all (docs/security.md).
  EXPECT_EQ(sync_client.head.find("Access-Control-Allow"), std::string::npos);
  const HttpResponse put = exchange(request_text("OPTIONS", "/healthz",
                                                 "Origin: https://app.example\r\n"
                                                 "Access-Control-Request-Method: PUT\r\n"));
  EXPECT_EQ(put.status, 403);
  // An origin without CORS (a loopback page, no --cors-loopback).
  const HttpResponse loopback = exchange(request_text("OPTIONS", "/healthz",
                                                      "Origin: http://localhost:5173\r\n"
                                                      "Access-Control-Request-Method: GET\r\n"));
  EXPECT_EQ(loopback.status, 403);
  EXPECT_EQ(loopback.head.find("Access-Control-Allow"), std::string::npos);
  EXPECT_EQ(counter("cors_preflights"), 1u);
  EXPECT_EQ(counter("cors_preflight_refused"), 3u);
}

TEST_F(HttpRoutesTest, FrameEventsRefuseABadSinceAndPageWithNextAndLost) {
  start();
  EXPECT_EQ(get("/events/frames?since=abc").status, 400);
  EXPECT_EQ(get("/events/frames?since=-1").status, 400);
  EXPECT_EQ(counter("http_bad_requests"), 2u);
  const HttpResponse r = get("/events/frames?since=0");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), "text/csv");
  EXPECT_EQ(r.header("x-events-next"), "0");  // nothing accepted yet
  EXPECT_EQ(r.header("x-events-lost"), "0");
  EXPECT_EQ(r.body.rfind("index,stream,sequence", 0), 0u);
}

TEST_F(HttpRoutesTest, TheDashboardPageIsServed) {
  start();
  const HttpResponse r = get("/");
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.header("content-type").find("text/html"), std::string::npos);
  EXPECT_FALSE(r.body.empty());
}

TEST_F(HttpRoutesTest, AStreamReceiveChecksOriginBeforeNameAndNameBeforeTicket) {
  start();
  // The Origin comes before the name: a refused page learns nothing of which names exist.
  EXPECT_EQ(get("/streams/nosuch?ticket=00", "Origin: http://evil.example\r\n").status, 403);
  EXPECT_EQ(counter("origin_refused"), 1u);
  EXPECT_EQ(get("/streams/nosuch?ticket=00").status, 404);
  EXPECT_EQ(counter("http_not_found"), 1u);
  EXPECT_EQ(counter("tickets_refused"), 0u);
}

TEST_F(HttpRoutesTest, RefusalsBeforeTheTicketLeaveItUnspent) {
  start();
  WsClient owner(*live);
  const std::string ticket = open_stream_with_ticket(owner, "main");
  ASSERT_FALSE(ticket.empty());
  // A malformed credit, a foreign Origin: refused, and the ticket stays as it was.
  EXPECT_EQ(get("/streams/main?ticket=" + ticket + "&credit=abc").status, 400);
  EXPECT_EQ(get("/streams/main?ticket=" + ticket + "&credit=-1").status, 400);
  EXPECT_EQ(get("/streams/main?ticket=" + ticket, "Origin: http://evil.example\r\n").status, 403);
  EXPECT_EQ(live->stats()["server"]["tickets_live"], 1u);
  // No ticket, or an unknown one: 403, counted.
  EXPECT_EQ(get("/streams/main").status, 403);
  EXPECT_EQ(get("/streams/main?ticket=0123456789abcdef0123456789abcdef").status, 403);
  EXPECT_EQ(counter("tickets_refused"), 2u);
  // The ticket still admits a receiver: a 200 stream head that stays open.
  const int fd = connect_to(*live);
  ASSERT_TRUE(send_all(*live, fd, request_text("GET", "/streams/main?ticket=" + ticket)));
  std::string head;
  ASSERT_TRUE(live->pump_until([&] {
    read_available(fd, head);
    return head.find("\r\n\r\n") != std::string::npos;
  }));
  const HttpResponse r = parse_response(head);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), "application/vnd.sync.frames");
  EXPECT_FALSE(r.header("x-sync-receiver").empty());
  EXPECT_EQ(live->stats()["server"]["receivers"], 1u);
  ::close(fd);
  // Spent: a second receiver with it is refused.
  EXPECT_EQ(get("/streams/main?ticket=" + ticket).status, 403);
  EXPECT_EQ(counter("tickets_refused"), 3u);
}

TEST_F(HttpRoutesTest, CreditPostNeedsAnAllowedOriginOrSyncClient) {
  start();
  const HttpResponse bare = exchange(request_text("POST", "/streams/main/credit?receiver=1"));
  EXPECT_EQ(bare.status, 403);
  EXPECT_EQ(bare.body, "POST needs an allowed Origin or a Sync-Client header\n");
  EXPECT_EQ(counter("origin_missing_refused"), 1u);
  const HttpResponse foreign = exchange(
      request_text("POST", "/streams/main/credit?receiver=1", "Origin: http://evil.example\r\n"));
  EXPECT_EQ(foreign.status, 403);
  EXPECT_EQ(foreign.body, "origin not allowed\n");
  EXPECT_EQ(counter("origin_refused"), 1u);
}

TEST_F(HttpRoutesTest, CreditPostValidatesItsQueryAndNamesAnUnknownReceiver404) {
  start();
  const std::string native = "Sync-Client: 1\r\n";
  for (const char* bad :
       {"/streams/main/credit", "/streams/main/credit?receiver=x",
        "/streams/main/credit?receiver=1&frames=0", "/streams/main/credit?receiver=1&frames=65"}) {
    EXPECT_EQ(exchange(request_text("POST", bad, native)).status, 400) << bad;
  }
  EXPECT_EQ(counter("http_bad_requests"), 4u);
  EXPECT_EQ(
      exchange(request_text("POST", "/streams/main/credit?receiver=99&frames=64", native)).status,
      404);
  // A loopback page's Origin is enough without Sync-Client (it reaches the receiver lookup).
  EXPECT_EQ(exchange(request_text("POST", "/streams/main/credit?receiver=99",
                                  "Origin: http://127.0.0.1:8000\r\n"))
                .status,
            404);
  EXPECT_EQ(counter("http_not_found"), 2u);
}

TEST_F(HttpRoutesTest, WhepRoutesAre404WhenWhepDoesNotRun) {
  start();  // test_config(): --no-whep
  EXPECT_EQ(
      exchange(request_text("POST", "/whep/main", "Content-Type: application/sdp\r\n", "v=0\r\n"))
          .status,
      404);
  EXPECT_EQ(exchange(request_text("DELETE", "/whep/main/0123456789abcdef")).status, 404);
  EXPECT_EQ(counter("http_not_found"), 2u);
}

TEST_F(HttpRoutesTest, ResponsesAreCountedByStatusClassInMetrics) {
  start();
  get("/healthz");
  get("/nope");
  exchange(request_text("POST", "/healthz"));
  const HttpResponse metrics = get("/metrics");
  EXPECT_NE(metrics.body.find("syncd_http_errors_total{status=\"404\"} 1"), std::string::npos)
      << metrics.body.substr(0, 400);
  EXPECT_NE(metrics.body.find("syncd_http_errors_total{status=\"405\"} 1"), std::string::npos);
}

TEST_F(HttpRoutesTest, AWhepOfferChecksOriginAndNameBeforeSpendingItsBearerTicket) {
  server::ServerConfig cfg = test_config();
  cfg.whep = whep::WhepConfig{};
  start(cfg);
  WsClient owner(*live);
  const std::string ticket = open_stream_with_ticket(owner, "main");
  const std::string sdp = offer_sdp();
  auto post = [&](const std::string& path, const std::string& headers) {
    return exchange(request_text("POST", path, "Content-Type: application/sdp\r\n" + headers, sdp));
  };
  const std::string bearer = "Authorization: Bearer " + ticket + "\r\n";
  EXPECT_EQ(post("/whep/main", bearer + "Origin: http://evil.example\r\n").status, 403);
  EXPECT_EQ(counter("origin_refused"), 1u);
  EXPECT_EQ(post("/whep/nosuch", bearer).status, 404);
  EXPECT_EQ(post("/whep/main", "").status, 403);  // no bearer ticket
  EXPECT_EQ(post("/whep/main", "Authorization: Basic " + ticket + "\r\n").status, 403);
  EXPECT_EQ(counter("tickets_refused"), 2u);
  EXPECT_EQ(live->stats()["server"]["tickets_live"], 1u);  // none of these spent it
  // The ticket is the authority: no Sync-Client needed without an Origin.
  const HttpResponse answered = post("/whep/main", bearer);
  ASSERT_EQ(answered.status, 201) << answered.body;
  EXPECT_EQ(answered.header("content-type"), "application/sdp");
  EXPECT_EQ(answered.header("access-control-expose-headers"), "Location");
  const std::string location = answered.header("location");
  ASSERT_EQ(location.rfind("/whep/main/", 0), 0u) << answered.head;
  // Spent: one use per offer.
  EXPECT_EQ(post("/whep/main", bearer).status, 403);
  // DELETE of the Location ends the session; a foreign Origin may not.
  EXPECT_EQ(exchange(request_text("DELETE", location, "Origin: http://evil.example\r\n")).status,
            403);
  EXPECT_EQ(exchange(request_text("DELETE", location)).status, 200);
  EXPECT_EQ(exchange(request_text("DELETE", "/whep/main/0123456789abcdef")).status, 404);
}

TEST_F(HttpRoutesTest, AWhepOfferWithAnotherContentTypeIs415) {
  server::ServerConfig cfg = test_config();
  cfg.whep = whep::WhepConfig{};
  start(cfg);
  WsClient owner(*live);
  const std::string ticket = open_stream_with_ticket(owner, "main");
  const HttpResponse r = exchange(request_text(
      "POST", "/whep/main", "Content-Type: text/plain\r\nAuthorization: Bearer " + ticket + "\r\n",
      offer_sdp()));
  EXPECT_EQ(r.status, 415);
  EXPECT_EQ(live->stats()["whep"]["refused"]["content_type"], 1);
}

}  // namespace
