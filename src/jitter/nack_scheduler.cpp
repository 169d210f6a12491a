#include "jitter/nack_scheduler.h"

#include <algorithm>

namespace syncd::jitter {

NackScheduler::NackScheduler(const NackConfig& config) : config_(config) {
  config_.capacity = std::clamp<uint32_t>(config_.capacity, 1, 1u << 16);
  config_.max_gap = std::min(config_.max_gap, config_.capacity);
  config_.max_tries = std::max<uint32_t>(config_.max_tries, 1);
  entries_.resize(config_.capacity);
  config_.reorder_window = std::clamp<uint32_t>(config_.reorder_window, 1, 4096);
  config_.reorder_percentile = std::min<uint32_t>(config_.reorder_percentile, 100);
  config_.reorder_allowance_max_ns =
      std::max(config_.reorder_allowance_max_ns, config_.reorder_allowance_ns);
  reorder_delays_.resize(config_.reorder_window);
  reorder_distances_.resize(config_.reorder_window);
  reorder_scratch_.resize(config_.reorder_window);
  allowance_ns_ = config_.reorder_allowance_ns;
  allowance_packets_ = config_.reorder_allowance_packets;
}

void NackScheduler::record_reorder(uint64_t delay_ns, uint64_t distance) {
  reorder_delays_[reorder_next_] = delay_ns;
  reorder_distances_[reorder_next_] = distance;
  reorder_next_ = (reorder_next_ + 1) % reorder_delays_.size();
  reorder_count_ = std::min(reorder_count_ + 1, reorder_delays_.size());
  const size_t rank = (reorder_count_ - 1) * config_.reorder_percentile / 100;
  const auto percentile = [&](const std::vector<uint64_t>& values) {
    std::copy(values.begin(), values.begin() + reorder_count_, reorder_scratch_.begin());
    std::nth_element(reorder_scratch_.begin(), reorder_scratch_.begin() + rank,
                     reorder_scratch_.begin() + reorder_count_);
    return reorder_scratch_[rank];
  };
  // A little above the percentile: a packet overtaken exactly that much was still only late.
  allowance_ns_ = std::clamp(percentile(reorder_delays_) + 500'000, config_.reorder_allowance_ns,
                             config_.reorder_allowance_max_ns);
  if (config_.reorder_allowance_packets > 0) {
    allowance_packets_ = static_cast<uint32_t>(std::clamp<uint64_t>(
        percentile(reorder_distances_) + 1, config_.reorder_allowance_packets, config_.capacity));
  }
}

void NackScheduler::push(uint64_t sequence, uint64_t now_ns) {
  if (count_ == entries_.size()) {
    // Full: forget the oldest, which is the nearest to its deadline anyway.
    if (!at(0).resolved) ++counters_.forgotten;
    head_ = (head_ + 1) % entries_.size();
    --count_;
  }
  Entry& entry = at(count_);
  entry = Entry{};
  entry.sequence = sequence;
  entry.detected_ns = now_ns;
  ++count_;
  ++counters_.missing;
}

void NackScheduler::pop_resolved() {
  while (count_ > 0 && at(0).resolved) {
    head_ = (head_ + 1) % entries_.size();
    --count_;
  }
}

void NackScheduler::on_packet(uint64_t sequence, uint64_t now_ns, bool repaired) {
  if (!started_) {
    started_ = true;
    highest_ = sequence;
    return;
  }
  if (sequence > highest_) {
    const uint64_t gap = sequence - highest_ - 1;
    if (gap > config_.max_gap) {
      ++counters_.gaps_too_large;
      for (size_t i = 0; i < count_; ++i) {
        if (!at(i).resolved) ++counters_.forgotten;
      }
      head_ = 0;
      count_ = 0;
    } else {
      for (uint64_t missing = highest_ + 1; missing < sequence; ++missing) push(missing, now_ns);
    }
    highest_ = sequence;
    return;
  }
  // Filling a gap? Entries are ascending, so a binary search finds it.
  size_t low = 0;
  size_t high = count_;
  while (low < high) {
    const size_t middle = (low + high) / 2;
    if (at(middle).sequence < sequence) {
      low = middle + 1;
    } else {
      high = middle;
    }
  }
  if (low == count_ || at(low).sequence != sequence || at(low).resolved) return;
  Entry& entry = at(low);
  entry.resolved = true;
  if (entry.tries > 0) {
    ++counters_.recovered;
    if (!repaired) ++counters_.spurious;
  } else {
    ++counters_.arrived_unrequested;
  }
  if (!repaired) {
    record_reorder(now_ns >= entry.detected_ns ? now_ns - entry.detected_ns : 0,
                   highest_ - sequence);
  }
  pop_resolved();
}

uint64_t NackScheduler::retry_at(const Entry& entry, uint64_t rtt_ns) const {
  const uint64_t rtt = std::min<uint64_t>(rtt_ns, 10'000'000'000);
  return entry.last_sent_ns + rtt * config_.retry_rtt_percent / 100 + config_.retry_margin_ns;
}

size_t NackScheduler::collect(uint64_t now_ns, uint64_t rtt_ns, const DeadlineSource& deadlines,
                              std::span<uint16_t> out) {
  size_t written = 0;
  for (size_t i = 0; i < count_; ++i) {
    Entry& entry = at(i);
    if (entry.resolved) continue;
    if (entry.tries == 0) {
      const bool waited = now_ns >= entry.detected_ns + allowance_ns_;
      const bool overtaken =
          allowance_packets_ > 0 && highest_ - entry.sequence >= allowance_packets_;
      if (!waited && !overtaken) continue;
    } else {
      if (now_ns < retry_at(entry, rtt_ns)) continue;
      if (entry.tries >= config_.max_tries) {
        entry.resolved = true;
        ++counters_.given_up_tries;
        continue;
      }
    }
    // A retransmission asked for now arrives a round trip later; past the deadline of its frame
    // it is of no use (the jitter buffer will have dropped the frame).
    const uint64_t deadline = deadlines.deadline_for(entry.sequence);
    if (deadline != UINT64_MAX && (deadline == 0 || now_ns + rtt_ns > deadline)) {
      entry.resolved = true;
      ++counters_.given_up_deadline;
      continue;
    }
    if (written == out.size()) {
      ++counters_.truncated;
      break;
    }
    out[written++] = static_cast<uint16_t>(entry.sequence);
    if (entry.tries == 0) {
      ++counters_.requested;
    } else {
      ++counters_.retried;
    }
    ++entry.tries;
    entry.last_sent_ns = now_ns;
  }
  pop_resolved();
  return written;
}

uint64_t NackScheduler::next_wakeup_ns(uint64_t rtt_ns) const {
  uint64_t earliest = UINT64_MAX;
  for (size_t i = 0; i < count_; ++i) {
    const Entry& entry = at(i);
    if (entry.resolved) continue;
    const uint64_t when =
        entry.tries == 0 ? entry.detected_ns + allowance_ns_ : retry_at(entry, rtt_ns);
    earliest = std::min(earliest, when);
  }
  return earliest;
}

}  // namespace syncd::jitter
