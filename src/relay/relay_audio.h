// The relay's audio (docs/wan.md, "Audio"): the capture's selected channels, Opus multistream per
// channel group, in the same session as the video (its own SSRC and payload type, the same SRTP
// context and keys), and back into a capture ring at the receiver.
//
// Both ends run on the relay thread. The sender reads the capture ring there (the ring's one
// reader while the relay sends audio) rather than on a worker: the packets are then made on the
// thread that owns the SRTP context they are protected with, with no second hand-over, and the
// cost fits the thread (measured over 60 s with 32 channels beside 720p60 video: the encoder's
// wall time on the relay thread 11.6 % of a core, about 1.2 ms per 10 ms frame on a loaded
// 2-core machine; docs/wan.md "Audio figures"). Audio packets skip the pacer and the FEC/NACK
// machinery: they are ~100 per second per group of ~50-1100 bytes; a retransmission would come a
// round trip late, past the playout target, so loss is repaired by Opus (the next packet's
// in-band FEC, or PLC) and the receiver's playout buffer counts which.
//
// Thread: the relay thread for everything here; counters are copied to RelaySessionStats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "audio/capture_ring.h"
#include "audio_codec/channel_groups.h"
#include "audio_codec/frame_accumulator.h"
#include "audio_codec/opus_decoder.h"
#include "audio_codec/opus_encoder.h"
#include "audio_codec/playout_buffer.h"
#include "relay/relay_wire.h"

namespace syncd::relay {

inline constexpr uint8_t kAudioPayloadType = 111;

struct AudioSendConfig {
  audio::CaptureRing* ring = nullptr;           // its reader side is the relay thread's
  uint32_t channels = 0;                        // selected channels, 1..255
  uint8_t channel_map[kMaxAudioChannels] = {};  // capture channel of each selected channel
  uint32_t bitrate_per_channel = 32000;
  uint32_t frame_ms = 10;
};

// Where the sender's plain audio RTP packets go (the session protects and sends them).
class AudioPacketSink {
 public:
  virtual ~AudioPacketSink() = default;
  virtual void on_audio_packet(std::span<uint8_t> plain_rtp) = 0;
};

struct AudioSenderCounters {
  uint64_t frames_read = 0;     // capture frames (sample instants) taken from the ring
  uint64_t frames_encoded = 0;  // Opus frames (all groups of one timestamp)
  uint64_t frames_sent = 0;     // of which sent (the session was keyed)
  uint64_t packets = 0;
  uint64_t bytes = 0;
  uint64_t encode_errors = 0;
  uint64_t capture_gaps = 0;           // the ring skipped frames (overrun or source gap)
  uint64_t encode_ns = 0;              // time spent encoding (the audio's CPU on the relay thread)
  uint64_t expected_loss_percent = 0;  // what the encoders plan their in-band FEC for now
};

class AudioSender {
 public:
  // Opens one encoder per group (the only allocations). ok() says whether it could.
  AudioSender(const AudioSendConfig& config, uint32_t ssrc);
  bool ok() const { return ok_; }
  // Reads everything the ring holds, encodes every complete frame and hands its packets to sink
  // when `send` (a sender not yet keyed still drains the ring). monotonic_ns times the encode.
  void poll(AudioPacketSink& sink, bool send, uint64_t (*monotonic_ns)());
  // The RTP timestamp (capture index) the capture clock reaches at now_ns (CLOCK_MONOTONIC),
  // extrapolated from the newest block read: the RTCP SR's, so the receiver maps the audio to
  // the same wall clock as the video.
  uint32_t rtp_time(uint64_t now_ns) const;
  bool have_clock() const { return clock_ns_ != 0; }
  // The path's loss (the receiver's RR fraction lost, of 256: audio and video share the path)
  // as every encoder's expected loss (OPUS_SET_PACKET_LOSS_PERC), so in-band FEC grows with
  // it; at least kMinExpectedLoss, at most kMaxExpectedLoss.
  void on_path_loss(uint8_t fraction_lost);
  static constexpr uint32_t kMinExpectedLoss = 5;
  static constexpr uint32_t kMaxExpectedLoss = 50;
  void describe(AudioDescription& d) const;
  uint32_t ssrc() const { return ssrc_; }
  uint32_t packets_sent() const { return uint32_t(counters_.packets); }
  uint32_t octets_sent() const { return uint32_t(counters_.bytes); }
  const AudioSenderCounters& counters() const { return counters_; }

 private:
  void encode_frame(AudioPacketSink& sink, bool send, uint64_t (*monotonic_ns)());

  AudioSendConfig config_;
  uint32_t ssrc_;
  bool ok_ = false;
  audio_codec::GroupPlan plan_;
  std::unique_ptr<audio_codec::OpusMultistreamEncoder[]> encoders_;
  std::unique_ptr<audio_codec::FrameAccumulator> accumulator_;
  std::vector<float> gather_;  // kGatherFrames x selected channels
  std::vector<uint8_t> packet_;
  uint16_t sequence_;
  uint64_t clock_index_ = 0, clock_ns_ = 0;
  uint64_t expected_next_ = UINT64_MAX;
  AudioSenderCounters counters_;
};

struct AudioReceiveConfig {
  audio::CaptureRing* ring = nullptr;  // its writer side is the relay thread's
  uint64_t target_ns = 60'000'000;     // the playout buffer's fixed target
};

struct AudioReceiverCounters {
  audio_codec::PlayoutCounters playout;
  uint64_t packets_refused = 0;  // bad group header, not the described plan, before a description
  uint64_t decode_errors = 0;    // a packet libopus refused (the frame is concealed instead)
  uint64_t descriptions = 0;     // distinct descriptions taken (decoders opened)
  uint64_t ring_overflow_frames = 0;  // the ring's reader was too slow: frames dropped
  uint64_t frames_written = 0;
  uint64_t decode_ns = 0;
  uint64_t recovered_lbrr = 0;  // recoveries from a SILK/hybrid next packet (may carry LBRR)
  uint64_t channels = 0;
  // Capture-to-available latency, from the sender's SR (valid when both ends share a wall clock).
  uint64_t latency_samples = 0;
  int64_t latency_last_us = 0, latency_min_us = 0, latency_max_us = 0, latency_sum_us = 0;
};

class AudioReceiver {
 public:
  explicit AudioReceiver(const AudioReceiveConfig& config);
  // A description: opens decoders and a playout buffer when it differs from the current one
  // (control plane: allocates). False when refused (more groups than the format allows).
  bool on_description(const AudioDescription& d);
  bool described() const { return described_; }
  uint32_t ssrc() const { return description_.ssrc; }
  // The sender's SR for the audio SSRC: the capture clock's wall time.
  void on_sender_report(uint64_t ntp_ns, uint32_t rtp_timestamp);
  void on_packet(uint32_t rtp_timestamp, std::span<const uint8_t> payload, uint64_t now_ns);
  // Plays out every frame due by now_ns into the ring. realtime_ns: the wall clock now (for the
  // latency figure).
  void poll(uint64_t now_ns, uint64_t realtime_ns);
  uint64_t next_wakeup_ns() const;
  const AudioReceiverCounters& counters() const { return counters_; }

 private:
  AudioReceiveConfig config_;
  bool described_ = false;
  AudioDescription description_{};
  audio_codec::GroupPlan plan_;
  std::unique_ptr<audio_codec::OpusMultistreamDecoder[]> decoders_;
  std::unique_ptr<audio_codec::PlayoutBuffer> playout_;
  std::vector<float> frame_;  // frame_samples x stream channels
  bool aligned_ = false;
  uint64_t ring_next_ = 0;  // the ring index the next frame written gets
  uint64_t sr_ntp_ns_ = 0;
  uint32_t sr_rtp_ = 0;
  bool have_sr_ = false;
  void sync_counters();

  audio_codec::PlayoutCounters base_playout_;
  uint64_t base_lbrr_ = 0;  // the counts of earlier descriptions' buffers
  AudioReceiverCounters counters_;
};

}  // namespace syncd::relay
