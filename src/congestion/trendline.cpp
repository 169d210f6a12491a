#include "congestion/trendline.h"

#include <algorithm>
#include <cmath>

namespace syncd::congestion {

namespace {
// m(i) scales with the number of deltas seen, up to this many, so a few early points cannot
// trip the detector (later GCC's kMinNumDeltas-style ramp).
constexpr uint32_t kMaxDeltasInTrend = 60;
// A |m| this far above gamma is a spike (a delay jump, a route change): gamma does not chase it.
constexpr double kThresholdSpikeMs = 15.0;
// gamma adapts at most over this much time per update, so a long silence cannot move it far.
constexpr double kMaxThresholdStepMs = 100.0;
}  // namespace

TrendlineDetector::TrendlineDetector(TrendlineConfig config) : config_(config) {
  config_.window = std::clamp<size_t>(config_.window, 2, kMaxTrendlineWindow);
  reset();
}

void TrendlineDetector::reset() {
  points_head_ = 0;
  points_count_ = 0;
  deltas_ = 0;
  have_first_ = false;
  first_arrival_ns_ = 0;
  accumulated_delay_ms_ = 0;
  smoothed_delay_ms_ = 0;
  slope_ = 0;
  previous_slope_ = 0;
  modified_trend_ms_ = 0;
  threshold_ms_ = config_.initial_threshold_ms;
  last_threshold_update_ns_ = 0;
  threshold_updated_ = false;
  time_over_using_ms_ = -1;
  overuse_count_ = 0;
  state_ = BandwidthUsage::kNormal;
}

double TrendlineDetector::fit_slope() const {
  double mean_x = 0, mean_y = 0;
  for (size_t i = 0; i < points_count_; ++i) {
    const Point& p = points_[(points_head_ + i) % kMaxTrendlineWindow];
    mean_x += p.arrival_ms;
    mean_y += p.smoothed_delay_ms;
  }
  mean_x /= static_cast<double>(points_count_);
  mean_y /= static_cast<double>(points_count_);
  double numerator = 0, denominator = 0;
  for (size_t i = 0; i < points_count_; ++i) {
    const Point& p = points_[(points_head_ + i) % kMaxTrendlineWindow];
    numerator += (p.arrival_ms - mean_x) * (p.smoothed_delay_ms - mean_y);
    denominator += (p.arrival_ms - mean_x) * (p.arrival_ms - mean_x);
  }
  // All points at one arrival time: no line through them; keep the last slope.
  if (!(denominator > 0) || !std::isfinite(numerator / denominator)) return slope_;
  return numerator / denominator;
}

BandwidthUsage TrendlineDetector::update(const GroupDelta& delta) {
  const double delay_ms = static_cast<double>(delta.arrival_delta_ns - delta.send_delta_ns) / 1e6;
  if (deltas_ < kMaxDeltasInTrend) ++deltas_;
  if (!have_first_) {
    have_first_ = true;
    first_arrival_ns_ = delta.arrival_ns;
  }
  accumulated_delay_ms_ += delay_ms;
  smoothed_delay_ms_ =
      config_.smoothing * smoothed_delay_ms_ + (1 - config_.smoothing) * accumulated_delay_ms_;
  const Point point{static_cast<double>(delta.arrival_ns - first_arrival_ns_) / 1e6,
                    smoothed_delay_ms_};
  if (points_count_ == config_.window) {
    points_head_ = (points_head_ + 1) % kMaxTrendlineWindow;
    --points_count_;
  }
  points_[(points_head_ + points_count_) % kMaxTrendlineWindow] = point;
  ++points_count_;
  if (points_count_ == config_.window) slope_ = fit_slope();

  detect(static_cast<double>(delta.send_delta_ns) / 1e6, delta.arrival_ns);
  return state_;
}

void TrendlineDetector::detect(double send_delta_ms, uint64_t now_ns) {
  const double modified = std::min<uint32_t>(deltas_, kMaxDeltasInTrend) * slope_ * config_.gain;
  modified_trend_ms_ = modified;
  if (modified > threshold_ms_) {
    // Overuse only once m has stayed above gamma for a while, over more than one delta, and is
    // not already falling (section 5.4: a single delayed group is not congestion).
    if (time_over_using_ms_ < 0) {
      time_over_using_ms_ = send_delta_ms / 2;
    } else {
      time_over_using_ms_ += send_delta_ms;
    }
    ++overuse_count_;
    if (time_over_using_ms_ > config_.overuse_time_ms && overuse_count_ > 1 &&
        slope_ >= previous_slope_) {
      time_over_using_ms_ = 0;
      overuse_count_ = 0;
      state_ = BandwidthUsage::kOverusing;
    }
  } else if (modified < -threshold_ms_) {
    time_over_using_ms_ = -1;
    overuse_count_ = 0;
    state_ = BandwidthUsage::kUnderusing;
  } else {
    time_over_using_ms_ = -1;
    overuse_count_ = 0;
    state_ = BandwidthUsage::kNormal;
  }
  previous_slope_ = slope_;
  adapt_threshold(modified, now_ns);
}

void TrendlineDetector::adapt_threshold(double modified_trend_ms, uint64_t now_ns) {
  if (!threshold_updated_) {
    threshold_updated_ = true;
    last_threshold_update_ns_ = now_ns;
  }
  const double magnitude = std::fabs(modified_trend_ms);
  if (magnitude > threshold_ms_ + kThresholdSpikeMs) {
    last_threshold_update_ns_ = now_ns;
    return;
  }
  const double k = magnitude < threshold_ms_ ? config_.k_down : config_.k_up;
  const double elapsed_ms =
      std::min(static_cast<double>(now_ns - last_threshold_update_ns_) / 1e6, kMaxThresholdStepMs);
  threshold_ms_ += k * (magnitude - threshold_ms_) * elapsed_ms;
  threshold_ms_ = std::clamp(threshold_ms_, config_.min_threshold_ms, config_.max_threshold_ms);
  last_threshold_update_ns_ = now_ns;
}

}  // namespace syncd::congestion
