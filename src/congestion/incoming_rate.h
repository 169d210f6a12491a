// Received bit rate over a sliding window (the "incoming rate" R of draft-ietf-rmcat-gcc-02
// section 5.5), in fixed buckets so that adding a packet costs O(1) amortised, with no allocation.
//
// Pure code: any thread; not thread-safe; one instance per received stream.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

namespace syncd::congestion {

class IncomingRate {
 public:
  static constexpr uint32_t kBuckets = 100;

  // window_ns: the span averaged over (the draft suggests 0.5 to 1 s); at least kBuckets ns.
  explicit IncomingRate(uint64_t window_ns = 500'000'000);

  // Counts bytes received at now_ns. Times must not go backwards; an earlier time counts in the
  // newest bucket.
  void add(uint64_t now_ns, uint32_t bytes);

  // Bits per second over the window ending at now_ns; empty until one whole window has passed
  // since the first packet (a partial window would read low).
  std::optional<uint64_t> rate_bps(uint64_t now_ns);

  void reset();

 private:
  void advance_to(uint64_t bucket_index);

  uint64_t window_ns_;
  uint64_t bucket_ns_;
  std::array<uint64_t, kBuckets> bucket_bytes_{};
  uint64_t window_bytes_ = 0;
  uint64_t newest_bucket_ = 0;
  bool started_ = false;
  uint64_t first_ns_ = 0;
};

}  // namespace syncd::congestion
