#include "egress/encode_ladder.h"

#include <algorithm>
#include <cmath>

namespace syncd::egress {

namespace {
// x264 wants even sides (4:2:0); anything below 16 pixels is not worth a step.
uint32_t even_side(uint32_t full, uint32_t numerator, uint32_t denominator) {
  const uint32_t side = uint32_t(uint64_t(full) * numerator / denominator) & ~1u;
  return std::max<uint32_t>(side, std::min<uint32_t>(full & ~1u, 16));
}
}  // namespace

EncodeLadder::EncodeLadder(uint32_t width, uint32_t height, double fps, EncodeLadderConfig config)
    : config_(config), fps_(std::clamp(fps, 1.0, 240.0)) {
  static constexpr uint32_t kNumerator[kSteps] = {1, 2, 1};
  static constexpr uint32_t kDenominator[kSteps] = {1, 3, 2};
  for (uint32_t s = 0; s < kSteps; ++s) {
    widths_[s] = s == 0 ? width : even_side(width, kNumerator[s], kDenominator[s]);
    heights_[s] = s == 0 ? height : even_side(height, kNumerator[s], kDenominator[s]);
  }
  target_ = {config_.max_kbps, width, height, 0};
}

double EncodeLadder::need_kbps(uint32_t step, double bits_per_pixel) const {
  return double(widths_[step]) * heights_[step] * fps_ * bits_per_pixel / 1000.0;
}

const EncodeTarget& EncodeLadder::on_estimate(uint64_t now_ns, uint64_t estimate_bps,
                                              uint64_t media_bps) {
  const double share = media_bps > 0 ? double(media_bps) / 1000.0
                                     : double(estimate_bps) * config_.media_share / 1000.0;
  const uint32_t kbps = uint32_t(std::clamp(share, double(config_.min_kbps),
                                            double(std::max(config_.min_kbps, config_.max_kbps))));
  target_.bitrate_kbps = kbps;
  uint32_t step = rate_step_;
  // Down as far as needed, at once: a rate drop is a queue building now.
  while (step + 1 < kSteps && kbps < need_kbps(step, config_.down_bits_per_pixel)) ++step;
  if (step != rate_step_) {
    steps_down_ += step - rate_step_;
    above_ = false;
  } else if (step > 0 && kbps >= need_kbps(step - 1, config_.up_bits_per_pixel)) {
    // Up one step once the rate has held above that step's need.
    if (!above_) {
      above_ = true;
      above_since_ns_ = now_ns;
    } else if (now_ns - above_since_ns_ >= config_.up_hold_ns) {
      --step;
      ++steps_up_;
      above_ = false;
    }
  } else {
    above_ = false;
  }
  rate_step_ = step;
  apply();
  return target_;
}

const EncodeTarget& EncodeLadder::on_encoder_load(uint64_t now_ns, double load) {
  // The load was measured at the size encoded then (the target's step).
  const uint32_t measured = target_.step;
  const bool held = load_stepped_ && now_ns - load_stepped_ns_ < config_.overload_hold_ns;
  if (load >= config_.overload && !held) {
    if (std::max(measured, load_step_) + 1 < kSteps) {
      load_step_ = std::max(measured, load_step_) + 1;
      ++load_steps_down_;
      load_stepped_ = true;
      load_stepped_ns_ = now_ns;
    }
    under_ = false;
  } else if (load_step_ > 0 && measured == load_step_ &&
             load * area(load_step_ - 1) / area(load_step_) < config_.underload) {
    if (!under_) {
      under_ = true;
      under_since_ns_ = now_ns;
    } else if (now_ns - under_since_ns_ >= config_.underload_hold_ns) {
      --load_step_;
      ++load_steps_up_;
      under_ = false;
    }
  } else {
    under_ = false;
  }
  apply();
  return target_;
}

void EncodeLadder::apply() {
  const uint32_t step = std::max(rate_step_, load_step_);
  target_.step = step;
  target_.width = widths_[step];
  target_.height = heights_[step];
}

}  // namespace syncd::egress
