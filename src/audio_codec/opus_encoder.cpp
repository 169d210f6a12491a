#include "audio_codec/opus_encoder.h"

#include <opus_multistream.h>

#include <algorithm>

namespace syncd::audio_codec {

const char* to_string(EncoderStatus status) {
  switch (status) {
    case EncoderStatus::kOk:
      return "ok";
    case EncoderStatus::kNotOpen:
      return "encoder not open";
    case EncoderStatus::kBadConfig:
      return "configuration out of range";
    case EncoderStatus::kOpusInitFailed:
      return "libopus refused the layout";
    case EncoderStatus::kWrongFrameCount:
      return "frame count is not the frame size";
    case EncoderStatus::kOutputTooSmall:
      return "output buffer too small";
    case EncoderStatus::kOpusError:
      return "libopus encode error";
    case EncoderStatus::kBadBitrate:
      return "bitrate out of range";
  }
  return "?";
}

OpusMultistreamEncoder::~OpusMultistreamEncoder() {
  close();
}

void OpusMultistreamEncoder::close() {
  if (encoder_) opus_multistream_encoder_destroy(encoder_);
  encoder_ = nullptr;
}

EncoderStatus OpusMultistreamEncoder::refuse(EncoderStatus status) {
  last_error_ = status;
  ++counters_.refused;
  return status;
}

EncoderStatus OpusMultistreamEncoder::open(const EncoderConfig& config) {
  close();
  const auto& g = config.group;
  if (config.input_channels < 1 || config.input_channels > kMaxChannels || g.channels < 1 ||
      uint32_t(g.first_channel) + g.channels > config.input_channels ||
      (config.frame_ms != 10 && config.frame_ms != 20) || config.complexity < 0 ||
      config.complexity > 10 || config.expected_loss_percent > 100 || config.max_packet_bytes < 1 ||
      config.bitrate_per_channel < 6000 || config.bitrate_per_channel > 256000 ||
      (config.stereo_pair && g.channels != 2))
    return last_error_ = EncoderStatus::kBadConfig;
  // Input channel c feeds mono stream c - first (or, for a stereo pair, the one coupled stream's
  // left and right); channels outside the group are ignored (255).
  unsigned char mapping[kMaxChannels];
  for (uint32_t c = 0; c < config.input_channels; ++c)
    mapping[c] = (c >= g.first_channel && c < uint32_t(g.first_channel) + g.channels)
                     ? static_cast<unsigned char>(c - g.first_channel)
                     : 255;
  const int application = config.application == Application::kAudio
                              ? OPUS_APPLICATION_AUDIO
                              : OPUS_APPLICATION_RESTRICTED_LOWDELAY;
  int error = OPUS_OK;
  const int streams = config.stereo_pair ? 1 : g.channels;
  const int coupled = config.stereo_pair ? 1 : 0;
  encoder_ = opus_multistream_encoder_create(kSampleRate, int(config.input_channels), streams,
                                             coupled, mapping, application, &error);
  if (!encoder_ || error != OPUS_OK) {
    close();
    return last_error_ = EncoderStatus::kOpusInitFailed;
  }
  config_ = config;
  frame_samples_ = kSampleRate / 1000 * config.frame_ms;
  opus_multistream_encoder_ctl(encoder_,
                               OPUS_SET_BITRATE(int(config.bitrate_per_channel * g.channels)));
  opus_multistream_encoder_ctl(encoder_, OPUS_SET_COMPLEXITY(config.complexity));
  // Constrained VBR: quality of VBR with a per-frame size close to the target, so a group's
  // packet stays near its planned share of 1200 bytes.
  opus_multistream_encoder_ctl(encoder_, OPUS_SET_VBR(1));
  opus_multistream_encoder_ctl(encoder_, OPUS_SET_VBR_CONSTRAINT(1));
  opus_multistream_encoder_ctl(encoder_, OPUS_SET_INBAND_FEC(config.inband_fec ? 1 : 0));
  opus_multistream_encoder_ctl(encoder_,
                               OPUS_SET_PACKET_LOSS_PERC(int(config.expected_loss_percent)));
  const int signal = config.signal == SignalHint::kVoice   ? OPUS_SIGNAL_VOICE
                     : config.signal == SignalHint::kMusic ? OPUS_SIGNAL_MUSIC
                                                           : OPUS_AUTO;
  opus_multistream_encoder_ctl(encoder_, OPUS_SET_SIGNAL(signal));
  opus_int32 lookahead = 0;
  opus_multistream_encoder_ctl(encoder_, OPUS_GET_LOOKAHEAD(&lookahead));
  lookahead_ = static_cast<uint32_t>(std::max<opus_int32>(lookahead, 0));
  last_error_ = EncoderStatus::kOk;
  return EncoderStatus::kOk;
}

EncodeResult OpusMultistreamEncoder::encode(const float* input, size_t frames,
                                            std::span<uint8_t> out) {
  if (!encoder_) return {refuse(EncoderStatus::kNotOpen), 0};
  if (frames != frame_samples_ || !input) return {refuse(EncoderStatus::kWrongFrameCount), 0};
  const size_t cap = std::min(out.size(), config_.max_packet_bytes);
  // libopus needs at least 2 bytes per stream minus one to frame the streams.
  if (cap < size_t(2) * config_.group.channels) return {refuse(EncoderStatus::kOutputTooSmall), 0};
  const int bytes = opus_multistream_encode_float(encoder_, input, int(frames), out.data(),
                                                  opus_int32(std::min<size_t>(cap, 1 << 30)));
  if (bytes == OPUS_BUFFER_TOO_SMALL) return {refuse(EncoderStatus::kOutputTooSmall), 0};
  if (bytes < 0) return {refuse(EncoderStatus::kOpusError), 0};
  ++counters_.packets;
  counters_.bytes += uint64_t(bytes);
  counters_.largest_packet = std::max<uint64_t>(counters_.largest_packet, uint64_t(bytes));
  return {EncoderStatus::kOk, size_t(bytes)};
}

EncoderStatus OpusMultistreamEncoder::set_bitrate_per_channel(uint32_t bits_per_second) {
  if (!encoder_) return refuse(EncoderStatus::kNotOpen);
  if (bits_per_second < 6000 || bits_per_second > 256000) return refuse(EncoderStatus::kBadBitrate);
  if (opus_multistream_encoder_ctl(
          encoder_, OPUS_SET_BITRATE(int(bits_per_second * config_.group.channels))) != OPUS_OK)
    return refuse(EncoderStatus::kOpusError);
  config_.bitrate_per_channel = bits_per_second;
  ++counters_.bitrate_changes;
  return EncoderStatus::kOk;
}

EncoderStatus OpusMultistreamEncoder::set_expected_loss(uint32_t percent) {
  if (!encoder_) return refuse(EncoderStatus::kNotOpen);
  if (percent > 100) return refuse(EncoderStatus::kBadConfig);
  opus_multistream_encoder_ctl(encoder_, OPUS_SET_PACKET_LOSS_PERC(int(percent)));
  config_.expected_loss_percent = percent;
  return EncoderStatus::kOk;
}

}  // namespace syncd::audio_codec
