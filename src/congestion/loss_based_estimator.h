// The sender's loss-based estimate from RTCP receiver reports (draft-ietf-rmcat-gcc-02
// section 6), and the sender's target rate: the lower of it and the receiver's REMB.
//
// From each RR's fraction lost p (RFC 3550 section 6.4.1, 8-bit fixed point):
//     p < 2%        A = 1.08 x A        (the path carries what is sent)
//     2% <= p <= 10% hold
//     p > 10%       A = R x (1 - 0.5 p) (R the rate that was being sent)
// at most once per update interval (max(min_update_interval, 2 x RTT)), since the next RR still
// counts losses from before the last change.
//
// A policer (a token bucket with no queue in front) drops whatever exceeds its rate and adds no
// delay, so only this rule sees it, and the plain rule see-saws across it or holds above it:
// halving the loss from 30 Mbit/s against a 10 Mbit/s policer stops in the band at ~10.6,
// losing 5 % for good (measured 4.2-16.2 Mbit/s and 78 % of the frames shown). A policer's mark
// is its throughput, R x (1 - p): the same whatever is sent above it, where random loss scales
// with the rate. Once two reports in a row of loss above high_loss, at rates more than 2 x
// policer_tolerance apart agree on it within policer_tolerance, that throughput is the ceiling: a
// decrease goes to ceiling_margin of it at once, loss at or above the margin is a decrease too (and
// the ceiling follows what passed), and an increase stops at the margin. Loss well under the
// ceiling as found means there was none: it is forgotten. Probing past the ceiling, to find a cap
// lifted or raised: a sender that can probes with padding on top of the target (padding_probes; the
// relay's): probe_bps() says when and how fast (probe_factor x the ceiling, probe_after_ns after
// the last decrease or failed probe), on_probe_result() what came of it. Probes of the encoder's
// own rate lost packets for a report or two each and pulled the target down again, a see-saw
// every few seconds (measured: 84-92 % of the frames shown, the target over the cap 12-31 % of
// the time). A probe the path carried forgets the ceiling; the estimate takes the probed rate
// and climbs by recovery_factor a report, not 8 %, back to where it was before the cap (or
// until it loses). Without padding_probes the estimate itself goes on past the margin at the
// usual 8 % once probe_after_ns have passed without a decrease (WHEP's viewers).
// A path without a policer keeps GCC's rule as it is.
//
// Pure code: any thread; not thread-safe; one instance per sent session (the relay thread's).
#pragma once

#include <cstdint>

namespace syncd::congestion {

struct LossEstimatorConfig {
  uint64_t min_bps = 300'000;
  uint64_t max_bps = 30'000'000;
  uint64_t start_bps = 8'000'000;
  double low_loss = 0.02;   // below: increase
  double high_loss = 0.10;  // above: decrease
  double increase_factor = 1.08;
  uint64_t min_update_interval_ns = 300'000'000;
  double ceiling_margin = 0.9;
  double policer_tolerance = 0.05;
  // Probing past a policer's ceiling (above): with padding, by a sender that can (the relay's:
  // probe_bps(), on_probe_result()), or else with the estimate itself.
  bool padding_probes = false;
  uint64_t probe_after_ns = 1'500'000'000;
  double probe_factor = 1.25;
  double recovery_factor = 1.25;
};

enum class LossUpdate : uint8_t {
  kIncreased,
  kHeld,  // loss between the two thresholds
  kDecreased,
  kTooSoon,  // a change within the update interval of the last one: ignored
};

class LossBasedEstimator {
 public:
  explicit LossBasedEstimator(LossEstimatorConfig config = {});

  // One receiver report: fraction_lost_q8 as in the RR block (lost / expected x 256), the RTT
  // from its LSR/DLRR, and the rate the sender was sending at (the target it paced to; 0 when
  // unknown, then the estimate itself is the base of a decrease). queue_seen: the receiver's
  // delay-based estimate saw a queue grow around this loss (its REMB fell), so the loss is a
  // queue's overflow, a shaper's, and no evidence of a policer, which adds no delay.
  LossUpdate on_report(uint64_t now_ns, uint8_t fraction_lost_q8, uint64_t rtt_ns,
                       uint64_t sending_bps, bool queue_seen = false);

  uint64_t estimate_bps() const { return estimate_bps_; }
  // A policer's ceiling (0 while none is known).
  uint64_t ceiling_bps() const { return policer_ ? ceiling_bps_ : 0; }

  // The rate a probe past the ceiling should send at (target and padding together) when one is
  // due at now_ns; 0 when none is (no policer known, or too soon).
  uint64_t probe_bps(uint64_t now_ns) const;
  // How a probe at probed_bps went: carried (no loss among what was sent while it ran) or not.
  // Not carried, the next one waits probe_after_ns; the estimate is unchanged (the sender
  // stopped the padding at the first loss).
  void on_probe_result(uint64_t now_ns, uint64_t probed_bps, bool carried);

 private:
  void note_throughput(uint64_t now_ns, double loss, uint64_t sending_bps, bool queue_seen);

  LossEstimatorConfig config_;
  uint64_t estimate_bps_;
  uint64_t ceiling_bps_ = 0;
  uint64_t probe_not_before_ns_ = 0;
  bool policer_ = false;  // a policer's ceiling is known (above)
  // The rate its loss episode began at when the policer was found: a carried probe climbs back
  // to it by recovery_factor (recover_to_bps_; 0: not recovering).
  uint64_t before_policer_bps_ = 0;
  uint64_t recover_to_bps_ = 0;
  static constexpr double kCeilingStep = 0.1;
  static constexpr double kUnderCeiling = 0.8;
  uint64_t found_ceiling_bps_ = 0;  // the ceiling as first found (the forget rule's reference)
  // Not forgotten within this of a decrease: a sample that spans one holds the loss of packets
  // sent at the rate before it, averaged with the lower rate after (measured: a policer found
  // and forgotten 0.25 s later, the target then back over the cap for 1.5 s).
  static constexpr uint64_t kForgetAfterDecreaseNs = 1'000'000'000;
  uint64_t last_decrease_ns_ = 0;
  double last_through_ = 0;     // the last lossy report's R x (1 - p), and its R
  double lowest_through_ = 0;   // the lowest R x (1 - p) of this loss episode
  uint64_t last_lossy_ns_ = 0;  // when the last report with loss above high_loss came
  uint64_t last_sending_ = 0;
  // Loss episodes: the rate the last one began at (its first report of loss above high_loss
  // after kEpisodeNs without one), where a lifted cap lets the rate go back.
  static constexpr uint64_t kEpisodeNs = 10'000'000'000;
  bool heavy_loss_seen_ = false;
  uint64_t heavy_loss_ns_ = 0;
  uint64_t episode_start_bps_ = 0;
  bool changed_ = false;
  uint64_t last_change_ns_ = 0;
};

struct SendRateConfig {
  uint64_t min_bps = 300'000;
  uint64_t max_bps = 30'000'000;
  uint64_t start_bps = 8'000'000;
  LossEstimatorConfig loss;  // its min, max and start are taken from the fields above
  // Probes for a path that got faster while the receiver's delay-based estimate (its REMB) binds
  // the target: a sender that pads (the relay's) sends delay_probe_factor x the target for a
  // moment, and the receiver raises its estimate to what arrived (probe_meter.h). AIMD alone
  // climbs back from a cap by 25 % a second (7 s from 5.4 to 30 Mbit/s).
  //  - Due delay_probe_interval_ns after the last probe, which bounds how long a lifted cap goes
  //    unseen. A probe that finds the cap still there costs a moment of queue at it (twice the
  //    target for 30 ms: 11 ms at 6.5 into 10 Mbit/s). Waiting up to 4 s after such a probe
  //    left the target at 8.8 Mbit/s for 4 s after the cap's end (full rate at 4.5 s).
  //  - Sooner, delay_probe_continue_ns after the last, once the REMB is delay_probe_climb x what
  //    it was then: a probe raised it, and the next doubles again; or AIMD is climbing into
  //    rates no probe has tried, which is when one tells most. A cap's onset leaves AIMD without
  //    its congestion point, and its 25 % a second took the target over the cap within a second
  //    (6 % of the samples in one run of five) before a probe 2 s later found the cap's rate,
  //    which then bounds AIMD (AimdRateControl::lower_to_bottleneck).
  //  - None within delay_probe_after_decrease_ns of a REMB decrease, while the queue that set it
  //    off drains.
  bool delay_probes = false;
  double delay_probe_factor = 2.0;
  uint64_t delay_probe_interval_ns = 2'000'000'000;
  uint64_t delay_probe_continue_ns = 300'000'000;
  double delay_probe_climb = 1.15;
  uint64_t delay_probe_after_decrease_ns = 500'000'000;
};

struct SendRateCounters {
  uint64_t rembs = 0;
  uint64_t reports = 0;
  uint64_t loss_increases = 0;
  uint64_t loss_holds = 0;
  uint64_t probes_carried = 0;
  uint64_t probes_lost = 0;
  uint64_t loss_decreases = 0;
  uint64_t loss_too_soon = 0;
  uint64_t delay_probes = 0;
  uint64_t delay_probes_raised = 0;  // the REMB after it came back raised
};

// The sender's target: min(REMB, loss-based), within [min_bps, max_bps]; start_bps until the
// first REMB. Any thread; not thread-safe; one instance per sent session.
class SendRateController {
 public:
  explicit SendRateController(SendRateConfig config = {});

  // A REMB's bit rate (RTCP PSFB, draft-alvestrand-rmcat-remb). 0 is taken as min_bps.
  void on_remb(uint64_t now_ns, uint64_t bitrate_bps);
  // sent_bps: what the sender measured going out over the report's span (0: unknown, then the
  // target is taken for it).
  LossUpdate on_receiver_report(uint64_t now_ns, uint8_t fraction_lost_q8, uint64_t rtt_ns,
                                uint64_t sent_bps = 0);

  uint64_t target_bps() const { return target_bps_; }
  uint64_t remb_bps() const { return remb_bps_; }
  uint64_t loss_based_bps() const { return loss_.estimate_bps(); }
  // LossBasedEstimator's probing past a policer's ceiling, through the controller (the target
  // follows a carried probe at once).
  uint64_t probe_bps(uint64_t now_ns) const { return loss_.probe_bps(now_ns); }
  void on_probe_result(uint64_t now_ns, uint64_t probed_bps, bool carried);
  // A policer's ceiling, once the loss rule has found one (0 while none is known).
  uint64_t ceiling_bps() const { return loss_.ceiling_bps(); }
  // The rate (target and padding together) a probe for a faster path should send at, when one
  // is due at now_ns (config delay_probes); else 0. Not while a policer is known (probe_bps() is
  // its probe), nor while the loss rule binds the target or the target is at its maximum.
  uint64_t delay_probe_bps(uint64_t now_ns) const;
  // The sender started such a probe.
  void on_delay_probe_sent(uint64_t now_ns);
  // The receiver's REMB sets the target, under the maximum: the path has a bottleneck that
  // queues (a shaper, a busy link), and what is sent (FEC and repairs on top of the media) must
  // fit the REMB, which measures all of it.
  bool delay_bound() const {
    return have_remb_ && remb_bps_ <= loss_.estimate_bps() && target_bps_ < config_.max_bps;
  }
  const SendRateCounters& counters() const { return counters_; }

 private:
  void recompute();

  SendRateConfig config_;
  LossBasedEstimator loss_;
  bool have_remb_ = false;
  uint64_t remb_bps_ = 0;
  uint64_t delay_probe_hold_until_ns_ = 0;  // after a REMB decrease
  // The last probe for a faster path: when, and the REMB then (a REMB kProbeRaise x above it
  // within kProbeAnswerNs was raised by the probe, counted; AIMD alone climbs less in that time).
  bool delay_probed_ = false;
  bool delay_probe_open_ = false;
  uint64_t delay_probe_ns_ = 0;
  uint64_t remb_at_delay_probe_ = 0;
  static constexpr double kProbeRaise = 1.3;
  static constexpr uint64_t kProbeAnswerNs = 1'000'000'000;
  static constexpr double kRembDecrease = 0.97;  // as the receiver's urgent REMB
  // Loss within this of a REMB decrease came with a queue (LossBasedEstimator::on_report's
  // queue_seen). A shaper's cap starts with its queue overflowing; taken for a policer, it was
  // probed at 1.25 x its "ceiling" for 400 ms every 1.5 s, each probe filling the 100-ms queue
  // until it dropped media (measured: 92 % of the frames shown during the cap, one seed of
  // five). Under the qualification's policer the REMB never fell.
  static constexpr uint64_t kQueueEvidenceNs = 2'000'000'000;
  bool remb_decreased_ = false;
  uint64_t last_remb_decrease_ns_ = 0;
  uint64_t target_bps_;
  SendRateCounters counters_;
};

}  // namespace syncd::congestion
