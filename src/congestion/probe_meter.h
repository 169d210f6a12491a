// The receiver's measurement of a sender's probe (docs/wan.md, "Probes the receiver measures").
//
// A probe is a short cluster sent above the target: the sender tops what it sends up to the
// probe's rate with padding packets, which the receiver knows by their payload type. The path
// either carries that rate, and the packets arrive as fast as they were sent, or a bottleneck
// spreads them out to its own rate. The receiver compares the two rates over the cluster: every
// packet from the first padding packet to the last (media, FEC and RTX between them load the
// path as much as the padding does).
//
// Each rate is the slope of the cluster's cumulative bytes against time, fitted by least squares
// over every packet, for the send times (abs-send-time) and the arrival times alike. Taken from
// the first and last packets alone, the arrival rate of a 60-ms spread could be 17 % off under
// +/- 5 ms of jitter, enough to take a 10 Mbit/s cap for 12; the fit over ~60 packets stays
// within 5.2 % (congestion_probe_test, 20 seeds). The sums are kept as they come: no
// allocation, O(1) a packet.
//
// A cluster ends at the first packet sent more than cluster_gap_ns after its last padding
// packet, which is also when it is measured; one with too few padding packets or too short a
// span says nothing (counted).
//
// Pure code: times are passed in; any thread; not thread-safe; one instance per received stream.
#pragma once

#include <cstdint>
#include <optional>

namespace syncd::congestion {

struct ProbeMeterConfig {
  uint64_t cluster_gap_ns = 30'000'000;
  uint32_t min_padding_packets = 10;
  uint64_t min_span_ns = 20'000'000;  // of the send times, first to last padding packet
};

struct ProbeMeasurement {
  uint64_t send_bps = 0;     // what was sent over the cluster
  uint64_t receive_bps = 0;  // what arrived over it
  uint32_t packets = 0;      // all of the cluster's packets, padding and the rest
};

struct ProbeMeterCounters {
  uint64_t clusters = 0;   // measured
  uint64_t too_small = 0;  // ended with too few padding packets or too short a span
  uint64_t padding_packets = 0;
};

class ProbeMeter {
 public:
  explicit ProbeMeter(ProbeMeterConfig config = {}) : config_(config) {}

  // Every accepted packet, in arrival order: its send time (unwrapped abs-send-time, ns), its
  // arrival time, its size, and whether it is probe padding. A measurement when this packet
  // ended a cluster.
  std::optional<ProbeMeasurement> on_packet(int64_t send_ns, uint64_t arrival_ns, uint32_t bytes,
                                            bool padding);

  // Forgets an open cluster (the send clock jumped: a restarted sender).
  void reset() { open_ = false; }
  // A cluster has begun and not yet ended.
  bool open() const { return open_; }
  // Clusters ended so far, measured or too small.
  uint64_t ended() const { return counters_.clusters + counters_.too_small; }

  const ProbeMeterCounters& counters() const { return counters_; }

 private:
  // The least-squares line of bytes sent before each packet against one of its times.
  struct Fit {
    double n = 0, sum_x = 0, sum_t = 0, sum_xx = 0, sum_xt = 0;
    void add(double x, double t);
    // Bytes per ns; 0 when the times do not move.
    double slope() const;
  };
  std::optional<ProbeMeasurement> close();
  void add(int64_t send_ns, uint64_t arrival_ns, uint32_t bytes);

  ProbeMeterConfig config_;
  ProbeMeterCounters counters_;
  bool open_ = false;
  int64_t first_send_ns_ = 0;
  uint64_t first_arrival_ns_ = 0;
  int64_t last_padding_send_ns_ = 0;
  uint32_t padding_ = 0;
  uint32_t packets_ = 0;
  double bytes_ = 0;  // sent before the packet being added (the fit's x)
  // The fits as they stood at the last padding packet: the cluster ends there.
  Fit send_, arrival_;
  Fit send_at_padding_, arrival_at_padding_;
  uint32_t packets_at_padding_ = 0;
};

}  // namespace syncd::congestion
