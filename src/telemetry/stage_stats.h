// Exact timing aggregate for one pipeline stage: count, total, max and a fixed-bucket histogram.
// Aggregates never lose an event (unlike a sample ring). Not thread-safe: owned by one thread
// (the loop thread in syncd).
#pragma once

#include <array>
#include <cstdint>

namespace syncd::telemetry {

class StageStats {
 public:
  // Upper bounds of the histogram buckets in nanoseconds; a final +Inf bucket follows.
  static constexpr std::array<uint64_t, 16> kBucketBoundsNs = {
      1'000,   2'000,     5'000,     10'000,    20'000,     50'000,     100'000,    200'000,
      500'000, 1'000'000, 2'000'000, 5'000'000, 10'000'000, 20'000'000, 50'000'000, 100'000'000};
  static constexpr size_t kBuckets = kBucketBoundsNs.size() + 1;

  void record(uint64_t ns) {
    ++count_;
    total_ns_ += ns;
    if (ns > max_ns_) max_ns_ = ns;
    size_t i = 0;
    while (i < kBucketBoundsNs.size() && ns > kBucketBoundsNs[i]) ++i;
    ++buckets_[i];
  }

  uint64_t count() const { return count_; }
  uint64_t total_ns() const { return total_ns_; }
  uint64_t max_ns() const { return max_ns_; }
  // Non-cumulative count of bucket i (i == kBuckets-1 is +Inf).
  uint64_t bucket(size_t i) const { return buckets_[i]; }

 private:
  uint64_t count_ = 0;
  uint64_t total_ns_ = 0;
  uint64_t max_ns_ = 0;
  std::array<uint64_t, kBuckets> buckets_{};
};

}  // namespace syncd::telemetry
