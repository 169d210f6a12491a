// Orientation filter quality, next to the upstream bridge's filter on the same seeded samples
// (src/headtrack/filter_eval.h): yaw jitter at rest and time to 90% of a 30 degree step with a
// silent gyro, for sensor noise 0.1, 0.3 and 1 degree and reports at 25, 50 and 100 Hz; then what
// --smoothing trades at 25 Hz. Deterministic: no clock is read, the same seed prints the same
// table. Exit 1 if a cell misses issue 19's targets (90% within 80 ms in every trial, jitter no
// higher than upstream's).
//
// Run: headtrack_filter_bench [--seed N] [--smoothing S] [--gain HZ_PER_RAD_S]
//                             [--speed-cutoff HZ] [--knee RAD_S] [--trials N] [--sweep]
// --sweep searches smoothing x gain x speed cutoff x knee and prints the settings that meet the
// targets everywhere, steadiest first (how the defaults in FilterConfig were chosen).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "headtrack/filter_eval.h"
#include "headtrack/orientation.h"

using namespace syncd::headtrack;

namespace {

constexpr double kNoise[] = {0.1, 0.3, 1.0};
constexpr double kRate[] = {25, 50, 100};
constexpr double kT90LimitMs = 80;

struct Worst {
  double t90_max_ms = 0;    // slowest step over all cells
  double jitter_ratio = 0;  // largest ours / upstream over all cells
  double reach80_min = 1;   // least fraction of the step shown 80 ms after the turn
};

// Every cell; prints the table when print is set.
Worst run_table(const FilterConfig& fc, uint64_t seed, bool print, int step_trials) {
  Worst w;
  if (print) {
    std::printf(
        "noise  rate | jitter at rest (deg)      | time to 90%% of 30 deg step (ms)     | at 80 ms "
        "|\n"
        "(deg)  (Hz) | ours     upstream  ratio  | ours mean/max   upstream mean/max  | ours min | "
        "ok\n");
  }
  for (double noise : kNoise) {
    for (double rate : kRate) {
      EvalConfig e;
      e.seed = seed;
      e.noise_deg = noise;
      e.rate_hz = rate;
      e.step_trials = step_trials;
      const FilterMetrics ours = evaluate_filter(fc, e);
      const FilterMetrics up = evaluate_upstream(e);
      const double ratio = ours.jitter_deg / up.jitter_deg;
      w.t90_max_ms = std::max(w.t90_max_ms, ours.t90_max_ms);
      w.jitter_ratio = std::max(w.jitter_ratio, ratio);
      w.reach80_min = std::min(w.reach80_min, ours.reach80_min);
      if (print) {
        const bool ok = ours.t90_max_ms <= kT90LimitMs && ratio <= 1;
        std::printf(
            "%5.1f %5.0f | %7.4f  %7.4f   %5.2f  | %6.1f / %6.1f   %6.1f / %6.1f    | %6.1f%%  | "
            "%s\n",
            noise, rate, ours.jitter_deg, up.jitter_deg, ratio, ours.t90_mean_ms, ours.t90_max_ms,
            up.t90_mean_ms, up.t90_max_ms, 100 * ours.reach80_min, ok ? "yes" : "NO");
      }
    }
  }
  return w;
}

void smoothing_table(const FilterConfig& base, uint64_t seed) {
  std::printf(
      "\n--smoothing at 25 Hz, noise 0.3 deg: steadier at rest, more lag on a slow turn\n"
      "smoothing | jitter (deg) | t90 mean/max (ms) | lag at 20 deg/s (deg, ms)\n");
  EvalConfig e;
  e.seed = seed;
  const FilterMetrics up = evaluate_upstream(e);
  std::printf(" upstream | %8.4f     | %6.1f / %6.1f   | %5.2f  %5.0f\n", up.jitter_deg,
              up.t90_mean_ms, up.t90_max_ms, up.pan_lag_deg,
              up.pan_lag_deg / e.pan_deg_per_s * 1000);
  for (double s : {0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0}) {
    FilterConfig fc = base;
    fc.smoothing = s;
    const FilterMetrics m = evaluate_filter(fc, e);
    std::printf("   %4.2f%s | %8.4f     | %6.1f / %6.1f   | %5.2f  %5.0f\n", s,
                s == base.smoothing ? "*" : " ", m.jitter_deg, m.t90_mean_ms, m.t90_max_ms,
                m.pan_lag_deg, m.pan_lag_deg / e.pan_deg_per_s * 1000);
  }
  std::printf("(* = the setting above)\n");
}

void sweep(uint64_t seed) {
  std::printf(
      "smoothing  gain  speed-cutoff  knee | worst t90 (ms)  worst jitter/upstream  lag at 20 "
      "deg/s, 25 Hz (deg)\n");
  for (double s : {0.2, 0.3, 0.4}) {
    for (double gain : {2.0, 4.0, 8.0, 12.0, 16.0, 20.0}) {
      for (double fd : {0.4, 0.6, 0.8, 1.0, 1.5}) {
        for (double knee : {0.0, 0.5, 1.0, 2.0, 3.0}) {
          FilterConfig fc;
          fc.smoothing = s;
          fc.speed_gain_hz_per_rad_s = gain;
          fc.speed_cutoff_hz = fd;
          fc.speed_knee_rad_s = knee;
          // Fewer step trials keep the search quick; the table re-checks with all of them.
          const Worst w = run_table(fc, seed, false, 16);
          EvalConfig e;
          e.seed = seed;
          e.step_trials = 1;
          const double lag = evaluate_filter(fc, e).pan_lag_deg;
          std::printf("%9.2f  %4.1f  %12.1f  %4.1f | %14.1f  %8.3f  %6.2f %s\n", s, gain, fd, knee,
                      w.t90_max_ms, w.jitter_ratio, lag,
                      w.t90_max_ms <= kT90LimitMs && w.jitter_ratio <= 1 ? "meets" : "");
        }
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  FilterConfig fc;
  uint64_t seed = 1;
  bool do_sweep = false;
  int trials = 64;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (!std::strcmp(argv[i], "--sweep")) {
      do_sweep = true;
    } else if (!std::strcmp(argv[i], "--trials") && has_value) {
      trials = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--seed") && has_value) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (!std::strcmp(argv[i], "--smoothing") && has_value) {
      fc.smoothing = std::atof(argv[++i]);
    } else if (!std::strcmp(argv[i], "--gain") && has_value) {
      fc.speed_gain_hz_per_rad_s = std::atof(argv[++i]);
    } else if (!std::strcmp(argv[i], "--speed-cutoff") && has_value) {
      fc.speed_cutoff_hz = std::atof(argv[++i]);
    } else if (!std::strcmp(argv[i], "--knee") && has_value) {
      fc.speed_knee_rad_s = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--seed N] [--smoothing S] [--gain HZ_PER_RAD_S] "
                   "[--speed-cutoff HZ] [--knee RAD_S] [--trials N] [--sweep]\n",
                   argv[0]);
      return 2;
    }
  }
  if (do_sweep) {
    sweep(seed);
    return 0;
  }
  std::printf(
      "filter: smoothing %.2f (rest time constant %.0f ms), gain %.2f Hz per rad/s, speed "
      "cutoff %.2f Hz, knee %.2f rad/s;\nseed %llu; gyro silent; 60 s at rest, %d step trials\n",
      fc.smoothing, fc.smoothing * FilterConfig::kMaxRestTimeConstantS * 1000,
      fc.speed_gain_hz_per_rad_s, fc.speed_cutoff_hz, fc.speed_knee_rad_s, (unsigned long long)seed,
      trials);
  const Worst w = run_table(fc, seed, true, trials);
  smoothing_table(fc, seed);
  const bool ok = w.t90_max_ms <= kT90LimitMs && w.jitter_ratio <= 1;
  std::printf(
      "\nworst time to 90%%: %.1f ms (target <= %.0f; least reached at 80 ms %.1f%%); worst "
      "jitter vs upstream: %.2fx (target <= 1): %s\n",
      w.t90_max_ms, kT90LimitMs, 100 * w.reach80_min, w.jitter_ratio, ok ? "MET" : "MISSED");
  return ok ? 0 : 1;
}
