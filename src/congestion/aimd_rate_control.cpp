#include "congestion/aimd_rate_control.h"

#include <algorithm>
#include <cmath>

namespace syncd::congestion {

namespace {
constexpr double kCapacitySmoothing = 0.05;  // weight of a new sample in the mean and variance
constexpr double kMinCapacityVariance = 0.4;
constexpr double kMaxCapacityVariance = 2.5;
constexpr uint64_t kResponseTimeExtraNs = 100'000'000;  // response time = rtt + 100 ms
constexpr uint64_t kMinReductionIntervalNs = 10'000'000;
constexpr uint64_t kMaxReductionIntervalNs = 200'000'000;
constexpr double kMinAdditiveIncreaseBps = 4000;  // per second
constexpr double kIncomingHeadroom = 1.5;
constexpr double kIncomingHeadroomBps = 10'000;
}  // namespace

AimdRateControl::AimdRateControl(AimdConfig config)
    : config_(config), rtt_ns_(config.default_rtt_ns) {
  if (config_.max_bps < config_.min_bps) config_.max_bps = config_.min_bps;
  estimate_bps_ = std::clamp(config_.start_bps, config_.min_bps, config_.max_bps);
}

void AimdRateControl::set_rtt(uint64_t rtt_ns) {
  // An RTT of more than 10 s is not a measurement.
  if (rtt_ns > 0 && rtt_ns < 10'000'000'000ull) rtt_ns_ = rtt_ns;
}

uint64_t AimdRateControl::clamp_bounds(double bps) const {
  if (!(bps > static_cast<double>(config_.min_bps))) return config_.min_bps;
  if (bps >= static_cast<double>(config_.max_bps)) return config_.max_bps;
  return static_cast<uint64_t>(bps);
}

double AimdRateControl::capacity_upper_bound_bps() const {
  const double deviation_kbps = std::sqrt(capacity_variance_ * capacity_kbps_);
  return (capacity_kbps_ + 3 * deviation_kbps) * 1000;
}

double AimdRateControl::capacity_lower_bound_bps() const {
  const double deviation_kbps = std::sqrt(capacity_variance_ * capacity_kbps_);
  return (capacity_kbps_ - 3 * deviation_kbps) * 1000;
}

void AimdRateControl::learn_capacity(uint64_t incoming_bps) {
  const double sample_kbps = static_cast<double>(incoming_bps) / 1000;
  if (!capacity_valid_) {
    capacity_valid_ = true;
    capacity_kbps_ = sample_kbps;
    capacity_variance_ = kMinCapacityVariance;
  } else {
    capacity_kbps_ = (1 - kCapacitySmoothing) * capacity_kbps_ + kCapacitySmoothing * sample_kbps;
  }
  const double norm = std::max(capacity_kbps_, 1.0);
  const double error = capacity_kbps_ - sample_kbps;
  capacity_variance_ =
      (1 - kCapacitySmoothing) * capacity_variance_ + kCapacitySmoothing * error * error / norm;
  capacity_variance_ = std::clamp(capacity_variance_, kMinCapacityVariance, kMaxCapacityVariance);
}

bool AimdRateControl::may_decrease(uint64_t now_ns, uint64_t incoming_bps) const {
  if (!decreased_) return true;
  const uint64_t interval = std::clamp(rtt_ns_, kMinReductionIntervalNs, kMaxReductionIntervalNs);
  if (now_ns - last_decrease_ns_ >= interval) return true;
  // Much less arriving than estimated: the last decrease was not enough, do not wait.
  return incoming_bps < estimate_bps_ / 2;
}

uint64_t AimdRateControl::raise_to(uint64_t bps) {
  const uint64_t raised = clamp_bounds(double(bps));
  // The path carried more than a bottleneck found before: it has gone.
  if (ceiling_bps_ != 0 && raised > ceiling_bps_) ceiling_bps_ = 0;
  if (raised <= estimate_bps_) return estimate_bps_;
  estimate_bps_ = raised;
  // Past the last congestion point: the path got faster, as when the incoming rate passes it.
  if (capacity_valid_ && double(raised) > capacity_upper_bound_bps()) capacity_valid_ = false;
  return estimate_bps_;
}

uint64_t AimdRateControl::lower_to_bottleneck(uint64_t bps, uint64_t bottleneck_bps) {
  ceiling_bps_ = clamp_bounds(double(bps));
  estimate_bps_ = std::min(estimate_bps_, ceiling_bps_);
  learn_capacity(bottleneck_bps);
  state_ = AimdState::kHold;
  return estimate_bps_;
}

uint64_t AimdRateControl::update(uint64_t now_ns, BandwidthUsage usage,
                                 std::optional<uint64_t> incoming_bps) {
  switch (usage) {
    case BandwidthUsage::kOverusing:
      state_ = AimdState::kDecrease;
      break;
    case BandwidthUsage::kUnderusing:
      state_ = AimdState::kHold;
      break;
    case BandwidthUsage::kNormal:
      if (state_ == AimdState::kHold) state_ = AimdState::kIncrease;
      break;
  }
  // Time since the last update scales the increase; capped at 1 s so a gap cannot leap.
  const uint64_t elapsed_ns = updated_ && now_ns > last_update_ns_
                                  ? std::min<uint64_t>(now_ns - last_update_ns_, 1'000'000'000ull)
                                  : 0;
  updated_ = true;
  last_update_ns_ = now_ns;
  // Without a measured incoming rate there is nothing to decrease to and no headroom limit to
  // increase under: hold.
  if (!incoming_bps) return estimate_bps_;
  const uint64_t incoming = *incoming_bps;
  const double elapsed_s = static_cast<double>(elapsed_ns) / 1e9;

  switch (state_) {
    case AimdState::kHold:
      break;
    case AimdState::kIncrease: {
      if (capacity_valid_ && static_cast<double>(incoming) > capacity_upper_bound_bps()) {
        capacity_valid_ = false;  // the path got faster than the last congestion point
      }
      double next = static_cast<double>(estimate_bps_);
      if (capacity_valid_) {
        const double response_s = static_cast<double>(rtt_ns_ + kResponseTimeExtraNs) / 1e9;
        const double per_second =
            std::max(kMinAdditiveIncreaseBps, config_.packet_bytes * 8.0 / response_s);
        next += per_second * elapsed_s;
      } else {
        next *= std::pow(config_.increase_per_second, elapsed_s);
        next += 1000 * elapsed_s;  // at least 1 kbit/s per second, even from a tiny estimate
      }
      // Not above what the sender can be shown to use, nor past a bottleneck a probe found; but
      // an increase never lowers A.
      double limit = kIncomingHeadroom * static_cast<double>(incoming) + kIncomingHeadroomBps;
      if (ceiling_bps_ != 0) limit = std::min(limit, static_cast<double>(ceiling_bps_));
      if (next > limit) next = std::max(limit, static_cast<double>(estimate_bps_));
      estimate_bps_ = clamp_bounds(next);
      break;
    }
    case AimdState::kDecrease:
      if (may_decrease(now_ns, incoming)) {
        double next = config_.beta * static_cast<double>(incoming);
        if (next > static_cast<double>(estimate_bps_) && capacity_valid_) {
          // More arrived than estimated (a burst drained): go by the congestion point instead.
          next = config_.beta * capacity_kbps_ * 1000;
        }
        next = std::min(next, static_cast<double>(estimate_bps_));
        estimate_bps_ = clamp_bounds(next);
        // Congested well below the remembered point: the path got slower; start the memory
        // afresh rather than averaging the old capacity down over dozens of decreases.
        if (capacity_valid_ && static_cast<double>(incoming) < capacity_lower_bound_bps()) {
          capacity_valid_ = false;
        }
        learn_capacity(incoming);
        decreased_ = true;
        last_decrease_ns_ = now_ns;
        ++decreases_;
      }
      state_ = AimdState::kHold;
      break;
  }
  return estimate_bps_;
}

}  // namespace syncd::congestion
