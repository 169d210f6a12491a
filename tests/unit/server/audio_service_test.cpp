// server::AudioService through a real Server: with the synthetic capture backend running (its
// thread writes the ring in real time) and without --audio-source. audio.read's NAUD packets are
// parsed off the WebSocket; its refusals and the service's /stats figures are checked.
#include <gtest/gtest.h>

#include <span>
#include <string>

#include "audio/naud.h"
#include "live_server.h"

using namespace syncd;
using namespace syncd::test;
using nlohmann::json;

namespace {

server::ServerConfig with_synthetic_audio() {
  server::ServerConfig cfg = test_config();
  audio::AudioSourceConfig audio;
  audio.backend = "synthetic";
  audio.channels = 2;
  audio.rate = 48000;
  cfg.audio = audio;
  return cfg;
}

// The NAUD header of a packet, checked whole (header and payload size).
audio::NaudHeader parse_packet(const std::string& packet) {
  audio::NaudHeader h;
  EXPECT_EQ(audio::parse_naud_packet(
                std::span(reinterpret_cast<const uint8_t*>(packet.data()), packet.size()), h),
            audio::NaudError::kNone);
  return h;
}

TEST(AudioServiceAbsent, ItsMessagesAreRefusedWithAudioUnavailable) {
  LiveServer live(test_config());
  ASSERT_TRUE(live.started());
  WsClient c(live);
  EXPECT_FALSE(has(c.hello()["capabilities"], "audio"));
  const json read = c.request({{"type", "audio.read"}});
  EXPECT_EQ(read["code"], "audio_unavailable");
  EXPECT_EQ(read["message"], "syncd runs without --audio-source");
  EXPECT_EQ(c.request({{"type", "audio.info"}})["code"], "audio_unavailable");
  EXPECT_FALSE(live.stats().contains("audio"));
  EXPECT_EQ(live.stats()["server"]["control_errors"], 2u);
}

TEST(AudioServiceRunning, AudioInfoDescribesTheSource) {
  LiveServer live(with_synthetic_audio());
  ASSERT_TRUE(live.started());
  WsClient c(live);
  EXPECT_TRUE(has(c.hello()["capabilities"], "audio"));
  const json info = c.request({{"type", "audio.info"}});
  EXPECT_EQ(info["type"], "audio.info");
  EXPECT_EQ(info["backend"], "synthetic");
  EXPECT_EQ(info["channels"], 2);
  EXPECT_EQ(info["rate"], 48000);
  EXPECT_EQ(info["sample_format"], "f32le");
  EXPECT_EQ(info["header_bytes"], audio::kNaudHeaderBytes);
  EXPECT_GE(info["ring_frames"].get<uint64_t>(), 48000u);  // --audio-ring-ms 1000
  EXPECT_EQ(info["reader_attached"], false);
}

TEST(AudioServiceRunning, ReadsFollowOnFromTheReadersPosition) {
  LiveServer live(with_synthetic_audio());
  ASSERT_TRUE(live.started());
  WsClient c(live);
  c.hello();
  const json read = {
      {"type", "audio.read"}, {"min_frames", 480}, {"max_frames", 480}, {"timeout_ms", 5000}};
  c.send_text(read.dump());
  const audio::NaudHeader first = parse_packet(c.next_binary());
  EXPECT_EQ(first.channels, 2);
  EXPECT_EQ(first.rate, 48000u);
  EXPECT_EQ(first.frames, 480u);  // held until min_frames, cut at max_frames
  EXPECT_EQ(first.sequence, 0u);
  c.send_text(read.dump());
  const audio::NaudHeader second = parse_packet(c.next_binary());
  EXPECT_EQ(second.sequence, 1u);
  EXPECT_EQ(second.first_frame, first.first_frame + first.frames);  // no gap between reads
  EXPECT_EQ(second.flags & audio::kNaudFlagDiscontinuity, 0);
  ASSERT_TRUE(live.pump_until([&] { return live.stats()["audio"]["frames_delivered"] == 960u; }));
  const json stats = live.stats()["audio"];
  EXPECT_EQ(stats["reads"], 2);
  EXPECT_EQ(stats["reader_attaches"], 1);
  EXPECT_EQ(stats["reader_attached"], true);
  EXPECT_EQ(stats["backend"], "synthetic");
}

TEST(AudioServiceRunning, OneConnectionReadsAtATimeUntilItLeaves) {
  LiveServer live(with_synthetic_audio());
  ASSERT_TRUE(live.started());
  auto first = std::make_unique<WsClient>(live);
  WsClient second(live);
  first->hello();
  second.hello();
  first->send_text(R"({"type":"audio.read","max_frames":64})");
  EXPECT_FALSE(first->next_binary().empty());
  EXPECT_EQ(second.request({{"type", "audio.read"}})["code"], "audio_in_use");
  EXPECT_EQ(live.stats()["audio"]["reads_in_use"], 1);
  first.reset();  // the reader leaves: the source is free
  ASSERT_TRUE(live.pump_until([&] { return live.stats()["audio"]["reader_attached"] == false; }));
  second.send_text(R"({"type":"audio.read","max_frames":64})");
  EXPECT_FALSE(second.next_binary().empty());
  EXPECT_EQ(live.stats()["audio"]["reader_attaches"], 2);
}

TEST(AudioServiceRunning, AHeldReadMakesTheNextOneBusyAndIsAnsweredAtItsDeadline) {
  LiveServer live(with_synthetic_audio());
  ASSERT_TRUE(live.started());
  WsClient c(live);
  c.hello();
  // More frames than the ring holds: held until its deadline.
  c.send_text(R"({"type":"audio.read","min_frames":1000000,"timeout_ms":1000})");
  const json busy = c.request({{"type", "audio.read"}});
  EXPECT_EQ(busy["code"], "audio_busy");
  EXPECT_EQ(live.stats()["audio"]["reads_busy"], 1);
  const std::string packet = c.next_binary();  // the held read, answered with what there is
  ASSERT_FALSE(packet.empty());
  EXPECT_LT(parse_packet(packet).frames, 1000000u);
}

}  // namespace
