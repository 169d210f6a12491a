#include "fec/policy.h"

#include <algorithm>
#include <cmath>

namespace syncd::fec {

double block_failure_probability(const LossEstimate& loss, uint32_t n, uint32_t repairs) {
  const double p = std::clamp(loss.loss_fraction, 0.0, 1.0);
  const double burst = std::max(1.0, loss.mean_burst_packets);
  if (p <= 0) return 0;
  // Burst starts are Bernoulli(p / burst) per packet; each burst takes `burst` packets on
  // average, so the block survives up to floor(repairs / burst) bursts (Gilbert-Elliott's good
  // state seen from the block, an approximation rather than an exact model). Not ceil(burst)
  // packets a burst: a measured mean of 1.01 (one pair of adjacent losses among a hundred
  // single ones) would count as bursts of 2 and double the repairs asked for.
  const double start = std::min(1.0, p / burst);
  const uint32_t bursts_survived =
      static_cast<uint32_t>(std::floor(static_cast<double>(repairs) / burst + 1e-9));
  if (bursts_survived >= n) return 0;
  // P(X <= bursts_survived), X ~ Binomial(n, start), summed term by term (n <= 64).
  double term = std::pow(1 - start, n);  // P(X = 0)
  double cumulative = term;
  for (uint32_t x = 1; x <= bursts_survived; ++x) {
    if (start >= 1) {
      term = 0;
    } else {
      term *= (static_cast<double>(n - x + 1) / x) * (start / (1 - start));
    }
    cumulative += term;
  }
  return std::clamp(1 - cumulative, 0.0, 1.0);
}

BlockShape choose_block_shape(const LossEstimate& loss, uint32_t frame_packets,
                              const PolicyLimits& limits) {
  const uint32_t max_k = std::clamp<uint32_t>(limits.max_k, 1, kMaxK);
  const uint32_t max_m = std::min<uint32_t>(limits.max_m, kMaxM);
  const uint32_t packets = std::max<uint32_t>(frame_packets, 1);
  const uint32_t blocks = (packets + max_k - 1) / max_k;
  const uint32_t k = (packets + blocks - 1) / blocks;
  BlockShape shape{static_cast<uint8_t>(k), 0};
  if (!(loss.loss_fraction >= limits.min_loss_for_fec)) return shape;  // also NaN
  const uint32_t cap = std::min<uint32_t>(
      max_m, static_cast<uint32_t>(std::ceil(std::max(0.0, limits.max_overhead) * k)));
  uint32_t m = 1;
  while (m < cap && block_failure_probability(loss, k + m, m) > limits.target_block_failure) {
    ++m;
  }
  shape.m = static_cast<uint8_t>(std::min(m, std::max<uint32_t>(cap, 1)));
  return shape;
}

LossEstimator::LossEstimator(const LossEstimatorConfig& config)
    : rise_(std::clamp(config.rise, 0.01, 1.0)),
      decay_(std::clamp(config.decay, 0.01, 1.0)),
      min_packets_per_sample_(std::max<uint32_t>(config.min_packets_per_sample, 1)) {
  estimate_.loss_fraction = std::clamp(config.initial_loss_fraction, 0.0, 1.0);
  have_report_ = estimate_.loss_fraction > 0;
}

void LossEstimator::on_nacked(uint16_t sequence) {
  if (have_nacked_) {
    const int16_t ahead = static_cast<int16_t>(static_cast<uint16_t>(sequence - last_nacked_));
    if (ahead <= 0) return;                  // repeated or older: the same losses again
    if (ahead != 1) ++bursts_since_report_;  // a gap: a new burst starts
  } else {
    ++bursts_since_report_;
  }
  have_nacked_ = true;
  last_nacked_ = sequence;
  ++nacked_since_report_;
}

void LossEstimator::on_receiver_report(uint8_t fraction_lost) {
  fold(fraction_lost / 256.0);
}

bool LossEstimator::on_report_counts(uint32_t extended_highest_sequence, int32_t cumulative_lost,
                                     bool congested, uint64_t now_ns) {
  // Differences modulo 2^32: the extended sequence wraps after 2^32 packets, not before.
  const uint32_t expected = extended_highest_sequence - sample_base_sequence_;
  if (!have_counts_ || expected > 0x8000'0000u) {
    have_counts_ = true;
    sample_base_sequence_ = extended_highest_sequence;
    sample_base_lost_ = cumulative_lost;
    return false;
  }
  if (expected < min_packets_per_sample_) return false;
  if (congested) {
    ++congested_samples_;
    nacked_since_report_ = 0;
    bursts_since_report_ = 0;
  } else {
    if (folded_count_ == kUndoSamples) {
      for (size_t i = 1; i < kUndoSamples; ++i) folded_[i - 1] = folded_[i];
      --folded_count_;
    }
    folded_[folded_count_++] = {now_ns, estimate_};
    const double lost = static_cast<double>(cumulative_lost) - sample_base_lost_;
    fold(std::clamp(lost / expected, 0.0, 1.0));
  }
  sample_base_sequence_ = extended_highest_sequence;
  sample_base_lost_ = cumulative_lost;
  return true;
}

void LossEstimator::drop_samples_since(uint64_t since_ns) {
  size_t first = folded_count_;
  while (first > 0 && folded_[first - 1].end_ns >= since_ns) --first;
  if (first == folded_count_) return;
  estimate_ = folded_[first].before;
  congested_samples_ += folded_count_ - first;
  folded_count_ = first;
}

void LossEstimator::fold(double loss) {
  if (!have_report_) {
    estimate_.loss_fraction = loss;
    have_report_ = true;
  } else {
    const double weight = loss > estimate_.loss_fraction ? rise_ : decay_;
    estimate_.loss_fraction += weight * (loss - estimate_.loss_fraction);
  }
  if (bursts_since_report_ > 0) {
    const double burst = static_cast<double>(nacked_since_report_) / bursts_since_report_;
    estimate_.mean_burst_packets += rise_ * (burst - estimate_.mean_burst_packets);
  } else {
    // No loss, no bursts: back towards independent loss at the slow rate. Without this a run of
    // hundreds NACKed at a cap's onset kept FEC at its 50 % ceiling for as long as the path
    // then lost nothing at all (the burst length sizes the repairs, whatever the loss).
    estimate_.mean_burst_packets += decay_ * (1 - estimate_.mean_burst_packets);
  }
  nacked_since_report_ = 0;
  // A burst still open at the report is counted in this report; its next NACKs extend it.
  bursts_since_report_ = 0;
}

}  // namespace syncd::fec
