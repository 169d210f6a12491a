// Cuts exact Opus frames out of capture blocks of any size (docs/audio.md: the capture ring hands
// out runs of interleaved float32 frames, at most one JACK period or synthetic block at a time,
// 256 frames by default, which is not a multiple of a 10 or 20 ms Opus frame).
//
// Holds at most one frame (frame_samples x channels floats), allocated in the constructor;
// append() only copies. It also carries the absolute capture index of the held frame's first
// sample, which is the frame's RTP timestamp at 48 kHz (the relay's audio clock).
//
// Usage, per capture run:
//   while (frames > 0) {
//     size_t taken = acc.append(samples, frames, first_frame);
//     samples += taken * channels; frames -= taken; first_frame += taken;
//     if (acc.full()) { encoder.encode(acc.frame(), ...); acc.clear(); }
//   }
//
// Any one thread at a time; one instance per encoded stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace syncd::audio_codec {

struct AccumulatorCounters {
  uint64_t frames_appended = 0;   // capture frames (sample instants) copied in
  uint64_t frames_completed = 0;  // full Opus frames handed out
  uint64_t discontinuities = 0;   // append() whose first_frame did not follow the held samples
};

class FrameAccumulator {
 public:
  // channels 1..255, frame_samples > 0 (480 for 10 ms at 48 kHz).
  FrameAccumulator(uint32_t channels, uint32_t frame_samples);

  // Copies up to the frames still missing from the held frame out of `interleaved` (frames x
  // channels floats). first_frame is the absolute capture index of interleaved[0]. Returns the
  // frames taken: 0 when full() (call clear() first). If first_frame does not follow the held
  // samples (a capture gap or overrun), the held partial frame is padded with silence up to the
  // gap only when the gap ends inside this frame; otherwise it is discarded (counted), so every
  // frame handed out covers exactly frame_samples consecutive capture instants.
  size_t append(const float* interleaved, size_t frames, uint64_t first_frame);

  bool full() const { return held_ == frame_samples_; }
  // The held frame, frame_samples x channels interleaved floats; meaningful when full().
  const float* frame() const { return storage_.get(); }
  // Absolute capture index of frame()[0]: the RTP timestamp of the encoded packet.
  uint64_t frame_index() const { return first_index_; }
  uint32_t frame_samples() const { return frame_samples_; }
  uint32_t channels() const { return channels_; }
  uint32_t held_frames() const { return held_; }
  // Drops the held frame (after encoding it); counts it as completed when it was full.
  void clear();

  const AccumulatorCounters& counters() const { return counters_; }

 private:
  uint32_t channels_;
  uint32_t frame_samples_;
  uint32_t held_ = 0;
  uint64_t first_index_ = 0;
  std::unique_ptr<float[]> storage_;
  AccumulatorCounters counters_;
};

}  // namespace syncd::audio_codec
