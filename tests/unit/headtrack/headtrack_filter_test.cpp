// The orientation filter's two promises from issue 19, on the seeded traces of
// src/headtrack/filter_eval.h: with a silent gyro it reaches 90% of a 30 degree step within 80 ms,
// and its yaw jitter at rest stays below the upstream filter's on the same samples, for noise 0.1,
// 0.3 and 1 degree at 25, 50 and 100 Hz. Deterministic: seeded noise, dt passed in, no clock.
//
// Thresholds come from the table in docs/headtracker.md (headtrack_filter_bench), with margin:
// worst mean time to 90% there is 35 ms (limit 45); worst jitter 0.70x upstream's (limit 0.85x);
// 0.052 degree at 0.3 degree and 25 Hz (limit 0.065). The worst single trial takes 79 ms (limit
// 80, the target): at 25 Hz a trial may need the second report, which comes at most 80 ms
// after the turn, so the margin is in how far the output has got by 80 ms: at least 93.6% of the
// step (limit 91%; 97.7% and limit 95% below 1 degree of noise). With 1 degree of noise a sample
// is itself 3 degrees (10%) low about once in 740, so a longer run (--trials 2000) finds a trial
// at 88%.
#include <gtest/gtest.h>

#include <cmath>

#include "headtrack/filter_eval.h"
#include "headtrack/orientation.h"

namespace syncd::headtrack {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kNoise[] = {0.1, 0.3, 1.0};
constexpr double kRate[] = {25, 50, 100};

double angle_between(const Quat& a, const Quat& b) {
  const Quat d = multiply(conjugate(normalized(a)), normalized(b));
  return 2 * std::atan2(std::sqrt(d.x * d.x + d.y * d.y + d.z * d.z), std::fabs(d.w));
}

Quat yaw_quat(double deg) {
  const double r[3] = {0, 0, deg * kPi / 180};
  return quat_from_rotation_vector(r);
}

TEST(FilterQuality, StepReaches90PercentWithin80msSilentGyro) {
  for (double noise : kNoise) {
    for (double rate : kRate) {
      EvalConfig e;
      e.noise_deg = noise;
      e.rate_hz = rate;
      const FilterMetrics m = evaluate_filter(FilterConfig{}, e);
      EXPECT_LE(m.t90_max_ms, 80.0) << noise << " deg, " << rate << " Hz";
      EXPECT_LE(m.t90_mean_ms, 45.0) << noise << " deg, " << rate << " Hz";
      EXPECT_GE(m.reach80_min, noise < 1 ? 0.95 : 0.91) << noise << " deg, " << rate << " Hz";
      // The model of upstream really is the slow one the issue measured (~460 ms at 25 Hz).
      EXPECT_GT(evaluate_upstream(e).t90_mean_ms, 100.0) << noise << " deg, " << rate << " Hz";
    }
  }
}

TEST(FilterQuality, SteadierAtRestThanUpstream) {
  for (double noise : kNoise) {
    for (double rate : kRate) {
      EvalConfig e;
      e.noise_deg = noise;
      e.rate_hz = rate;
      const double ours = evaluate_filter(FilterConfig{}, e).jitter_deg;
      const double upstream = evaluate_upstream(e).jitter_deg;
      EXPECT_LE(ours, 0.85 * upstream) << noise << " deg, " << rate << " Hz";
    }
  }
  // The reference case: upstream 0.094 here (0.082 on the shorter replay), the
  // filter before this one 0.206.
  EvalConfig e;
  EXPECT_LE(evaluate_filter(FilterConfig{}, e).jitter_deg, 0.065);
  EXPECT_NEAR(evaluate_upstream(e).jitter_deg, 0.094, 0.01);
}

// Other seeds, shorter traces: the margins are not an accident of seed 1.
TEST(FilterQuality, HoldsForOtherSeeds) {
  for (uint64_t seed = 2; seed <= 6; ++seed) {
    for (double noise : kNoise) {
      for (double rate : kRate) {
        EvalConfig e;
        e.seed = seed;
        e.noise_deg = noise;
        e.rate_hz = rate;
        e.rest_seconds = 30;
        e.step_trials = 16;
        const FilterMetrics m = evaluate_filter(FilterConfig{}, e);
        EXPECT_LE(m.t90_max_ms, 80.0) << seed << ": " << noise << " deg, " << rate << " Hz";
        EXPECT_LE(m.jitter_deg, 0.95 * evaluate_upstream(e).jitter_deg)
            << seed << ": " << noise << " deg, " << rate << " Hz";
      }
    }
  }
}

TEST(FilterQuality, Deterministic) {
  EvalConfig e;
  e.noise_deg = 1;
  const FilterMetrics a = evaluate_filter(FilterConfig{}, e);
  const FilterMetrics b = evaluate_filter(FilterConfig{}, e);
  EXPECT_EQ(a.jitter_deg, b.jitter_deg);
  EXPECT_EQ(a.t90_max_ms, b.t90_max_ms);
  EXPECT_EQ(a.pan_lag_deg, b.pan_lag_deg);
}

// What --smoothing trades: more of it is steadier at rest and lags more on a slow turn, while a
// fast turn (the step) stays fast.
TEST(FilterQuality, SmoothingTradesJitterForSlowTurnLag) {
  EvalConfig e;  // 25 Hz, 0.3 degree
  FilterMetrics previous;
  bool first = true;
  for (double s : {0.1, 0.2, 0.3, 0.5, 1.0}) {
    FilterConfig fc;
    fc.smoothing = s;
    const FilterMetrics m = evaluate_filter(fc, e);
    if (!first) {
      EXPECT_LT(m.jitter_deg, previous.jitter_deg) << s;
      EXPECT_GT(m.pan_lag_deg, previous.pan_lag_deg) << s;
    }
    EXPECT_LE(m.t90_max_ms, 80.0) << s;
    previous = m;
    first = false;
  }
  // Even the heaviest lags a 20 degree/s turn less than upstream (3.7 degrees).
  EXPECT_LT(previous.pan_lag_deg, evaluate_upstream(e).pan_lag_deg);
}

TEST(Filter, NoSmoothingPassesThrough) {
  FilterConfig fc;
  fc.smoothing = 0;
  OrientationFilter f(fc);
  f.update(Quat{}, nullptr, 0);
  const Quat out = f.update(yaw_quat(7), nullptr, 0.04);
  EXPECT_LT(angle_between(out, yaw_quat(7)), 1e-12);
}

// A reporting gyro sets the speed, not the estimate from orientations.
TEST(Filter, ReportingGyroSetsTheSpeed) {
  OrientationFilter f;
  const double slow[3] = {0, 0, 0.01};
  f.update(Quat{}, slow, 0);
  // The orientation jumps 5 degrees, but the gyro says the head is nearly still: smooth it.
  Quat out = f.update(yaw_quat(5), slow, 0.04);
  EXPECT_FALSE(f.gyro_silent());
  EXPECT_DOUBLE_EQ(f.angular_speed(), 0.01);
  EXPECT_LT(angle_between(out, Quat{}), 0.1 * 5 * kPi / 180);
  // The gyro reports a fast turn: the filter opens at once, no estimate to wait for.
  const double fast[3] = {0, 0, 3.0};
  out = f.update(yaw_quat(10), fast, 0.04);
  EXPECT_NEAR(f.angular_speed(), 3.0, 1e-12);
  EXPECT_GT(f.cutoff_hz(), 30.0);  // 16 Hz/(rad/s) * 9 / 4 + rest
  EXPECT_LT(angle_between(out, yaw_quat(10)), 0.01 * 10 * kPi / 180);
}

// The cutoff law: rest cutoff from smoothing, plus gain * v^2 / (v + knee).
TEST(Filter, CutoffFollowsKneedSpeed) {
  FilterConfig fc;
  OrientationFilter f(fc);
  const double gyro[3] = {0, 2.0, 0};
  f.update(Quat{}, gyro, 0);
  f.update(Quat{}, gyro, 0.02);
  const double rest = 1 / (2 * kPi * fc.smoothing * FilterConfig::kMaxRestTimeConstantS);
  const double v = 2.0;
  EXPECT_NEAR(f.cutoff_hz(), rest + fc.speed_gain_hz_per_rad_s * v * v / (v + fc.speed_knee_rad_s),
              1e-9);
  const double still[3] = {0, 1e-3, 0};
  f.update(Quat{}, still, 0.02);
  EXPECT_NEAR(f.cutoff_hz(), rest, 1e-4);  // gyro noise and bias stay below the knee
}

TEST(Filter, FiniteOnHugeSpeeds) {
  OrientationFilter f;
  const double huge[3] = {1e150, 1e150, 0};  // |gyro| finite, its square is not
  f.update(Quat{}, huge, 0);
  const Quat out = f.update(yaw_quat(90), huge, 1e-6);
  EXPECT_TRUE(std::isfinite(out.w) && std::isfinite(out.z));
  EXPECT_LT(angle_between(out, yaw_quat(90)), 1e-9);
  const Quat back = f.update(yaw_quat(-90), nullptr, 1e-6);  // 180 degrees in 100 us
  EXPECT_TRUE(std::isfinite(back.w) && std::isfinite(back.z));
}

}  // namespace
}  // namespace syncd::headtrack
