#include "control/control_message.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

using namespace syncd::control;

namespace {
const ControlError* as_error(const ParseResult& r) {
  return std::get_if<ControlError>(&r);
}
template <typename T>
const T* as(const ParseResult& r) {
  auto* m = std::get_if<ControlMessage>(&r);
  return m ? std::get_if<T>(m) : nullptr;
}
}  // namespace

TEST(ControlMessage, Hello) {
  auto r = parse_control_message(R"({"type":"hello","protocol":1,"client":"t"})");
  ASSERT_TRUE(as<Hello>(r));
  EXPECT_EQ(as<Hello>(r)->protocol, 1);
  EXPECT_EQ(as<Hello>(r)->client, "t");
}

TEST(ControlMessage, StreamOpenDefaultsAndFields) {
  auto r = parse_control_message(
      R"({"type":"stream.open","name":"main","width":1920,"height":1080,"format":"bgra8","fps":30})");
  ASSERT_TRUE(as<StreamOpen>(r));
  const auto& c = as<StreamOpen>(r)->config;
  EXPECT_EQ(c.name, "main");
  EXPECT_EQ(c.width, 1920u);
  EXPECT_EQ(c.height, 1080u);
  EXPECT_EQ(c.format, syncd::media::PixelFormat::kBgra8);
  EXPECT_EQ(c.fps, 30.0);
  EXPECT_EQ(c.slots, 4u);
}

TEST(ControlMessage, StreamOpenTakesEveryPixelFormat) {
  const std::pair<const char*, syncd::media::PixelFormat> formats[] = {
      {"rgba8", syncd::media::PixelFormat::kRgba8}, {"bgra8", syncd::media::PixelFormat::kBgra8},
      {"nv12", syncd::media::PixelFormat::kNv12},   {"i420", syncd::media::PixelFormat::kI420},
      {"h264", syncd::media::PixelFormat::kH264},
  };
  for (const auto& [name, format] : formats) {
    auto r = parse_control_message(std::string(R"({"type":"stream.open","name":"a","width":2,)") +
                                   R"("height":2,"format":")" + name + R"("})");
    ASSERT_TRUE(as<StreamOpen>(r)) << name;
    EXPECT_EQ(as<StreamOpen>(r)->config.format, format) << name;
  }
}

TEST(ControlMessage, StreamOpenFeedbackIsOptInAndBoolean) {
  // A source hears stream.keyframe / stream.bitrate only when it asks to.
  const std::string open = R"({"type":"stream.open","name":"a","width":2,"height":2)";
  ASSERT_TRUE(as<StreamOpen>(parse_control_message(open + "}")));
  EXPECT_FALSE(as<StreamOpen>(parse_control_message(open + "}"))->feedback);
  auto on = parse_control_message(open + R"(,"format":"h264","feedback":true})");
  ASSERT_TRUE(as<StreamOpen>(on));
  EXPECT_TRUE(as<StreamOpen>(on)->feedback);
  for (const char* bad : {"1", R"("yes")", "null"}) {
    const auto r = parse_control_message(open + R"(,"feedback":)" + bad + "}");
    const ControlError* e = as_error(r);
    ASSERT_TRUE(e) << bad;
    EXPECT_STREQ(e->code, error_code::kBadMessage);
    EXPECT_EQ(e->message, "'feedback' must be true or false");
  }
}

TEST(ControlMessage, UnknownFormatNamesTheFiveFormats) {
  // "stream default" (0) is a frame-header value, not a format a stream can be opened with.
  for (const char* bad : {R"("yuv")", R"("NV12")", R"("?")", "3"}) {
    auto r = parse_control_message(
        std::string(R"({"type":"stream.open","name":"a","width":2,"height":2,"format":)") + bad +
        "}");
    const ControlError* e = as_error(r);
    ASSERT_TRUE(e) << bad;
    EXPECT_STREQ(e->code, error_code::kBadMessage);
    EXPECT_EQ(e->message, "'format' must be rgba8, bgra8, nv12, i420 or h264") << bad;
  }
}

TEST(ControlMessage, CodedErrors) {
  EXPECT_STREQ(as_error(parse_control_message("{"))->code, error_code::kBadJson);
  EXPECT_STREQ(as_error(parse_control_message("[]"))->code, error_code::kBadMessage);
  EXPECT_STREQ(as_error(parse_control_message(R"({"type":"nope"})"))->code,
               error_code::kUnknownType);
  EXPECT_STREQ(as_error(parse_control_message(R"({"type":"hello"})"))->code,
               error_code::kBadMessage);
  EXPECT_STREQ(
      as_error(parse_control_message(R"({"type":"stream.open","name":"a","width":-1,"height":2})"))
          ->code,
      error_code::kBadMessage);
  EXPECT_STREQ(
      as_error(parse_control_message(R"({"type":"stream.open","name":"a b","width":1,"height":2})"))
          ->code,
      error_code::kBadMessage);
  EXPECT_STREQ(
      as_error(parse_control_message(
                   R"({"type":"stream.open","name":"a","width":1,"height":2,"format":"yuv"})"))
          ->code,
      error_code::kBadMessage);
}

TEST(ControlMessage, PingEchoesId) {
  auto r = parse_control_message(R"({"type":"ping","id":{"n":5}})");
  ASSERT_TRUE(as<Ping>(r));
  EXPECT_EQ(as<Ping>(r)->id_json, R"({"n":5})");
}

TEST(ControlMessage, ErrorJsonMergesExtra) {
  auto j = nlohmann::json::parse(error_json("unknown_stream", "m", R"({"stream":3})"));
  EXPECT_EQ(j["type"], "error");
  EXPECT_EQ(j["code"], "unknown_stream");
  EXPECT_EQ(j["stream"], 3);
}

TEST(ControlMessage, NestingIsBoundedAtParse) {
  // A ping whose id nests 75,000 arrays deep: refused at parse, never built or echoed.
  const std::string deep =
      R"({"type":"ping","id":)" + std::string(75'000, '[') + std::string(75'000, ']') + "}";
  const ParseResult parsed = parse_control_message(deep);
  const ControlError* e = as_error(parsed);
  ASSERT_TRUE(e);
  EXPECT_STREQ(e->code, error_code::kBadJson);  // codes are compared as strings
  EXPECT_NE(e->message.find("nested deeper than 32"), std::string::npos);
  // The bound: the message object is level 1, so an id of 31 nested arrays is the deepest taken.
  auto nested = [](int levels) {
    return R"({"type":"ping","id":)" + std::string(levels, '[') + std::string(levels, ']') + "}";
  };
  const ParseResult deepest = parse_control_message(nested(31));
  EXPECT_TRUE(as<Ping>(deepest));
  const ParseResult too_deep = parse_control_message(nested(32));
  EXPECT_TRUE(as_error(too_deep));
}

TEST(ControlMessage, StreamReportCarriesTheSourcesCounters) {
  auto r = parse_control_message(
      R"({"type":"stream.report","stream":3,"offered":293,"sent":179,"in_flight":0,)"
      R"("dropped":{"backpressure":110,"readback_busy":4}})");
  ASSERT_TRUE(as<StreamReport>(r));
  const StreamReport& s = *as<StreamReport>(r);
  EXPECT_EQ(s.stream, 3u);
  EXPECT_EQ(s.offered, 293u);
  EXPECT_EQ(s.sent, 179u);
  ASSERT_EQ(s.dropped.size(), 2u);
  uint64_t total = 0;
  for (const auto& [reason, n] : s.dropped) total += n;
  EXPECT_EQ(total, 114u);
  const char* refused[] = {
      R"({"type":"stream.report","offered":1,"sent":1})",                          // no stream
      R"({"type":"stream.report","stream":1,"sent":1})",                           // no offered
      R"({"type":"stream.report","stream":1,"offered":-1,"sent":0})",              // negative
      R"({"type":"stream.report","stream":1,"offered":1,"sent":0,"dropped":[]})",  // not object
      R"({"type":"stream.report","stream":1,"offered":1,"sent":0,"dropped":{"Bad Name":1}})",
      R"({"type":"stream.report","stream":1,"offered":1,"sent":0,"dropped":{"x":1.5}})",
      R"({"type":"stream.report","stream":1,"offered":1,"sent":0,"dropped":{"x":-1}})",
      R"({"type":"stream.report","stream":1,"offered":9007199254740993,"sent":0})",  // > 2^53
      R"({"type":"stream.report","stream":1,"offered":1,"sent":0,"dropped":)"
      R"({"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1,"i":1}})",  // 9 reasons
  };
  for (const char* text : refused) {
    const ParseResult parsed = parse_control_message(text);
    const ControlError* e = as_error(parsed);
    ASSERT_TRUE(e) << text;
    EXPECT_STREQ(e->code, error_code::kBadMessage) << text;
  }
}
