// Trendline filter and overuse detector with an adaptive threshold
// (draft-ietf-rmcat-gcc-02 sections 5.3-5.4, with the trendline slope of later GCC in place of
// the draft's Kalman filter).
//
// Each group delta d(i) (inter_arrival.h) is accumulated into the one-way delay's change since
// the first group, exponentially smoothed, and a least-squares line is fitted through the last
// `window` points (arrival time, smoothed accumulated delay). Its slope (ms of queueing gained per
// ms) is positive while a queue grows. The slope, scaled by min(deltas, 60) x gain, is compared
// with a threshold gamma that follows |trend| itself (slowly up, faster down; section 5.4):
//     gamma(i) = gamma(i-1) + k x (|m(i)| - gamma(i-1)) x dt_ms,  k = k_up if |m| > gamma else
//     k_down
// so a path whose delay jitters all the time raises gamma and is not read as congested, and a
// quiet path lowers it and reacts early.
//
// Pure code: any thread; not thread-safe; one instance per received stream.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "congestion/inter_arrival.h"

namespace syncd::congestion {

enum class BandwidthUsage : uint8_t { kNormal, kUnderusing, kOverusing };

struct TrendlineConfig {
  size_t window = 20;                  // points in the regression (at most kMaxTrendlineWindow)
  double smoothing = 0.9;              // weight of the previous smoothed delay
  double gain = 4.0;                   // scales the slope before the threshold test
  double initial_threshold_ms = 12.5;  // gamma(0)
  double min_threshold_ms = 6.0;
  double max_threshold_ms = 600.0;
  double k_up = 0.0087;           // per ms, when |m| > gamma
  double k_down = 0.039;          // per ms, when |m| < gamma
  double overuse_time_ms = 10.0;  // m must stay above gamma this long to signal overuse
};

inline constexpr size_t kMaxTrendlineWindow = 64;

class TrendlineDetector {
 public:
  explicit TrendlineDetector(TrendlineConfig config = {});

  // Feeds one group delta; returns the detector's state after it.
  BandwidthUsage update(const GroupDelta& delta);

  void reset();

  BandwidthUsage state() const { return state_; }
  double slope() const { return slope_; }
  // The last m(i) = min(deltas, 60) x slope x gain, in ms.
  double modified_trend_ms() const { return modified_trend_ms_; }
  double threshold_ms() const { return threshold_ms_; }

 private:
  struct Point {
    double arrival_ms;
    double smoothed_delay_ms;
  };

  double fit_slope() const;
  void detect(double send_delta_ms, uint64_t now_ns);
  void adapt_threshold(double modified_trend_ms, uint64_t now_ns);

  TrendlineConfig config_;
  std::array<Point, kMaxTrendlineWindow> points_{};
  size_t points_head_ = 0;  // index of the oldest point
  size_t points_count_ = 0;
  uint32_t deltas_ = 0;
  bool have_first_ = false;
  uint64_t first_arrival_ns_ = 0;
  double accumulated_delay_ms_ = 0;
  double smoothed_delay_ms_ = 0;
  double slope_ = 0;
  double previous_slope_ = 0;
  double modified_trend_ms_ = 0;
  double threshold_ms_ = 12.5;
  uint64_t last_threshold_update_ns_ = 0;
  bool threshold_updated_ = false;
  double time_over_using_ms_ = -1;
  uint32_t overuse_count_ = 0;
  BandwidthUsage state_ = BandwidthUsage::kNormal;
};

}  // namespace syncd::congestion
