#include "congestion/loss_based_estimator.h"

#include <algorithm>

namespace syncd::congestion {

namespace {
uint64_t clamp_bps(double bps, uint64_t min_bps, uint64_t max_bps) {
  if (!(bps > static_cast<double>(min_bps))) return min_bps;
  if (bps >= static_cast<double>(max_bps)) return max_bps;
  return static_cast<uint64_t>(bps);
}
}  // namespace

LossBasedEstimator::LossBasedEstimator(LossEstimatorConfig config) : config_(config) {
  if (config_.max_bps < config_.min_bps) config_.max_bps = config_.min_bps;
  estimate_bps_ = std::clamp(config_.start_bps, config_.min_bps, config_.max_bps);
}

LossUpdate LossBasedEstimator::on_report(uint64_t now_ns, uint8_t fraction_lost_q8, uint64_t rtt_ns,
                                         uint64_t sending_bps) {
  const double loss = fraction_lost_q8 / 256.0;
  if (loss >= config_.low_loss && loss <= config_.high_loss) return LossUpdate::kHeld;
  // An RTT above 10 s is not a measurement; the floor interval then applies.
  const uint64_t rtt = rtt_ns < 10'000'000'000ull ? rtt_ns : 0;
  const uint64_t interval = std::max(config_.min_update_interval_ns, 2 * rtt);
  if (changed_ && now_ns >= last_change_ns_ && now_ns - last_change_ns_ < interval) {
    return LossUpdate::kTooSoon;
  }
  changed_ = true;
  last_change_ns_ = now_ns;
  if (loss < config_.low_loss) {
    estimate_bps_ = clamp_bps(static_cast<double>(estimate_bps_) * config_.increase_factor,
                              config_.min_bps, config_.max_bps);
    return LossUpdate::kIncreased;
  }
  // Decrease from what was actually sent: the estimate may sit far above it (no loss seen while
  // the REMB held the target lower), and halving the loss from there would change nothing.
  const uint64_t base = sending_bps > 0 ? std::min(sending_bps, estimate_bps_) : estimate_bps_;
  estimate_bps_ =
      clamp_bps(static_cast<double>(base) * (1 - 0.5 * loss), config_.min_bps, config_.max_bps);
  return LossUpdate::kDecreased;
}

SendRateController::SendRateController(SendRateConfig config)
    : config_(config), loss_([&config] {
        LossEstimatorConfig loss = config.loss;
        loss.min_bps = config.min_bps;
        loss.max_bps = config.max_bps;
        loss.start_bps = config.start_bps;
        return loss;
      }()) {
  if (config_.max_bps < config_.min_bps) config_.max_bps = config_.min_bps;
  target_bps_ = std::clamp(config_.start_bps, config_.min_bps, config_.max_bps);
}

void SendRateController::recompute() {
  uint64_t target = loss_.estimate_bps();
  // Until the receiver has said anything, the start rate: the loss rule alone would climb 8% per
  // interval on a path nobody has measured.
  target = std::min(target, have_remb_ ? remb_bps_ : config_.start_bps);
  target_bps_ = std::clamp(target, config_.min_bps, config_.max_bps);
}

void SendRateController::on_remb(uint64_t /*now_ns*/, uint64_t bitrate_bps) {
  ++counters_.rembs;
  have_remb_ = true;
  remb_bps_ = std::max(bitrate_bps, config_.min_bps);
  recompute();
}

LossUpdate SendRateController::on_receiver_report(uint64_t now_ns, uint8_t fraction_lost_q8,
                                                  uint64_t rtt_ns) {
  ++counters_.reports;
  const LossUpdate update = loss_.on_report(now_ns, fraction_lost_q8, rtt_ns, target_bps_);
  switch (update) {
    case LossUpdate::kIncreased:
      ++counters_.loss_increases;
      break;
    case LossUpdate::kHeld:
      ++counters_.loss_holds;
      break;
    case LossUpdate::kDecreased:
      ++counters_.loss_decreases;
      break;
    case LossUpdate::kTooSoon:
      ++counters_.loss_too_soon;
      break;
  }
  recompute();
  return update;
}

}  // namespace syncd::congestion
