// What the relay's encoder makes of the bandwidth estimate (docs/wan.md, "Adaptive bitrate"): a
// bitrate and a picture size. The estimate is the whole send rate the path takes (the pacer's
// target); the encoder gets a share of it, the rest being FEC, retransmissions and headers, and
// steps its resolution down when that share is too few bits for the picture to look like
// anything (1080p -> 720p -> 540p from a 1080p source: 1, 2/3 and 1/2 of each side), and back up
// once the estimate has stayed above the next step's need for a while.
//
// Pure: no clocks or threads; times come in. Any one thread at a time (the main loop's).
#pragma once

#include <array>
#include <cstdint>

namespace syncd::egress {

struct EncodeLadderConfig {
  // The encoder's share of the estimate when the sender has not measured its own (on_estimate's
  // media_bps): FEC at 1-5 % loss takes 10-50 % of the media rate (docs/wan.md, "Figures": 0.17
  // at 1 %), RTP/SRTP headers ~3 %.
  double media_share = 0.8;
  uint32_t min_kbps = 300;
  uint32_t max_kbps = 20000;
  // Bits per pixel each step needs (at the stream's rate): below `down` the step is left; the
  // step above is taken when the rate has stayed over its `up` for up_hold_ns. x264 ultrafast at
  // 0.05 bit/pixel keeps a 1080p60 picture watchable (6.2 Mbit/s) and the column marker
  // readable; 0.07 to come back up leaves room so it does not flap.
  double down_bits_per_pixel = 0.05;
  double up_bits_per_pixel = 0.07;
  uint64_t up_hold_ns = 2'000'000'000;
  // The encoder's load: its worker's busy share of the wall clock over a window (encode time
  // per frame times the frame rate; CPU contention included). At `overload` or more it cannot
  // keep up with the source (frames wait, then are refused before it): one step down, and the
  // next not before overload_hold_ns (the re-open and its IDR pass). One step back up once the
  // load that step would have (this load times the area ratio) has stayed under `underload`
  // for underload_hold_ns. Like the bandwidth steps, the larger of the two wins.
  double overload = 0.85;
  double underload = 0.6;
  uint64_t overload_hold_ns = 1'000'000'000;
  uint64_t underload_hold_ns = 5'000'000'000;
};

struct EncodeTarget {
  uint32_t bitrate_kbps = 0;
  uint32_t width = 0;  // even
  uint32_t height = 0;
  uint32_t step = 0;  // 0: full size
};

class EncodeLadder {
 public:
  static constexpr uint32_t kSteps = 3;  // full, 2/3, 1/2 of each side

  EncodeLadder(uint32_t width, uint32_t height, double fps, EncodeLadderConfig config = {});

  // The estimate changed (bit/s, the pacer's target), and what of it the encoder may spend
  // (media_bps: the sender's measure; 0, the configured media_share of the estimate). Returns
  // the target from now on.
  const EncodeTarget& on_estimate(uint64_t now_ns, uint64_t estimate_bps, uint64_t media_bps = 0);
  // The encoder's load over the last window (see EncodeLadderConfig::overload), measured at the
  // size it encoded then. Returns the target from now on.
  const EncodeTarget& on_encoder_load(uint64_t now_ns, double load);
  const EncodeTarget& target() const { return target_; }
  // The bandwidth's steps, and the encoder load's.
  uint64_t steps_down() const { return steps_down_; }
  uint64_t steps_up() const { return steps_up_; }
  uint64_t load_steps_down() const { return load_steps_down_; }
  uint64_t load_steps_up() const { return load_steps_up_; }
  uint32_t load_step() const { return load_step_; }

 private:
  double need_kbps(uint32_t step, double bits_per_pixel) const;
  double area(uint32_t step) const { return double(widths_[step]) * heights_[step]; }
  // The target's step: the larger of the bandwidth's and the load's.
  void apply();

  EncodeLadderConfig config_;
  double fps_;
  std::array<uint32_t, kSteps> widths_{};
  std::array<uint32_t, kSteps> heights_{};
  EncodeTarget target_;
  uint32_t rate_step_ = 0;       // what the bandwidth allows
  uint64_t above_since_ns_ = 0;  // when the rate first stood above the next step's need
  bool above_ = false;
  uint64_t steps_down_ = 0;
  uint64_t steps_up_ = 0;
  uint32_t load_step_ = 0;  // what the encoder's load allows
  uint64_t load_stepped_ns_ = 0;
  bool load_stepped_ = false;
  uint64_t under_since_ns_ = 0;
  bool under_ = false;
  uint64_t load_steps_down_ = 0;
  uint64_t load_steps_up_ = 0;
};

}  // namespace syncd::egress
