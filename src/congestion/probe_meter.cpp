#include "congestion/probe_meter.h"

namespace syncd::congestion {

void ProbeMeter::Fit::add(double x, double t) {
  n += 1;
  sum_x += x;
  sum_t += t;
  sum_xx += x * x;
  sum_xt += x * t;
}

double ProbeMeter::Fit::slope() const {
  // t = a + x / rate: the fit's dt/dx (sxt / sxx, ns per byte) is 1 / rate.
  const double sxx = n * sum_xx - sum_x * sum_x;
  const double sxt = n * sum_xt - sum_x * sum_t;
  if (!(sxx > 0) || !(sxt > 0)) return 0;
  return sxx / sxt;
}

void ProbeMeter::add(int64_t send_ns, uint64_t arrival_ns, uint32_t bytes) {
  // Times relative to the cluster's first packet keep the sums small enough for a double.
  send_.add(bytes_, double(send_ns - first_send_ns_));
  arrival_.add(bytes_, double(arrival_ns - first_arrival_ns_));
  bytes_ += bytes;
  ++packets_;
}

std::optional<ProbeMeasurement> ProbeMeter::on_packet(int64_t send_ns, uint64_t arrival_ns,
                                                      uint32_t bytes, bool padding) {
  std::optional<ProbeMeasurement> measured;
  if (open_ && send_ns - last_padding_send_ns_ > int64_t(config_.cluster_gap_ns)) {
    measured = close();
  }
  if (padding) ++counters_.padding_packets;
  if (!open_) {
    if (!padding) return measured;
    open_ = true;
    first_send_ns_ = send_ns;
    first_arrival_ns_ = arrival_ns;
    padding_ = 0;
    packets_ = 0;
    bytes_ = 0;
    send_ = arrival_ = Fit{};
  }
  // A packet sent before the cluster began, arriving inside it (reordered), is not its load.
  if (send_ns < first_send_ns_) return measured;
  add(send_ns, arrival_ns, bytes);
  if (padding) {
    ++padding_;
    last_padding_send_ns_ = send_ns;
    send_at_padding_ = send_;
    arrival_at_padding_ = arrival_;
    packets_at_padding_ = packets_;
  }
  return measured;
}

std::optional<ProbeMeasurement> ProbeMeter::close() {
  open_ = false;
  const bool enough = padding_ >= config_.min_padding_packets &&
                      last_padding_send_ns_ - first_send_ns_ >= int64_t(config_.min_span_ns);
  const double send_rate = send_at_padding_.slope();
  const double arrival_rate = arrival_at_padding_.slope();
  if (!enough || !(send_rate > 0) || !(arrival_rate > 0)) {
    ++counters_.too_small;
    return std::nullopt;
  }
  ++counters_.clusters;
  ProbeMeasurement m;
  m.send_bps = uint64_t(send_rate * 8e9);
  m.receive_bps = uint64_t(arrival_rate * 8e9);
  m.packets = packets_at_padding_;
  return m;
}

}  // namespace syncd::congestion
