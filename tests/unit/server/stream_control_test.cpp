// server::StreamControl's control messages (hello, stream.open/close, ticket.create,
// stream.report, ping, stats) as docs/protocol.md states them: WebSocket clients of a real
// Server on a loopback port, replies and refusal codes read off the wire, state from /stats.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "live_server.h"

using namespace syncd;
using namespace syncd::test;
using nlohmann::json;

namespace {

struct StreamControlTest : ::testing::Test {
  std::unique_ptr<LiveServer> live;

  void start(server::ServerConfig cfg = test_config()) {
    live = std::make_unique<LiveServer>(std::move(cfg));
    ASSERT_TRUE(live->started());
  }
  static json open_request(const std::string& name, int width = 16, int height = 16) {
    return {{"name", name}, {"width", width}, {"height", height}};
  }
};

bool has(const json& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

TEST_F(StreamControlTest, TheWelcomeListsWhatRunsAndTheLimits) {
  server::ServerConfig cfg = test_config();
  cfg.max_message_bytes = 8u << 20;
  start(cfg);
  WsClient c(*live);
  const json welcome = c.hello();
  EXPECT_EQ(welcome["type"], "welcome");
  EXPECT_EQ(welcome["protocol"], 1);
  for (const char* always : {"video.ingest", "tickets", "stats", "ping", "video.receive"})
    EXPECT_TRUE(has(welcome["capabilities"], always)) << always;
  // Neither audio nor a head tracker is configured: their capabilities are not claimed.
  EXPECT_FALSE(has(welcome["capabilities"], "audio"));
  EXPECT_FALSE(has(welcome["capabilities"], "pose"));
  EXPECT_EQ(welcome["limits"]["max_message_bytes"], 8u << 20);
  EXPECT_EQ(welcome["frame_header_bytes"], 56);
}

TEST_F(StreamControlTest, AnotherProtocolIsRefusedAndTheSessionStaysBeforeHello) {
  start();
  WsClient c(*live);
  const json refused = c.request({{"type", "hello"}, {"protocol", 2}});
  EXPECT_EQ(refused["code"], "protocol_unsupported");
  EXPECT_EQ(refused["supported"], json::array({1}));
  EXPECT_EQ(c.request({{"type", "ping"}})["code"], "hello_required");
  EXPECT_EQ(live->stats()["server"]["control_errors"], 2u);
}

TEST_F(StreamControlTest, StreamOpenedDescribesTheLayout) {
  start();
  WsClient c(*live);
  c.hello();
  const json rgba = c.open_stream(open_request("rgba"));
  ASSERT_EQ(rgba["type"], "stream.opened") << rgba;
  EXPECT_EQ(rgba["name"], "rgba");
  EXPECT_EQ(rgba["format"], "rgba8");
  EXPECT_EQ(rgba["frame_bytes"], 16 * 16 * 4);
  EXPECT_EQ(rgba["slots"], 4);  // the default
  ASSERT_EQ(rgba["planes"].size(), 1u);
  EXPECT_EQ(rgba["planes"][0]["stride"], 64);
  const json i420 =
      c.open_stream({{"name", "yuv"}, {"width", 8}, {"height", 4}, {"format", "i420"}});
  ASSERT_EQ(i420["type"], "stream.opened") << i420;
  EXPECT_EQ(i420["frame_bytes"], 8 * 4 * 3 / 2);
  ASSERT_EQ(i420["planes"].size(), 3u);
  EXPECT_EQ(i420["planes"][1]["offset"], 32);
  EXPECT_EQ(i420["planes"][2]["offset"], 40);
  EXPECT_NE(i420["stream"], rgba["stream"]);
}

TEST_F(StreamControlTest, StreamOpenRefusalsCarryTheirCodeAndEchoTheName) {
  start();
  WsClient c(*live);
  c.hello();
  ASSERT_EQ(c.open_stream(open_request("main"))["type"], "stream.opened");
  const json taken = c.open_stream(open_request("main"));
  EXPECT_EQ(taken["code"], "stream_name_taken");
  EXPECT_EQ(taken["name"], "main");
  const json odd =
      c.open_stream({{"name", "odd"}, {"width", 15}, {"height", 16}, {"format", "nv12"}});
  EXPECT_EQ(odd["code"], "bad_geometry");
  EXPECT_EQ(odd["name"], "odd");
  json slots = open_request("slots");
  slots["slots"] = 17;
  const json bad_slots = c.open_stream(slots);
  EXPECT_EQ(bad_slots["code"], "bad_slots");
  EXPECT_EQ(bad_slots["message"], "'slots' out of range [1, 16]");
  // Refused by the parser before the registry: bad_message, not a stream.open code.
  EXPECT_EQ(c.open_stream({{"name", "x"}, {"width", 0}, {"height", 16}})["code"], "bad_message");
  EXPECT_EQ(live->stats()["server"]["control_errors"], 4u);
  EXPECT_EQ(live->stats()["open_refused"]["stream_name_taken"], 1u);
}

TEST_F(StreamControlTest, AConnectionsStreamCountIsItsShareOfTheLimit) {
  server::ServerConfig cfg = test_config();
  cfg.stream_limits.max_streams = 3;
  cfg.stream_limits.max_streams_per_owner = 2;
  start(cfg);
  WsClient a(*live), b(*live);
  a.hello();
  b.hello();
  ASSERT_EQ(a.open_stream(open_request("a1"))["type"], "stream.opened");
  ASSERT_EQ(a.open_stream(open_request("a2"))["type"], "stream.opened");
  EXPECT_EQ(a.open_stream(open_request("a3"))["code"], "connection_stream_limit");
  // Another connection still has its share, up to the process's limit.
  EXPECT_EQ(b.open_stream(open_request("b1"))["type"], "stream.opened");
  EXPECT_EQ(b.open_stream(open_request("b2"))["code"], "stream_limit");
}

TEST_F(StreamControlTest, AConnectionsPoolMemoryIsItsShareOfTheTotal) {
  server::ServerConfig cfg = test_config();
  cfg.stream_limits.max_pool_bytes_per_owner = 512 * 1024;
  start(cfg);
  WsClient a(*live), b(*live);
  a.hello();
  b.hello();
  json first = open_request("first", 128, 128);  // 64 KiB frames, 4 slots: 256 KiB
  ASSERT_EQ(a.open_stream(first)["type"], "stream.opened");
  json second = open_request("second", 128, 128);
  second["slots"] = 6;  // 384 KiB more: past this connection's 512 KiB
  const json refused = a.open_stream(second);
  EXPECT_EQ(refused["code"], "connection_memory_limit");
  EXPECT_EQ(refused["name"], "second");
  // The same stream from another connection fits its own share.
  EXPECT_EQ(b.open_stream(second)["type"], "stream.opened");
}

TEST_F(StreamControlTest, TheProcessPoolLimitRefusesWithNoMemory) {
  server::ServerConfig cfg = test_config();
  cfg.stream_limits.max_pool_bytes_total = 256 * 1024;
  start(cfg);
  WsClient a(*live);
  a.hello();
  json big = open_request("big", 256, 256);  // 256 KiB frames
  EXPECT_EQ(a.open_stream(big)["code"], "no_memory");
}

TEST_F(StreamControlTest, OnlyTheOwnerClosesItsStream) {
  start();
  WsClient owner(*live), other(*live);
  owner.hello();
  other.hello();
  const json opened = owner.open_stream(open_request("main"));
  const uint32_t id = opened["stream"];
  EXPECT_EQ(other.request({{"type", "stream.close"}, {"stream", id}})["code"], "not_stream_owner");
  EXPECT_EQ(owner.request({{"type", "stream.close"}, {"stream", id + 100}})["code"],
            "unknown_stream");
  const json closed = owner.request({{"type", "stream.close"}, {"stream", id}});
  EXPECT_EQ(closed, json({{"type", "stream.closed"}, {"stream", id}}));
  // Closed streams stay in /stats, marked closed; the id now names no open stream.
  EXPECT_EQ(live->stream_stats("main")["open"], false);
  EXPECT_EQ(owner.request({{"type", "stream.close"}, {"stream", id}})["code"], "unknown_stream");
}

TEST_F(StreamControlTest, AnOwnersDisconnectClosesItsStreamsAndDropsItsTickets) {
  start();
  auto owner = std::make_unique<WsClient>(*live);
  owner->hello();
  const json opened = owner->open_stream(open_request("main"));
  ASSERT_EQ(owner->request({{"type", "ticket.create"}, {"stream", opened["stream"]}})["type"],
            "ticket");
  EXPECT_EQ(live->stats()["server"]["tickets_live"], 1u);
  owner.reset();  // the socket closes
  ASSERT_TRUE(live->pump_until([&] { return live->stream_stats("main")["open"] == false; }));
  EXPECT_EQ(live->stats()["server"]["tickets_live"], 0u);
  // The name is free again.
  WsClient next(*live);
  next.hello();
  EXPECT_EQ(next.open_stream(open_request("main"))["type"], "stream.opened");
}

TEST_F(StreamControlTest, TicketsAreHandedOutByTheOwnerOnly) {
  start();
  WsClient owner(*live), other(*live);
  owner.hello();
  other.hello();
  const json opened = owner.open_stream(open_request("main"));
  const json ticket =
      owner.request({{"type", "ticket.create"}, {"stream", "main"}, {"uses", 3}, {"ttl_s", 30}});
  EXPECT_EQ(ticket["type"], "ticket");
  EXPECT_EQ(ticket["stream"], opened["stream"]);
  EXPECT_EQ(ticket["name"], "main");
  EXPECT_EQ(ticket["ticket"].get<std::string>().size(), 32u);
  EXPECT_EQ(ticket["uses"], 3);
  EXPECT_EQ(other.request({{"type", "ticket.create"}, {"stream", opened["stream"]}})["code"],
            "not_stream_owner");
  EXPECT_EQ(other.request({{"type", "ticket.create"}, {"stream", "nosuch"}})["code"],
            "unknown_stream");
  EXPECT_EQ(owner.request({{"type", "ticket.create"}, {"stream", 1}, {"uses", 17}})["code"],
            "bad_message");
}

TEST_F(StreamControlTest, AConnectionHoldsAtMost64LiveTickets) {
  start();
  WsClient owner(*live);
  owner.hello();
  const json opened = owner.open_stream(open_request("main"));
  const json request = {{"type", "ticket.create"}, {"stream", opened["stream"]}};
  for (int i = 0; i < 64; ++i) ASSERT_EQ(owner.request(request)["type"], "ticket") << i;
  EXPECT_EQ(owner.request(request)["code"], "too_many_tickets");
  EXPECT_EQ(live->stats()["server"]["tickets_live"], 64u);
  // They go with their stream, and the connection may ticket again.
  owner.request({{"type", "stream.close"}, {"stream", opened["stream"]}});
  EXPECT_EQ(live->stats()["server"]["tickets_live"], 0u);
}

TEST_F(StreamControlTest, StreamReportIsTheOwnersAndShowsInStats) {
  start();
  WsClient owner(*live), other(*live);
  owner.hello();
  other.hello();
  const uint32_t id = owner.open_stream(open_request("main"))["stream"];
  const json report = {{"type", "stream.report"}, {"stream", id},
                       {"offered", 10},           {"sent", 7},
                       {"in_flight", 1},          {"dropped", {{"backpressure", 2}}}};
  EXPECT_EQ(other.request(report)["code"], "not_stream_owner");
  owner.send_text(report.dump());
  // No reply to a report: the next reply is the ping's.
  EXPECT_EQ(owner.request({{"type", "ping"}, {"id", 5}})["type"], "pong");
  const json source = live->stream_stats("main")["source"];
  EXPECT_EQ(source["offered"], 10);
  EXPECT_EQ(source["sent"], 7);
  EXPECT_EQ(source["dropped_total"], 2);
}

TEST_F(StreamControlTest, PingEchoesItsIdAndStatsAnswersTheDocument) {
  start();
  WsClient c(*live);
  c.hello();
  EXPECT_EQ(c.request({{"type", "ping"}, {"id", {{"n", 1}}}}),
            json({{"type", "pong"}, {"id", {{"n", 1}}}}));
  EXPECT_EQ(c.request({{"type", "ping"}}), json({{"type", "pong"}, {"id", nullptr}}));
  const json stats = c.request({{"type", "stats"}});
  EXPECT_EQ(stats["type"], "stats");
  EXPECT_TRUE(stats["stats"]["server"].contains("connections_open"));
}

}  // namespace
