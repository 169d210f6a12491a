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
                                         uint64_t sending_bps, bool queue_seen) {
  const double loss = fraction_lost_q8 / 256.0;
  {
    const bool known = policer_;
    note_throughput(now_ns, loss, sending_bps, queue_seen);
    // Found now: what the path carried before it is where a lifted cap lets the rate go back.
    if (policer_ && !known) before_policer_bps_ = episode_start_bps_;
  }
  // At the margin under a policer's ceiling or above it, loss says the ceiling is lower than
  // taken (note_throughput lowered it): a decrease, not the band's hold.
  const bool above_ceiling =
      policer_ && static_cast<double>(sending_bps) >=
                      config_.ceiling_margin * static_cast<double>(ceiling_bps_);
  // Loss in the band holds (a repaired path's random loss), except at a policer's ceiling.
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
    // The first heavy loss in a while: the rate it began at is what the path carried before.
    if (loss > config_.high_loss) {
      if (!heavy_loss_seen_ || now_ns - heavy_loss_ns_ > kEpisodeNs)
        episode_start_bps_ = std::max(sending_bps, estimate_bps_);
      heavy_loss_seen_ = true;
      heavy_loss_ns_ = now_ns;
    }
    double next = static_cast<double>(base) * (1 - 0.5 * loss);
    if (policer_) {
      next = std::min(next, config_.ceiling_margin * static_cast<double>(ceiling_bps_));
      probe_not_before_ns_ = now_ns + config_.probe_after_ns;
    }
    recover_to_bps_ = 0;  // a recovery that loses is over
    estimate_bps_ = clamp_bps(next, config_.min_bps, config_.max_bps);
    last_decrease_ns_ = now_ns;
    return LossUpdate::kDecreased;
  }
  const bool recovering = recover_to_bps_ > estimate_bps_;
  double next = static_cast<double>(estimate_bps_) *
                (recovering ? config_.recovery_factor : config_.increase_factor);
  if (recovering) next = std::min(next, static_cast<double>(recover_to_bps_));
  // Up to the margin under a policer's ceiling. Past it, a sender that probes with padding
  // does so; for one that does not, the estimate itself goes on past it at the usual rate once
  // probe_after_ns have passed without a decrease (a raised cap is found; passing the ceiling
  // by half as much again without loss forgets it).
  if (policer_) {
    const double margin = config_.ceiling_margin * static_cast<double>(ceiling_bps_);
    if (config_.padding_probes || now_ns < probe_not_before_ns_)
      next = std::min(next, std::max(margin, static_cast<double>(estimate_bps_)));
    if (!config_.padding_probes &&
        static_cast<double>(sending_bps) > 1.5 * static_cast<double>(ceiling_bps_))
      policer_ = false;
  }
  estimate_bps_ = clamp_bps(next, config_.min_bps, config_.max_bps);
  return LossUpdate::kIncreased;
}

uint64_t LossBasedEstimator::probe_bps(uint64_t now_ns) const {
  if (!config_.padding_probes || !policer_ || now_ns < probe_not_before_ns_) return 0;
  const double base = static_cast<double>(std::max(ceiling_bps_, estimate_bps_));
  return clamp_bps(base * config_.probe_factor, config_.min_bps, config_.max_bps);
}

void LossBasedEstimator::on_probe_result(uint64_t now_ns, uint64_t probed_bps, bool carried) {
  if (!policer_) return;
  if (!carried) {
    probe_not_before_ns_ = now_ns + config_.probe_after_ns;
    return;
  }
  // The path carried more than the ceiling: the cap lifted or rose. Back towards the rate before
  // it, fast; a loss on the way is a decrease as ever (and may find a new ceiling).
  policer_ = false;
  last_through_ = 0;
  recover_to_bps_ = std::max(before_policer_bps_, probed_bps);
  estimate_bps_ = clamp_bps(static_cast<double>(std::max(probed_bps, estimate_bps_)),
                            config_.min_bps, config_.max_bps);
  changed_ = true;
  last_change_ns_ = now_ns;
}

void LossBasedEstimator::note_throughput(uint64_t now_ns, double loss, uint64_t sending_bps,
                                         bool queue_seen) {
  if (sending_bps == 0) return;
  // A policer passes the same rate whatever is sent above it: two lossy reports in a row at
  // rates apart by more than twice the tolerance whose throughputs, R x (1 - p), agree within
  // it. Random and bursty loss scale with what is sent, so their throughputs stay as far apart
  // as the rates. (Comparing with more than the last lossy report found the qualification's
  // policer a see-saw sooner, but took 5 % Gilbert-Elliott loss for one in the simulation.)
  const double through = static_cast<double>(sending_bps) * (1 - loss);
  if (policer_ && loss >= config_.low_loss) {
    const double sent = static_cast<double>(sending_bps);
    const double ceiling = static_cast<double>(ceiling_bps_);
    if (sent < kUnderCeiling * static_cast<double>(found_ceiling_bps_) &&
        now_ns - last_decrease_ns_ >= kForgetAfterDecreaseNs) {
      // A policer loses nothing well under the ceiling it was found at: this loss is the
      // path's own (random or bursty loss whose throughputs happened to agree). Forget it.
      // Against the ceiling as it follows (below) instead, 5 % burst loss walked it down 10 %
      // a report to a twentieth of the path.
      policer_ = false;
      last_through_ = 0;
    } else if (sent >= config_.ceiling_margin * ceiling) {
      // At the margin or above it the ceiling follows what the policer passed: down by up to
      // kCeilingStep a report (a throughput measured high the first time left the target over
      // the cap, losing 6 % in the band for good), up by 5 % at most.
      ceiling_bps_ =
          static_cast<uint64_t>(std::clamp(through, ceiling * (1 - kCeilingStep), ceiling * 1.05));
    }
  }
  // Only loss above high_loss is a policer's evidence. At the band's 2 %, a 50-packet sample of
  // a low-rate stream on a 1 %-loss path is one lost packet, and two such in a row took that
  // path for a policer (then paced at its "ceiling", probed it, and kept FEC off its loss).
  if (loss <= config_.high_loss) return;
  const bool same_episode = last_through_ > 0 && now_ns - last_lossy_ns_ <= kEpisodeNs;
  lowest_through_ = same_episode ? std::min(lowest_through_, through) : through;
  last_lossy_ns_ = now_ns;
  const double tolerance = config_.policer_tolerance;
  if (!policer_ && last_through_ > 0 && !queue_seen) {
    const double rates = static_cast<double>(sending_bps) / static_cast<double>(last_sending_);
    const double throughs = through / last_through_;
    if (std::abs(rates - 1) > 2 * tolerance && std::abs(throughs - 1) <= tolerance) {
      probe_not_before_ns_ = now_ns + config_.probe_after_ns;
      policer_ = true;
      // The lowest throughput of the episode: the others carry some of the bucket's depth
      // (measured against a 10 Mbit/s policer with a 32-KB bucket: 10.3-11.7 Mbit/s).
      ceiling_bps_ = static_cast<uint64_t>(std::min({through, last_through_, lowest_through_}));
      found_ceiling_bps_ = ceiling_bps_;
    }
  }
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

void SendRateController::on_probe_result(uint64_t now_ns, uint64_t probed_bps, bool carried) {
  ++(carried ? counters_.probes_carried : counters_.probes_lost);
  loss_.on_probe_result(now_ns, probed_bps, carried);
  recompute();
}

void SendRateController::on_remb(uint64_t now_ns, uint64_t bitrate_bps) {
  ++counters_.rembs;
  const uint64_t remb = std::max(bitrate_bps, config_.min_bps);
  // The receiver saw a queue grow: not the moment to add to it.
  if (have_remb_ && double(remb) < kRembDecrease * double(remb_bps_)) {
    delay_probe_hold_until_ns_ = now_ns + config_.delay_probe_after_decrease_ns;
    remb_decreased_ = true;
    last_remb_decrease_ns_ = now_ns;
  }
  if (delay_probe_open_ && now_ns - delay_probe_ns_ < kProbeAnswerNs &&
      double(remb) >= kProbeRaise * double(remb_at_delay_probe_)) {
    delay_probe_open_ = false;
    ++counters_.delay_probes_raised;
  }
  have_remb_ = true;
  remb_bps_ = remb;
  recompute();
}

uint64_t SendRateController::delay_probe_bps(uint64_t now_ns) const {
  if (!config_.delay_probes || !delay_bound() || loss_.ceiling_bps() != 0) return 0;
  if (now_ns < delay_probe_hold_until_ns_) return 0;
  const bool due = !delay_probed_ || now_ns - delay_probe_ns_ >= config_.delay_probe_interval_ns ||
                   (now_ns - delay_probe_ns_ >= config_.delay_probe_continue_ns &&
                    double(remb_bps_) >= config_.delay_probe_climb * double(remb_at_delay_probe_));
  if (!due) return 0;
  return std::min(config_.max_bps, uint64_t(config_.delay_probe_factor * double(target_bps_)));
}

void SendRateController::on_delay_probe_sent(uint64_t now_ns) {
  ++counters_.delay_probes;
  delay_probed_ = true;
  delay_probe_open_ = true;
  delay_probe_ns_ = now_ns;
  remb_at_delay_probe_ = remb_bps_;
}

LossUpdate SendRateController::on_receiver_report(uint64_t now_ns, uint8_t fraction_lost_q8,
                                                  uint64_t rtt_ns, uint64_t sent_bps) {
  ++counters_.reports;
  const bool queue_seen = remb_decreased_ && now_ns - last_remb_decrease_ns_ < kQueueEvidenceNs;
  const LossUpdate update = loss_.on_report(now_ns, fraction_lost_q8, rtt_ns,
                                            sent_bps ? sent_bps : target_bps_, queue_seen);
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
