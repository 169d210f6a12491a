// The sender's loss-based estimate from RTCP receiver reports (draft-ietf-rmcat-gcc-02
// section 6), and the sender's target rate: the lower of it and the receiver's REMB.
//
// From each RR's fraction lost p (RFC 3550 section 6.4.1, 8-bit fixed point):
//     p < 2%        A = 1.08 x A        (the path carries what is sent)
//     2% <= p <= 10% hold
//     p > 10%       A = R x (1 - 0.5 p) (R the rate that was being sent)
// at most once per update interval (max(min_update_interval, 2 x RTT)), since the next RR still
// counts losses from before the last change. The relay's RRs report loss before FEC and NACK
// repair, so the random loss a repaired path shows all the time (1% here) must not pull the rate
// down: it stays below the 2% line, where the rule increases. Thresholds are parameters for a
// path whose repairable loss is higher.
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
  // unknown, then the estimate itself is the base of a decrease).
  LossUpdate on_report(uint64_t now_ns, uint8_t fraction_lost_q8, uint64_t rtt_ns,
                       uint64_t sending_bps);

  uint64_t estimate_bps() const { return estimate_bps_; }

 private:
  LossEstimatorConfig config_;
  uint64_t estimate_bps_;
  bool changed_ = false;
  uint64_t last_change_ns_ = 0;
};

struct SendRateConfig {
  uint64_t min_bps = 300'000;
  uint64_t max_bps = 30'000'000;
  uint64_t start_bps = 8'000'000;
  LossEstimatorConfig loss;  // its min, max and start are taken from the fields above
};

struct SendRateCounters {
  uint64_t rembs = 0;
  uint64_t reports = 0;
  uint64_t loss_increases = 0;
  uint64_t loss_holds = 0;
  uint64_t loss_decreases = 0;
  uint64_t loss_too_soon = 0;
};

// The sender's target: min(REMB, loss-based), within [min_bps, max_bps]; start_bps until the
// first REMB. Any thread; not thread-safe; one instance per sent session.
class SendRateController {
 public:
  explicit SendRateController(SendRateConfig config = {});

  // A REMB's bit rate (RTCP PSFB, draft-alvestrand-rmcat-remb). 0 is taken as min_bps.
  void on_remb(uint64_t now_ns, uint64_t bitrate_bps);
  LossUpdate on_receiver_report(uint64_t now_ns, uint8_t fraction_lost_q8, uint64_t rtt_ns);

  uint64_t target_bps() const { return target_bps_; }
  uint64_t remb_bps() const { return remb_bps_; }
  uint64_t loss_based_bps() const { return loss_.estimate_bps(); }
  const SendRateCounters& counters() const { return counters_; }

 private:
  void recompute();

  SendRateConfig config_;
  LossBasedEstimator loss_;
  bool have_remb_ = false;
  uint64_t remb_bps_ = 0;
  uint64_t target_bps_;
  SendRateCounters counters_;
};

}  // namespace syncd::congestion
