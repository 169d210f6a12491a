// audio.read / audio.info control messages (docs/protocol.md, "Audio capture").
#include <gtest/gtest.h>

#include "control/control_message.h"

namespace syncd::control {
namespace {

const AudioRead* as_read(const ParseResult& r) {
  if (auto* m = std::get_if<ControlMessage>(&r)) return std::get_if<AudioRead>(m);
  return nullptr;
}

TEST(AudioControl, ReadDefaults) {
  const ParseResult r = parse_control_message(R"({"type":"audio.read"})");
  const AudioRead* a = as_read(r);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->max_frames, 0u);
  EXPECT_EQ(a->min_frames, 0u);
  EXPECT_EQ(a->timeout_ms, 1000u);
}

TEST(AudioControl, ReadFieldsAndAlias) {
  const ParseResult r = parse_control_message(
      R"({"type":"readAudioSource","max_frames":4800,"min_frames":240,"timeout_ms":50})");
  const AudioRead* a = as_read(r);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->max_frames, 4800u);
  EXPECT_EQ(a->min_frames, 240u);
  EXPECT_EQ(a->timeout_ms, 50u);
}

TEST(AudioControl, ReadRejectsBadFields) {
  for (const char* text :
       {R"({"type":"audio.read","max_frames":-1})", R"({"type":"audio.read","max_frames":"10"})",
        R"({"type":"audio.read","max_frames":2000000})",
        R"({"type":"audio.read","timeout_ms":10001})",
        R"({"type":"audio.read","max_frames":10,"min_frames":11})"}) {
    const ParseResult r = parse_control_message(text);
    const auto* e = std::get_if<ControlError>(&r);
    ASSERT_NE(e, nullptr) << text;
    EXPECT_STREQ(e->code, error_code::kBadMessage) << text;
  }
}

TEST(AudioControl, Info) {
  const ParseResult r = parse_control_message(R"({"type":"audio.info"})");
  const auto* m = std::get_if<ControlMessage>(&r);
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(std::holds_alternative<AudioInfo>(*m));
}

}  // namespace
}  // namespace syncd::control
