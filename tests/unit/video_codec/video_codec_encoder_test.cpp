// H264Encoder with H264Decoder as its checker (src/video_codec, docs/codec.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "media/column_marker.h"
#include "video_codec/h264_decoder.h"
#include "video_codec/h264_encoder.h"
#include "video_codec_pictures.h"
#include "video_codec_test_support.h"

namespace syncd::video_codec {
using media::draw_column_marker;
using media::kMarkerWidth;
using media::read_column_marker;
namespace {

using testing::ConvertedFrame;
using testing::I420Frame;
using testing::MovingPicture;
using testing::nal_types;

EncoderConfig config_for(uint32_t width, uint32_t height, uint32_t kbps) {
  EncoderConfig config;
  config.width = width;
  config.height = height;
  config.fps = 60;
  config.bitrate_kbps = kbps;
  return config;
}

struct RoundTripCase {
  uint32_t width;
  uint32_t height;
  PixelFormat format;
};

std::string case_name(const ::testing::TestParamInfo<RoundTripCase>& info) {
  static const char* const kFormats[] = {"Rgba", "Bgra", "I420", "Nv12"};
  return std::to_string(info.param.width) + "x" + std::to_string(info.param.height) +
         kFormats[static_cast<int>(info.param.format)];
}

class RoundTrip : public ::testing::TestWithParam<RoundTripCase> {};

// Every input format at every size: one access unit per frame, AUD first, SPS/PPS/IDR in the
// first, decoded at the right size, close to the source, with its marker intact.
TEST_P(RoundTrip, DecodesCloseToTheSourceWithMarker) {
  const RoundTripCase c = GetParam();
  H264Encoder encoder;
  ASSERT_EQ(encoder.open(config_for(c.width, c.height, 8000)), OpenStatus::kOk);
  H264Decoder decoder;
  ASSERT_TRUE(decoder.open());
  MovingPicture moving(c.width, c.height);
  I420Frame source(c.width, c.height);
  I420Frame decoded(c.width, c.height);
  std::vector<uint8_t> au(4 << 20);
  constexpr uint32_t kFrames = 8;
  for (uint32_t i = 0; i < kFrames; ++i) {
    moving.draw(source, i, static_cast<uint16_t>(1000 + i));
    EncodeResult encoded;
    if (c.format == PixelFormat::kI420) {
      encoded = encoder.encode(source.input(), i * 16'666'667ull, false, au);
    } else {
      ConvertedFrame converted(source, c.format);
      encoded = encoder.encode(converted.picture, i * 16'666'667ull, false, au);
    }
    ASSERT_EQ(encoded.status, EncodeStatus::kOk) << i;
    EXPECT_EQ(encoded.pts_ns, i * 16'666'667ull);
    EXPECT_EQ(encoded.bits, encoded.bytes * 8);
    EXPECT_EQ(encoded.keyframe, i == 0) << i;
    const auto types = nal_types(au.data(), encoded.bytes);
    ASSERT_FALSE(types.empty());
    EXPECT_EQ(types.front(), 9) << "access unit delimiter first";
    EXPECT_EQ(std::count(types.begin(), types.end(), 9), 1);
    if (i == 0) {
      EXPECT_NE(std::find(types.begin(), types.end(), 7), types.end()) << "SPS";
      EXPECT_NE(std::find(types.begin(), types.end(), 8), types.end()) << "PPS";
      EXPECT_NE(std::find(types.begin(), types.end(), 5), types.end()) << "IDR slice";
    }
    const DecodeResult result = decoder.decode({au.data(), encoded.bytes}, decoded.output());
    ASSERT_EQ(result.status, DecodeStatus::kPicture) << i;
    EXPECT_EQ(result.width, c.width);
    EXPECT_EQ(result.height, c.height);
    EXPECT_EQ(result.resolution_changed, i == 0);
    // The texture's fine detail at 8 Mbit/s: ~15 at 1080p (a wrong or grey frame is over 40).
    EXPECT_LT(testing::mean_abs_luma_difference(source, decoded), 20.0) << i;
    EXPECT_EQ(read_column_marker(decoded.y.data(), c.width, c.width, c.height),
              std::optional<uint16_t>(static_cast<uint16_t>(1000 + i)));
  }
  const EncoderCounters& counters = encoder.counters();
  EXPECT_EQ(counters.frames_in, kFrames);
  EXPECT_EQ(counters.frames_encoded, kFrames);
  EXPECT_EQ(counters.keyframes, 1u);
  EXPECT_GT(counters.bytes, 0u);
  EXPECT_EQ(decoder.counters().pictures_out, kFrames);
}

INSTANTIATE_TEST_SUITE_P(SizesAndFormats, RoundTrip,
                         ::testing::Values(RoundTripCase{640, 360, PixelFormat::kRgba8},
                                           RoundTripCase{640, 360, PixelFormat::kBgra8},
                                           RoundTripCase{640, 360, PixelFormat::kI420},
                                           RoundTripCase{640, 360, PixelFormat::kNv12},
                                           RoundTripCase{1280, 720, PixelFormat::kRgba8},
                                           RoundTripCase{1280, 720, PixelFormat::kBgra8},
                                           RoundTripCase{1280, 720, PixelFormat::kI420},
                                           RoundTripCase{1280, 720, PixelFormat::kNv12},
                                           RoundTripCase{1920, 1080, PixelFormat::kRgba8},
                                           RoundTripCase{1920, 1080, PixelFormat::kBgra8},
                                           RoundTripCase{1920, 1080, PixelFormat::kI420},
                                           RoundTripCase{1920, 1080, PixelFormat::kNv12}),
                         case_name);

// NV12 output from the decoder holds the same luma and interleaved chroma.
TEST(H264DecoderOutput, Nv12MatchesI420) {
  H264Encoder encoder;
  ASSERT_EQ(encoder.open(config_for(640, 360, 4000)), OpenStatus::kOk);
  MovingPicture moving(640, 360);
  I420Frame source(640, 360);
  moving.draw(source, 0, 77);
  std::vector<uint8_t> au(1 << 20);
  const EncodeResult encoded = encoder.encode(source.input(), 0, false, au);
  ASSERT_EQ(encoded.status, EncodeStatus::kOk);
  H264Decoder as_i420, as_nv12;
  ASSERT_TRUE(as_i420.open());
  ASSERT_TRUE(as_nv12.open());
  I420Frame i420(640, 360);
  ASSERT_EQ(as_i420.decode({au.data(), encoded.bytes}, i420.output()).status,
            DecodeStatus::kPicture);
  std::vector<uint8_t> y(640 * 360), uv(640 * 180);
  OutputPicture nv12;
  nv12.format = PixelFormat::kNv12;
  nv12.width = 640;
  nv12.height = 360;
  nv12.planes[0] = y.data();
  nv12.planes[1] = uv.data();
  nv12.strides[0] = 640;
  nv12.strides[1] = 640;
  ASSERT_EQ(as_nv12.decode({au.data(), encoded.bytes}, nv12).status, DecodeStatus::kPicture);
  EXPECT_EQ(y, i420.y);
  for (size_t i = 0; i < i420.u.size(); ++i) {
    ASSERT_EQ(uv[2 * i], i420.u[i]) << i;
    ASSERT_EQ(uv[2 * i + 1], i420.v[i]) << i;
  }
}

std::vector<bool> keyframes_of(H264Encoder& encoder, uint32_t frames,
                               const std::vector<uint32_t>& forced = {}) {
  const EncoderConfig& config = encoder.config();
  MovingPicture moving(config.width, config.height);
  I420Frame source(config.width, config.height);
  std::vector<uint8_t> au(1 << 20);
  std::vector<bool> keyframes;
  for (uint32_t i = 0; i < frames; ++i) {
    moving.draw(source, i, static_cast<uint16_t>(i));
    const bool force = std::find(forced.begin(), forced.end(), i) != forced.end();
    const EncodeResult encoded = encoder.encode(source.input(), i, force, au);
    EXPECT_EQ(encoded.status, EncodeStatus::kOk);
    keyframes.push_back(encoded.keyframe);
    if (encoded.keyframe) {
      // Every IDR repeats SPS and PPS, so a receiver can join there.
      const auto types = nal_types(au.data(), encoded.bytes);
      EXPECT_NE(std::find(types.begin(), types.end(), 7), types.end()) << i;
      EXPECT_NE(std::find(types.begin(), types.end(), 8), types.end()) << i;
    }
  }
  return keyframes;
}

TEST(H264Encoder, PeriodicIdrEveryIntervalFrames) {
  H264Encoder encoder;
  EncoderConfig config = config_for(640, 360, 2000);
  config.keyframe_interval = 30;
  ASSERT_EQ(encoder.open(config), OpenStatus::kOk);
  const std::vector<bool> keyframes = keyframes_of(encoder, 95);
  for (uint32_t i = 0; i < keyframes.size(); ++i) EXPECT_EQ(keyframes[i], i % 30 == 0) << i;
  EXPECT_EQ(encoder.counters().keyframes, 4u);
  EXPECT_EQ(encoder.counters().forced_keyframes, 0u);
}

TEST(H264Encoder, ForcedKeyframeIsTheRequestedFrame) {
  H264Encoder encoder;
  ASSERT_EQ(encoder.open(config_for(640, 360, 2000)), OpenStatus::kOk);
  const std::vector<bool> keyframes = keyframes_of(encoder, 40, {10, 25});
  for (uint32_t i = 0; i < keyframes.size(); ++i) {
    EXPECT_EQ(keyframes[i], i == 0 || i == 10 || i == 25) << i;
  }
  EXPECT_EQ(encoder.counters().forced_keyframes, 2u);
  EXPECT_EQ(encoder.counters().keyframes, 3u);
}

TEST(H264Encoder, IntraRefreshHasNoPeriodicIdrButHonoursRequests) {
  H264Encoder encoder;
  EncoderConfig config = config_for(640, 360, 2000);
  config.keyframe_mode = KeyframeMode::kIntraRefresh;
  config.keyframe_interval = 30;
  ASSERT_EQ(encoder.open(config), OpenStatus::kOk);
  const std::vector<bool> keyframes = keyframes_of(encoder, 70, {50});
  for (uint32_t i = 0; i < keyframes.size(); ++i) EXPECT_EQ(keyframes[i], i == 0 || i == 50) << i;
}

// The produced rate follows a live reconfiguration within a second of frames (60 at 60 fps).
TEST(H264Encoder, BitrateFollowsReconfigureWithinASecond) {
  H264Encoder encoder;
  EncoderConfig config = config_for(640, 360, 3000);
  config.keyframe_interval = 1000;
  ASSERT_EQ(encoder.open(config), OpenStatus::kOk);
  MovingPicture moving(640, 360, 12);
  I420Frame source(640, 360);
  std::vector<uint8_t> au(1 << 20);
  uint32_t frame = 0;
  // kbps over frames [skip, count) of a run of count frames at 60 fps.
  auto run = [&](uint32_t count, uint32_t skip) {
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < count; ++i, ++frame) {
      moving.draw(source, frame, static_cast<uint16_t>(frame));
      const EncodeResult encoded = encoder.encode(source.input(), frame, false, au);
      EXPECT_EQ(encoded.status, EncodeStatus::kOk);
      if (i >= skip) bytes += encoded.bytes;
    }
    return static_cast<double>(bytes) * 8 * 60 / (count - skip) / 1000;
  };
  const double high = run(90, 30);
  ASSERT_TRUE(encoder.reconfigure(600, 100));
  const double low = run(60, 0);  // the first second after the change, IDR-free
  const double low_settled = run(60, 0);
  ASSERT_TRUE(encoder.reconfigure(3000, 100));
  const double back = run(60, 0);
  EXPECT_GT(high, 3000 * 0.6);
  EXPECT_LT(high, 3000 * 1.2);
  EXPECT_LT(low, 600 * 1.3);
  EXPECT_GT(low_settled, 600 * 0.5);
  EXPECT_LT(low_settled, 600 * 1.2);
  EXPECT_GT(back, 3000 * 0.6);
  EXPECT_EQ(encoder.counters().reconfigures, 2u);
  EXPECT_EQ(encoder.counters().keyframes, 1u) << "a reconfiguration is not an IDR";
  RecordProperty("kbps_3000", std::to_string(high));
  RecordProperty("kbps_600_first_second", std::to_string(low));
}

// 1080p input throughout; the encoder steps 1080p -> 720p -> 540p -> 1080p. The first frame
// after each step is an IDR at the new size; the decoder reports the change and holds the
// picture until the caller's output has the new size.
TEST(H264Encoder, ResolutionStepsDownAndUpFromOneSourceSize) {
  for (PixelFormat format : {PixelFormat::kI420, PixelFormat::kRgba8, PixelFormat::kNv12}) {
    SCOPED_TRACE(static_cast<int>(format));
    H264Encoder encoder;
    ASSERT_EQ(encoder.open(config_for(1920, 1080, 6000)), OpenStatus::kOk);
    H264Decoder decoder;
    ASSERT_TRUE(decoder.open());
    MovingPicture moving(1920, 1080);
    I420Frame source(1920, 1080);
    std::vector<uint8_t> au(4 << 20);
    uint32_t frame = 0;
    const std::pair<uint32_t, uint32_t> steps[] = {
        {1920, 1080}, {1280, 720}, {960, 540}, {1920, 1080}};
    for (auto [width, height] : steps) {
      if (width != encoder.config().width) {
        ASSERT_EQ(encoder.resize(width, height), OpenStatus::kOk);
      }
      I420Frame decoded(width, height);
      for (uint32_t i = 0; i < 3; ++i, ++frame) {
        moving.draw(source, frame, static_cast<uint16_t>(frame));
        ConvertedFrame converted(source, format);
        const InputPicture input =
            format == PixelFormat::kI420 ? source.input() : converted.picture;
        const EncodeResult encoded = encoder.encode(input, frame, false, au);
        ASSERT_EQ(encoded.status, EncodeStatus::kOk);
        EXPECT_EQ(encoded.keyframe, i == 0);
        if (i == 0 && frame != 0) {
          // The caller's output still has the previous size.
          I420Frame previous(1920, 1080);
          I420Frame& target = width == 1920 ? decoded : previous;
          const DecodeResult result = decoder.decode({au.data(), encoded.bytes}, target.output());
          ASSERT_EQ(result.status,
                    width == 1920 ? DecodeStatus::kPicture : DecodeStatus::kSizeChanged);
          EXPECT_TRUE(result.resolution_changed);
          EXPECT_EQ(result.width, width);
          EXPECT_EQ(result.height, height);
          if (width != 1920) {
            ASSERT_EQ(decoder.copy_picture(decoded.output()), DecodeStatus::kPicture);
          }
        } else {
          const DecodeResult result = decoder.decode({au.data(), encoded.bytes}, decoded.output());
          ASSERT_EQ(result.status, DecodeStatus::kPicture);
          EXPECT_EQ(result.resolution_changed, frame == 0);
        }
        // Scaled content still resembles the source's mean brightness.
        double sum = 0;
        for (uint8_t value : decoded.y) sum += value;
        EXPECT_GT(sum / static_cast<double>(decoded.y.size()), 60.0);
      }
    }
    EXPECT_EQ(encoder.counters().reopens, 3u);
    EXPECT_EQ(encoder.counters().keyframes, 4u);
    EXPECT_EQ(decoder.counters().resolution_changes, 4u);
  }
}

TEST(H264Encoder, RefusesBadCallsAndCountsThem) {
  H264Encoder encoder;
  std::vector<uint8_t> au(1 << 20);
  I420Frame source(640, 360);
  EXPECT_EQ(encoder.encode(source.input(), 0, false, au).status, EncodeStatus::kNotOpen);
  EncoderConfig odd = config_for(641, 360, 1000);
  EXPECT_EQ(encoder.open(odd), OpenStatus::kBadConfig);
  EncoderConfig bad_preset = config_for(640, 360, 1000);
  bad_preset.preset = "warp";
  EXPECT_EQ(encoder.open(bad_preset), OpenStatus::kBadConfig);
  ASSERT_EQ(encoder.open(config_for(640, 360, 1000)), OpenStatus::kOk);

  InputPicture null_plane = source.input();
  null_plane.planes[1] = nullptr;
  EXPECT_EQ(encoder.encode(null_plane, 0, false, au).status, EncodeStatus::kBadInput);
  InputPicture short_stride = source.input();
  short_stride.strides[0] = 100;
  EXPECT_EQ(encoder.encode(short_stride, 0, false, au).status, EncodeStatus::kBadInput);
  I420Frame other_size(320, 180);
  EXPECT_EQ(encoder.encode(other_size.input(), 0, false, au).status, EncodeStatus::kInputSize);
  std::vector<uint8_t> tiny(16);
  EXPECT_EQ(encoder.encode(source.input(), 0, false, tiny).status, EncodeStatus::kOutputTooSmall);
  EXPECT_FALSE(encoder.reconfigure(0, 0));
  EXPECT_EQ(encoder.encode(source.input(), 1, false, au).status, EncodeStatus::kOk);

  const EncoderCounters& counters = encoder.counters();
  EXPECT_EQ(counters.frames_in, 6u);
  EXPECT_EQ(counters.frames_encoded, 1u);
  EXPECT_EQ(counters.failed_not_open, 1u);
  EXPECT_EQ(counters.failed_bad_input, 2u);
  EXPECT_EQ(counters.failed_input_size, 1u);
  EXPECT_EQ(counters.failed_output_too_small, 1u);
  EXPECT_EQ(counters.failed_reconfigure, 1u);
}

}  // namespace
}  // namespace syncd::video_codec
