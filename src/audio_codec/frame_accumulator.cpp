#include "audio_codec/frame_accumulator.h"

#include <algorithm>
#include <cstring>

namespace syncd::audio_codec {

FrameAccumulator::FrameAccumulator(uint32_t channels, uint32_t frame_samples)
    : channels_(std::max<uint32_t>(channels, 1)),
      frame_samples_(std::max<uint32_t>(frame_samples, 1)),
      storage_(new float[size_t(channels_) * frame_samples_]()) {}

size_t FrameAccumulator::append(const float* interleaved, size_t frames, uint64_t first_frame) {
  if (full() || frames == 0) return 0;
  if (held_ == 0) {
    first_index_ = first_frame;
  } else if (first_frame != first_index_ + held_) {
    ++counters_.discontinuities;
    const uint64_t expected = first_index_ + held_;
    if (first_frame > expected && first_frame < first_index_ + frame_samples_) {
      // A short capture gap inside this frame: the missing instants become silence, so the
      // packet's timestamp still matches its samples.
      const size_t gap = size_t(first_frame - expected);
      std::memset(storage_.get() + size_t(held_) * channels_, 0, gap * channels_ * sizeof(float));
      held_ += static_cast<uint32_t>(gap);
    } else {
      held_ = 0;
      first_index_ = first_frame;
    }
  }
  const size_t take = std::min<size_t>(frames, frame_samples_ - held_);
  std::memcpy(storage_.get() + size_t(held_) * channels_, interleaved,
              take * channels_ * sizeof(float));
  held_ += static_cast<uint32_t>(take);
  counters_.frames_appended += take;
  return take;
}

void FrameAccumulator::clear() {
  if (full()) ++counters_.frames_completed;
  first_index_ += held_;
  held_ = 0;
}

}  // namespace syncd::audio_codec
