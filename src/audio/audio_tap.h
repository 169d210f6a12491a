// A copy of one or two capture channels for a consumer on another thread (docs/whep.md, "Audio"):
// a WHEP egress's relay thread, which encodes them as the stereo (or mono) Opus a browser plays.
//
// The capture ring (capture_ring.h) has exactly one reader, syncd's loop thread, and a second
// reader cannot join an SPSC ring. So the loop thread, which already sees every captured frame,
// copies the chosen channels of each frame into the tap's own small ring (two channels, 1 s):
// the loop thread is that ring's writer, the consumer's thread its reader. 8 bytes a frame, 384
// kB/s, copied once: nothing on the capture's real-time thread changes, and a slow consumer
// overruns its tap (counted there) and never the capture.
//
// Frames keep their capture indices and timestamps: the tap ring's absolute index of a frame is
// the capture's, so a consumer's RTP timestamps follow the capture clock across pauses and gaps.
//
// The consumer says when it wants frames (`set_wanted`): a tap nobody reads would fill and count
// overruns for frames nobody missed.
//
// Threads: write() on the loop thread (the tap ring's writer); ring()'s reader side and
// set_wanted() on the consumer's thread; wanted() and the counters anywhere.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "audio/capture_ring.h"

namespace syncd::audio {

class AudioTap {
 public:
  static constexpr uint32_t kChannels = 2;

  // left and right: capture channel indices (the same index twice for mono).
  AudioTap(uint32_t left, uint32_t right, uint32_t rate, uint32_t capacity_frames);
  AudioTap(const AudioTap&) = delete;
  AudioTap& operator=(const AudioTap&) = delete;

  uint32_t left() const { return left_; }
  uint32_t right() const { return right_; }
  bool mono() const { return left_ == right_; }

  // Consumer's thread.
  CaptureRing& ring() { return ring_; }
  const CaptureRing& ring() const { return ring_; }  // its counters, from any thread
  void set_wanted(bool wanted) { wanted_.store(wanted, std::memory_order_release); }

  bool wanted() const { return wanted_.load(std::memory_order_acquire); }

  // Loop thread: copies the tap's two channels of `run` (frames of source_channels interleaved
  // floats) into the tap ring, in blocks of at most kMaxBlockFrames. A run that does not follow
  // the last one starts a new stretch (CaptureRing::jump_to); one that does not fit is dropped
  // (the tap ring counts it as an overrun).
  void write(const ReadRun& run, uint32_t source_channels);

  static constexpr uint32_t kMaxBlockFrames = 1024;

 private:
  uint32_t left_, right_;
  std::vector<float> samples_;
  std::vector<CaptureBlock> blocks_;
  CaptureRing ring_;
  std::atomic<bool> wanted_{false};
};

}  // namespace syncd::audio
