// server::PoseService through a real Server: replaying tests/data/headtrack/synthetic.replay in
// real time (the reader thread stands in for a device), and without --headtracker. The pose topic's
// replies, events and refusals are read off the WebSocket; its figures off /stats.
#include <gtest/gtest.h>

#include <string>

#include "live_server.h"

using namespace syncd;
using namespace syncd::test;
using nlohmann::json;

namespace {

server::ServerConfig with_replayed_tracker() {
  server::ServerConfig cfg = test_config();
  cfg.headtracker = std::string("replay:") + SYNC_HEADTRACK_DATA_DIR + "/synthetic.replay";
  return cfg;
}

// The next message of `type` (others, such as pose.status, are skipped), or null.
json next_of_type(WsClient& c, const std::string& type) {
  for (int i = 0; i < 100; ++i) {
    const json m = c.next_json();
    if (m.is_null() || m["type"] == type) return m;
  }
  return nullptr;
}

TEST(PoseServiceAbsent, TheTopicIsUnavailableAndOtherTopicsUnknown) {
  LiveServer live(test_config());
  ASSERT_TRUE(live.started());
  WsClient c(live);
  EXPECT_FALSE(has(c.hello()["capabilities"], "pose"));
  EXPECT_EQ(c.request({{"type", "subscribe"}, {"topic", "pose"}})["code"], "topic_unavailable");
  EXPECT_EQ(c.request({{"type", "subscribe"}, {"topic", "weather"}})["code"], "unknown_topic");
  EXPECT_EQ(c.request({{"type", "pose.recenter"}})["code"], "topic_unavailable");
  EXPECT_FALSE(live.stats().contains("headtracker"));
}

TEST(PoseServiceAbsent, ABadReplayFileStopsTheServerFromStarting) {
  server::ServerConfig cfg = test_config();
  cfg.headtracker = "replay:/nonexistent/no.replay";
  LiveServer live(cfg);
  EXPECT_FALSE(live.started());
}

TEST(PoseServiceRunning, ASubscriberGetsTheStatusThenPoses) {
  LiveServer live(with_replayed_tracker());
  ASSERT_TRUE(live.started());
  WsClient c(live);
  EXPECT_TRUE(has(c.hello()["capabilities"], "pose"));
  EXPECT_EQ(c.request({{"type", "subscribe"}, {"topic", "pose"}}),
            json({{"type", "subscribed"}, {"topic", "pose"}}));
  // The new subscriber learns at once whether a tracker is there.
  const json status = c.next_json();
  EXPECT_EQ(status["type"], "pose.status");
  EXPECT_EQ(status["source"], with_replayed_tracker().headtracker);
  const json a = next_of_type(c, "pose");
  const json b = next_of_type(c, "pose");
  ASSERT_FALSE(a.is_null());
  ASSERT_FALSE(b.is_null());
  EXPECT_GT(b["seq"].get<uint64_t>(), a["seq"].get<uint64_t>());
  EXPECT_EQ(a["q"].size(), 4u);
  EXPECT_EQ(a["ypr"].size(), 3u);
  const json stats = live.stats()["headtracker"];
  EXPECT_EQ(stats["subscribers"], 1);
  EXPECT_GE(stats["events_sent"].get<uint64_t>(), 2u);
  EXPECT_EQ(stats["events_dropped"], 0);
}

TEST(PoseServiceRunning, NothingFollowsUnsubscribed) {
  LiveServer live(with_replayed_tracker());
  ASSERT_TRUE(live.started());
  WsClient c(live);
  c.hello();
  c.send_text(R"({"type":"subscribe","topic":"pose"})");
  ASSERT_FALSE(next_of_type(c, "pose").is_null());
  c.send_text(R"({"type":"unsubscribe","topic":"pose"})");
  ASSERT_FALSE(next_of_type(c, "unsubscribed").is_null());
  EXPECT_EQ(c.next_text(500), "");  // replays report at 25 Hz: several would have come
  EXPECT_EQ(live.stats()["headtracker"]["subscribers"], 0);
  // Unsubscribing again is answered the same.
  EXPECT_EQ(c.request({{"type", "unsubscribe"}, {"topic", "pose"}})["type"], "unsubscribed");
}

TEST(PoseServiceRunning, UnknownTopicsAreRefusedAndRecenterNeedsNoReply) {
  LiveServer live(with_replayed_tracker());
  ASSERT_TRUE(live.started());
  WsClient c(live);
  c.hello();
  EXPECT_EQ(c.request({{"type", "subscribe"}, {"topic", "weather"}})["code"], "unknown_topic");
  c.send_text(R"({"type":"pose.recenter"})");
  EXPECT_EQ(c.request({{"type", "ping"}, {"id", 3}})["type"], "pong");  // no reply came before
}

TEST(PoseServiceRunning, ASubscriberThatLeavesIsForgotten) {
  LiveServer live(with_replayed_tracker());
  ASSERT_TRUE(live.started());
  auto c = std::make_unique<WsClient>(live);
  c->hello();
  c->send_text(R"({"type":"subscribe","topic":"pose"})");
  ASSERT_FALSE(next_of_type(*c, "pose").is_null());
  c.reset();
  EXPECT_TRUE(live.pump_until([&] { return live.stats()["headtracker"]["subscribers"] == 0; }));
}

}  // namespace
