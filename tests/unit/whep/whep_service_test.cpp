// whep::WhepService's bookkeeping with no browser: offers refused with their status and counter,
// answered ones holding a session slot on a real egress thread, and the slots freed on DELETE
// or when an unanswered session times out. A real libuv loop on the test's thread and a real
// media::StreamRegistry; state read back from write_stats.
#include "whep/whep_service.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "whep_fixture.h"
#include "whep_offer.h"

using namespace syncd;
using nlohmann::json;
using syncd::test::offer_sdp;
using syncd::test::pump;

namespace {

struct WhepServiceTest : test::WhepFixture {
  void start(whep::WhepConfig config = {}) {
    std::string why;
    ASSERT_TRUE(start_service(std::move(config), why)) << why;
  }
  whep::WhepService::Response offer(const std::string& stream,
                                    const std::string& sdp = offer_sdp()) {
    return whep->offer(stream, "application/sdp", sdp);
  }
  // The session part of a 201's Location, "/whep/NAME/SESSION".
  static std::string session_of(const whep::WhepService::Response& r) {
    const std::string prefix = "Location: /whep/";
    const size_t at = r.headers.find(prefix);
    if (at == std::string::npos) return {};
    const size_t slash = r.headers.find('/', at + prefix.size());
    return r.headers.substr(slash + 1, r.headers.find("\r\n", slash) - slash - 1);
  }
  bool sessions_become(size_t n) {
    return pump(&loop, [&] { return stats()["sessions"].size() == n; });
  }
};

TEST_F(WhepServiceTest, AnOfferThatIsNotSdpIsRefused415) {
  start();
  open_stream("main");
  const auto r = whep->offer("main", "text/plain", offer_sdp());
  EXPECT_EQ(r.status, 415);
  // A parameter after the media type is allowed.
  EXPECT_EQ(whep->offer("main", "application/sdp; charset=utf-8", "v=0\r\n").status, 400);
  EXPECT_EQ(stats()["refused"]["content_type"], 1);
}

TEST_F(WhepServiceTest, AnOfferForNoOpenStreamIsRefused404) {
  start();
  EXPECT_EQ(offer("nosuch").status, 404);
  EXPECT_EQ(offer("").status, 404);
  EXPECT_EQ(stats()["refused"]["unknown_stream"], 2);
  EXPECT_EQ(stats()["egresses"].size(), 0u);  // nothing was started for it
}

TEST_F(WhepServiceTest, AnOfferSyncdCannotAnswerIsRefused400WithItsReason) {
  start();
  open_stream("main");
  const auto not_sdp = offer("main", "hello");
  EXPECT_EQ(not_sdp.status, 400);
  EXPECT_EQ(not_sdp.body, "bad offer: not_sdp\n");
  const auto vp8 = offer("main", offer_sdp("VP8"));
  EXPECT_EQ(vp8.status, 400);
  EXPECT_EQ(vp8.body, "bad offer: no_h264\n");
  const json s = stats();
  EXPECT_EQ(s["refused"]["bad_sdp"], 1);
  EXPECT_EQ(s["refused"]["no_h264"], 1);
  EXPECT_EQ(s["offers"], 2);
  EXPECT_EQ(s["answered"], 0);
  EXPECT_EQ(s["sessions"].size(), 0u);
}

TEST_F(WhepServiceTest, AnAnsweredOfferHoldsASessionUntilItsDelete) {
  start();
  open_stream("main");
  const auto r = offer("main");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(r.content_type, "application/sdp");
  EXPECT_EQ(r.body.rfind("v=0\r\n", 0), 0u);
  EXPECT_NE(r.body.find("a=ice-lite"), std::string::npos);
  const std::string session = session_of(r);
  ASSERT_EQ(session.size(), 16u) << r.headers;
  json s = stats();
  EXPECT_EQ(s["answered"], 1);
  ASSERT_EQ(s["sessions"].size(), 1u);
  EXPECT_EQ(s["sessions"][0]["id"], session);
  EXPECT_EQ(s["sessions"][0]["stream"], "main");
  ASSERT_EQ(s["egresses"].size(), 1u);
  EXPECT_EQ(s["egresses"][0]["sessions"], 1);
  // DELETE names the stream and the session: any other pair is no session.
  EXPECT_EQ(whep->remove("other", session).status, 404);
  EXPECT_EQ(whep->remove("main", "0000000000000000").status, 404);
  EXPECT_EQ(whep->remove("main", "xyz").status, 404);
  EXPECT_EQ(stats()["delete_unknown"], 3);
  EXPECT_EQ(whep->remove("main", session).status, 200);
  EXPECT_EQ(stats()["deleted"], 1);
  // The egress thread ends the session and the slot is given back.
  ASSERT_TRUE(sessions_become(0));
  EXPECT_EQ(stats()["egresses"][0]["sessions"], 0);
  EXPECT_EQ(whep->remove("main", session).status, 404);
}

TEST_F(WhepServiceTest, AtSixteenSessionsOffersAreBusyWithRetryAfterUntilOneEnds) {
  start();
  open_stream("main");
  std::string first;
  for (size_t i = 0; i < whep::WhepService::kMaxSessions; ++i) {
    const auto r = offer("main");
    ASSERT_EQ(r.status, 201) << i << ": " << r.body;
    if (i == 0) first = session_of(r);
  }
  const auto busy = offer("main");
  EXPECT_EQ(busy.status, 503);
  EXPECT_NE(busy.headers.find("Retry-After: 5\r\n"), std::string::npos);
  EXPECT_EQ(stats()["refused"]["busy"], 1);
  ASSERT_EQ(whep->remove("main", first).status, 200);
  ASSERT_TRUE(sessions_become(whep::WhepService::kMaxSessions - 1));
  EXPECT_EQ(offer("main").status, 201);
}

TEST_F(WhepServiceTest, AtFourWatchedStreamsAFifthWaitsAndTakesAnIdleEgress) {
  start();
  std::string sessions[4];
  for (int i = 0; i < 4; ++i) {
    const std::string name(1, char('a' + i));  // streams a, b, c, d
    open_stream(name);
    const auto r = offer(name);
    ASSERT_EQ(r.status, 201) << r.body;
    sessions[i] = session_of(r);
  }
  open_stream("fifth");
  const auto busy = offer("fifth");
  EXPECT_EQ(busy.status, 503);
  EXPECT_EQ(busy.body, "too many streams watched over WHEP\n");
  EXPECT_NE(busy.headers.find("Retry-After: 5\r\n"), std::string::npos);
  EXPECT_EQ(stats()["egresses"].size(), 4u);
  // The last viewer of a leaves: its egress moves to the fifth stream.
  ASSERT_EQ(whep->remove("a", sessions[0]).status, 200);
  ASSERT_TRUE(sessions_become(3));
  EXPECT_EQ(offer("fifth").status, 201);
  const json s = stats();
  EXPECT_EQ(s["egresses_reused"], 1);
  EXPECT_EQ(s["egresses"].size(), 4u);
}

TEST_F(WhepServiceTest, AnUnansweredSessionEndsAndFreesItsSlot) {
  whep::WhepConfig config;
  config.transport.ice_timeout_ns = 200'000'000;  // no browser will ever check
  start(config);
  open_stream("main");
  ASSERT_EQ(offer("main").status, 201);
  ASSERT_EQ(stats()["sessions"].size(), 1u);
  ASSERT_TRUE(sessions_become(0));
  EXPECT_EQ(stats()["egresses"][0]["sessions_ended"], 1);
  EXPECT_EQ(stats()["deleted"], 0);
}

TEST_F(WhepServiceTest, ASessionWhoseStreamClosedEndsAfterAGraceUnlessItOpensAgain) {
  whep::WhepConfig config;
  config.transport.stream_gone_ns = 300'000'000;
  start(config);
  media::Stream* s = open_stream("main");
  ASSERT_EQ(offer("main").status, 201);
  ASSERT_EQ(stats()["sessions"].size(), 1u);
  // Closed and opened again within the grace (a producer reconnecting): the session stays.
  registry->close(s);
  s = open_stream("main");
  ASSERT_NE(s, nullptr);
  EXPECT_FALSE(pump(
      &loop, [&] { return stats()["sessions"].size() == 0; }, 600));
  // Closed for good: the session ends and its slot is free.
  registry->close(s);
  ASSERT_TRUE(sessions_become(0));
  EXPECT_EQ(stats()["egresses"][0]["sessions_ended"], 1);
}

TEST_F(WhepServiceTest, ARawStreamIsAnsweredThroughItsEncoder) {
  start();
  open_stream("raw", media::PixelFormat::kI420);
  const auto r = offer("raw");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(stats()["refused"]["format"], 0);
}

TEST_F(WhepServiceTest, MetricsCountOffersAndRefusalsByReason) {
  start();
  open_stream("main");
  offer("nosuch");
  offer("main", "garbage");
  telemetry::PrometheusText text;
  whep->write_metrics(text);
  const std::string out = text.text();
  EXPECT_NE(out.find("syncd_whep_offers_total 2"), std::string::npos) << out;
  EXPECT_NE(out.find("syncd_whep_refused_total{reason=\"unknown_stream\"} 1"), std::string::npos);
  EXPECT_NE(out.find("syncd_whep_refused_total{reason=\"bad_sdp\"} 1"), std::string::npos);
  EXPECT_NE(out.find("syncd_whep_sessions 0"), std::string::npos);
}

TEST(WhepAudioChannels, TheOptionIsParsedAgainstTheSourcesChannels) {
  whep::WhepAudioChannels channels;
  std::string why;
  ASSERT_TRUE(whep::parse_whep_audio_channels("", 2, channels, why));
  EXPECT_TRUE(channels.enabled);
  EXPECT_EQ(channels.left, 0u);
  EXPECT_EQ(channels.right, 1u);
  ASSERT_TRUE(whep::parse_whep_audio_channels("", 1, channels, why));
  EXPECT_EQ(channels.right, 0u);  // mono: channel 0 on both sides
  ASSERT_TRUE(whep::parse_whep_audio_channels("none", 2, channels, why));
  EXPECT_FALSE(channels.enabled);
  EXPECT_FALSE(whep::parse_whep_audio_channels("0,2", 2, channels, why));
  EXPECT_NE(why.find("past the audio source's 2 channels"), std::string::npos) << why;
  EXPECT_FALSE(whep::parse_whep_audio_channels("a,b", 2, channels, why));
}

}  // namespace
