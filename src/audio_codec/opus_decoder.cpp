#include "audio_codec/opus_decoder.h"

#include <opus_multistream.h>

#include <algorithm>
#include <cstring>

namespace syncd::audio_codec {

namespace {
constexpr uint32_t kMaxOpusFrameSamples = 5760;   // 120 ms at 48 kHz
constexpr uint32_t kGranule = kSampleRate / 400;  // 2.5 ms, the shortest Opus frame
}  // namespace

const char* to_string(DecodeRefusal refusal) {
  switch (refusal) {
    case DecodeRefusal::kNone:
      return "none";
    case DecodeRefusal::kNotOpen:
      return "decoder not open";
    case DecodeRefusal::kEmpty:
      return "empty packet";
    case DecodeRefusal::kTooLarge:
      return "packet larger than kMaxPacketBytes";
    case DecodeRefusal::kBadToc:
      return "TOC or frame count does not parse";
    case DecodeRefusal::kTooLong:
      return "packet longer than max_frame_samples";
    case DecodeRefusal::kOutputTooSmall:
      return "output buffer shorter than the packet";
    case DecodeRefusal::kBadDuration:
      return "duration 0, too long or not a multiple of 2.5 ms";
    case DecodeRefusal::kInvalidPacket:
      return "libopus: invalid packet";
    case DecodeRefusal::kOpusError:
      return "libopus: decode error";
    case DecodeRefusal::kCount:
      break;
  }
  return "?";
}

OpusMultistreamDecoder::~OpusMultistreamDecoder() {
  close();
}

void OpusMultistreamDecoder::close() {
  if (decoder_) opus_multistream_decoder_destroy(decoder_);
  decoder_ = nullptr;
}

bool OpusMultistreamDecoder::open(const DecoderConfig& config) {
  close();
  const auto& g = config.group;
  if (config.output_channels < 1 || config.output_channels > kMaxChannels || g.channels < 1 ||
      uint32_t(g.first_channel) + g.channels > config.output_channels ||
      config.max_frame_samples < kGranule || config.max_frame_samples > kMaxOpusFrameSamples ||
      config.max_frame_samples % kGranule != 0)
    return false;
  unsigned char mapping[kMaxChannels];
  for (uint32_t c = 0; c < g.channels; ++c) mapping[c] = static_cast<unsigned char>(c);
  int error = OPUS_OK;
  decoder_ =
      opus_multistream_decoder_create(kSampleRate, g.channels, g.channels, 0, mapping, &error);
  if (!decoder_ || error != OPUS_OK) {
    close();
    return false;
  }
  config_ = config;
  scratch_.reset(new float[size_t(config.max_frame_samples) * g.channels]());
  return true;
}

DecodeResult OpusMultistreamDecoder::refuse(DecodeRefusal refusal) {
  last_refusal_ = refusal;
  ++counters_.refused;
  ++counters_.refused_by_reason[size_t(refusal)];
  return {refusal, 0};
}

size_t OpusMultistreamDecoder::packet_frames(std::span<const uint8_t> packet) {
  if (packet.empty()) return 0;
  const int n = opus_packet_get_nb_samples(
      packet.data(), opus_int32(std::min<size_t>(packet.size(), 1 << 30)), kSampleRate);
  return n > 0 ? size_t(n) : 0;
}

DecodeResult OpusMultistreamDecoder::run(const uint8_t* data, size_t bytes, size_t frames, bool fec,
                                         float* out, size_t out_frames) {
  const uint32_t channels = config_.group.channels;
  const bool direct = config_.output_channels == channels;  // then first_channel is 0
  float* target = direct ? out : scratch_.get();
  const int n = opus_multistream_decode_float(decoder_, data, opus_int32(bytes), target,
                                              int(frames), fec ? 1 : 0);
  if (n == OPUS_INVALID_PACKET) return refuse(DecodeRefusal::kInvalidPacket);
  if (n == OPUS_BUFFER_TOO_SMALL) return refuse(DecodeRefusal::kTooLong);
  if (n < 0) return refuse(DecodeRefusal::kOpusError);
  if (size_t(n) > out_frames) return refuse(DecodeRefusal::kOutputTooSmall);  // not reached
  if (!direct) {
    const size_t stride = config_.output_channels;
    const float* src = scratch_.get();
    float* dst = out + config_.group.first_channel;
    for (int i = 0; i < n; ++i, src += channels, dst += stride)
      std::memcpy(dst, src, channels * sizeof(float));
  }
  last_refusal_ = DecodeRefusal::kNone;
  return {DecodeRefusal::kNone, size_t(n)};
}

DecodeResult OpusMultistreamDecoder::decode(std::span<const uint8_t> packet, float* out,
                                            size_t out_frames) {
  if (!decoder_) return refuse(DecodeRefusal::kNotOpen);
  if (packet.empty()) return refuse(DecodeRefusal::kEmpty);
  if (packet.size() > kMaxPacketBytes) return refuse(DecodeRefusal::kTooLarge);
  const size_t frames = packet_frames(packet);
  if (frames == 0) return refuse(DecodeRefusal::kBadToc);
  if (frames > config_.max_frame_samples) return refuse(DecodeRefusal::kTooLong);
  if (!out || frames > out_frames) return refuse(DecodeRefusal::kOutputTooSmall);
  // libopus decodes into a buffer sized for exactly this packet: with a larger capacity it would
  // also accept a packet whose later streams last longer than the first.
  const DecodeResult result = run(packet.data(), packet.size(), frames, false, out, out_frames);
  if (result.ok()) {
    ++counters_.packets_decoded;
    counters_.frames_decoded += result.frames;
  }
  return result;
}

DecodeResult OpusMultistreamDecoder::conceal(size_t frames, float* out, size_t out_frames) {
  if (!decoder_) return refuse(DecodeRefusal::kNotOpen);
  if (frames == 0 || frames > config_.max_frame_samples || frames % kGranule != 0)
    return refuse(DecodeRefusal::kBadDuration);
  if (!out || frames > out_frames) return refuse(DecodeRefusal::kOutputTooSmall);
  const DecodeResult result = run(nullptr, 0, frames, false, out, out_frames);
  if (result.ok()) {
    ++counters_.packets_concealed;
    counters_.frames_concealed += result.frames;
  }
  return result;
}

DecodeResult OpusMultistreamDecoder::recover_from_next(std::span<const uint8_t> next_packet,
                                                       size_t frames, float* out,
                                                       size_t out_frames) {
  if (!decoder_) return refuse(DecodeRefusal::kNotOpen);
  if (frames == 0 || frames > config_.max_frame_samples || frames % kGranule != 0)
    return refuse(DecodeRefusal::kBadDuration);
  if (next_packet.empty()) return refuse(DecodeRefusal::kEmpty);
  if (next_packet.size() > kMaxPacketBytes) return refuse(DecodeRefusal::kTooLarge);
  const size_t next_frames = packet_frames(next_packet);
  if (next_frames == 0) return refuse(DecodeRefusal::kBadToc);
  if (next_frames > config_.max_frame_samples) return refuse(DecodeRefusal::kTooLong);
  if (!out || frames > out_frames) return refuse(DecodeRefusal::kOutputTooSmall);
  const DecodeResult result =
      run(next_packet.data(), next_packet.size(), frames, true, out, out_frames);
  if (result.ok()) {
    ++counters_.packets_recovered;
    counters_.frames_recovered += result.frames;
    // TOC config 0..11 is SILK-only, 12..15 hybrid, 16..31 CELT-only (RFC 6716 section 3.1).
    if ((next_packet[0] >> 3) < 16) ++counters_.recovered_from_silk_or_hybrid;
  }
  return result;
}

}  // namespace syncd::audio_codec
