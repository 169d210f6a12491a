#include "congestion/inter_arrival.h"

namespace syncd::congestion {

void InterArrival::reset() {
  current_ = Group{};
  previous_ = Group{};
}

void InterArrival::start_current(int64_t send_ns, uint64_t arrival_ns, uint32_t size_bytes) {
  current_ = Group{true, send_ns, send_ns, arrival_ns, arrival_ns, size_bytes};
}

bool InterArrival::belongs_to_current(int64_t send_ns, uint64_t arrival_ns) const {
  if (send_ns - current_.first_send_ns <= static_cast<int64_t>(config_.burst_ns)) return true;
  // Arrived in a burst behind the group: a smaller arrival step than send step means the packets
  // waited in the same queue and left it back to back.
  const int64_t arrival_step = static_cast<int64_t>(arrival_ns - current_.last_arrival_ns);
  const int64_t send_step = send_ns - current_.last_send_ns;
  return arrival_step <= static_cast<int64_t>(config_.burst_ns) && arrival_step < send_step &&
         arrival_ns - current_.first_arrival_ns < config_.max_burst_span_ns;
}

GroupResult InterArrival::add(int64_t send_ns, uint64_t arrival_ns, uint32_t size_bytes) {
  GroupResult result;
  if (!current_.valid) {
    start_current(send_ns, arrival_ns, size_bytes);
    result.verdict = GroupVerdict::kStartedGroup;
    return result;
  }
  if (send_ns < current_.first_send_ns) {
    result.verdict = GroupVerdict::kReordered;
    return result;
  }
  if (belongs_to_current(send_ns, arrival_ns)) {
    if (send_ns > current_.last_send_ns) current_.last_send_ns = send_ns;
    current_.last_arrival_ns = arrival_ns;
    current_.size_bytes += size_bytes;
    result.verdict = GroupVerdict::kAddedToGroup;
    return result;
  }
  // The current group is complete.
  if (previous_.valid) {
    GroupDelta delta;
    delta.send_delta_ns = current_.last_send_ns - previous_.last_send_ns;
    delta.arrival_delta_ns = static_cast<int64_t>(current_.last_arrival_ns) -
                             static_cast<int64_t>(previous_.last_arrival_ns);
    delta.size_delta_bytes =
        static_cast<int64_t>(current_.size_bytes) - static_cast<int64_t>(previous_.size_bytes);
    delta.arrival_ns = current_.last_arrival_ns;
    const int64_t offset_change = delta.arrival_delta_ns - delta.send_delta_ns;
    const int64_t max_jump = static_cast<int64_t>(config_.max_offset_jump_ns);
    if (offset_change > max_jump || offset_change < -max_jump) {
      reset();
      start_current(send_ns, arrival_ns, size_bytes);
      result.verdict = GroupVerdict::kReset;
      return result;
    }
    // A burst-merged group can end after the next one's last send; such a pair says nothing.
    if (delta.send_delta_ns > 0) {
      result.has_delta = true;
      result.delta = delta;
    }
  }
  previous_ = current_;
  start_current(send_ns, arrival_ns, size_bytes);
  result.verdict = GroupVerdict::kStartedGroup;
  return result;
}

}  // namespace syncd::congestion
