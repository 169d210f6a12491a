// Opus multistream encoder for one channel group of the relay's audio (docs/codec.md).
//
// Channel mapping family 255 (RFC 7845 section 5.1.1.3: independent channels): one mono Opus
// stream per channel, no coupled pairs. The capture is 32 independent microphone or line
// channels, not a surround layout, so family 1 (Vorbis order, 1..8 channels, coupled pairs) does
// not apply to it; each channel decodes alone and groups can be cut anywhere.
//
// The encoder reads its group's channels straight out of the capture's full interleaved frame:
// it is created with input_channels inputs where every channel outside the group maps to 255
// (ignored), so no deinterleave or copy happens on the caller's side.
//
// libopus allocates the encoder state in open(); encode() allocates nothing (its scratch is on
// the stack, ~tens of KiB for 32 streams). Any one thread at a time; one instance per group.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "audio_codec/channel_groups.h"

struct OpusMSEncoder;

namespace syncd::audio_codec {

enum class Application : uint8_t {
  kAudio,               // OPUS_APPLICATION_AUDIO: SILK, hybrid or CELT; 6.5 ms lookahead
  kRestrictedLowDelay,  // OPUS_APPLICATION_RESTRICTED_LOWDELAY: CELT only, 2.5 ms lookahead,
                        // no in-band FEC (LBRR is a SILK feature)
};

enum class SignalHint : uint8_t {
  kAuto,   // libopus's own speech/music analysis
  kVoice,  // OPUS_SIGNAL_VOICE: favours SILK/hybrid (and so LBRR) at low rates
  kMusic,  // OPUS_SIGNAL_MUSIC: favours CELT
};

struct EncoderConfig {
  uint32_t input_channels = 32;  // channels of each interleaved input frame (its stride), 1..255
  ChannelGroup group{0, 32};     // the channels this encoder carries, inside input_channels
  uint32_t frame_ms = 10;        // 10 or 20
  uint32_t bitrate_per_channel = 32000;  // bit/s, 6000..256000
  Application application = Application::kAudio;
  // 0..10. 5: measured 1.5 ms CPU per 20 ms for 32 channels here (7.7 % of a core); 10 costs
  // 7.6 ms with AUDIO (its signal analysis runs per stream), too much beside x264 on 2 cores.
  int complexity = 5;
  SignalHint signal = SignalHint::kAuto;
  // In-band FEC (LBRR): with AUDIO, the encoder adds a low-rate copy of the previous frame to
  // SILK and hybrid frames once the expected loss is high enough for its mode decision.
  bool inband_fec = true;
  uint32_t expected_loss_percent = 5;                   // 0..100, OPUS_SET_PACKET_LOSS_PERC
  size_t max_packet_bytes = kDefaultGroupPayloadBytes;  // the Opus packet's hard cap
  // A 2-channel group as one coupled stereo stream instead of two mono ones: the packet is then
  // a plain RFC 7587 stereo Opus packet, what a browser plays (WHEP). The relay's own format
  // keeps channels independent (see the top of this file).
  bool stereo_pair = false;
};

enum class EncoderStatus : uint8_t {
  kOk,
  kNotOpen,
  kBadConfig,        // see the config's comments for the ranges
  kOpusInitFailed,   // libopus refused the layout or ran out of memory
  kWrongFrameCount,  // encode() frames != frame_samples()
  kOutputTooSmall,   // out smaller than 1 byte or the encoder could not fit max bytes
  kOpusError,        // opus_multistream_encode_float returned an error
  kBadBitrate,
};
const char* to_string(EncoderStatus status);

struct EncodeResult {
  EncoderStatus status = EncoderStatus::kOk;
  size_t bytes = 0;  // the multistream packet's length in out
};

struct EncoderCounters {
  uint64_t packets = 0;
  uint64_t bytes = 0;
  uint64_t largest_packet = 0;
  uint64_t refused = 0;  // encode() calls that returned an error
  uint64_t bitrate_changes = 0;
};

class OpusMultistreamEncoder {
 public:
  OpusMultistreamEncoder() = default;
  ~OpusMultistreamEncoder();
  OpusMultistreamEncoder(const OpusMultistreamEncoder&) = delete;
  OpusMultistreamEncoder& operator=(const OpusMultistreamEncoder&) = delete;

  // Creates the libopus state (the only allocation). Re-opening closes the previous state.
  EncoderStatus open(const EncoderConfig& config);
  bool is_open() const { return encoder_ != nullptr; }

  // Encodes one frame: frames must equal frame_samples(), input holds frames x input_channels
  // interleaved floats (nominally -1..1). Writes one multistream packet (at most
  // min(out.size(), max_packet_bytes)) into out.
  EncodeResult encode(const float* input, size_t frames, std::span<uint8_t> out);

  // Live bitrate change, from the next frame on (e.g. from the relay's bandwidth estimate).
  EncoderStatus set_bitrate_per_channel(uint32_t bits_per_second);
  // Live expected-loss change (OPUS_SET_PACKET_LOSS_PERC), e.g. from RTCP receiver reports.
  EncoderStatus set_expected_loss(uint32_t percent);

  uint32_t frame_samples() const { return frame_samples_; }
  // The codec's lookahead in samples at 48 kHz (OPUS_GET_LOOKAHEAD): decoded sample n carries
  // input sample n - lookahead.
  uint32_t lookahead_samples() const { return lookahead_; }
  const EncoderConfig& config() const { return config_; }
  const EncoderCounters& counters() const { return counters_; }
  EncoderStatus last_error() const { return last_error_; }

 private:
  void close();
  EncoderStatus refuse(EncoderStatus status);

  OpusMSEncoder* encoder_ = nullptr;
  EncoderConfig config_;
  uint32_t frame_samples_ = 0;
  uint32_t lookahead_ = 0;
  EncoderCounters counters_;
  EncoderStatus last_error_ = EncoderStatus::kOk;
};

}  // namespace syncd::audio_codec
