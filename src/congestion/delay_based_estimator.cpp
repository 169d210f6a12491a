#include "congestion/delay_based_estimator.h"

#include <limits>

namespace syncd::congestion {

DelayBasedEstimator::DelayBasedEstimator(DelayEstimatorConfig config)
    : config_(config),
      inter_arrival_(config.grouping),
      detector_(config.trendline),
      incoming_(config.incoming_window_ns),
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
                                             uint32_t size_bytes) {
  const PacketVerdict verdict = check(arrival_ns, size_bytes);
  if (verdict != PacketVerdict::kAccepted) return verdict;
  // Unwrapped only once the packet is accepted, so a refused packet cannot skew the timeline.
  return accept(arrival_ns, unwrapper_.unwrap_ns(abs_send_time), size_bytes);
}

PacketVerdict DelayBasedEstimator::on_packet_send_ns(uint64_t arrival_ns, int64_t send_ns,
                                                     uint32_t size_bytes) {
  const PacketVerdict verdict = check(arrival_ns, size_bytes);
  if (verdict != PacketVerdict::kAccepted) return verdict;
  return accept(arrival_ns, send_ns, size_bytes);
}

PacketVerdict DelayBasedEstimator::accept(uint64_t arrival_ns, int64_t send_ns,
                                          uint32_t size_bytes) {
  have_packet_ = true;
  last_arrival_ns_ = arrival_ns;
  ++counters_.packets;
  counters_.bytes += size_bytes;
  incoming_.add(arrival_ns, size_bytes);

  const GroupResult group = inter_arrival_.add(send_ns, arrival_ns, size_bytes);
  if (group.verdict == GroupVerdict::kReordered) ++counters_.reordered;
  if (group.verdict == GroupVerdict::kReset) {
    ++counters_.resets;
    detector_.reset();
  }
  if (!group.has_delta) return PacketVerdict::kAccepted;

  ++counters_.groups;
  const BandwidthUsage usage = detector_.update(group.delta);
  if (usage == BandwidthUsage::kOverusing) ++counters_.overuse_signals;
  if (usage == BandwidthUsage::kUnderusing) ++counters_.underuse_signals;
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
