// The camera column marker survives H.264 (src/video_codec/column_marker.h): 300 frames of
// moving content at 720p and 1080p, 2 and 8 Mbit/s, every decoded frame's marker equals its
// sequence.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "media/column_marker.h"
#include "video_codec/h264_decoder.h"
#include "video_codec/h264_encoder.h"
#include "video_codec_pictures.h"

namespace syncd::video_codec {
using media::draw_column_marker;
using media::kMarkerBits;
using media::kMarkerColumn;
using media::kMarkerWidth;
using media::read_column_marker;
namespace {

using testing::I420Frame;
using testing::MovingPicture;

TEST(ColumnMarker, ReadsWhatWasDrawnAndRefusesOtherPictures) {
  I420Frame frame(320, 180);
  for (uint32_t sequence : {0u, 1u, 0x8000u, 0xa5a5u, 0xffffu}) {
    std::fill(frame.y.begin(), frame.y.end(), 128);
    draw_column_marker(frame.y.data(), 320, 320, 180, static_cast<uint16_t>(sequence));
    EXPECT_EQ(read_column_marker(frame.y.data(), 320, 320, 180),
              std::optional<uint16_t>(static_cast<uint16_t>(sequence)));
  }
  std::fill(frame.y.begin(), frame.y.end(), 128);  // grey: no column is black or white
  EXPECT_EQ(read_column_marker(frame.y.data(), 320, 320, 180), std::nullopt);
  draw_column_marker(frame.y.data(), 320, 320, 180, 5);
  for (uint32_t y = 0; y < 180; ++y) {
    std::fill_n(&frame.y[y * 320 + kMarkerBits * kMarkerColumn], kMarkerColumn, 235);
  }
  EXPECT_EQ(read_column_marker(frame.y.data(), 320, 320, 180), std::nullopt) << "white guard";
  EXPECT_EQ(read_column_marker(frame.y.data(), 320, 100, 180), std::nullopt) << "too narrow";
}

struct MarkerCase {
  uint32_t width;
  uint32_t height;
  uint32_t kbps;
};

class MarkerSurvives : public ::testing::TestWithParam<MarkerCase> {};

TEST_P(MarkerSurvives, EveryFrameOf300) {
  const MarkerCase c = GetParam();
  H264Encoder encoder;
  EncoderConfig config;
  config.width = c.width;
  config.height = c.height;
  config.bitrate_kbps = c.kbps;
  ASSERT_EQ(encoder.open(config), OpenStatus::kOk);
  H264Decoder decoder;
  ASSERT_TRUE(decoder.open());
  MovingPicture moving(c.width, c.height, 2);  // camera-like noise on top of the motion
  I420Frame source(c.width, c.height);
  I420Frame decoded(c.width, c.height);
  std::vector<uint8_t> au(4 << 20);
  uint32_t mismatches = 0;
  constexpr uint32_t kFirstSequence = 65'000;  // wraps through 0 on the way
  for (uint32_t i = 0; i < 300; ++i) {
    const auto sequence = static_cast<uint16_t>(kFirstSequence + i);
    moving.draw(source, i, sequence);
    const EncodeResult encoded = encoder.encode(source.input(), i, false, au);
    ASSERT_EQ(encoded.status, EncodeStatus::kOk);
    ASSERT_EQ(decoder.decode({au.data(), encoded.bytes}, decoded.output()).status,
              DecodeStatus::kPicture);
    const auto marker = read_column_marker(decoded.y.data(), c.width, c.width, c.height);
    if (marker != std::optional<uint16_t>(sequence)) {
      ++mismatches;
      ADD_FAILURE() << "frame " << i << " read " << (marker ? std::to_string(*marker) : "none");
      if (mismatches > 5) break;
    }
  }
  EXPECT_EQ(mismatches, 0u);
  const double kbps = static_cast<double>(encoder.counters().bytes) * 8 * 60 / 300 / 1000;
  RecordProperty("kbps", std::to_string(kbps));
  EXPECT_LT(kbps, c.kbps * 1.3) << "the rate the marker survived at";
}

INSTANTIATE_TEST_SUITE_P(Rates, MarkerSurvives,
                         ::testing::Values(MarkerCase{1280, 720, 2000}, MarkerCase{1280, 720, 8000},
                                           MarkerCase{1920, 1080, 2000},
                                           MarkerCase{1920, 1080, 8000}),
                         [](const ::testing::TestParamInfo<MarkerCase>& info) {
                           return std::to_string(info.param.height) + "p" +
                                  std::to_string(info.param.kbps / 1000) + "M";
                         });

}  // namespace
}  // namespace syncd::video_codec
