// The audio of a WHEP egress (docs/whep.md, "Audio"): two capture channels, from the audio
// service's tap (audio/audio_tap.h), as the stereo (or mono) 20 ms Opus frames a browser plays.
//
// One encoder per egress, shared by its sessions like the video's encode: each frame is encoded
// once and every session wraps it in its own RTP header and SRTP context. It runs on the egress's
// relay thread, between datagrams, from its timer: 20 ms of stereo at complexity 5 costs a
// fraction of a millisecond (docs/whep.md figures), less than one access unit's packetizing.
//
// RTP timestamps are capture indices (48 kHz, the capture's sample clock): a session's audio
// timestamp is its random offset plus the frame's capture index, so a pause or a capture gap
// shows as a jump in time, as RFC 3550 wants. The capture clock maps to CLOCK_MONOTONIC by the
// tap's block timestamps (capture_index_at), which is how the sender report ties audio to the
// same wall clock as the video (whep_transport.cpp).
//
// Nothing allocates after construction; nothing locks (the tap is an SPSC ring).
//
// Thread: the egress's relay thread for everything; counters() anywhere.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>

#include "audio/audio_tap.h"
#include "audio_codec/frame_accumulator.h"
#include "audio_codec/opus_encoder.h"

namespace syncd::whep {

// One encoded frame, valid until the next call to next().
struct EncodedAudio {
  std::span<const uint8_t> opus;
  uint64_t capture_index = 0;  // of the frame's first sample: its RTP timestamp, less an offset
  bool discontinuity = false;  // not right after the previous frame (the first, or after a gap)
};

struct WhepAudioCounters {
  std::atomic<uint64_t> frames_read{0};     // capture frames (sample instants) taken from the tap
  std::atomic<uint64_t> frames_encoded{0};  // 20 ms Opus frames
  std::atomic<uint64_t> encode_errors{0};
  std::atomic<uint64_t> capture_gaps{0};  // the tap's index jumped (a pause, a gap, an overrun)
  std::atomic<uint64_t> encode_ns{0};     // the encoder's time on the relay thread
  std::atomic<uint64_t> bytes{0};         // Opus bytes encoded
  std::atomic<uint64_t> expected_loss_percent{0};  // what the encoder plans its FEC for now
};

class WhepAudioEncoder {
 public:
  static constexpr uint32_t kFrameMs = 20;
  static constexpr uint32_t kFrameSamples = 960;
  // Music from an instrument, not speech: 48 kbit/s a channel (96 kbit/s stereo).
  static constexpr uint32_t kBitratePerChannel = 48000;
  // The largest Opus packet we let the encoder write (RTP 12 + this + GCM tag 16 < 1200).
  static constexpr size_t kMaxOpusBytes = 1000;

  explicit WhepAudioEncoder(std::shared_ptr<audio::AudioTap> tap);
  bool ok() const { return encoder_.is_open(); }
  bool stereo() const { return !tap_->mono(); }

  // Whether any session wants audio now. Turning it on starts from what the tap gets next (the
  // loop copies only while wanted); a half frame held from before is dropped.
  void set_wanted(bool wanted);
  bool wanted() const { return wanted_; }

  // The next 20 ms frame from what the tap holds: false when it holds less than one more frame.
  // monotonic_ns times the encode.
  bool next(EncodedAudio& out, uint64_t (*monotonic_ns)());

  // The loss the encoder plans its in-band FEC for (OPUS_SET_PACKET_LOSS_PERC), from the
  // listeners' receiver reports: the worst of them, at least kMinExpectedLoss.
  void set_expected_loss(uint32_t percent);
  static constexpr uint32_t kMinExpectedLoss = 5;
  static constexpr uint32_t kMaxExpectedLoss = 50;

  // The capture index the capture clock reaches at now_ns (CLOCK_MONOTONIC), extrapolated from
  // the newest block read; meaningful when has_clock().
  uint64_t capture_index_at(uint64_t now_ns) const;
  bool has_clock() const { return clock_ns_ != 0; }

  const WhepAudioCounters& counters() const { return counters_; }

 private:
  void release_run();

  std::shared_ptr<audio::AudioTap> tap_;
  audio_codec::OpusMultistreamEncoder encoder_;
  audio_codec::FrameAccumulator accumulator_;
  uint8_t packet_[kMaxOpusBytes];
  bool wanted_ = false;
  audio::ReadRun run_;                   // the run being cut into frames
  uint32_t run_done_ = 0;                // its frames appended so far
  uint64_t expected_next_ = UINT64_MAX;  // the capture index the tap's next frame should have
  uint64_t last_frame_index_ = UINT64_MAX;
  uint64_t clock_index_ = 0, clock_ns_ = 0;
  uint32_t expected_loss_ = kMinExpectedLoss;
  WhepAudioCounters counters_;
};

}  // namespace syncd::whep
