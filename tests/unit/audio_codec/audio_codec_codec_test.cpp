// Opus multistream encoder and decoder (src/audio_codec): round trips for 1, 2, 8 and 32
// channels, live bitrate change, malformed packets refused with their reason and counted, PLC
// and FEC paths, configuration errors.
#include <gtest/gtest.h>
#include <opus/opus.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "audio_codec/opus_decoder.h"
#include "audio_codec/opus_encoder.h"
#include "audio_codec_test_signal.h"

namespace syncd::audio_codec {
namespace {

using testing::dominant_marker;
using testing::make_sines;
using testing::snr_db;

// Per channel, against the input delayed by the lookahead. Measured at 32 kbit/s: 8.4 dB for the
// worst of 32 channels (the 4.3 kHz one), ~20 dB at low frequencies. A swapped, silent or
// misaligned channel scores <= 0 dB (the error is as large as the signal), so 6 dB tells a
// correct channel from a wrong one with margin for other libopus builds.
constexpr double kMinSnrDb = 6.0;

// Encodes `frames` of input through one encoder per group and decodes each group back into the
// full-width output; returns the packets' sizes.
std::vector<size_t> round_trip(const std::vector<float>& input, uint32_t channels,
                               const GroupPlan& plan, EncoderConfig config,
                               std::vector<float>& output, uint32_t& lookahead) {
  const size_t frames = input.size() / channels;
  std::vector<OpusMultistreamEncoder> encoders(plan.count);
  std::vector<OpusMultistreamDecoder> decoders(plan.count);
  config.input_channels = channels;
  for (size_t g = 0; g < plan.count; ++g) {
    config.group = plan.groups[g];
    EXPECT_EQ(encoders[g].open(config), EncoderStatus::kOk);
    EXPECT_TRUE(decoders[g].open({channels, plan.groups[g], 960}));
  }
  lookahead = encoders[0].lookahead_samples();
  const uint32_t frame = encoders[0].frame_samples();
  output.assign(frames * channels, 0.0f);
  std::vector<size_t> sizes;
  uint8_t buf[kMaxPacketBytes];
  for (size_t pos = 0; pos + frame <= frames; pos += frame) {
    for (size_t g = 0; g < plan.count; ++g) {
      const EncodeResult e = encoders[g].encode(input.data() + pos * channels, frame, buf);
      EXPECT_EQ(e.status, EncoderStatus::kOk);
      sizes.push_back(e.bytes);
      const DecodeResult d =
          decoders[g].decode({buf, e.bytes}, output.data() + pos * channels, frames - pos);
      EXPECT_TRUE(d.ok()) << to_string(d.refusal);
      EXPECT_EQ(d.frames, frame);
    }
  }
  return sizes;
}

class RoundTrip : public ::testing::TestWithParam<uint32_t> {};

TEST_P(RoundTrip, EveryChannelComesBackInItsPlace) {
  const uint32_t channels = GetParam();
  constexpr size_t kFrames = 48000;  // 1 s
  const auto input = make_sines(channels, kFrames);
  EncoderConfig config;
  const GroupPlan plan = plan_groups(channels, channels_per_group(32000, 10));
  ASSERT_EQ(plan.count, channels <= 17 ? 1 : 2);
  std::vector<float> output;
  uint32_t lookahead = 0;
  const auto sizes = round_trip(input, channels, plan, config, output, lookahead);
  ASSERT_EQ(sizes.size(), 100u * plan.count);
  EXPECT_GT(lookahead, 0u);
  for (size_t bytes : sizes) EXPECT_LE(bytes, kDefaultGroupPayloadBytes);
  for (uint32_t c = 0; c < channels; ++c) {
    EXPECT_EQ(dominant_marker(output, channels, c, 4800, kFrames), c);
    std::vector<bool> use(100, true);
    for (size_t k = 0; k < 10; ++k) use[k] = false;  // the encoder's first 100 ms
    EXPECT_GT(snr_db(input, output, channels, c, lookahead, kFrames, use), kMinSnrDb)
        << "channel " << c;
  }
}

INSTANTIATE_TEST_SUITE_P(Channels, RoundTrip, ::testing::Values(1u, 2u, 8u, 32u));

TEST(OpusEncoder, GroupReadsOnlyItsColumnsOfTheFullFrame) {
  // A group of channels 4..5 of an 8-channel frame: its decoded channels carry the sines of
  // input channels 4 and 5, the other output columns stay untouched.
  const auto input = make_sines(8, 9600);
  OpusMultistreamEncoder encoder;
  EncoderConfig config;
  config.input_channels = 8;
  config.group = {4, 2};
  ASSERT_EQ(encoder.open(config), EncoderStatus::kOk);
  OpusMultistreamDecoder decoder;
  ASSERT_TRUE(decoder.open({8, {4, 2}, 960}));
  std::vector<float> output(9600 * 8, 7.0f);
  uint8_t buf[1500];
  for (size_t pos = 0; pos < 9600; pos += 480) {
    const EncodeResult e = encoder.encode(input.data() + pos * 8, 480, buf);
    ASSERT_EQ(e.status, EncoderStatus::kOk);
    ASSERT_TRUE(decoder.decode({buf, e.bytes}, output.data() + pos * 8, 9600 - pos).ok());
  }
  for (size_t n = 0; n < 9600; ++n)
    for (uint32_t c : {0u, 1u, 2u, 3u, 6u, 7u}) ASSERT_EQ(output[n * 8 + c], 7.0f);
  EXPECT_EQ(dominant_marker(output, 8, 4, 960, 9600), 4u);
  EXPECT_EQ(dominant_marker(output, 8, 5, 960, 9600), 5u);
}

double mean_bytes(OpusMultistreamEncoder& encoder, const std::vector<float>& input, size_t from,
                  size_t count) {
  uint8_t buf[1500];
  double total = 0;
  for (size_t k = 0; k < count; ++k) {
    const EncodeResult e =
        encoder.encode(input.data() + (from + k) * 480 * 8, 480, {buf, sizeof buf});
    EXPECT_EQ(e.status, EncoderStatus::kOk);
    total += double(e.bytes);
  }
  return total / double(count);
}

// A stereo pair is one coupled stream: a plain stereo Opus packet (RFC 7587, what a browser
// plays) that libopus's ordinary stereo decoder takes, each side coming back on its own side.
TEST(OpusEncoder, StereoPairIsAPlainStereoPacket) {
  const uint32_t channels = 3;  // the pair is channels 1 and 2 of a 3-channel frame
  const size_t frames = 48000;
  std::vector<float> input(frames * channels, 0.0f);
  for (size_t f = 0; f < frames; ++f) {
    input[f * channels + 0] = 0.5f * std::sin(2 * M_PI * 3000.0 * double(f) / 48000);  // ignored
    input[f * channels + 1] = 0.5f * std::sin(2 * M_PI * 440.0 * double(f) / 48000);
    input[f * channels + 2] = 0.0f;  // the right side is silent
  }
  EncoderConfig config;
  config.input_channels = channels;
  config.group = {1, 2};
  config.frame_ms = 20;
  config.bitrate_per_channel = 48000;
  config.stereo_pair = true;
  OpusMultistreamEncoder encoder;
  ASSERT_EQ(encoder.open(config), EncoderStatus::kOk);
  int error = 0;
  OpusDecoder* decoder = opus_decoder_create(48000, 2, &error);
  ASSERT_EQ(error, OPUS_OK);
  uint8_t packet[1500];
  std::vector<float> out(960 * 2);
  double left = 0, right = 0;
  for (size_t pos = 0; pos + 960 <= frames; pos += 960) {
    const EncodeResult e = encoder.encode(input.data() + pos * channels, 960, packet);
    ASSERT_EQ(e.status, EncoderStatus::kOk);
    ASSERT_EQ(opus_packet_get_nb_channels(packet), 2);
    ASSERT_EQ(opus_decode_float(decoder, packet, opus_int32(e.bytes), out.data(), 960, 0), 960);
    if (pos < 4800) continue;  // past the codec's start-up
    for (size_t f = 0; f < 960; ++f) {
      left += double(out[2 * f]) * out[2 * f];
      right += double(out[2 * f + 1]) * out[2 * f + 1];
    }
  }
  opus_decoder_destroy(decoder);
  EXPECT_GT(left, 1000 * right) << "left " << left << " right " << right;
  // Only a 2-channel group can be a pair.
  config.group = {0, 3};
  EXPECT_EQ(encoder.open(config), EncoderStatus::kBadConfig);
}

TEST(OpusEncoder, LiveBitrateChangeMovesPacketSize) {
  const auto input = make_sines(8, 48000 * 3);
  OpusMultistreamEncoder encoder;
  EncoderConfig config;
  config.input_channels = 8;
  config.group = {0, 8};
  ASSERT_EQ(encoder.open(config), EncoderStatus::kOk);
  const double at32 = mean_bytes(encoder, input, 0, 100);
  // 32 kbit/s x 8 channels x 10 ms = 320 bytes a packet on average.
  EXPECT_NEAR(at32, 320.0, 40.0);
  ASSERT_EQ(encoder.set_bitrate_per_channel(16000), EncoderStatus::kOk);
  const double at16 = mean_bytes(encoder, input, 100, 100);
  // Below ~20 kbit/s a 10 ms mono stream runs above its target (libopus's minimum per stream
  // and frame), so only the direction and a clear step are asserted here.
  EXPECT_LT(at16, 0.75 * at32);
  ASSERT_EQ(encoder.set_bitrate_per_channel(64000), EncoderStatus::kOk);
  const double at64 = mean_bytes(encoder, input, 200, 100);
  EXPECT_NEAR(at64, 640.0, 80.0);
  std::printf("mean packet bytes for 8 channels: 32k %.0f, 16k %.0f, 64k %.0f\n", at32, at16, at64);
  EXPECT_EQ(encoder.counters().bitrate_changes, 2u);
  EXPECT_EQ(encoder.config().bitrate_per_channel, 64000u);

  EXPECT_EQ(encoder.set_bitrate_per_channel(5999), EncoderStatus::kBadBitrate);
  EXPECT_EQ(encoder.set_bitrate_per_channel(256001), EncoderStatus::kBadBitrate);
  EXPECT_EQ(encoder.counters().refused, 2u);
  EXPECT_EQ(encoder.config().bitrate_per_channel, 64000u);
  EXPECT_EQ(encoder.counters().packets, 300u);

  // Live expected-loss change, and its range.
  EXPECT_EQ(encoder.set_expected_loss(10), EncoderStatus::kOk);
  EXPECT_EQ(encoder.config().expected_loss_percent, 10u);
  EXPECT_EQ(encoder.set_expected_loss(101), EncoderStatus::kBadConfig);
  EXPECT_EQ(encoder.config().expected_loss_percent, 10u);
  EXPECT_EQ(encoder.counters().refused, 3u);
}

TEST(OpusEncoder, RefusesBadConfigAndCalls) {
  OpusMultistreamEncoder encoder;
  float frame[480 * 2] = {};
  uint8_t buf[1500];
  EXPECT_EQ(encoder.encode(frame, 480, buf).status, EncoderStatus::kNotOpen);
  auto bad = [&](auto edit) {
    EncoderConfig c;
    c.input_channels = 2;
    c.group = {0, 2};
    edit(c);
    return encoder.open(c);
  };
  EXPECT_EQ(bad([](EncoderConfig& c) { c.frame_ms = 5; }), EncoderStatus::kBadConfig);
  EXPECT_EQ(bad([](EncoderConfig& c) { c.group = {1, 2}; }), EncoderStatus::kBadConfig);
  EXPECT_EQ(bad([](EncoderConfig& c) { c.group = {0, 0}; }), EncoderStatus::kBadConfig);
  EXPECT_EQ(bad([](EncoderConfig& c) { c.input_channels = 256; }), EncoderStatus::kBadConfig);
  EXPECT_EQ(bad([](EncoderConfig& c) { c.complexity = 11; }), EncoderStatus::kBadConfig);
  EXPECT_EQ(bad([](EncoderConfig& c) { c.bitrate_per_channel = 1000; }), EncoderStatus::kBadConfig);
  EXPECT_FALSE(encoder.is_open());
  ASSERT_EQ(bad([](EncoderConfig&) {}), EncoderStatus::kOk);
  EXPECT_EQ(encoder.encode(frame, 479, buf).status, EncoderStatus::kWrongFrameCount);
  EXPECT_EQ(encoder.encode(frame, 480, {buf, 3}).status, EncoderStatus::kOutputTooSmall);
  EXPECT_EQ(encoder.encode(frame, 480, buf).status, EncoderStatus::kOk);
  EXPECT_EQ(encoder.counters().refused, 3u);
  EXPECT_EQ(encoder.counters().packets, 1u);

  // 20 ms frames and the low-delay application: 960 samples, a shorter lookahead.
  OpusMultistreamEncoder audio, low_delay;
  EncoderConfig c;
  c.input_channels = 1;
  c.group = {0, 1};
  c.frame_ms = 20;
  ASSERT_EQ(audio.open(c), EncoderStatus::kOk);
  c.application = Application::kRestrictedLowDelay;
  ASSERT_EQ(low_delay.open(c), EncoderStatus::kOk);
  EXPECT_EQ(audio.frame_samples(), 960u);
  EXPECT_LT(low_delay.lookahead_samples(), audio.lookahead_samples());
}

// A valid 2-channel packet from the encoder, for the malformed cases to start from.
std::vector<uint8_t> valid_packet(uint32_t channels) {
  OpusMultistreamEncoder encoder;
  EncoderConfig c;
  c.input_channels = channels;
  c.group = {0, uint8_t(channels)};
  EXPECT_EQ(encoder.open(c), EncoderStatus::kOk);
  const auto input = make_sines(channels, 480);
  uint8_t buf[1500];
  const EncodeResult e = encoder.encode(input.data(), 480, buf);
  return {buf, buf + e.bytes};
}

TEST(OpusDecoder, RefusesMalformedPacketsWithReasons) {
  OpusMultistreamDecoder decoder;
  std::vector<float> out(960 * 2, 5.0f);
  EXPECT_EQ(decoder.decode(valid_packet(2), out.data(), 960).refusal, DecodeRefusal::kNotOpen);
  ASSERT_TRUE(decoder.open({2, {0, 2}, 960}));
  const auto good = valid_packet(2);

  EXPECT_EQ(decoder.decode({}, out.data(), 960).refusal, DecodeRefusal::kEmpty);
  std::vector<uint8_t> huge(kMaxPacketBytes + 1, 0);
  EXPECT_EQ(decoder.decode(huge, out.data(), 960).refusal, DecodeRefusal::kTooLarge);
  // Code 3 (arbitrary frame count) with a count of 0.
  const uint8_t zero_frames[] = {0xfb, 0x00};
  EXPECT_EQ(decoder.decode(zero_frames, out.data(), 960).refusal, DecodeRefusal::kBadToc);
  // CELT 20 ms frames, code 3, 3 frames: 60 ms, above max_frame_samples.
  const uint8_t sixty_ms[] = {0xfb, 0x03, 0, 0, 0};
  EXPECT_EQ(decoder.decode(sixty_ms, out.data(), 960).refusal, DecodeRefusal::kTooLong);
  // The first stream only: the second stream is missing.
  std::vector<uint8_t> truncated(good.begin(), good.begin() + 2);
  EXPECT_EQ(decoder.decode(truncated, out.data(), 960).refusal, DecodeRefusal::kInvalidPacket);
  // A self-delimiting length running past the end.
  std::vector<uint8_t> overlong = good;
  overlong[1] = 250;
  overlong.resize(20);
  EXPECT_EQ(decoder.decode(overlong, out.data(), 960).refusal, DecodeRefusal::kInvalidPacket);
  EXPECT_EQ(decoder.decode(good, out.data(), 479).refusal, DecodeRefusal::kOutputTooSmall);
  for (float v : out) ASSERT_EQ(v, 5.0f) << "a refused packet leaves the output untouched";

  const auto& c = decoder.counters();
  EXPECT_EQ(c.refused, 8u);
  EXPECT_EQ(c.refused_by_reason[size_t(DecodeRefusal::kNotOpen)], 1u);
  EXPECT_EQ(c.refused_by_reason[size_t(DecodeRefusal::kEmpty)], 1u);
  EXPECT_EQ(c.refused_by_reason[size_t(DecodeRefusal::kTooLarge)], 1u);
  EXPECT_EQ(c.refused_by_reason[size_t(DecodeRefusal::kBadToc)], 1u);
  EXPECT_EQ(c.refused_by_reason[size_t(DecodeRefusal::kTooLong)], 1u);
  EXPECT_EQ(c.refused_by_reason[size_t(DecodeRefusal::kInvalidPacket)], 2u);
  EXPECT_EQ(c.refused_by_reason[size_t(DecodeRefusal::kOutputTooSmall)], 1u);
  EXPECT_EQ(decoder.last_refusal(), DecodeRefusal::kOutputTooSmall);
  EXPECT_EQ(c.packets_decoded, 0u);

  // Still decodes good packets afterwards.
  const DecodeResult r = decoder.decode(good, out.data(), 960);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.frames, 480u);
  EXPECT_EQ(decoder.last_refusal(), DecodeRefusal::kNone);
  EXPECT_EQ(c.packets_decoded, 1u);
  EXPECT_EQ(c.frames_decoded, 480u);
}

TEST(OpusDecoder, RefusesBadConfig) {
  OpusMultistreamDecoder decoder;
  EXPECT_FALSE(decoder.open({2, {1, 2}, 960}));
  EXPECT_FALSE(decoder.open({2, {0, 0}, 960}));
  EXPECT_FALSE(decoder.open({2, {0, 2}, 100}));
  EXPECT_FALSE(decoder.open({2, {0, 2}, 5761}));
  EXPECT_FALSE(decoder.is_open());
}

TEST(OpusDecoder, ConcealmentKeepsTheLengthAndRefusesBadDurations) {
  OpusMultistreamDecoder decoder;
  ASSERT_TRUE(decoder.open({4, {2, 2}, 960}));
  std::vector<float> out(960 * 4, 9.0f);
  const DecodeResult r = decoder.conceal(480, out.data(), 960);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.frames, 480u);
  EXPECT_EQ(out[0], 9.0f) << "column 0 is not the group's";
  EXPECT_NE(out[2], 9.0f) << "the group's columns were written";
  EXPECT_EQ(out[480 * 4 + 2], 9.0f) << "nothing past the concealed length";
  EXPECT_EQ(decoder.conceal(0, out.data(), 960).refusal, DecodeRefusal::kBadDuration);
  EXPECT_EQ(decoder.conceal(100, out.data(), 960).refusal, DecodeRefusal::kBadDuration);
  EXPECT_EQ(decoder.conceal(1080, out.data(), 2000).refusal, DecodeRefusal::kBadDuration);
  EXPECT_EQ(decoder.conceal(960, out.data(), 480).refusal, DecodeRefusal::kOutputTooSmall);
  EXPECT_EQ(decoder.counters().packets_concealed, 1u);
  EXPECT_EQ(decoder.counters().frames_concealed, 480u);
  EXPECT_EQ(decoder.counters().refused, 4u);
}

// A voiced, speech-like signal with the voice hint and FEC on at 20 % expected loss: the encoder
// codes SILK or hybrid with LBRR (at 16 kbit/s a channel it codes SILK without LBRR: its LBRR
// threshold is above that rate), and a frame rebuilt from the next packet's FEC is closer to the
// input than a concealed one (measured: 9.1 / 10.2 dB against 11.8 / 12.5 dB).
TEST(OpusDecoder, InBandFecBeatsConcealment) {
  constexpr uint32_t kChannels = 2;
  constexpr size_t kFrames = 48000 * 4;
  std::vector<float> input(kFrames * kChannels);
  for (size_t n = 0; n < kFrames; ++n)
    for (uint32_t c = 0; c < kChannels; ++c) {
      // A 200 Hz-ish voiced tone whose pitch and level wander, so concealment cannot just
      // extrapolate it.
      const double t = double(n) / 48000.0;
      const double f = 180.0 + 60.0 * std::sin(2 * M_PI * 1.3 * t) + 20.0 * c;
      const double level = 0.3 * (0.6 + 0.4 * std::sin(2 * M_PI * 2.1 * t));
      input[n * kChannels + c] = float(level * std::sin(2 * M_PI * f * t + 0.7 * c) +
                                       0.3 * level * std::sin(2 * M_PI * 3 * f * t));
    }
  EncoderConfig config;
  config.input_channels = kChannels;
  config.group = {0, kChannels};
  config.bitrate_per_channel = 32000;
  config.signal = SignalHint::kVoice;
  config.inband_fec = true;
  config.expected_loss_percent = 20;
  OpusMultistreamEncoder encoder;
  ASSERT_EQ(encoder.open(config), EncoderStatus::kOk);
  std::vector<std::vector<uint8_t>> packets;
  uint8_t buf[1500];
  for (size_t pos = 0; pos + 480 <= kFrames; pos += 480) {
    const EncodeResult e = encoder.encode(input.data() + pos * kChannels, 480, buf);
    ASSERT_EQ(e.status, EncoderStatus::kOk);
    packets.emplace_back(buf, buf + e.bytes);
  }
  // Two receivers see the same losses (every 10th packet from the 20th): one rebuilds them from
  // FEC, the other conceals them. Compare the error in the lost frames only.
  OpusMultistreamDecoder with_fec, with_plc;
  ASSERT_TRUE(with_fec.open({kChannels, {0, kChannels}, 960}));
  ASSERT_TRUE(with_plc.open({kChannels, {0, kChannels}, 960}));
  std::vector<float> out_fec(kFrames * kChannels), out_plc(kFrames * kChannels);
  std::vector<bool> lost_frame(packets.size(), false);
  for (size_t k = 0; k < packets.size(); ++k) {
    float* f = out_fec.data() + k * 480 * kChannels;
    float* p = out_plc.data() + k * 480 * kChannels;
    const bool lost = k >= 20 && k % 10 == 0 && k + 1 < packets.size();
    if (lost) {
      lost_frame[k] = true;
      ASSERT_TRUE(with_fec.recover_from_next(packets[k + 1], 480, f, 480).ok());
      ASSERT_TRUE(with_plc.conceal(480, p, 480).ok());
    } else {
      ASSERT_TRUE(with_fec.decode(packets[k], f, 480).ok());
      ASSERT_TRUE(with_plc.decode(packets[k], p, 480).ok());
    }
  }
  const auto& fc = with_fec.counters();
  EXPECT_GT(fc.packets_recovered, 0u);
  EXPECT_EQ(fc.recovered_from_silk_or_hybrid, fc.packets_recovered)
      << "the encoder was expected to pick SILK at 16 kbit/s with FEC on";
  EXPECT_EQ(with_plc.counters().packets_concealed, fc.packets_recovered);
  // SILK does not match the waveform (its SNR is near 0 dB even without loss), so the lost frames
  // are compared by log-spectral distance to the input's same frame: a bank of 40 Goertzel bins,
  // 100..4000 Hz, over each lost 10 ms.
  const size_t lookahead = encoder.lookahead_samples();
  for (uint32_t c = 0; c < kChannels; ++c) {
    double fec = 0, plc = 0;
    size_t count = 0;
    for (size_t k = 0; k < packets.size(); ++k) {
      if (!lost_frame[k]) continue;
      const size_t begin = k * 480, end = begin + 480;
      for (int b = 0; b < 40; ++b) {
        const double f = 100.0 + 100.0 * b;
        const double ref =
            10 * std::log10(1e-9 + testing::goertzel(input, kChannels, c, f, begin - lookahead,
                                                     end - lookahead));
        const double a =
            10 * std::log10(1e-9 + testing::goertzel(out_fec, kChannels, c, f, begin, end));
        const double p =
            10 * std::log10(1e-9 + testing::goertzel(out_plc, kChannels, c, f, begin, end));
        fec += (a - ref) * (a - ref);
        plc += (p - ref) * (p - ref);
        ++count;
      }
    }
    fec = std::sqrt(fec / double(count));
    plc = std::sqrt(plc / double(count));
    std::printf("channel %u lost frames, log-spectral distance: FEC %.1f dB, PLC %.1f dB\n", c, fec,
                plc);
    EXPECT_LT(fec, plc - 1.0) << "channel " << c;
  }
}

}  // namespace
}  // namespace syncd::audio_codec
