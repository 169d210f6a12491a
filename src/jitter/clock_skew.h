// Clock-skew estimate from RTCP sender reports: how fast the sender's clock runs against ours,
// and where its RTP timestamps fall on our clock.
//
// Each SR (RFC 3550 section 6.4.1) pairs the sender's wallclock (NTP) with the RTP timestamp of
// the same instant; its local arrival time adds our clock. Arrival = sender time * rate +
// offset + queueing delay, and the delay is never negative, so the line is fitted to the
// lowest-delay samples: the window is cut into buckets of sender time, each keeps its
// lowest-delay report, and a least-squares line through those minima (refitted once without the
// highest quarter of residuals) gives the rate and the offset. docs/wan.md, "Jitter buffer and
// repair", gives the defaults and why.
//
// Pure code: no clocks, threads, logs, exceptions or allocation after construction. Threads: any
// thread; not thread-safe; one instance per received stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace syncd::jitter {

// RFC 3550 section 4: a 64-bit NTP timestamp (seconds since 1900 in the high 32 bits, the
// fraction in the low 32) in nanoseconds.
uint64_t ntp_to_ns(uint64_t ntp);

struct ClockSkewConfig {
  uint32_t clock_rate_hz = 90000;
  uint64_t bucket_ns = 5'000'000'000;  // of sender time; SRs every 500 ms: 10 per bucket
  uint32_t buckets = 128;              // window: 128 x 5 s = 10 min 40 s
  // The rate is estimated once the kept minima span this much sender time (before: nominal).
  uint64_t min_span_ns = 20'000'000'000;
  double max_skew_ppm = 500;  // estimates beyond this are clamped (crystals are within ~100)
};

struct ClockSkewCounters {
  uint64_t reports = 0;
  uint64_t refused_out_of_order = 0;  // sender time not after the previous report's
  uint64_t refused_jump = 0;          // sender time jumped by over an hour: restart the window
};

class ClockSkewEstimator {
 public:
  // Allocates all storage. Not for the data plane.
  explicit ClockSkewEstimator(const ClockSkewConfig& config = {});

  // One SR: the sender's time (ntp_to_ns of its NTP timestamp), its RTP timestamp, and when it
  // arrived here. Returns false when it was refused (counted).
  bool on_sender_report(uint64_t sender_ns, uint32_t rtp_timestamp, uint64_t arrival_ns);

  // At least one report was taken; the mappings below are meaningful.
  bool valid() const { return count_ > 0; }
  // Sender clock rate against ours in parts per million: +100 when it runs 100 ppm fast.
  double skew_ppm() const;
  // Our nanoseconds per RTP tick of the sender (nominally 1e9 / clock rate), for
  // JitterBuffer::set_local_ns_per_tick().
  double local_ns_per_tick() const;
  // When a packet sent at sender time `sender_ns` arrives here at the lowest delay seen.
  int64_t local_ns_for_sender_ns(uint64_t sender_ns) const;
  // The same for an RTP timestamp, through the newest SR's NTP/RTP pair (within +-6 h of it).
  int64_t local_ns_for_rtp(uint32_t rtp_timestamp) const;

  const ClockSkewCounters& counters() const { return counters_; }

 private:
  struct Sample {
    double sender = 0;  // ns since origin_ns_
    double delay = 0;   // arrival - sender, ns, with an arbitrary constant
  };

  void refit();
  void restart();

  ClockSkewConfig config_;
  ClockSkewCounters counters_;
  std::vector<Sample> minima_;  // a ring of the buckets' lowest-delay samples
  std::vector<Sample> fit_scratch_;
  std::vector<double> residual_scratch_;
  size_t head_ = 0;
  size_t count_ = 0;
  uint64_t current_bucket_ = 0;
  uint64_t origin_sender_ns_ = 0;
  int64_t origin_arrival_ns_ = 0;
  uint64_t last_sender_ns_ = 0;
  uint32_t last_rtp_ = 0;
  // The fitted line: delay(sender) = intercept_ + slope_ * sender (sender in ns since origin).
  double slope_ = 0;
  double intercept_ = 0;
};

}  // namespace syncd::jitter
