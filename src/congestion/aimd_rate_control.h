// AIMD rate control of the delay-based estimate (draft-ietf-rmcat-gcc-02 section 5.5).
//
// The detector's signal drives a three-state machine:
//     overusing  -> Decrease: A = beta x R (R the measured incoming rate), at most once per
//                   reduction interval (about one RTT), then Hold;
//     underusing -> Hold: the queue is draining; keep A until it is empty;
//     normal     -> Increase (from Hold), else stay.
// Increase is multiplicative (eta per second, 25% by default) while far from the last point of
// congestion and additive (about one packet per response time, rtt + 100 ms) near it. "Near" is
// within three standard deviations of the incoming rates seen at overuse (kept in kbit/s with a
// variance normalised by the mean, as later GCC does); an incoming rate above that band means the
// path got faster and the memory is dropped; one below it at a decrease, that the path got slower.
// A is never raised above 1.5 x R + 10 kbit/s (the sender is not using it) and stays within
// [min_bps, max_bps].
//
// Pure code: any thread; not thread-safe; one instance per received stream.
#pragma once

#include <cstdint>
#include <optional>

#include "congestion/trendline.h"

namespace syncd::congestion {

struct AimdConfig {
  uint64_t min_bps = 300'000;
  uint64_t max_bps = 30'000'000;
  uint64_t start_bps = 8'000'000;
  double beta = 0.85;  // decrease to beta x incoming rate
  // eta: multiplicative increase per second far from convergence. The draft's 1.08 takes ~25 s
  // from 4 to 18 Mbit/s after a cap is lifted; 1.25 takes ~8-13 s with the same steady-state
  // queue delay (docs/wan.md, "Bandwidth estimate and pacing").
  double increase_per_second = 1.25;
  uint32_t packet_bytes = 1200;           // additive increase: one such packet per response time
  uint64_t default_rtt_ns = 100'000'000;  // until set_rtt() says otherwise
};

enum class AimdState : uint8_t { kHold, kIncrease, kDecrease };

class AimdRateControl {
 public:
  explicit AimdRateControl(AimdConfig config = {});

  // One detector signal at now_ns with the incoming rate measured then (empty while unknown).
  // Returns the estimate after it, in bit/s.
  uint64_t update(uint64_t now_ns, BandwidthUsage usage, std::optional<uint64_t> incoming_bps);

  void set_rtt(uint64_t rtt_ns);

  // A probe showed the path carrying bps (delay_based_estimator.h): the estimate goes up to it
  // (never down), and a last congestion point it passes is forgotten. Returns the estimate.
  uint64_t raise_to(uint64_t bps);
  // A probe found a bottleneck at bottleneck_bps: the estimate goes down to bps if above it, the
  // bottleneck's rate is a congestion point, and bps a ceiling no increase passes until a probe
  // is carried past it (raise_to). Without the ceiling, AIMD's capacity memory lapsed on an IDR's
  // burst of incoming rate and its 25 % a second took the estimate over a 10 Mbit/s shaper's cap
  // within a second, in 5 % of the samples of one run. Returns the estimate.
  uint64_t lower_to_bottleneck(uint64_t bps, uint64_t bottleneck_bps);
  // The ceiling a probe found (0: none).
  uint64_t ceiling_bps() const { return ceiling_bps_; }

  uint64_t estimate_bps() const { return estimate_bps_; }
  AimdState state() const { return state_; }
  bool near_convergence() const { return capacity_valid_; }
  // The mean incoming rate at overuse, bit/s (0 while unknown).
  uint64_t capacity_estimate_bps() const {
    return capacity_valid_ ? static_cast<uint64_t>(capacity_kbps_ * 1000) : 0;
  }
  uint64_t decreases() const { return decreases_; }

 private:
  bool may_decrease(uint64_t now_ns, uint64_t incoming_bps) const;
  void learn_capacity(uint64_t incoming_bps);
  double capacity_upper_bound_bps() const;
  double capacity_lower_bound_bps() const;
  uint64_t clamp_bounds(double bps) const;

  AimdConfig config_;
  uint64_t estimate_bps_;
  AimdState state_ = AimdState::kHold;
  uint64_t rtt_ns_;
  bool updated_ = false;
  uint64_t last_update_ns_ = 0;
  bool decreased_ = false;
  uint64_t last_decrease_ns_ = 0;
  uint64_t decreases_ = 0;
  bool capacity_valid_ = false;
  double capacity_kbps_ = 0;
  double capacity_variance_ = 0.4;  // normalised by capacity_kbps_
  uint64_t ceiling_bps_ = 0;
};

}  // namespace syncd::congestion
