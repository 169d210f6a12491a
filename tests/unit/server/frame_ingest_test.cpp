// server::FrameIngest: binary frame messages from a producer's WebSocket into a real Server's
// registry. Each refusal's error code and counter is checked, and the stream's account in /stats
// must keep offered = accepted + dropped by reason (docs/architecture.md, docs/protocol.md).
#include <gtest/gtest.h>

#include <string>

#include "live_server.h"

using namespace syncd;
using namespace syncd::test;
using nlohmann::json;

namespace {

constexpr int kSide = 16;
constexpr size_t kFrameBytes = kSide * kSide * 4;  // rgba8

struct FrameIngestTest : OneStreamFixture {
  void SetUp() override { start(test_config(), kSide); }
  json main_stats() { return live->stream_stats("main"); }
  uint64_t server_counter(const char* group, const char* name) {
    return live->stats()["server"][group][name].get<uint64_t>();
  }
  // Waits until the stream has been offered `n` frames.
  bool offered(uint64_t n) {
    return live->pump_until([&] { return main_stats()["frames_offered"] == n; });
  }
  // offered = accepted + the sum of the drops by reason.
  static void expect_accounted(const json& s) {
    uint64_t dropped = 0;
    for (const auto& [reason, count] : s["frames_dropped"].items())
      dropped += count.get<uint64_t>();
    EXPECT_EQ(s["frames_dropped_total"], dropped);
    EXPECT_EQ(s["frames_offered"].get<uint64_t>(), s["frames_accepted"].get<uint64_t>() + dropped)
        << s.dump();
  }
  // The connection still serves requests after a refusal.
  void expect_connection_serves() {
    EXPECT_EQ(producer->request({{"type", "ping"}, {"id", 1}})["type"], "pong");
  }
};

TEST_F(FrameIngestTest, WholeFramesAreAcceptedAndLogged) {
  for (uint64_t seq = 1; seq <= 5; ++seq)
    ASSERT_TRUE(producer->send_binary(frame_message(stream, seq, std::string(kFrameBytes, 'p'))));
  ASSERT_TRUE(offered(5));
  const json s = main_stats();
  EXPECT_EQ(s["frames_accepted"], 5);
  EXPECT_EQ(s["frames_dropped_total"], 0);
  expect_accounted(s);
  // Every accepted frame is in the frame event log.
  const HttpResponse events = http_exchange(*live, request_text("GET", "/events/frames?since=0"));
  EXPECT_EQ(events.header("x-events-next"), "5");
}

TEST_F(FrameIngestTest, AMessageShorterThanAHeaderIsABadFrameHeaderWithoutAStream) {
  ASSERT_TRUE(producer->send_binary(std::string(10, 'x')));
  const json error = producer->next_json();
  EXPECT_EQ(error["code"], "bad_frame_header");
  EXPECT_EQ(error["stream"], 0);
  EXPECT_EQ(error["sequence"], 0);
  EXPECT_EQ(server_counter("frames_rejected", "bad_header"), 1u);
  EXPECT_EQ(main_stats()["frames_offered"], 0);  // no stream to charge it to
  expect_connection_serves();
}

TEST_F(FrameIngestTest, ABadMagicIsABadFrameHeader) {
  std::string message = frame_message(stream, 3, std::string(kFrameBytes, 'p'));
  message[0] = 'X';
  ASSERT_TRUE(producer->send_binary(message));
  EXPECT_EQ(producer->next_json()["code"], "bad_frame_header");
  EXPECT_EQ(server_counter("frames_rejected", "bad_header"), 1u);
  EXPECT_EQ(main_stats()["frames_offered"], 0);
  expect_connection_serves();
}

TEST_F(FrameIngestTest, AFrameForNoOpenStreamIsRefusedAndCountedByTheServer) {
  ASSERT_TRUE(producer->send_binary(frame_message(stream + 50, 9, std::string(kFrameBytes, 'p'))));
  const json error = producer->next_json();
  EXPECT_EQ(error["code"], "unknown_stream");
  EXPECT_EQ(error["stream"], stream + 50);
  EXPECT_EQ(error["sequence"], 9);
  EXPECT_EQ(server_counter("frames_rejected", "unknown_stream"), 1u);
  expect_connection_serves();
}

TEST_F(FrameIngestTest, AFrameForAnotherConnectionsStreamIsNotTheStreamsToCount) {
  WsClient intruder(*live);
  intruder.hello();
  ASSERT_TRUE(intruder.send_binary(frame_message(stream, 1, std::string(kFrameBytes, 'p'))));
  EXPECT_EQ(intruder.next_json()["code"], "not_stream_owner");
  EXPECT_EQ(server_counter("frames_rejected", "unknown_stream"), 1u);
  EXPECT_EQ(main_stats()["frames_offered"], 0);
}

TEST_F(FrameIngestTest, AFrameOfTheWrongSizeIsDroppedAsSizeMismatch) {
  ASSERT_TRUE(producer->send_binary(frame_message(stream, 7, std::string(500, 'p'))));
  const json error = producer->next_json();
  EXPECT_EQ(error["code"], "frame_size_mismatch");
  // One shape for every frame_size_mismatch (docs/protocol.md, "Errors"), header included.
  EXPECT_EQ(error["message"], "stream " + std::to_string(stream) +
                                  " frame 7: message is 556 bytes, stream needs " +
                                  std::to_string(56 + kFrameBytes));
  ASSERT_TRUE(offered(1));
  const json s = main_stats();
  EXPECT_EQ(s["frames_dropped"]["size_mismatch"], 1);
  EXPECT_EQ(s["frames_accepted"], 0);
  expect_accounted(s);
  expect_connection_serves();
}

TEST_F(FrameIngestTest, AFrameOfAnotherGeometryIsDroppedAsGeometryMismatch) {
  ASSERT_TRUE(producer->send_binary(
      frame_message(stream, 2, std::string(kFrameBytes, 'p'), kSide * 2, kSide / 2, 1)));
  EXPECT_EQ(producer->next_json()["code"], "geometry_mismatch");
  ASSERT_TRUE(offered(1));
  EXPECT_EQ(main_stats()["frames_dropped"]["geometry_mismatch"], 1);
  expect_accounted(main_stats());
}

TEST_F(FrameIngestTest, EveryFrameOfferedIsAcceptedOrDroppedByReason) {
  const std::string whole(kFrameBytes, 'p');
  producer->send_binary(frame_message(stream, 1, whole));
  producer->send_binary(frame_message(stream, 2, std::string(kFrameBytes - 1, 'p')));
  producer->send_binary(frame_message(stream, 3, whole));
  producer->send_binary(frame_message(stream, 4, whole, 8, 8, 1));
  producer->send_binary(frame_message(stream, 5, whole));
  producer->send_binary(frame_message(stream, 6, whole + "extra"));
  ASSERT_TRUE(offered(6));
  const json s = main_stats();
  EXPECT_EQ(s["frames_accepted"], 3);
  EXPECT_EQ(s["frames_dropped"]["size_mismatch"], 2);
  EXPECT_EQ(s["frames_dropped"]["geometry_mismatch"], 1);
  expect_accounted(s);
}

TEST_F(FrameIngestTest, AFragmentedFrameIsAcceptedWhenItsFragmentsAddUp) {
  const std::string message = frame_message(stream, 1, std::string(kFrameBytes, 'f'));
  // Three fragments: binary (FIN clear), continuation, continuation (FIN).
  auto fragment = [](uint8_t first_byte, std::string_view part) {
    std::string f = client_frame(0x2, part);
    f[0] = char(first_byte);
    return f;
  };
  producer->send_raw(fragment(0x02, message.substr(0, 30)));
  producer->send_raw(fragment(0x00, message.substr(30, 500)));
  producer->send_raw(fragment(0x80, message.substr(530)));
  ASSERT_TRUE(offered(1));
  EXPECT_EQ(main_stats()["frames_accepted"], 1);
}

TEST_F(FrameIngestTest, FragmentsThatEndShortOrRunOverAreSizeMismatches) {
  auto fragment = [](uint8_t first_byte, std::string_view part) {
    std::string f = client_frame(0x2, part);
    f[0] = char(first_byte);
    return f;
  };
  const std::string short_frame = frame_message(stream, 1, std::string(100, 's'));
  producer->send_raw(fragment(0x02, short_frame.substr(0, 80)));
  producer->send_raw(fragment(0x80, short_frame.substr(80)));
  const json short_error = producer->next_json();
  EXPECT_EQ(short_error["code"], "frame_size_mismatch");
  EXPECT_EQ(short_error["message"], "stream " + std::to_string(stream) +
                                        " frame 1: message is 156 bytes, stream needs " +
                                        std::to_string(56 + kFrameBytes));
  const std::string long_frame = frame_message(stream, 2, std::string(kFrameBytes + 10, 'l'));
  producer->send_raw(fragment(0x02, long_frame.substr(0, 100)));
  producer->send_raw(fragment(0x80, long_frame.substr(100)));
  const json long_error = producer->next_json();
  EXPECT_EQ(long_error["code"], "frame_size_mismatch");
  EXPECT_NE(long_error["message"].get<std::string>().find("message is over"), std::string::npos)
      << long_error;
  ASSERT_TRUE(offered(2));
  EXPECT_EQ(main_stats()["frames_dropped"]["size_mismatch"], 2);
  expect_accounted(main_stats());
  expect_connection_serves();
}

TEST_F(FrameIngestTest, AFrameCutByTheProducersDisconnectIsDroppedAsDisconnected) {
  producer->send_binary(frame_message(stream, 1, std::string(kFrameBytes, 'p')));
  ASSERT_TRUE(offered(1));
  // A whole frame announced, half of it sent, then the socket closes.
  const std::string frame =
      client_frame(0x2, frame_message(stream, 2, std::string(kFrameBytes, 'h')));
  producer->send_raw(frame.substr(0, frame.size() / 2));
  producer->close();  // the server reads the half frame before it sees the end
  ASSERT_TRUE(live->pump_until([&] { return main_stats()["open"] == false; }));
  const json s = main_stats();
  EXPECT_EQ(s["frames_accepted"], 1);
  EXPECT_EQ(s["frames_dropped"]["disconnected"], 1);
  expect_accounted(s);
}

TEST_F(FrameIngestTest, AnEncodedStreamTakesAccessUnitsUpToItsFrameSize) {
  const json opened =
      producer->open_stream({{"name", "enc"}, {"width", 16}, {"height", 16}, {"format", "h264"}});
  ASSERT_EQ(opened["type"], "stream.opened");
  const uint32_t enc = opened["stream"];
  const size_t most = opened["frame_bytes"];
  producer->send_binary(frame_message(enc, 1, std::string(100, '\x01')));
  producer->send_binary(frame_message(enc, 2, std::string(most, '\x01')));
  producer->send_binary(frame_message(enc, 3, std::string(most + 1, '\x01')));
  EXPECT_EQ(producer->next_json()["code"], "frame_size_mismatch");
  ASSERT_TRUE(live->pump_until([&] { return live->stream_stats("enc")["frames_offered"] == 3; }));
  const json s = live->stream_stats("enc");
  EXPECT_EQ(s["frames_accepted"], 2);
  EXPECT_EQ(s["frames_dropped"]["size_mismatch"], 1);
  expect_accounted(s);
}

}  // namespace
