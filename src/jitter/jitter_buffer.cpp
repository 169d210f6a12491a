#include "jitter/jitter_buffer.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace syncd::jitter {

namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

int64_t saturating_add(int64_t a, int64_t b) {
  int64_t sum;
  if (__builtin_add_overflow(a, b, &sum)) return b > 0 ? kInt64Max : kInt64Min;
  return sum;
}

int64_t saturating_sub(int64_t a, int64_t b) {
  int64_t difference;
  if (__builtin_sub_overflow(a, b, &difference)) return b < 0 ? kInt64Max : kInt64Min;
  return difference;
}

// Times come in as uint64; beyond INT64_MAX (292 years of uptime) they are pinned.
int64_t to_signed(uint64_t ns) {
  return ns > static_cast<uint64_t>(kInt64Max) ? kInt64Max : static_cast<int64_t>(ns);
}

uint64_t to_unsigned(int64_t ns) {
  return ns < 0 ? 0 : static_cast<uint64_t>(ns);
}

int64_t clamp_to_int64(double value) {
  if (!(value > -9.0e18)) return -9'000'000'000'000'000'000;  // also NaN
  if (value > 9.0e18) return 9'000'000'000'000'000'000;
  return static_cast<int64_t>(value);
}

uint32_t round_up_power_of_two(uint32_t value) {
  uint32_t power = 16;
  while (power < value && power < (1u << 24)) power <<= 1;
  return power;
}

}  // namespace

JitterBuffer::JitterBuffer(const JitterBufferConfig& config) : config_(config) {
  config_.packet_capacity = round_up_power_of_two(config_.packet_capacity);
  config_.frame_capacity = std::clamp<uint32_t>(config_.frame_capacity, 2, 4096);
  config_.window_frames = std::clamp<uint32_t>(config_.window_frames, 1, 1024);
  config_.percentile = std::clamp<uint32_t>(config_.percentile, 0, 100);
  if (config_.clock_rate_hz == 0) config_.clock_rate_hz = 90000;
  config_.target_ceiling_ns = std::max(config_.target_ceiling_ns, config_.target_floor_ns);
  config_.repair_budget_max_ns =
      std::max(config_.repair_budget_max_ns, config_.repair_budget_min_ns);
  slots_.resize(config_.packet_capacity);
  slot_mask_ = config_.packet_capacity - 1;
  frames_.resize(config_.frame_capacity);
  order_.resize(config_.frame_capacity);
  free_frames_.resize(config_.frame_capacity);
  for (uint32_t i = 0; i < config_.frame_capacity; ++i) {
    free_frames_[i] = config_.frame_capacity - 1 - i;
  }
  free_count_ = config_.frame_capacity;
  scratch_.resize(config_.packet_capacity);
  lateness_.resize(config_.window_frames);
  lateness_sorted_.resize(config_.window_frames);
  ns_per_tick_ = 1e9 / config_.clock_rate_hz;
  target_ns_ = config_.target_floor_ns;
  set_rtt(config_.initial_rtt_ns);
  counters_.target_delay_ns = target_ns_;
}

void JitterBuffer::set_rtt(uint64_t rtt_ns) {
  // Anything above 10 s is not a path this buffer can repair over; pin it.
  rtt_ns_ = std::min<uint64_t>(rtt_ns, 10'000'000'000);
  counters_.repair_budget_ns = repair_budget_ns();
}

uint64_t JitterBuffer::repair_budget_ns() const {
  const uint64_t budget = rtt_ns_ * config_.rtt_factor_percent / 100 + config_.repair_margin_ns;
  return std::clamp(budget, config_.repair_budget_min_ns, config_.repair_budget_max_ns);
}

void JitterBuffer::set_local_ns_per_tick(double ns_per_tick) {
  // A sender clock off by more than 0.1 % is broken, not skewed; keep the old rate.
  const double nominal = 1e9 / config_.clock_rate_hz;
  if (!(std::fabs(ns_per_tick / nominal - 1.0) <= 1e-3)) return;
  if (anchored_) {
    // Re-anchor at the newest timestamp, so that mapped times there stay where they were and
    // the lateness history stays comparable.
    const uint64_t newest = timestamps_.highest();
    anchor_local_ns_ = mapped_ns(newest);
    anchor_timestamp_ = newest;
  }
  ns_per_tick_ = ns_per_tick;
}

bool JitterBuffer::take_keyframe_request() {
  const bool requested = keyframe_request_;
  keyframe_request_ = false;
  return requested;
}

int64_t JitterBuffer::mapped_ns(uint64_t timestamp) const {
  const auto ticks = static_cast<int64_t>(timestamp - anchor_timestamp_);
  return saturating_add(anchor_local_ns_,
                        clamp_to_int64(static_cast<double>(ticks) * ns_per_tick_));
}

int64_t JitterBuffer::playout_ns(const Frame& frame) const {
  const int64_t delay = saturating_add(lateness_base_ns_, to_signed(target_ns_));
  return saturating_add(mapped_ns(frame.timestamp), delay);
}

uint64_t JitterBuffer::deadline_ns(const Frame& frame) const {
  return to_unsigned(saturating_add(playout_ns(frame), to_signed(repair_budget_ns())));
}

JitterBuffer::Boundaries JitterBuffer::boundaries(const Frame& frame) const {
  Boundaries result;
  const Slot& first = slot(frame.min_sequence);
  const Slot& before = slot(frame.min_sequence - 1);
  // A frame's packets are consecutive sequence numbers, so a held packet just before it (which
  // belongs to another frame) or a retired one at floor_ - 1 marks its start.
  result.start_known = first.starts_frame ||
                       (frame.min_sequence == floor_ && floor_starts_frame_) ||
                       (frame.min_sequence > floor_ && before.sequence == frame.min_sequence - 1);
  const Slot& last = slot(frame.max_sequence);
  const Slot& after = slot(frame.max_sequence + 1);
  result.end_known = last.marker || after.sequence == frame.max_sequence + 1;
  result.complete = result.start_known && result.end_known &&
                    frame.packets == frame.max_sequence - frame.min_sequence + 1;
  // Missing packets between the last frame retired and this one are a whole lost frame, or the
  // tail of a frame dropped open. When the timestamps leave no room for a frame between them
  // (closer than the shortest frame interval seen), they can only be that tail.
  const uint64_t ticks_since_retired = frame.timestamp - last_retired_timestamp_;
  const bool no_frame_fits = retired_any_ && min_frame_ticks_ > 0 && ticks_since_retired > 0 &&
                             ticks_since_retired <= min_frame_ticks_;
  result.gap_before = floor_starts_frame_ && frame.min_sequence > floor_ && !no_frame_fits;
  return result;
}

size_t JitterBuffer::find_frame(uint64_t timestamp) const {
  // Newest first: nearly every packet belongs to one of the last frames created.
  for (size_t i = order_count_; i-- > 0;) {
    if (frames_[order_[i]].timestamp == timestamp) return order_[i];
  }
  return SIZE_MAX;
}

size_t JitterBuffer::order_position(uint64_t sequence) const {
  size_t low = 0;
  size_t high = order_count_;
  while (low < high) {
    const size_t middle = (low + high) / 2;
    if (frames_[order_[middle]].min_sequence < sequence) {
      low = middle + 1;
    } else {
      high = middle;
    }
  }
  return low;
}

InsertResult JitterBuffer::insert(const PacketIn& packet, uint64_t now_ns, FrameSink& sink) {
  ++counters_.packets_in;
  const uint64_t sequence = sequences_.unwrap(packet.sequence);
  last_extended_ = sequence;
  if (!started_) {
    started_ = true;
    // Leave room below the first packet for ones that were reordered ahead of it.
    floor_ = sequence - config_.packet_capacity / 4;
  }
  const uint64_t timestamp = timestamps_.peek(packet.rtp_timestamp);

  if (sequence < floor_) {
    ++counters_.late;
    return InsertResult::kLate;
  }
  if (retired_any_ && timestamp == last_retired_timestamp_) {
    // A straggler of the frame just released or dropped. It still tells where that frame ends,
    // which can settle the start of the next one.
    if (sequence < floor_ + config_.packet_capacity &&
        (order_count_ == 0 || frames_[order_[0]].min_sequence > sequence)) {
      floor_ = sequence + 1;
      floor_starts_frame_ = true;
    }
    ++counters_.late;
    advance(now_ns, sink);
    return InsertResult::kLate;
  }
  if (sequence < floor_ + config_.packet_capacity && slot(sequence).sequence == sequence) {
    ++counters_.duplicates;
    if (slot(sequence).repaired && !packet.repaired) ++counters_.originals_after_repair;
    return InsertResult::kDuplicate;
  }

  // Checks against the frames held, before anything moves.
  size_t frame_index = find_frame(timestamp);
  if (frame_index != SIZE_MAX) {
    const Frame& frame = frames_[frame_index];
    const uint64_t new_min = std::min(frame.min_sequence, sequence);
    const uint64_t new_max = std::max(frame.max_sequence, sequence);
    const size_t position = order_position(frame.min_sequence);
    const bool after_marker = slot(frame.max_sequence).marker && sequence > frame.max_sequence;
    const bool marker_inside = packet.marker && sequence < frame.max_sequence;
    const bool overlaps_previous =
        position > 0 && frames_[order_[position - 1]].max_sequence >= new_min;
    const bool overlaps_next =
        position + 1 < order_count_ && frames_[order_[position + 1]].min_sequence <= new_max;
    // A frame spans at most the window; a timestamp seen again further away is another frame.
    const bool too_wide = new_max - new_min >= config_.packet_capacity / 2;
    if (after_marker || marker_inside || overlaps_previous || overlaps_next || too_wide) {
      ++counters_.conflicts;
      return InsertResult::kConflict;
    }
  } else {
    const size_t position = order_position(sequence);
    if (position > 0 && frames_[order_[position - 1]].max_sequence >= sequence) {
      ++counters_.conflicts;
      return InsertResult::kConflict;
    }
    if (free_count_ == 0 && position == 0) {
      ++counters_.no_room;
      return InsertResult::kNoRoom;
    }
  }

  // Make room: the window must reach the new sequence number, and a new frame needs a record.
  if (!make_room_for(sequence, now_ns, sink)) {
    ++counters_.no_room;
    return InsertResult::kNoRoom;
  }
  frame_index = find_frame(timestamp);
  if (frame_index == SIZE_MAX) {
    while (free_count_ == 0 && order_count_ > 0 && frames_[order_[0]].min_sequence < sequence) {
      evict_head(now_ns, sink);
    }
    if (free_count_ == 0 || sequence < floor_) {
      ++counters_.no_room;
      return InsertResult::kNoRoom;
    }
    frame_index = free_frames_[--free_count_];
    Frame& frame = frames_[frame_index];
    frame = Frame{};
    frame.timestamp = timestamp;
    frame.min_sequence = sequence;
    frame.max_sequence = sequence;
    frame.first_arrival_ns = packet.arrival_ns;
    const size_t position = order_position(sequence);
    std::copy_backward(order_.begin() + position, order_.begin() + order_count_,
                       order_.begin() + order_count_ + 1);
    order_[position] = static_cast<uint32_t>(frame_index);
    ++order_count_;
    if (!anchored_) {
      anchored_ = true;
      anchor_timestamp_ = timestamp;
      anchor_local_ns_ = to_signed(packet.arrival_ns);
    }
  }
  timestamps_.unwrap(packet.rtp_timestamp);

  Frame& frame = frames_[frame_index];
  frame.min_sequence = std::min(frame.min_sequence, sequence);
  frame.max_sequence = std::max(frame.max_sequence, sequence);
  frame.first_arrival_ns = std::min(frame.first_arrival_ns, packet.arrival_ns);
  frame.last_arrival_ns = std::max(frame.last_arrival_ns, packet.arrival_ns);
  if (packet.repaired) {
    frame.repaired = true;
    ++counters_.repaired_accepted;
  } else {
    frame.last_original_arrival_ns = std::max(frame.last_original_arrival_ns, packet.arrival_ns);
    frame.has_original = true;
  }
  ++frame.packets;

  Slot& target = slot(sequence);
  target.sequence = sequence;
  target.arrival_ns = packet.arrival_ns;
  target.handle = packet.handle;
  target.length = packet.length;
  target.frame = static_cast<uint32_t>(frame_index);
  target.marker = packet.marker;
  target.starts_frame = packet.starts_frame;
  target.repaired = packet.repaired;
  ++packets_held_;
  ++counters_.packets_accepted;

  advance(now_ns, sink);
  return InsertResult::kAccepted;
}

bool JitterBuffer::make_room_for(uint64_t sequence, uint64_t now_ns, FrameSink& sink) {
  if (sequence < floor_ + config_.packet_capacity) return true;
  const uint64_t new_floor = sequence - config_.packet_capacity + 1;
  // Frames that would fall out of the window go now: released if complete, dropped if not.
  while (order_count_ > 0 && frames_[order_[0]].min_sequence < new_floor) {
    evict_head(now_ns, sink);
  }
  if (floor_ < new_floor) {
    floor_ = new_floor;
    floor_starts_frame_ = false;
  }
  return sequence < floor_ + config_.packet_capacity;
}

void JitterBuffer::evict_head(uint64_t now_ns, FrameSink& sink) {
  const Boundaries head = boundaries(frames_[order_[0]]);
  if (head.complete) {
    if (head.gap_before) report_lost_gap(now_ns, sink);
    release_head(now_ns, sink);
  } else {
    drop_head(DropReason::kEvicted, now_ns, sink);
  }
}

void JitterBuffer::advance(uint64_t now_ns, FrameSink& sink) {
  // Each pass releases or drops the head frame (or gives up the gap before it), or stops: at
  // most two passes per frame held.
  for (size_t passes = 0; passes <= 2 * config_.frame_capacity && order_count_ > 0; ++passes) {
    const Frame& head = frames_[order_[0]];
    const Boundaries state = boundaries(head);
    if (state.complete && !state.gap_before) {
      const bool due =
          config_.mode == ReleaseMode::kWhenComplete || to_signed(now_ns) >= playout_ns(head);
      if (!due) break;
      release_head(now_ns, sink);
      continue;
    }
    if (now_ns < deadline_ns(head)) break;
    // An incomplete frame with nothing after it is held past its deadline: no later packet
    // says anything was lost (its missing packets may be late: a sender, or this thread, that
    // was not scheduled for a while), and holding it holds nothing back. The next frame's
    // first packet settles it, or, when none comes, the hold's end (config).
    if (!state.complete && order_count_ == 1 && now_ns < lone_frame_release_ns(head)) break;
    if (state.complete) {
      // Only the gap before it is missing: those frames are lost; this one goes out.
      report_lost_gap(now_ns, sink);
      continue;
    }
    if (state.gap_before && state.start_known) report_lost_gap(now_ns, sink);
    drop_head(DropReason::kIncomplete, now_ns, sink);
  }
}

uint64_t JitterBuffer::lone_frame_release_ns(const Frame& frame) const {
  const uint64_t deadline = deadline_ns(frame);
  return deadline > UINT64_MAX - config_.lone_frame_hold_ns ? UINT64_MAX
                                                            : deadline + config_.lone_frame_hold_ns;
}

uint64_t JitterBuffer::next_wakeup_ns() const {
  if (order_count_ == 0) return UINT64_MAX;
  const Frame& head = frames_[order_[0]];
  const Boundaries state = boundaries(head);
  if (state.complete && !state.gap_before) {
    return config_.mode == ReleaseMode::kWhenComplete ? 0 : to_unsigned(playout_ns(head));
  }
  if (!state.complete && order_count_ == 1) return lone_frame_release_ns(head);  // advance()
  return deadline_ns(head);
}

uint64_t JitterBuffer::deadline_for(uint64_t sequence) const {
  if (sequence < floor_) return 0;
  // Frames are disjoint and ordered, so by max_sequence too: the first one ending at or after
  // `sequence` holds it, or is the frame right after the gap it is in. Its deadline is the
  // latest at which the packet can still help.
  size_t low = 0;
  size_t high = order_count_;
  while (low < high) {
    const size_t middle = (low + high) / 2;
    if (frames_[order_[middle]].max_sequence < sequence) {
      low = middle + 1;
    } else {
      high = middle;
    }
  }
  if (low == order_count_) return UINT64_MAX;
  return deadline_ns(frames_[order_[low]]);
}

size_t JitterBuffer::gather_packets(const Frame& frame) {
  size_t count = 0;
  for (uint64_t sequence = frame.min_sequence; sequence <= frame.max_sequence; ++sequence) {
    Slot& held = slot(sequence);
    if (held.sequence != sequence) continue;
    scratch_[count++] = PacketRef{sequence, held.handle, held.length};
    held.sequence = kNoSequence;
    --packets_held_;
  }
  return count;
}

void JitterBuffer::release_head(uint64_t now_ns, FrameSink& sink) {
  const Frame& frame = frames_[order_[0]];
  const int64_t playout = playout_ns(frame);
  if (frame.has_original) record_lateness(frame);
  if (retired_any_ && floor_starts_frame_ && frame.min_sequence == floor_) {
    // Two frames in a row: their timestamp difference is one frame interval (or more, if the
    // sender skipped); the shortest is the frame interval.
    const uint64_t ticks = frame.timestamp - last_retired_timestamp_;
    if (ticks > 0 && ticks < (uint64_t{1} << 31)) {
      min_frame_ticks_ = min_frame_ticks_ == 0 ? ticks : std::min(min_frame_ticks_, ticks);
    }
  }
  const size_t count = gather_packets(frame);
  FrameEvent event;
  event.packets = std::span<const PacketRef>(scratch_.data(), count);
  event.rtp_timestamp = static_cast<uint32_t>(frame.timestamp);
  event.first_arrival_ns = frame.first_arrival_ns;
  event.completion_ns = frame.last_arrival_ns;
  event.release_ns = now_ns;
  event.playout_ns = to_unsigned(playout);
  event.repaired = frame.repaired;
  ++counters_.frames_released;
  counters_.packets_released += count;
  retire_head();
  sink.on_frame(event);
}

void JitterBuffer::drop_head(DropReason reason, uint64_t now_ns, FrameSink& sink) {
  const Frame& frame = frames_[order_[0]];
  const size_t count = gather_packets(frame);
  DropEvent event;
  event.packets = std::span<const PacketRef>(scratch_.data(), count);
  event.rtp_timestamp = static_cast<uint32_t>(frame.timestamp);
  event.reason = reason;
  event.now_ns = now_ns;
  ++counters_.frames_dropped[static_cast<size_t>(reason)];
  counters_.packets_dropped += count;
  ++counters_.keyframe_requests;
  keyframe_request_ = true;
  retire_head();
  sink.on_drop(event);
}

void JitterBuffer::report_lost_gap(uint64_t now_ns, FrameSink& sink) {
  // The head's start is known, so whatever lay between floor_ and it is given up.
  floor_ = frames_[order_[0]].min_sequence;
  floor_starts_frame_ = true;
  DropEvent event;
  event.reason = DropReason::kLost;
  event.now_ns = now_ns;
  ++counters_.frames_dropped[static_cast<size_t>(DropReason::kLost)];
  ++counters_.keyframe_requests;
  keyframe_request_ = true;
  sink.on_drop(event);
}

void JitterBuffer::retire_head() {
  const uint32_t index = order_[0];
  const Frame& frame = frames_[index];
  floor_ = frame.max_sequence + 1;
  floor_starts_frame_ = true;
  last_retired_timestamp_ = frame.timestamp;
  retired_any_ = true;
  std::copy(order_.begin() + 1, order_.begin() + order_count_, order_.begin());
  --order_count_;
  free_frames_[free_count_++] = index;
}

void JitterBuffer::record_lateness(const Frame& frame) {
  // How late the frame's last original packet came against its sender time; repaired packets
  // are left out, or each repair would pull the target up by a round trip.
  const int64_t lateness =
      saturating_sub(to_signed(frame.last_original_arrival_ns), mapped_ns(frame.timestamp));
  // The window is kept twice: in arrival order (to know which sample leaves) and sorted (so a
  // percentile is an index). Moving one sample in the sorted copy costs a short memmove per
  // frame instead of a selection over the window.
  const auto sorted_begin = lateness_sorted_.begin();
  if (lateness_count_ == lateness_.size()) {
    const int64_t leaving = lateness_[lateness_next_];
    const auto at = std::lower_bound(sorted_begin, sorted_begin + lateness_count_, leaving);
    std::copy(at + 1, sorted_begin + lateness_count_, at);
    --lateness_count_;
  }
  const auto at = std::upper_bound(sorted_begin, sorted_begin + lateness_count_, lateness);
  std::copy_backward(at, sorted_begin + lateness_count_, sorted_begin + lateness_count_ + 1);
  *at = lateness;
  ++lateness_count_;
  lateness_[lateness_next_] = lateness;
  lateness_next_ = (lateness_next_ + 1) % lateness_.size();
  update_target();
}

void JitterBuffer::update_target() {
  const int64_t lowest = lateness_sorted_[0];
  const int64_t high = lateness_sorted_[(lateness_count_ - 1) * config_.percentile / 100];
  lateness_base_ns_ = lowest;
  const uint64_t spread = to_unsigned(saturating_sub(high, lowest));
  target_ns_ = std::clamp(spread, config_.target_floor_ns, config_.target_ceiling_ns);
  counters_.target_delay_ns = target_ns_;
}

}  // namespace syncd::jitter
