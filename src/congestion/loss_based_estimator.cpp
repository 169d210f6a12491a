#include "congestion/loss_based_estimator.h"

#include <algorithm>
#include <cmath>

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
  if (loss >= config_.low_loss) note_throughput(now_ns, loss, sending_bps);
  const bool above_ceiling = policer_ && sending_bps > ceiling_bps_;
  // Loss in the band holds (a repaired path's random loss), except above a policer's ceiling:
  // that is the probe past it losing.
  if (loss >= config_.low_loss && loss <= config_.high_loss && !above_ceiling)
    return LossUpdate::kHeld;
  // An RTT above 10 s is not a measurement; the floor interval then applies.
  const uint64_t rtt = rtt_ns < 10'000'000'000ull ? rtt_ns : 0;
  const uint64_t interval = std::max(config_.min_update_interval_ns, 2 * rtt);
  if (changed_ && now_ns >= last_change_ns_ && now_ns - last_change_ns_ < interval) {
    return LossUpdate::kTooSoon;
  }
  changed_ = true;
  last_change_ns_ = now_ns;
  if (loss >= config_.low_loss) {
    // Decrease from what was actually sent: the estimate may sit far above it (no loss seen
    // while the REMB held the target lower), and halving the loss from there would change
    // nothing. Under a policer, to just under its ceiling at once: by halves it would stop in
    // the band, above the ceiling and losing.
    const uint64_t base = sending_bps > 0 ? std::min(sending_bps, estimate_bps_) : estimate_bps_;
    double next = static_cast<double>(base) * (1 - 0.5 * loss);
    if (policer_) {
      next = std::min(next, config_.ceiling_margin * static_cast<double>(ceiling_bps_));
      ceiling_set_ns_ = now_ns;
    }
    estimate_bps_ = clamp_bps(next, config_.min_bps, config_.max_bps);
    return LossUpdate::kDecreased;
  }
  double next = static_cast<double>(estimate_bps_) * config_.increase_factor;
  if (policer_) {
    // Up to the margin under the ceiling, and past it only after the hold: one probe every
    // hold + a report or two, not a see-saw.
    const double margin = config_.ceiling_margin * static_cast<double>(ceiling_bps_);
    if (now_ns - ceiling_set_ns_ < config_.ceiling_hold_ns && next > margin)
      next = std::max(margin, static_cast<double>(estimate_bps_));
    if (static_cast<double>(sending_bps) > 1.5 * static_cast<double>(ceiling_bps_))
      policer_ = false;  // carried half as much again without loss: the cap has lifted
  }
  estimate_bps_ = clamp_bps(next, config_.min_bps, config_.max_bps);
  return LossUpdate::kIncreased;
}

void LossBasedEstimator::note_throughput(uint64_t now_ns, double loss, uint64_t sending_bps) {
  if (sending_bps == 0) return;
  // A policer passes the same rate whatever is sent above it: two lossy reports at rates apart
  // by more than the tolerance whose throughputs, R x (1 - p), agree within it. Random loss
  // scales with what is sent, so its throughputs stay as far apart as the rates.
  const double through = static_cast<double>(sending_bps) * (1 - loss);
  const double tolerance = config_.policer_tolerance;
  if (last_through_ > 0) {
    const double rates = static_cast<double>(sending_bps) / static_cast<double>(last_sending_);
    const double throughs = through / last_through_;
    if (std::abs(rates - 1) > 2 * tolerance && std::abs(throughs - 1) <= tolerance) {
      if (!policer_) ceiling_set_ns_ = now_ns;
      policer_ = true;
      ceiling_bps_ = static_cast<uint64_t>(std::min(through, last_through_));
    }
  }
  if (policer_ && sending_bps > ceiling_bps_)
    ceiling_bps_ = static_cast<uint64_t>(
        std::min(static_cast<double>(ceiling_bps_) * 1.05,
                 std::max(static_cast<double>(ceiling_bps_) * 0.95, through)));
  last_through_ = through;
  last_sending_ = sending_bps;
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
                                                  uint64_t rtt_ns, uint64_t sent_bps) {
  ++counters_.reports;
  const LossUpdate update =
      loss_.on_report(now_ns, fraction_lost_q8, rtt_ns, sent_bps ? sent_bps : target_bps_);
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
