#include "congestion/delay_based_estimator.h"

#include <algorithm>
#include <limits>

namespace syncd::congestion {

DelayBasedEstimator::DelayBasedEstimator(DelayEstimatorConfig config)
    : config_(config),
      inter_arrival_(config.grouping),
      detector_(config.trendline),
      incoming_(config.incoming_window_ns),
      probes_(config.probes),
      rate_(config.rate) {}

PacketVerdict DelayBasedEstimator::check(uint64_t arrival_ns, uint32_t size_bytes) {
  if (size_bytes == 0) {
    ++counters_.refused_empty;
    return PacketVerdict::kEmpty;
  }
  if (size_bytes > config_.max_packet_bytes) {
    ++counters_.refused_too_large;
    return PacketVerdict::kTooLarge;
  }
  if (have_packet_ && arrival_ns < last_arrival_ns_) {
    ++counters_.refused_arrival_backwards;
    return PacketVerdict::kArrivalBackwards;
  }
  return PacketVerdict::kAccepted;
}

PacketVerdict DelayBasedEstimator::on_packet(uint64_t arrival_ns, uint32_t abs_send_time,
                                             uint32_t size_bytes, bool probe_padding) {
  const PacketVerdict verdict = check(arrival_ns, size_bytes);
  if (verdict != PacketVerdict::kAccepted) return verdict;
  // Unwrapped only once the packet is accepted, so a refused packet cannot skew the timeline.
  return accept(arrival_ns, unwrapper_.unwrap_ns(abs_send_time), size_bytes, probe_padding);
}

PacketVerdict DelayBasedEstimator::on_packet_send_ns(uint64_t arrival_ns, int64_t send_ns,
                                                     uint32_t size_bytes, bool probe_padding) {
  const PacketVerdict verdict = check(arrival_ns, size_bytes);
  if (verdict != PacketVerdict::kAccepted) return verdict;
  return accept(arrival_ns, send_ns, size_bytes, probe_padding);
}

void DelayBasedEstimator::on_probe(const ProbeMeasurement& probe) {
  counters_.last_probe_send_bps = probe.send_bps;
  counters_.last_probe_receive_bps = probe.receive_bps;
  const uint64_t before = rate_.estimate_bps();
  uint64_t after;
  if (double(probe.receive_bps) < config_.probe_saturated * double(probe.send_bps)) {
    ++counters_.probes_saturated;
    after = rate_.lower_to_bottleneck(uint64_t(config_.probe_use * double(probe.receive_bps)),
                                      probe.receive_bps);
  } else {
    after = rate_.raise_to(
        uint64_t(config_.probe_use * double(std::min(probe.send_bps, probe.receive_bps))));
  }
  if (after > before) ++counters_.probes_raised;
  if (after != before && remb_sent_) remb_urgent_ = true;
}

PacketVerdict DelayBasedEstimator::accept(uint64_t arrival_ns, int64_t send_ns, uint32_t size_bytes,
                                          bool probe_padding) {
  have_packet_ = true;
  last_arrival_ns_ = arrival_ns;
  ++counters_.packets;
  counters_.bytes += size_bytes;
  // A probe's padding is not the sender's rate: counted in the incoming rate, a probe stopped by
  // a cap read as the path carrying more than the congestion point, which AIMD then forgot and
  // climbed past the cap again (measured in the simulation: the target over a shaper's cap in
  // 3-5 % of the samples).
  if (!probe_padding) incoming_.add(arrival_ns, size_bytes);

  // A probe's own queue is not congestion. While its cluster is in flight AIMD holds, and once it
  // ends the delay history it built is dropped. Without this, each probe stopped by a cap set off
  // a decrease to 0.85 x the media's rate just after its measurement, and the congestion point
  // ratcheted down probe by probe (measured in the simulation: the target's mean under a shaper
  // 7.6 instead of 8.5 Mbit/s).
  const uint64_t ended_before = probes_.ended();
  const auto probe = probes_.on_packet(send_ns, arrival_ns, size_bytes, probe_padding);
  if (probes_.ended() != ended_before) {
    inter_arrival_.reset();
    detector_.reset();
    if (probe) on_probe(*probe);
  }

  const GroupResult group = inter_arrival_.add(send_ns, arrival_ns, size_bytes);
  if (group.verdict == GroupVerdict::kReordered) ++counters_.reordered;
  if (group.verdict == GroupVerdict::kReset) {
    ++counters_.resets;
    detector_.reset();
    probes_.reset();
  }
  if (!group.has_delta) return PacketVerdict::kAccepted;

  ++counters_.groups;
  const BandwidthUsage usage = detector_.update(group.delta);
  if (usage == BandwidthUsage::kOverusing) ++counters_.overuse_signals;
  if (usage == BandwidthUsage::kUnderusing) ++counters_.underuse_signals;
  if (probes_.open()) return PacketVerdict::kAccepted;
  const uint64_t decreases_before = rate_.decreases();
  const uint64_t estimate = rate_.update(arrival_ns, usage, incoming_.rate_bps(arrival_ns));
  if (rate_.decreases() != decreases_before) ++counters_.decreases;
  if (remb_sent_ && static_cast<double>(estimate) <
                        config_.remb_decrease_ratio * static_cast<double>(last_remb_bps_)) {
    remb_urgent_ = true;
  }
  return PacketVerdict::kAccepted;
}

uint64_t DelayBasedEstimator::next_remb_ns() const {
  if (!have_packet_) return std::numeric_limits<uint64_t>::max();
  if (!remb_sent_ || remb_urgent_) return 0;
  return last_remb_ns_ + config_.remb_interval_ns;
}

std::optional<uint64_t> DelayBasedEstimator::take_remb(uint64_t now_ns) {
  if (!have_packet_) return std::nullopt;
  const bool due = !remb_sent_ || remb_urgent_ || now_ns < last_remb_ns_ ||
                   now_ns - last_remb_ns_ >= config_.remb_interval_ns;
  if (!due) return std::nullopt;
  if (remb_urgent_) ++counters_.rembs_immediate;
  ++counters_.rembs;
  remb_sent_ = true;
  remb_urgent_ = false;
  last_remb_ns_ = now_ns;
  last_remb_bps_ = rate_.estimate_bps();
  return last_remb_bps_;
}

}  // namespace syncd::congestion
