#include "congestion/incoming_rate.h"

#include <algorithm>

namespace syncd::congestion {

IncomingRate::IncomingRate(uint64_t window_ns)
    : window_ns_(std::max<uint64_t>(window_ns, kBuckets)), bucket_ns_(window_ns_ / kBuckets) {
  window_ns_ = bucket_ns_ * kBuckets;
}

void IncomingRate::reset() {
  bucket_bytes_.fill(0);
  window_bytes_ = 0;
  newest_bucket_ = 0;
  started_ = false;
  first_ns_ = 0;
}

void IncomingRate::advance_to(uint64_t bucket_index) {
  if (bucket_index <= newest_bucket_) return;
  // Clears the buckets that fell out of the window: at most kBuckets of them, however long the
  // silence was.
  const uint64_t steps = std::min<uint64_t>(bucket_index - newest_bucket_, kBuckets);
  for (uint64_t i = 1; i <= steps; ++i) {
    uint64_t& bucket = bucket_bytes_[(newest_bucket_ + i) % kBuckets];
    window_bytes_ -= bucket;
    bucket = 0;
  }
  newest_bucket_ = bucket_index;
}

void IncomingRate::add(uint64_t now_ns, uint32_t bytes) {
  if (!started_) {
    started_ = true;
    first_ns_ = now_ns;
    newest_bucket_ = now_ns / bucket_ns_;
  }
  advance_to(now_ns / bucket_ns_);
  bucket_bytes_[newest_bucket_ % kBuckets] += bytes;
  window_bytes_ += bytes;
}

std::optional<uint64_t> IncomingRate::rate_bps(uint64_t now_ns) {
  if (!started_ || now_ns < first_ns_ || now_ns - first_ns_ < window_ns_) return std::nullopt;
  advance_to(now_ns / bucket_ns_);
  // In double: window_bytes_ x 8e9 overflows 64 bits past 2.3e9 bytes in one window, which only
  // hostile sizes reach; the result saturates at 2^62 bit/s instead.
  const double bps = static_cast<double>(window_bytes_) * 8e9 / static_cast<double>(window_ns_);
  return bps < 4.6e18 ? static_cast<uint64_t>(bps) : uint64_t{1} << 62;
}

}  // namespace syncd::congestion
