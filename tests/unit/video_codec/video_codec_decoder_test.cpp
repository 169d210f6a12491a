// H264Decoder's refusals and recovery (src/video_codec, docs/codec.md).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "video_codec/h264_decoder.h"
#include "video_codec/h264_encoder.h"
#include "video_codec_pictures.h"

namespace syncd::video_codec {
namespace {

using testing::I420Frame;
using testing::MovingPicture;

// A short 640x360 stream: IDR at 0 and at 20 (forced), P-frames otherwise.
std::vector<std::vector<uint8_t>> encode_stream(uint32_t frames) {
  H264Encoder encoder;
  EncoderConfig config;
  config.width = 640;
  config.height = 360;
  config.bitrate_kbps = 2000;
  EXPECT_EQ(encoder.open(config), OpenStatus::kOk);
  MovingPicture moving(640, 360);
  I420Frame source(640, 360);
  std::vector<uint8_t> buffer(1 << 20);
  std::vector<std::vector<uint8_t>> stream;
  for (uint32_t i = 0; i < frames; ++i) {
    moving.draw(source, i, static_cast<uint16_t>(i));
    const EncodeResult encoded = encoder.encode(source.input(), i, i == 20, buffer);
    EXPECT_EQ(encoded.status, EncodeStatus::kOk);
    EXPECT_EQ(encoded.keyframe, i == 0 || i == 20);
    stream.emplace_back(buffer.begin(), buffer.begin() + static_cast<long>(encoded.bytes));
  }
  return stream;
}

class H264DecoderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    stream_ = encode_stream(30);
    ASSERT_TRUE(decoder_.open());
  }
  DecodeStatus decode(std::span<const uint8_t> au) {
    return decoder_.decode(au, out_.output()).status;
  }

  std::vector<std::vector<uint8_t>> stream_;
  H264Decoder decoder_;
  I420Frame out_{640, 360};
};

TEST_F(H264DecoderTest, WaitsForTheFirstIdr) {
  EXPECT_TRUE(decoder_.needs_keyframe());
  EXPECT_EQ(decode(stream_[1]), DecodeStatus::kAwaitingKeyframe);
  EXPECT_EQ(decode(stream_[0]), DecodeStatus::kPicture);
  EXPECT_FALSE(decoder_.needs_keyframe());
  EXPECT_EQ(decoder_.counters().awaiting_keyframe, 1u);
}

TEST_F(H264DecoderTest, RefusesGarbageWithAReason) {
  std::mt19937 random(7);
  std::vector<uint8_t> garbage(5000);
  for (auto& byte : garbage) byte = static_cast<uint8_t>(random());
  garbage[0] = 0x47;  // not a start code
  EXPECT_EQ(decode({}), DecodeStatus::kRefusedEmpty);
  EXPECT_EQ(decode(garbage), DecodeStatus::kRefusedNotAnnexB);
  // A start code and an IDR NAL header in front of noise: fed to libavcodec, which refuses it.
  garbage[0] = 0;
  garbage[1] = 0;
  garbage[2] = 1;
  garbage[3] = 0x65;
  const DecodeStatus idr_noise = decode(garbage);
  EXPECT_TRUE(idr_noise == DecodeStatus::kDecodeError || idr_noise == DecodeStatus::kNoPicture ||
              idr_noise == DecodeStatus::kCorruptPicture)
      << static_cast<int>(idr_noise);
  EXPECT_NE(idr_noise, DecodeStatus::kPicture);
  // Still fine at the real IDR afterwards.
  EXPECT_EQ(decode(stream_[0]), DecodeStatus::kPicture);
  std::vector<uint8_t> huge(DecoderConfig{}.max_access_unit_bytes + 1, 0);
  huge[2] = 1;
  EXPECT_EQ(decode(huge), DecodeStatus::kRefusedTooLarge);
  const DecoderCounters& counters = decoder_.counters();
  EXPECT_EQ(counters.refused_empty, 1u);
  EXPECT_EQ(counters.refused_not_annexb, 1u);
  EXPECT_EQ(counters.refused_too_large, 1u);
  EXPECT_EQ(counters.pictures_out, 1u);
}

// Every byte flipped garbage at any position of every access unit never crashes, and a clean IDR
// always brings the decoder back.
TEST_F(H264DecoderTest, CorruptedAccessUnitsNeverCrashAndIdrRecovers) {
  std::mt19937 random(11);
  for (int round = 0; round < 40; ++round) {
    std::vector<uint8_t> au = stream_[static_cast<size_t>(round) % stream_.size()];
    for (int flips = 0; flips < 20; ++flips) {
      au[random() % au.size()] ^= static_cast<uint8_t>(1 + random() % 255);
    }
    (void)decode(au);
  }
  EXPECT_EQ(decode(stream_[20]), DecodeStatus::kPicture);
  EXPECT_EQ(decode(stream_[21]), DecodeStatus::kPicture);
}

// A truncated access unit is an error, the decoder then refuses P-frames until the next IDR.
TEST_F(H264DecoderTest, TruncatedAccessUnitNeedsKeyframeUntilIdr) {
  for (uint32_t i = 0; i < 5; ++i) ASSERT_EQ(decode(stream_[i]), DecodeStatus::kPicture) << i;
  const std::vector<uint8_t>& p_frame = stream_[5];
  const DecodeStatus truncated = decode({p_frame.data(), p_frame.size() / 2});
  EXPECT_TRUE(truncated == DecodeStatus::kDecodeError || truncated == DecodeStatus::kCorruptPicture)
      << static_cast<int>(truncated);
  EXPECT_TRUE(decoder_.needs_keyframe());
  for (uint32_t i = 6; i < 20; ++i) {
    EXPECT_EQ(decode(stream_[i]), DecodeStatus::kAwaitingKeyframe) << i;
  }
  EXPECT_EQ(decode(stream_[20]), DecodeStatus::kPicture);
  EXPECT_FALSE(decoder_.needs_keyframe());
  EXPECT_EQ(decode(stream_[21]), DecodeStatus::kPicture);
  EXPECT_EQ(decoder_.counters().awaiting_keyframe, 14u);
  EXPECT_EQ(decoder_.counters().decode_errors + decoder_.counters().corrupt_pictures, 1u);
}

TEST_F(H264DecoderTest, TruncatedIdrIsRefused) {
  const std::vector<uint8_t>& idr = stream_[0];
  const DecodeStatus truncated = decode({idr.data(), idr.size() * 2 / 3});
  EXPECT_NE(truncated, DecodeStatus::kPicture);
  EXPECT_TRUE(decoder_.needs_keyframe());
  EXPECT_EQ(decode(stream_[1]), DecodeStatus::kAwaitingKeyframe);
  EXPECT_EQ(decode(stream_[20]), DecodeStatus::kPicture);
}

// A loss the caller saw (the jitter buffer gave up on a frame) holds P-frames back until an IDR.
TEST_F(H264DecoderTest, NotedLossWaitsForIdr) {
  EXPECT_EQ(decode(stream_[0]), DecodeStatus::kPicture);
  EXPECT_EQ(decode(stream_[1]), DecodeStatus::kPicture);
  decoder_.note_loss();
  EXPECT_TRUE(decoder_.needs_keyframe());
  EXPECT_EQ(decode(stream_[3]), DecodeStatus::kAwaitingKeyframe);
  EXPECT_EQ(decode(stream_[20]), DecodeStatus::kPicture);
  EXPECT_EQ(decoder_.counters().losses_noted, 1u);
  EXPECT_EQ(decoder_.counters().keyframes_in, 2u);
}

TEST_F(H264DecoderTest, RefusesABadOutputPicture) {
  OutputPicture bad = out_.output();
  bad.planes[2] = nullptr;
  EXPECT_EQ(decoder_.decode(stream_[0], bad).status, DecodeStatus::kBadOutput);
  EXPECT_EQ(decoder_.copy_picture(out_.output()), DecodeStatus::kPicture);
  EXPECT_EQ(decoder_.counters().bad_output, 1u);
}

TEST(H264DecoderClosed, RefusesUntilOpen) {
  H264Decoder decoder;
  I420Frame out(64, 64);
  const uint8_t au[] = {0, 0, 0, 1, 0x65, 0x88};
  EXPECT_EQ(decoder.decode(au, out.output()).status, DecodeStatus::kNotOpen);
  EXPECT_FALSE(decoder.open(DecoderConfig{0, 1}));
}

}  // namespace
}  // namespace syncd::video_codec
