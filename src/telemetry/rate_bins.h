// Unique frames per complete one-second bin, the measurement contract of the qualification
// reports: bins are aligned to whole seconds of the clock passed in; a bin is *complete* once it
// has ended and it is not the bin the first frame fell in (that one began before the stream did).
// A complete bin with fewer than low_rate_threshold frames is a low-rate second.
//
// Pure (time is passed in). Not thread-safe: owned by the loop thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace syncd::telemetry {

class RateBins {
 public:
  static constexpr size_t kRecentBins = 120;

  explicit RateBins(uint32_t low_rate_threshold = 50) : low_rate_threshold_(low_rate_threshold) {}

  // One unique frame at now_ms.
  void record(uint64_t now_ms) {
    advance(now_ms);
    if (!started_) {
      started_ = true;
      current_bin_ = now_ms / 1000;
      first_bin_ = current_bin_;
    }
    ++current_count_;
  }

  // Closes every bin that ended before now_ms; call at least once a second so that silent
  // seconds are counted too.
  void advance(uint64_t now_ms) {
    if (!started_) return;
    const uint64_t bin = now_ms / 1000;
    while (current_bin_ < bin) {
      if (current_bin_ != first_bin_) close_bin(current_count_);
      current_count_ = 0;
      ++current_bin_;
    }
  }

  uint64_t complete_seconds() const { return complete_seconds_; }
  uint64_t low_rate_seconds() const { return low_rate_seconds_; }
  uint32_t low_rate_threshold() const { return low_rate_threshold_; }
  uint64_t complete_frames() const { return complete_frames_; }
  // Frames of the last complete second; 0 before the first one.
  uint32_t last_complete_fps() const { return last_complete_fps_; }
  uint32_t min_complete_fps() const { return complete_seconds_ ? min_complete_fps_ : 0; }
  // Up to kRecentBins most recent complete bins, oldest first.
  template <typename F>
  void for_each_recent(F&& f) const {
    const size_t n = complete_seconds_ < kRecentBins ? size_t(complete_seconds_) : kRecentBins;
    for (size_t i = 0; i < n; ++i) f(recent_[(recent_next_ + kRecentBins - n + i) % kRecentBins]);
  }

 private:
  void close_bin(uint32_t frames) {
    ++complete_seconds_;
    complete_frames_ += frames;
    if (frames < low_rate_threshold_) ++low_rate_seconds_;
    if (frames < min_complete_fps_) min_complete_fps_ = frames;
    last_complete_fps_ = frames;
    recent_[recent_next_] = frames;
    recent_next_ = (recent_next_ + 1) % kRecentBins;
  }

  uint32_t low_rate_threshold_;
  bool started_ = false;
  uint64_t first_bin_ = 0;
  uint64_t current_bin_ = 0;
  uint32_t current_count_ = 0;
  uint64_t complete_seconds_ = 0;
  uint64_t low_rate_seconds_ = 0;
  uint64_t complete_frames_ = 0;
  uint32_t last_complete_fps_ = 0;
  uint32_t min_complete_fps_ = UINT32_MAX;
  std::array<uint32_t, kRecentBins> recent_{};
  size_t recent_next_ = 0;
};

}  // namespace syncd::telemetry
