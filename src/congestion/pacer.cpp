#include "congestion/pacer.h"

#include <algorithm>

namespace syncd::congestion {

Pacer::Pacer(PacerConfig config) : config_(config) {
  config_.capacity_packets = std::max<uint32_t>(config_.capacity_packets, 1);
  if (!(config_.pacing_factor >= 1.0)) config_.pacing_factor = 1.0;  // also catches NaN
  ring_.resize(config_.capacity_packets);
  set_target_rate(config_.initial_target_bps);
}

void Pacer::set_pacing(double pacing_factor, uint64_t drain_within_ns) {
  config_.pacing_factor = pacing_factor >= 1.0 ? pacing_factor : 1.0;  // also catches NaN
  config_.drain_within_ns = drain_within_ns;
  set_target_rate(target_bps_);
}

void Pacer::set_target_rate(uint64_t target_bps) {
  target_bps_ = target_bps;
  const double pacing = static_cast<double>(target_bps) * config_.pacing_factor;
  pacing_bps_ = pacing < 1.8e19 ? static_cast<uint64_t>(pacing) : uint64_t{1} << 63;
  pacing_bps_ = std::max(pacing_bps_, std::max<uint64_t>(config_.min_pacing_bps, 1));
}

EnqueueResult Pacer::enqueue(uint64_t now_ns, uint64_t id, uint32_t size_bytes) {
  if (size_bytes == 0) {
    ++counters_.refused_empty;
    return EnqueueResult::kEmpty;
  }
  if (size_bytes > config_.max_packet_bytes) {
    ++counters_.refused_too_large;
    return EnqueueResult::kTooLarge;
  }
  if (count_ == ring_.size()) {
    ++counters_.refused_full;
    return EnqueueResult::kQueueFull;
  }
  ring_[(head_ + count_) % ring_.size()] = Entry{id, now_ns, size_bytes};
  ++count_;
  queued_bytes_ += size_bytes;
  ++counters_.enqueued;
  return EnqueueResult::kQueued;
}

void Pacer::pop_head() {
  queued_bytes_ -= ring_[head_].size_bytes;
  head_ = (head_ + 1) % ring_.size();
  --count_;
}

uint64_t Pacer::send_rate_bps(const Entry& head, uint64_t now_ns) const {
  if (config_.drain_within_ns == 0) return pacing_bps_;
  const uint64_t age = now_ns > head.enqueued_ns ? now_ns - head.enqueued_ns : 0;
  // At least 1 ms left, so an overdue queue goes at a finite rate.
  const uint64_t left_ns = std::max<uint64_t>(
      config_.drain_within_ns > age ? config_.drain_within_ns - age : 0, 1'000'000);
  const double drain_bps = static_cast<double>(queued_bytes_) * 8e9 / static_cast<double>(left_ns);
  return drain_bps > static_cast<double>(pacing_bps_) && drain_bps < 1.8e19
             ? static_cast<uint64_t>(drain_bps)
             : pacing_bps_;
}

size_t Pacer::pop_due(uint64_t now_ns, std::span<PacedPacket> out) {
  size_t produced = 0;
  while (produced < out.size() && count_ > 0) {
    const Entry& head = ring_[head_];
    if (expired(head, now_ns)) {
      out[produced++] = PacedPacket{head.id, head.size_bytes, PacketDisposition::kDroppedExpired,
                                    head.enqueued_ns};
      ++counters_.dropped_expired;
      counters_.dropped_expired_bytes += head.size_bytes;
      pop_head();
      continue;
    }
    if (!started_) {
      started_ = true;
      virtual_finish_ns_ = now_ns > config_.burst_ns ? now_ns - config_.burst_ns : 0;
    }
    if (virtual_finish_ns_ > now_ns) break;
    // Credit from idle time is capped at burst_ns: the bucket's depth.
    const uint64_t floor_ns = now_ns > config_.burst_ns ? now_ns - config_.burst_ns : 0;
    // size x 8e9 fits 64 bits for any uint32 size (< 3.5e19).
    const uint64_t duration_ns =
        static_cast<uint64_t>(head.size_bytes) * 8'000'000'000ull / send_rate_bps(head, now_ns);
    virtual_finish_ns_ = std::max(virtual_finish_ns_, floor_ns) + duration_ns;
    out[produced++] =
        PacedPacket{head.id, head.size_bytes, PacketDisposition::kSend, head.enqueued_ns};
    ++counters_.sent;
    counters_.sent_bytes += head.size_bytes;
    pop_head();
  }
  return produced;
}

uint64_t Pacer::next_event_ns(uint64_t now_ns) const {
  if (count_ == 0) return kNoEvent;
  const Entry& head = ring_[head_];
  if (expired(head, now_ns) || !started_ || virtual_finish_ns_ <= now_ns) return now_ns;
  // The head leaves when the bucket allows, or is dropped once it expires, whichever is first.
  const uint64_t expires_ns = head.enqueued_ns + config_.max_queue_delay_ns + 1;
  return std::min(virtual_finish_ns_, expires_ns);
}

uint64_t Pacer::oldest_age_ns(uint64_t now_ns) const {
  if (count_ == 0) return 0;
  const uint64_t enqueued = ring_[head_].enqueued_ns;
  return now_ns > enqueued ? now_ns - enqueued : 0;
}

}  // namespace syncd::congestion
