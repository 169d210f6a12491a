#include "jitter/clock_skew.h"

#include <algorithm>
#include <cmath>

namespace syncd::jitter {

uint64_t ntp_to_ns(uint64_t ntp) {
  const uint64_t seconds = ntp >> 32;
  const uint64_t fraction = ntp & 0xffffffffu;
  // 2^32 fractions per second; rounded to the nearest nanosecond.
  return seconds * 1'000'000'000 + ((fraction * 1'000'000'000 + (uint64_t{1} << 31)) >> 32);
}

ClockSkewEstimator::ClockSkewEstimator(const ClockSkewConfig& config) : config_(config) {
  if (config_.clock_rate_hz == 0) config_.clock_rate_hz = 90000;
  config_.buckets = std::clamp<uint32_t>(config_.buckets, 2, 4096);
  config_.bucket_ns = std::max<uint64_t>(config_.bucket_ns, 1'000'000);
  minima_.resize(config_.buckets);
  fit_scratch_.resize(config_.buckets);
  residual_scratch_.resize(config_.buckets);
}

void ClockSkewEstimator::restart() {
  head_ = 0;
  count_ = 0;
  slope_ = 0;
  intercept_ = 0;
}

bool ClockSkewEstimator::on_sender_report(uint64_t sender_ns, uint32_t rtp_timestamp,
                                          uint64_t arrival_ns) {
  constexpr uint64_t kHour = 3'600'000'000'000;
  constexpr uint64_t kTimeLimit = uint64_t{1} << 62;  // keeps the int64 arithmetic below exact
  if (sender_ns >= kTimeLimit || arrival_ns >= kTimeLimit) {
    ++counters_.refused_out_of_order;
    return false;
  }
  if (count_ > 0) {
    if (sender_ns <= last_sender_ns_) {
      ++counters_.refused_out_of_order;
      return false;
    }
    if (sender_ns - last_sender_ns_ > kHour) {
      ++counters_.refused_jump;
      restart();
    }
  }
  if (count_ == 0) {
    origin_sender_ns_ = sender_ns;
    origin_arrival_ns_ = static_cast<int64_t>(arrival_ns);
  }
  ++counters_.reports;
  last_sender_ns_ = sender_ns;
  last_rtp_ = rtp_timestamp;

  const Sample sample{static_cast<double>(sender_ns - origin_sender_ns_),
                      static_cast<double>(static_cast<int64_t>(arrival_ns) - origin_arrival_ns_) -
                          static_cast<double>(sender_ns - origin_sender_ns_)};
  const uint64_t bucket = (sender_ns - origin_sender_ns_) / config_.bucket_ns;
  if (count_ > 0 && bucket == current_bucket_) {
    Sample& newest = minima_[(head_ + count_ - 1) % minima_.size()];
    if (sample.delay < newest.delay) newest = sample;
  } else {
    if (count_ == minima_.size()) {
      head_ = (head_ + 1) % minima_.size();
      --count_;
    }
    minima_[(head_ + count_) % minima_.size()] = sample;
    ++count_;
    current_bucket_ = bucket;
  }
  refit();
  return true;
}

void ClockSkewEstimator::refit() {
  const Sample& oldest = minima_[head_];
  const Sample& newest = minima_[(head_ + count_ - 1) % minima_.size()];
  const double span = newest.sender - oldest.sender;
  if (count_ < 3 || span < static_cast<double>(config_.min_span_ns)) {
    // Too short to tell a rate from the jitter: nominal rate, offset from the lowest delay.
    slope_ = 0;
    double lowest = oldest.delay;
    for (size_t i = 0; i < count_; ++i) {
      lowest = std::min(lowest, minima_[(head_ + i) % minima_.size()].delay);
    }
    intercept_ = lowest;
    return;
  }
  size_t used = count_;
  for (size_t i = 0; i < count_; ++i) fit_scratch_[i] = minima_[(head_ + i) % minima_.size()];
  for (int pass = 0; pass < 2; ++pass) {
    // Least squares about the means, which keeps the sums well conditioned.
    double mean_x = 0;
    double mean_y = 0;
    for (size_t i = 0; i < used; ++i) {
      mean_x += fit_scratch_[i].sender;
      mean_y += fit_scratch_[i].delay;
    }
    mean_x /= static_cast<double>(used);
    mean_y /= static_cast<double>(used);
    double sxx = 0;
    double sxy = 0;
    for (size_t i = 0; i < used; ++i) {
      const double dx = fit_scratch_[i].sender - mean_x;
      sxx += dx * dx;
      sxy += dx * (fit_scratch_[i].delay - mean_y);
    }
    const double max_slope = config_.max_skew_ppm * 1e-6;
    slope_ = sxx > 0 ? std::clamp(sxy / sxx, -max_slope, max_slope) : 0;
    intercept_ = mean_y - slope_ * mean_x;
    if (pass == 1 || used < 8) break;
    // Refit without the highest quarter of residuals: buckets whose every report was queued.
    for (size_t i = 0; i < used; ++i) {
      residual_scratch_[i] = fit_scratch_[i].delay - (intercept_ + slope_ * fit_scratch_[i].sender);
    }
    const auto begin = residual_scratch_.begin();
    const size_t keep = used - used / 4;
    std::nth_element(begin, begin + (keep - 1), begin + used);
    const double cut = begin[keep - 1];
    size_t kept = 0;
    for (size_t i = 0; i < used; ++i) {
      const double residual =
          fit_scratch_[i].delay - (intercept_ + slope_ * fit_scratch_[i].sender);
      if (residual <= cut && kept < keep) fit_scratch_[kept++] = fit_scratch_[i];
    }
    used = kept;
  }
  // The line through the minima still sits above the true lowest delay by the minima's own
  // spread; shift it down to the lowest point so it marks the fastest path.
  double lowest_residual = 0;
  for (size_t i = 0; i < count_; ++i) {
    const Sample& point = minima_[(head_ + i) % minima_.size()];
    lowest_residual = std::min(lowest_residual, point.delay - (intercept_ + slope_ * point.sender));
  }
  intercept_ += lowest_residual;
}

double ClockSkewEstimator::skew_ppm() const {
  // delay = arrival - sender grows by slope per sender ns: our clock advances (1 + slope) per
  // sender ns, so the sender runs 1 / (1 + slope) times ours.
  return (1.0 / (1.0 + slope_) - 1.0) * 1e6;
}

double ClockSkewEstimator::local_ns_per_tick() const {
  return (1.0 + slope_) * 1e9 / config_.clock_rate_hz;
}

int64_t ClockSkewEstimator::local_ns_for_sender_ns(uint64_t sender_ns) const {
  const double sender = static_cast<double>(static_cast<int64_t>(sender_ns - origin_sender_ns_));
  const double local = sender + intercept_ + slope_ * sender;
  return origin_arrival_ns_ + static_cast<int64_t>(std::llround(local));
}

int64_t ClockSkewEstimator::local_ns_for_rtp(uint32_t rtp_timestamp) const {
  // RTP ticks at the nominal rate of the sender's own clock, the one its NTP time reads.
  const auto ticks = static_cast<int32_t>(rtp_timestamp - last_rtp_);
  const int64_t sender_offset =
      static_cast<int64_t>(ticks) * 1'000'000'000 / static_cast<int64_t>(config_.clock_rate_hz);
  return local_ns_for_sender_ns(last_sender_ns_ + static_cast<uint64_t>(sender_offset));
}

}  // namespace syncd::jitter
