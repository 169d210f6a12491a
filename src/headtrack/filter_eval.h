// Measures orientation filters on seeded synthetic traces, so that the filter's two promises (fast
// on a turn, steady at rest) are numbers that a benchmark prints and unit tests assert, next to
// the upstream bridge's filter fed the very same samples.
//
// Traces follow issue 19: the head still (yaw 10 degrees) or stepping 30 degrees in yaw, Gaussian
// noise added to each rotation-vector component, reports at a fixed rate, gyro silent (all
// zeros, as one XM5 firmware reports). Noise comes from std::mt19937_64 (whose output the
// standard fixes) through Box-Muller written here, so a seed gives the same trace everywhere.
//
// Test and benchmark code: it allocates and is not meant for the real-time path. Every function
// may be called from any thread; nothing is shared between calls.
#pragma once

#include <cstdint>

#include "headtrack/orientation.h"

namespace syncd::headtrack {

// Model of the upstream bridge's filter with a silent gyro: slerp towards each sample by a fixed
// 0.18, whatever the report rate. (Upstream raises alpha with the gyro's speed; with a silent gyro
// that branch never runs, so it is not modelled.) Owned by one thread.
class UpstreamSlerpFilter {
 public:
  static constexpr double kAlpha = 0.18;
  void reset() { initialized_ = false; }
  Quat update(const Quat& measured, const double* gyro, double dt_s);

 private:
  bool initialized_ = false;
  Quat state_;
};

struct EvalConfig {
  double rate_hz = 25;
  double noise_deg = 0.3;  // standard deviation per rotation-vector axis
  uint64_t seed = 1;
  double rest_seconds = 60;  // stationary trace; the first warmup_seconds are not scored
  double warmup_seconds = 2;
  double rest_yaw_deg = 10;
  double step_deg = 30;
  // Step trials: each has its own noise and puts the step at another point between two reports,
  // spread evenly over one report interval, so the worst case includes waiting for the report.
  int step_trials = 64;
  double pan_deg_per_s = 20;  // slow turn used for the lag figure
};

struct FilterMetrics {
  double jitter_deg = 0;   // standard deviation of the output yaw at rest
  double t90_mean_ms = 0;  // from the step to the first output at >= 90% of it
  double t90_max_ms = 0;   // infinite if some trial never got there
  // Least fraction of the step shown by the last report within 80 ms of the turn, over all
  // trials: the margin behind t90_max_ms <= 80 (at 25 Hz that report can be just the second).
  double reach80_min = 0;
  double pan_lag_deg = 0;  // mean yaw lag behind a steady pan at pan_deg_per_s
};

// Any thread. The same config (rate, noise, seed) gives both filters identical samples.
FilterMetrics evaluate_filter(const FilterConfig& filter, const EvalConfig& eval);
FilterMetrics evaluate_upstream(const EvalConfig& eval);

}  // namespace syncd::headtrack
