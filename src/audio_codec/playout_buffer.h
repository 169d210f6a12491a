// The receiver's audio playout buffer for the relay (docs/wan.md, "Audio"): Opus packets in, by
// RTP timestamp and channel group, in any order; at each frame's playout time, what to do with
// every group of that frame out: decode its packet, rebuild it from the next frame's in-band FEC,
// or conceal it (PLC). Every frame between the first and the newest played is accounted once:
// played (every group had its packet), recovered (some group rebuilt by FEC, none concealed),
// or concealed, by reason: lost (its packet missing while a later one was held) or underflow (the
// buffer was empty at its playout time: the target delay was too short for the path).
//
// The target delay is fixed (config): a frame plays target_ns after the time its packets would
// have arrived on the fastest path seen so far (the anchor moves earlier when a packet comes
// earlier than the anchor predicted, never later), so jitter up to the target costs nothing.
// Capture and playout share the 48 kHz clock through the RTP timestamps; a slow drift between
// the two machines' clocks moves the buffer's fill, which the anchor absorbs one way and the
// underflow counter shows the other way.
//
// Pure: bytes and times in, actions out; no clock, no allocation after the constructor. Any one
// thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace syncd::audio_codec {

struct PlayoutConfig {
  uint32_t groups = 1;            // packets per frame, 1..32
  uint32_t frame_samples = 480;   // 10 ms at 48 kHz
  uint32_t capacity_frames = 64;  // frames held ahead of playout (640 ms at 10 ms)
  uint64_t target_ns = 60'000'000;
  size_t max_packet_bytes = 1200;
  // Frames concealed in a row with the buffer empty before playout stops (the sender stopped or
  // the path died): 200 ms at 10 ms. The next packet starts playout again from itself, and the
  // frames in between are a gap (not concealed, not counted as frames).
  uint32_t max_underflow_frames = 20;
};

struct PlayoutCounters {
  uint64_t packets_in = 0;
  uint64_t packets_late = 0;        // arrived after their frame played: dropped
  uint64_t packets_duplicate = 0;   // the slot already held that group's packet
  uint64_t packets_overflow = 0;    // too far ahead of playout (beyond capacity): dropped
  uint64_t packets_refused = 0;     // bad group or empty or too large
  uint64_t packets_misaligned = 0;  // timestamp not a whole number of frames from the first
  uint64_t frames_played = 0;
  uint64_t frames_recovered = 0;
  uint64_t frames_concealed_lost = 0;
  uint64_t frames_concealed_underflow = 0;
  uint64_t underflows = 0;  // playout times that found the buffer empty (runs of underflow)
  uint64_t stalls = 0;      // underflow runs that reached max_underflow_frames: playout stopped
  uint64_t restarts = 0;    // playout started again after a stall
  uint64_t frames_total() const {
    return frames_played + frames_recovered + frames_concealed_lost + frames_concealed_underflow;
  }
};

enum class GroupAction : uint8_t { kDecode, kRecover, kConceal };

// One frame due for playout: per group, what to do and with which bytes (valid until the next
// call to any method).
struct PlayoutFrame {
  uint64_t capture_index = 0;  // absolute 48 kHz index of the frame's first sample
  uint64_t due_ns = 0;
  GroupAction action[32] = {};
  std::span<const uint8_t> packet[32];  // kDecode: this frame's; kRecover: the next frame's
};

class PlayoutBuffer {
 public:
  explicit PlayoutBuffer(const PlayoutConfig& config);

  // A packet of group `group` whose RTP timestamp is rtp_timestamp (the low 32 bits of the
  // capture index), arrived at now_ns. Copied in. False when dropped (counted by reason).
  bool insert(uint32_t rtp_timestamp, uint32_t group, std::span<const uint8_t> packet,
              uint64_t now_ns);

  // The next frame whose playout time is at or before now_ns, or false when none is due yet
  // (or nothing has arrived yet, or playout stalled). Call until false.
  bool pop(uint64_t now_ns, PlayoutFrame& out);

  // When the next frame is due (UINT64_MAX when nothing has arrived yet).
  uint64_t next_due_ns() const;
  // Frames held at or after the next to play (the buffer's fill).
  uint32_t held_frames() const;
  bool started() const { return started_; }
  const PlayoutCounters& counters() const { return counters_; }
  const PlayoutConfig& config() const { return config_; }

 private:
  struct Slot {
    uint64_t frame = UINT64_MAX;  // frame number held (UINT64_MAX: empty)
    uint32_t present = 0;         // bit per group
  };
  uint8_t* packet_at(uint64_t frame, uint32_t group);
  Slot& slot_of(uint64_t frame) { return slots_[frame % config_.capacity_frames]; }
  uint64_t frame_ns() const { return uint64_t(config_.frame_samples) * 1'000'000'000ull / 48000; }

  PlayoutConfig config_;
  std::unique_ptr<Slot[]> slots_;
  std::unique_ptr<uint8_t[]> bytes_;   // capacity x groups x max_packet_bytes
  std::unique_ptr<uint16_t[]> sizes_;  // capacity x groups
  bool started_ = false;
  uint64_t base_index_ = 0;    // capture index of frame 0 (the first packet's)
  uint64_t newest_index_ = 0;  // unwrapped capture index of the newest packet
  uint64_t next_frame_ = 0;    // next frame number to play (capture index / frame_samples)
  uint64_t newest_frame_ = 0;  // newest frame number held
  uint64_t anchor_ns_ = 0;     // arrival time of frame 0 on the fastest path seen
  bool underflowing_ = false;
  uint32_t underflow_run_ = 0;
  bool stalled_ = false;
  PlayoutCounters counters_;
};

}  // namespace syncd::audio_codec
