// Redundancy policy (docs/wan.md, "FEC payload format"): how many repair packets a frame's
// blocks carry, from the loss the receiver reports.
//
// choose_block_shape() is a pure function, no state: any thread. LossEstimator: any thread; not
// thread-safe; one per sending session.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "fec/encoder.h"

namespace syncd::fec {

struct LossEstimate {
  // Fraction of packets lost, 0..1 (e.g. RTCP RR "fraction lost" / 256, smoothed).
  double loss_fraction = 0;
  // Mean length of a loss burst in packets (>= 1; 1 when losses are independent or unknown).
  double mean_burst_packets = 1;
};

struct PolicyLimits {
  uint8_t max_k = 48;  // source packets per block (<= kMaxK)
  uint8_t max_m = 16;  // repair packets per block (<= kMaxM)
  // m / k never above this: past ~50 % overhead, retransmission (NACK) and a lower encoder rate
  // are the better spend of the bandwidth.
  double max_overhead = 0.5;
  // Below this loss no FEC at all: NACK repairs isolated losses inside the latency budget.
  double min_loss_for_fec = 0.002;
  // Target probability that a block is left with more losses than repairs.
  double target_block_failure = 1e-3;
};

// The shape of the blocks of a frame of frame_packets packets: k splits the frame into
// ceil(frame_packets / max_k) blocks of near-equal size (one block per frame when it fits, so
// a frame's repair never waits for the next frame), and m is the least number of repairs that
// brings the block's failure probability under target_block_failure, when losses come in bursts
// of mean_burst_packets starting with probability loss_fraction / mean_burst_packets per packet
// (each burst costs ceil(mean burst) symbols); m is then capped by max_m and max_overhead, and is
// at least 1 once loss_fraction reaches min_loss_for_fec.
BlockShape choose_block_shape(const LossEstimate& loss, uint32_t frame_packets,
                              const PolicyLimits& limits = {});

// The probability that a block of n packets, losses as above, loses more than `repairs`
// symbols (exposed for the tests and docs/wan.md's table).
double block_failure_probability(const LossEstimate& loss, uint32_t n, uint32_t repairs);

// The sender's view of the path's loss, from what the receiver tells it: RTCP RR "fraction lost"
// (RFC 3550 section 6.4.1) and the sequences it NACKs (RFC 4585 section 6.2.1). Consecutive
// NACKed sequences are one burst, so the mean burst comes from the NACKs; both figures are
// smoothed (EWMA per report). Pure: no clocks; bounded work per call.
//
// The loss figure may rise faster than it decays: FEC sized from it must not switch off after a
// few lucky reports (at 1 % loss a 100-ms report of ~170 packets holds no loss one time in six),
// since an unprotected frame that loses a packet waits a round trip for its retransmission.
struct LossEstimatorConfig {
  double rise = 0.25;   // EWMA weight of a report above the estimate (and of the burst length)
  double decay = 0.25;  // EWMA weight of a report at or below it
  // Assumed before the first report (so the first frames are protected on a lossy path). With
  // 0, the first report is taken as the estimate as it is.
  double initial_loss_fraction = 0;
  // on_report_counts(): a loss sample spans at least this many packets. A receiver that sends
  // feedback as soon as it sees a loss (RFC 4585 early feedback) sends reports a few dozen
  // packets apart, whose fraction lost is mostly 0 or a spike (1 of 40 is 2.5 %): taken one by
  // one they drive a fast-rising estimate far above the path's loss.
  uint32_t min_packets_per_sample = 600;
};

class LossEstimator {
 public:
  explicit LossEstimator(double smoothing = 0.25)
      : LossEstimator(LossEstimatorConfig{smoothing, smoothing, 0}) {}
  explicit LossEstimator(const LossEstimatorConfig& config);

  // One NACKed sequence, in the order the feedback lists them (ascending within a packet). A
  // sequence not newer than the last one seen (a NACK repeated for the same loss) is ignored.
  void on_nacked(uint16_t sequence);

  // A receiver report's fraction lost (0..255 = fraction * 256). Folds the NACKs since the last
  // report into the burst estimate.
  void on_receiver_report(uint8_t fraction_lost);

  // A receiver report block's running counts (RFC 3550 section 6.4.1: the extended highest
  // sequence received and the cumulative number lost): a loss sample is taken once they span
  // min_packets_per_sample packets since the last sample, and folded in as a report would be
  // (NACK runs included). The first call only sets the baseline; counts that go backwards
  // (the peer restarted its statistics) set it again.
  //
  // congested: the sender's rate control took loss within this sample's span for congestion
  // (it sent more than the path carries). Such a sample is dropped, not folded, NACK runs and
  // all: FEC repairs the path's own loss, and sized from self-inflicted loss it only adds to
  // what does not fit (measured under a 10 Mbit/s policer: 35 % of the packets FEC for the
  // whole cap and 15 s after it). now_ns (any monotonic clock) dates the sample's end for
  // drop_samples_since(). Returns whether a sample ended (folded or dropped).
  bool on_report_counts(uint32_t extended_highest_sequence, int32_t cumulative_lost,
                        bool congested = false, uint64_t now_ns = 0);
  // The samples folded that ended at or after since_ns turned out to hold congestion loss (the
  // sender's verdict comes after the loss, and at a high rate several samples end within one of
  // its spans): the estimate goes back to what it was before the first of them. Reaches back
  // kUndoSamples samples at most.
  void drop_samples_since(uint64_t since_ns);
  static constexpr size_t kUndoSamples = 8;
  // Samples dropped as congestion.
  uint64_t congested_samples() const { return congested_samples_; }

  LossEstimate estimate() const { return estimate_; }

 private:
  void fold(double loss);

  double rise_, decay_;
  uint32_t min_packets_per_sample_;
  bool have_counts_ = false;
  uint32_t sample_base_sequence_ = 0;
  int32_t sample_base_lost_ = 0;
  LossEstimate estimate_;
  struct Folded {
    uint64_t end_ns;
    LossEstimate before;  // the estimate before it was folded
  };
  std::array<Folded, kUndoSamples> folded_{};  // the latest, oldest first
  size_t folded_count_ = 0;
  uint64_t congested_samples_ = 0;
  bool have_report_ = false;
  bool have_nacked_ = false;
  uint16_t last_nacked_ = 0;
  uint32_t nacked_since_report_ = 0;
  uint32_t bursts_since_report_ = 0;
};

}  // namespace syncd::fec
