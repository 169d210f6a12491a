// Continuity of the relay's audio through Opus (src/audio_codec): 32 channels for 10 s, each a
// different sine, in 256-frame capture blocks, encoded in channel groups, 1 % of the packets
// dropped at random (seeded), decoded with in-band FEC when the next packet arrived and PLC
// otherwise. Asserts: exactly the input's sample count comes out (every loss concealed with its
// length: 0 underflows), every channel's dominant frequency is its own, and the SNR against the
// input delayed by the reported lookahead stays above a floor in the lossless parts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "audio_codec/frame_accumulator.h"
#include "audio_codec/opus_decoder.h"
#include "audio_codec/opus_encoder.h"
#include "audio_codec_test_signal.h"

namespace syncd::audio_codec {
namespace {

using testing::channel_frequency;
using testing::dominant_marker;
using testing::goertzel;
using testing::make_sines;
using testing::snr_db;

// Per channel, in the lossless parts, against the input delayed by the lookahead. Opus is a
// perceptual codec: at 32 kbit/s a channel's waveform SNR on a pure tone measured 8.4 dB for the
// worst channel (4.3 kHz) and ~20 dB for the low ones, 13.6 dB on average. A swapped channel, a
// frame out of place, a concealment left in or silence scores <= 0 dB (the error is as large as
// the signal), so 6 dB per channel and 11 dB on average tell right from wrong with margin.
constexpr double kMinSnrDb = 6.0;
constexpr double kMinMeanSnrDb = 11.0;

struct ContinuityRun {
  uint64_t output_frames = 0;
  uint64_t lost = 0;
  uint64_t recovered = 0;
  uint64_t concealed = 0;
  uint64_t recovered_with_lbrr_possible = 0;
  uint64_t bytes = 0;
  uint64_t largest_packet = 0;
  double worst_snr = 1e9;
  double mean_snr = 0;
};

ContinuityRun run_continuity(Application application, uint32_t seed, double min_snr_db) {
  constexpr uint32_t kChannels = 32;
  constexpr size_t kSeconds = 10;
  constexpr size_t kFrames = 48000 * kSeconds;
  constexpr size_t kBlock = 256;  // the capture's JACK period (docs/audio.md)
  const std::vector<float> input = make_sines(kChannels, kFrames);

  EncoderConfig config;
  config.application = application;
  const GroupPlan plan =
      plan_groups(kChannels, channels_per_group(config.bitrate_per_channel, config.frame_ms));
  EXPECT_EQ(plan.count, 2);
  OpusMultistreamEncoder encoders[kMaxGroups];
  OpusMultistreamDecoder decoders[kMaxGroups];
  for (size_t g = 0; g < plan.count; ++g) {
    config.group = plan.groups[g];
    EXPECT_EQ(encoders[g].open(config), EncoderStatus::kOk);
    EXPECT_TRUE(decoders[g].open({kChannels, plan.groups[g], 960}));
  }
  const uint32_t frame = encoders[0].frame_samples();
  const size_t lookahead = encoders[0].lookahead_samples();

  // Sender: capture blocks -> accumulator -> one packet per group per frame.
  FrameAccumulator acc(kChannels, frame);
  std::vector<std::vector<std::vector<uint8_t>>> packets;  // [frame][group]
  uint8_t buf[1500];
  for (size_t pos = 0; pos < kFrames;) {
    size_t n = std::min(kBlock, kFrames - pos);
    const float* p = input.data() + pos * kChannels;
    uint64_t index = pos;
    pos += n;
    while (n > 0) {
      const size_t taken = acc.append(p, n, index);
      p += taken * kChannels, n -= taken, index += taken;
      if (!acc.full()) continue;
      EXPECT_EQ(acc.frame_index(), packets.size() * frame);
      auto& per_group = packets.emplace_back();
      for (size_t g = 0; g < plan.count; ++g) {
        const EncodeResult r = encoders[g].encode(acc.frame(), frame, buf);
        EXPECT_EQ(r.status, EncoderStatus::kOk);
        EXPECT_LE(r.bytes, kDefaultGroupPayloadBytes);
        per_group.emplace_back(buf, buf + r.bytes);
      }
      acc.clear();
    }
  }
  const size_t frames_sent = packets.size();
  EXPECT_EQ(frames_sent * frame, kFrames);

  // Network: 1 % of the packets lost, independently per group packet.
  std::mt19937 rng(seed);
  std::bernoulli_distribution drop(0.01);
  std::vector<std::vector<bool>> lost(frames_sent, std::vector<bool>(plan.count));
  ContinuityRun run;
  for (size_t k = 0; k < frames_sent; ++k)
    for (size_t g = 0; g < plan.count; ++g)
      if (drop(rng)) lost[k][g] = true, ++run.lost;

  // Receiver: one frame late, so a loss can be rebuilt from the next packet's FEC.
  std::vector<float> output(kFrames * kChannels, 0.0f);
  std::vector<size_t> written(plan.count, 0);
  for (size_t k = 0; k < frames_sent; ++k) {
    for (size_t g = 0; g < plan.count; ++g) {
      float* out = output.data() + written[g] * kChannels;
      const size_t room = kFrames - written[g];
      DecodeResult r;
      if (!lost[k][g]) {
        r = decoders[g].decode(packets[k][g], out, room);
      } else if (k + 1 < frames_sent && !lost[k + 1][g]) {
        r = decoders[g].recover_from_next(packets[k + 1][g], frame, out, room);
      } else {
        r = decoders[g].conceal(frame, out, room);
      }
      EXPECT_TRUE(r.ok()) << to_string(r.refusal);
      EXPECT_EQ(r.frames, frame);
      written[g] += r.frames;
    }
  }
  for (size_t g = 0; g < plan.count; ++g) {
    EXPECT_EQ(written[g], kFrames) << "group " << g;
    const auto& c = decoders[g].counters();
    run.recovered += c.packets_recovered;
    run.concealed += c.packets_concealed;
    run.recovered_with_lbrr_possible += c.recovered_from_silk_or_hybrid;
    run.bytes += encoders[g].counters().bytes;
    run.largest_packet =
        std::max<uint64_t>(run.largest_packet, encoders[g].counters().largest_packet);
    EXPECT_EQ(c.refused, 0u);
    EXPECT_EQ(c.frames_decoded + c.frames_recovered + c.frames_concealed, kFrames);
  }
  run.output_frames = written[0];

  for (uint32_t c = 0; c < kChannels; ++c) {
    // Skip the first 100 ms (the encoder's start-up) for the marker check.
    EXPECT_EQ(dominant_marker(output, kChannels, c, 4800, kFrames), c) << "channel " << c;
    // Lossless parts: frames whose packet and the two before it arrived (the decoder's state
    // reconverges within a frame or two after a concealment), after the first 100 ms.
    size_t g = 0;
    while (!(c >= plan.groups[g].first_channel &&
             c < plan.groups[g].first_channel + plan.groups[g].channels))
      ++g;
    std::vector<bool> use(frames_sent + 1, false);
    for (size_t k = 10; k < frames_sent; ++k)
      use[k] = !lost[k][g] && !lost[k - 1][g] && !lost[k - 2][g];
    const double snr = snr_db(input, output, kChannels, c, lookahead, kFrames, use, frame);
    run.worst_snr = std::min(run.worst_snr, snr);
    run.mean_snr += snr / kChannels;
    EXPECT_GT(snr, min_snr_db) << "channel " << c << " at " << channel_frequency(c) << " Hz";
  }
  EXPECT_GT(run.mean_snr, kMinMeanSnrDb);
  std::printf(
      "continuity: %s, lookahead %zu, lost %llu, recovered from next %llu (SILK/hybrid "
      "%llu), concealed %llu, SNR worst %.1f dB mean %.1f dB, %.0f kbit/s, largest "
      "packet %llu B\n",
      application == Application::kAudio ? "AUDIO" : "RESTRICTED_LOWDELAY", lookahead,
      (unsigned long long)run.lost, (unsigned long long)run.recovered,
      (unsigned long long)run.recovered_with_lbrr_possible, (unsigned long long)run.concealed,
      run.worst_snr, run.mean_snr, double(run.bytes) * 8 / kSeconds / 1000,
      (unsigned long long)run.largest_packet);
  return run;
}

TEST(AudioCodecContinuity, ThirtyTwoChannelsTenSecondsOnePercentLoss) {
  const ContinuityRun run = run_continuity(Application::kAudio, 17, kMinSnrDb);
  EXPECT_EQ(run.output_frames, 480000u);
  EXPECT_GT(run.lost, 0u);
  EXPECT_EQ(run.recovered + run.concealed, run.lost);
}

TEST(AudioCodecContinuity, RestrictedLowDelayToo) {
  const ContinuityRun run = run_continuity(Application::kRestrictedLowDelay, 18, kMinSnrDb);
  EXPECT_EQ(run.output_frames, 480000u);
  EXPECT_EQ(run.recovered + run.concealed, run.lost);
}

}  // namespace
}  // namespace syncd::audio_codec
