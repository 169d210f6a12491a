#include "headtrack/filter_eval.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace syncd::headtrack {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kDegToRad = kPi / 180.0;

// Standard normal deviates by Box-Muller: std::normal_distribution's algorithm is left to the
// library, which would make the traces (and the test thresholds) differ between toolchains.
class Gaussian {
 public:
  explicit Gaussian(uint64_t seed) : rng_(seed) {}
  double next() {
    if (have_spare_) {
      have_spare_ = false;
      return spare_;
    }
    // 53 random bits in (0, 1]: never 0, so the log is finite.
    const double u1 = double((rng_() >> 11) + 1) * 0x1.0p-53;
    const double u2 = double(rng_() >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2 * std::log(u1));
    spare_ = r * std::sin(2 * kPi * u2);
    have_spare_ = true;
    return r * std::cos(2 * kPi * u2);
  }

 private:
  std::mt19937_64 rng_;
  double spare_ = 0;
  bool have_spare_ = false;
};

// A noisy measurement of a head turned yaw_deg about +Z.
Quat noisy_yaw(double yaw_deg, double noise_deg, Gaussian& g) {
  const double sigma = noise_deg * kDegToRad;
  double r[3] = {sigma * g.next(), sigma * g.next(), yaw_deg * kDegToRad + sigma * g.next()};
  return quat_from_rotation_vector(r);
}

double yaw_deg(const Quat& q) {
  return head_euler(q).yaw / kDegToRad;
}

const double kSilentGyro[3] = {0, 0, 0};

// Seeds for the three traces, derived from one so that they are independent of one another.
uint64_t mix(uint64_t seed, uint64_t salt) {
  uint64_t z = seed + salt * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

template <typename Filter>
FilterMetrics evaluate(Filter& f, const EvalConfig& e) {
  FilterMetrics m;
  const double dt = 1.0 / e.rate_hz;

  // At rest: standard deviation of the output yaw (two-pass, for accuracy).
  {
    Gaussian g(mix(e.seed, 1));
    f.reset();
    const long n = std::lround(e.rest_seconds * e.rate_hz);
    const long skip = std::lround(e.warmup_seconds * e.rate_hz);
    std::vector<double> yaw;
    yaw.reserve(size_t(std::max(0L, n - skip)));
    for (long i = 0; i < n; ++i) {
      const Quat out =
          f.update(noisy_yaw(e.rest_yaw_deg, e.noise_deg, g), kSilentGyro, i == 0 ? 0.0 : dt);
      if (i >= skip) yaw.push_back(yaw_deg(out));
    }
    double mean = 0;
    for (double y : yaw) mean += y;
    mean /= double(yaw.size());
    double var = 0;
    for (double y : yaw) var += (y - mean) * (y - mean);
    m.jitter_deg = std::sqrt(var / double(yaw.size() - 1));
  }

  // Step: reports at k * dt, the head turns at (pre + phase) * dt. Time to 90% counts from the
  // turn, so it includes the wait for the first report that sees it, as a user would.
  {
    const long pre = std::lround(std::max(e.warmup_seconds, 0.5) * e.rate_hz);
    const long post = std::lround(1.0 * e.rate_hz);
    double sum = 0;
    m.t90_max_ms = 0;
    m.reach80_min = INFINITY;
    for (int trial = 0; trial < e.step_trials; ++trial) {
      // A seed per trial: how long a trial runs depends on the filter, and must not shift the
      // noise the next trial sees.
      Gaussian g(mix(e.seed, 100 + uint64_t(trial)));
      f.reset();
      const double t_step = (double(pre) + (trial + 0.5) / e.step_trials) * dt;
      double t90 = INFINITY;
      double reach80 = 0;
      for (long k = 0; k <= pre + post; ++k) {
        const double t = double(k) * dt;
        const double truth = t >= t_step ? e.step_deg : 0.0;
        const Quat out = f.update(noisy_yaw(truth, e.noise_deg, g), kSilentGyro, k == 0 ? 0.0 : dt);
        if (t < t_step) continue;
        const double fraction = yaw_deg(out) / e.step_deg;
        if (t - t_step <= 0.080) reach80 = fraction;
        if (fraction >= 0.9 && !std::isfinite(t90)) t90 = (t - t_step) * 1000;
        if (std::isfinite(t90) && t - t_step > 0.080) break;
      }
      sum += t90;
      m.t90_max_ms = std::max(m.t90_max_ms, t90);
      m.reach80_min = std::min(m.reach80_min, reach80);
    }
    m.t90_mean_ms = sum / e.step_trials;
  }

  // Slow pan: mean lag over the second half of a 4 s turn at a steady speed.
  {
    Gaussian g(mix(e.seed, 3));
    f.reset();
    const long n = std::lround(4.0 * e.rate_hz);
    double lag = 0;
    long counted = 0;
    for (long k = 0; k < n; ++k) {
      const double truth = e.pan_deg_per_s * double(k) * dt;
      const Quat out = f.update(noisy_yaw(truth, e.noise_deg, g), kSilentGyro, k == 0 ? 0.0 : dt);
      if (k >= n / 2) {
        lag += truth - yaw_deg(out);
        ++counted;
      }
    }
    m.pan_lag_deg = lag / double(counted);
  }
  return m;
}

}  // namespace

Quat UpstreamSlerpFilter::update(const Quat& measured, const double*, double) {
  if (!initialized_) {
    state_ = normalized(measured);
    initialized_ = true;
    return state_;
  }
  state_ = slerp(state_, measured, kAlpha);
  return state_;
}

FilterMetrics evaluate_filter(const FilterConfig& filter, const EvalConfig& eval) {
  OrientationFilter f(filter);
  return evaluate(f, eval);
}

FilterMetrics evaluate_upstream(const EvalConfig& eval) {
  UpstreamSlerpFilter f;
  return evaluate(f, eval);
}

}  // namespace syncd::headtrack
