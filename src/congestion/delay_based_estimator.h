// The receiver's delay-based bandwidth estimate, sent to the sender as REMB
// (draft-ietf-rmcat-gcc-02 section 5; docs/wan.md, "Bandwidth estimate and pacing").
//
// Per received media packet (media, RTX and FEC alike: all load the path): its abs-send-time,
// its arrival time and its size. Packets are grouped (inter_arrival.h), the delay variation
// between groups goes through the trendline filter and overuse detector (trendline.h), and the
// detector's signal with the incoming rate (incoming_rate.h) drives AIMD (aimd_rate_control.h).
// A REMB is due at once when the estimate falls by more than remb_decrease_ratio below the last
// one sent, or when a probe raised it, otherwise every remb_interval_ns.
//
// Probes (probe_meter.h): AIMD climbs back from a cap by at most increase_per_second, 7 s from
// 5.4 to 30 Mbit/s at 25 %. A probe the sender pads up to twice its target says at once what the
// path carries:
//  - It arrived as fast as it was sent (at least probe_saturated of the send rate): the path
//    carries that rate, and the estimate goes up to probe_use x it (never down: the probe shows
//    only that much fits).
//  - A bottleneck spread it out: its arrival rate is the bottleneck's, remembered as the
//    congestion point, and the estimate comes down to probe_use x it if above. That is an
//    estimate AIMD let float to 1.5 x the incoming rate while the loss rule held the target under
//    a cap; a probe past the loss rule's ceiling then took the target up to it, over a shaper's
//    cap (measured: 14 % of the samples). Never up: the target is what the sender paces, and
//    its FEC and repairs ride on top (up to 50 % under a cap's loss); set up to 0.9 of the
//    bottleneck, what was sent overflowed it (measured: 90 % of the frames shown, not 98).
//
// Pure code: times are passed in (CLOCK_MONOTONIC-like nanoseconds); no allocation. Any thread;
// not thread-safe; one instance per received session (the relay thread's).
#pragma once

#include <cstdint>
#include <optional>

#include "congestion/abs_send_time.h"
#include "congestion/aimd_rate_control.h"
#include "congestion/incoming_rate.h"
#include "congestion/inter_arrival.h"
#include "congestion/probe_meter.h"
#include "congestion/trendline.h"

namespace syncd::congestion {

struct DelayEstimatorConfig {
  InterArrivalConfig grouping;
  TrendlineConfig trendline;
  AimdConfig rate;  // min, max and start bit rates live here
  uint64_t incoming_window_ns = 500'000'000;
  uint64_t remb_interval_ns = 100'000'000;
  // A REMB goes out at once when the estimate drops below this fraction of the last one sent.
  double remb_decrease_ratio = 0.97;
  // The largest packet accepted (an IP datagram).
  uint32_t max_packet_bytes = 65'535;
  ProbeMeterConfig probes;
  // The share of a probe's measured rate the estimate may go up to: the fit's error under jitter
  // is a few per cent, and a probe measured at a cap must not put the estimate over it.
  double probe_use = 0.9;
  // Below this share of the send rate a probe's arrival rate is a bottleneck's. Not nearer 1:
  // arrival times are read when the receiving thread takes each datagram, and a few ms of that
  // thread's delay stretch a 30-ms cluster (seen: at 0.9, a probe 1.5 s after a cap's end was
  // taken for a bottleneck, and the target stayed under the lifted cap 2 s longer). What the
  // estimate goes to is the lower of the two rates, so a bottleneck taken for a carried probe
  // cannot lift it past the bottleneck.
  double probe_saturated = 0.8;
};

// Why a packet was refused (it then changes nothing but the counters).
enum class PacketVerdict : uint8_t {
  kAccepted,
  kEmpty,             // size 0
  kTooLarge,          // above max_packet_bytes
  kArrivalBackwards,  // arrival time before the previous packet's
};

struct DelayEstimatorCounters {
  uint64_t packets = 0;  // accepted
  uint64_t bytes = 0;
  uint64_t refused_empty = 0;
  uint64_t refused_too_large = 0;
  uint64_t refused_arrival_backwards = 0;
  uint64_t reordered = 0;  // accepted, counted in the rate, not used for delay
  uint64_t groups = 0;     // group deltas fed to the detector
  uint64_t resets = 0;     // offset jumps (clock jump, stream restart)
  uint64_t overuse_signals = 0;
  uint64_t underuse_signals = 0;
  uint64_t decreases = 0;
  uint64_t rembs = 0;
  uint64_t rembs_immediate = 0;   // sent at once on a decrease or a probe's rise
  uint64_t probes_raised = 0;     // the estimate went up
  uint64_t probes_saturated = 0;  // a bottleneck spread it out (the estimate is kept under it)
  uint64_t last_probe_send_bps = 0;
  uint64_t last_probe_receive_bps = 0;
};

class DelayBasedEstimator {
 public:
  explicit DelayBasedEstimator(DelayEstimatorConfig config = {});

  // A packet carrying abs-send-time (the low 24 bits are used). probe_padding: it is a probe's
  // padding (probe_meter.h).
  PacketVerdict on_packet(uint64_t arrival_ns, uint32_t abs_send_time, uint32_t size_bytes,
                          bool probe_padding = false);
  // A packet whose send time is known in nanoseconds (tests, a sender-side mirror).
  PacketVerdict on_packet_send_ns(uint64_t arrival_ns, int64_t send_ns, uint32_t size_bytes,
                                  bool probe_padding = false);

  // The round-trip time, when the receiver knows it; sets the reduction interval and the additive
  // increase step.
  void set_rtt(uint64_t rtt_ns) { rate_.set_rtt(rtt_ns); }

  // The estimate, bit/s, within [rate.min_bps, rate.max_bps].
  uint64_t estimate_bps() const { return rate_.estimate_bps(); }
  BandwidthUsage usage() const { return detector_.state(); }
  const TrendlineDetector& detector() const { return detector_; }
  const AimdRateControl& rate_control() const { return rate_; }

  // The bit rate for a REMB if one is due at now_ns (and takes it as sent); else empty. No REMB
  // before the first packet.
  std::optional<uint64_t> take_remb(uint64_t now_ns);
  // When the next REMB falls due: 0 when one is due already (the first, or one after a
  // decrease), else the last one's time + remb_interval_ns; UINT64_MAX before any packet. For the
  // caller's timer.
  uint64_t next_remb_ns() const;

  const DelayEstimatorCounters& counters() const { return counters_; }
  const ProbeMeterCounters& probe_counters() const { return probes_.counters(); }

 private:
  PacketVerdict check(uint64_t arrival_ns, uint32_t size_bytes);
  PacketVerdict accept(uint64_t arrival_ns, int64_t send_ns, uint32_t size_bytes,
                       bool probe_padding);
  void on_probe(const ProbeMeasurement& probe);

  DelayEstimatorConfig config_;
  AbsSendTimeUnwrapper unwrapper_;
  InterArrival inter_arrival_;
  TrendlineDetector detector_;
  IncomingRate incoming_;
  ProbeMeter probes_;
  AimdRateControl rate_;
  DelayEstimatorCounters counters_;
  bool have_packet_ = false;
  uint64_t last_arrival_ns_ = 0;
  bool remb_sent_ = false;
  bool remb_urgent_ = false;
  uint64_t last_remb_ns_ = 0;
  uint64_t last_remb_bps_ = 0;
};

}  // namespace syncd::congestion
