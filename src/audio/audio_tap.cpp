#include "audio/audio_tap.h"

#include <algorithm>

namespace syncd::audio {

AudioTap::AudioTap(uint32_t left, uint32_t right, uint32_t rate, uint32_t capacity_frames)
    : left_(left),
      right_(right),
      samples_(size_t(capacity_frames) * kChannels, 0.0f),
      blocks_(CaptureRing::blocks_for(capacity_frames, 64), CaptureBlock{}),
      ring_(samples_, blocks_, kChannels, rate) {}

void AudioTap::write(const ReadRun& run, uint32_t source_channels) {
  uint64_t index = run.first_frame;
  if (index != ring_.next_write_frame()) ring_.jump_to(index);
  // Source frame i of the run, across its two pieces.
  const RingSpan& in = run.samples;
  auto source_frame = [&in, source_channels](uint32_t i) -> const float* {
    return i < in.frames[0] ? in.part[0] + size_t(i) * source_channels
                            : in.part[1] + size_t(i - in.frames[0]) * source_channels;
  };
  const uint32_t total = in.total();
  for (uint32_t done = 0; done < total;) {
    const uint32_t n = std::min(total - done, kMaxBlockFrames);
    const uint64_t timestamp_ns =
        run.timestamp_ns + uint64_t(done) * 1'000'000'000ull / ring_.rate();
    RingSpan out = ring_.begin_write(n);
    if (out.total() == 0) {
      ring_.drop(n);
    } else {
      uint32_t i = done;
      for (int part = 0; part < 2; ++part) {
        float* o = out.part[part];
        for (uint32_t f = 0; f < out.frames[part]; ++f, ++i) {
          const float* s = source_frame(i);
          *o++ = s[left_];
          *o++ = s[right_];
        }
      }
      ring_.commit(n, timestamp_ns);
    }
    done += n;
    index += n;
  }
}

}  // namespace syncd::audio
