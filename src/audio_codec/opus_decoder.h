// Opus multistream decoder for one channel group of the relay's audio (docs/codec.md): packets
// from OpusMultistreamEncoder (mapping family 255, one mono stream per channel) in, float32
// interleaved out, written into the group's columns of the caller's full-width frame buffer.
//
// A lost packet is concealed with exactly its duration, either by packet loss concealment
// (conceal(): libopus decodes with no data) or, when the next packet has arrived, from that
// packet's in-band FEC (recover_from_next(): decode_fec = 1; libopus falls back to concealment
// when the next packet carries no LBRR, i.e. a CELT-only packet). Either way the output keeps the
// input's sample count, so the receiver never underflows on a loss.
//
// Malformed packets are refused before or by libopus, with a reason, counted; the output is then
// untouched.
//
// libopus allocates the decoder state in open() and this class a scratch frame for strided
// output; decode calls allocate nothing. Any one thread at a time; one instance per group.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "audio_codec/channel_groups.h"

struct OpusMSDecoder;

namespace syncd::audio_codec {

struct DecoderConfig {
  // The output buffer's channels per frame (its stride) and the group's columns inside it.
  uint32_t output_channels = 32;
  ChannelGroup group{0, 32};
  // Longest packet duration accepted, in samples at 48 kHz (a multiple of 120, at most 5760).
  // The relay's packets last one encoder frame; longer ones are refused as not ours.
  uint32_t max_frame_samples = 960;
};

enum class DecodeRefusal : uint8_t {
  kNone,
  kNotOpen,
  kEmpty,           // zero-length packet (use conceal() for a loss)
  kTooLarge,        // longer than kMaxPacketBytes
  kBadToc,          // the first stream's TOC / frame count does not parse
  kTooLong,         // duration above max_frame_samples
  kOutputTooSmall,  // the caller's buffer holds fewer frames than the packet
  kBadDuration,     // conceal/recover duration 0, above max, or not a multiple of 2.5 ms
  kInvalidPacket,   // libopus: OPUS_INVALID_PACKET (stream framing, lengths, durations)
  kOpusError,       // any other libopus error
  kCount,
};
const char* to_string(DecodeRefusal refusal);

// Longest multistream packet accepted: 255 streams of at most 1275 bytes is the format's bound,
// but one RTP packet of the relay is below 1200; 4000 leaves room for a test of larger MTUs.
inline constexpr size_t kMaxPacketBytes = 4000;

struct DecodeResult {
  DecodeRefusal refusal = DecodeRefusal::kNone;
  size_t frames = 0;  // samples per channel written
  bool ok() const { return refusal == DecodeRefusal::kNone; }
};

struct DecoderCounters {
  uint64_t packets_decoded = 0;
  uint64_t frames_decoded = 0;     // samples per channel from real packets
  uint64_t packets_concealed = 0;  // conceal() calls
  uint64_t frames_concealed = 0;
  uint64_t packets_recovered = 0;  // recover_from_next() calls that succeeded
  uint64_t frames_recovered = 0;
  // recover_from_next() whose next packet was SILK or hybrid (may carry LBRR); the others were
  // CELT-only, where libopus can only conceal.
  uint64_t recovered_from_silk_or_hybrid = 0;
  uint64_t refused = 0;
  std::array<uint64_t, size_t(DecodeRefusal::kCount)> refused_by_reason{};
};

class OpusMultistreamDecoder {
 public:
  OpusMultistreamDecoder() = default;
  ~OpusMultistreamDecoder();
  OpusMultistreamDecoder(const OpusMultistreamDecoder&) = delete;
  OpusMultistreamDecoder& operator=(const OpusMultistreamDecoder&) = delete;

  // Creates the libopus state. Returns false (and stays closed) on a bad config.
  bool open(const DecoderConfig& config);
  bool is_open() const { return decoder_ != nullptr; }

  // Decodes one multistream packet into out (out_frames x output_channels floats), writing only
  // the group's columns of the first result.frames frames.
  DecodeResult decode(std::span<const uint8_t> packet, float* out, size_t out_frames);

  // Conceals one lost packet of `frames` samples (its duration, e.g. the encoder's frame).
  DecodeResult conceal(size_t frames, float* out, size_t out_frames);

  // Rebuilds the lost packet just before next_packet from next_packet's in-band FEC, `frames`
  // samples long. Call decode(next_packet) afterwards as usual.
  DecodeResult recover_from_next(std::span<const uint8_t> next_packet, size_t frames, float* out,
                                 size_t out_frames);

  // Duration in samples of a packet (its first stream's TOC), or 0 when it does not parse.
  static size_t packet_frames(std::span<const uint8_t> packet);

  const DecoderConfig& config() const { return config_; }
  const DecoderCounters& counters() const { return counters_; }
  DecodeRefusal last_refusal() const { return last_refusal_; }

 private:
  void close();
  DecodeResult refuse(DecodeRefusal refusal);
  // Runs libopus into the caller's buffer or the scratch frame, then scatters to the columns.
  DecodeResult run(const uint8_t* data, size_t bytes, size_t frames, bool fec, float* out,
                   size_t out_frames);

  OpusMSDecoder* decoder_ = nullptr;
  DecoderConfig config_;
  std::unique_ptr<float[]> scratch_;  // max_frame_samples x group channels
  DecoderCounters counters_;
  DecodeRefusal last_refusal_ = DecodeRefusal::kNone;
};

}  // namespace syncd::audio_codec
