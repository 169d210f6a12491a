#include "audio_codec/playout_buffer.h"

#include <algorithm>
#include <cstring>

namespace syncd::audio_codec {

PlayoutBuffer::PlayoutBuffer(const PlayoutConfig& config) : config_(config) {
  config_.groups = std::clamp<uint32_t>(config_.groups, 1, 32);
  config_.capacity_frames = std::max<uint32_t>(config_.capacity_frames, 2);
  config_.frame_samples = std::max<uint32_t>(config_.frame_samples, 120);
  slots_ = std::make_unique<Slot[]>(config_.capacity_frames);
  bytes_ = std::make_unique<uint8_t[]>(size_t(config_.capacity_frames) * config_.groups *
                                       config_.max_packet_bytes);
  sizes_ = std::make_unique<uint16_t[]>(size_t(config_.capacity_frames) * config_.groups);
}

uint8_t* PlayoutBuffer::packet_at(uint64_t frame, uint32_t group) {
  const size_t slot = frame % config_.capacity_frames;
  return bytes_.get() + (slot * config_.groups + group) * config_.max_packet_bytes;
}

bool PlayoutBuffer::insert(uint32_t rtp_timestamp, uint32_t group, std::span<const uint8_t> packet,
                           uint64_t now_ns) {
  ++counters_.packets_in;
  if (group >= config_.groups || packet.empty() || packet.size() > config_.max_packet_bytes) {
    ++counters_.packets_refused;
    return false;
  }
  uint64_t index;
  if (!started_ || stalled_) {
    if (stalled_) {
      ++counters_.restarts;
      for (uint32_t i = 0; i < config_.capacity_frames; ++i) slots_[i].frame = UINT64_MAX;
      stalled_ = false;
      underflowing_ = false;
      underflow_run_ = 0;
    }
    index = rtp_timestamp;
    base_index_ = index;
    newest_index_ = index;
    next_frame_ = 0;
    newest_frame_ = 0;
    anchor_ns_ = now_ns;
    started_ = true;
  } else {
    // RFC 3550 timestamps wrap at 2^32 (~24.9 h at 48 kHz): unwrap around the newest.
    const int32_t delta = int32_t(rtp_timestamp - uint32_t(newest_index_));
    if (delta < 0 && uint64_t(-int64_t(delta)) > newest_index_ - base_index_) {
      ++counters_.packets_late;  // before the first frame
      return false;
    }
    index = uint64_t(int64_t(newest_index_) + delta);
  }
  const uint64_t offset = index - base_index_;
  if (offset % config_.frame_samples != 0) {
    ++counters_.packets_misaligned;
    return false;
  }
  const uint64_t frame = offset / config_.frame_samples;
  if (frame < next_frame_) {
    ++counters_.packets_late;
    return false;
  }
  if (frame >= next_frame_ + config_.capacity_frames) {
    ++counters_.packets_overflow;
    return false;
  }
  // The fastest path seen sets when frame 0 would have arrived; a frame plays target_ns later.
  const uint64_t expected = anchor_ns_ + frame * frame_ns();
  if (now_ns < expected) anchor_ns_ -= expected - now_ns;
  Slot& slot = slot_of(frame);
  if (slot.frame != frame) {
    slot.frame = frame;
    slot.present = 0;
  }
  if (slot.present & (1u << group)) {
    ++counters_.packets_duplicate;
    return false;
  }
  std::memcpy(packet_at(frame, group), packet.data(), packet.size());
  sizes_[(frame % config_.capacity_frames) * config_.groups + group] = uint16_t(packet.size());
  slot.present |= 1u << group;
  if (index > newest_index_) newest_index_ = index;
  if (frame > newest_frame_) newest_frame_ = frame;
  return true;
}

uint64_t PlayoutBuffer::next_due_ns() const {
  if (!started_) return UINT64_MAX;
  return anchor_ns_ + config_.target_ns + next_frame_ * frame_ns();
}

uint32_t PlayoutBuffer::held_frames() const {
  if (!started_ || newest_frame_ < next_frame_) return 0;
  uint32_t held = 0;
  for (uint64_t f = next_frame_; f <= newest_frame_; ++f)
    if (slots_[f % config_.capacity_frames].frame == f) ++held;
  return held;
}

bool PlayoutBuffer::pop(uint64_t now_ns, PlayoutFrame& out) {
  if (!started_ || stalled_ || now_ns < next_due_ns()) return false;
  const uint64_t frame = next_frame_;
  const Slot& slot = slots_[frame % config_.capacity_frames];
  const uint32_t present = slot.frame == frame ? slot.present : 0;
  const uint64_t next = frame + 1;
  const Slot& next_slot = slots_[next % config_.capacity_frames];
  const uint32_t next_present = next_slot.frame == next ? next_slot.present : 0;
  const bool later_held = newest_frame_ > frame;
  out.capture_index = base_index_ + frame * config_.frame_samples;
  out.due_ns = next_due_ns();
  bool recovered = false, concealed = false;
  for (uint32_t g = 0; g < config_.groups; ++g) {
    const size_t at = (frame % config_.capacity_frames) * config_.groups + g;
    const size_t next_at = (next % config_.capacity_frames) * config_.groups + g;
    if (present & (1u << g)) {
      out.action[g] = GroupAction::kDecode;
      out.packet[g] = {packet_at(frame, g), sizes_[at]};
    } else if (next_present & (1u << g)) {
      out.action[g] = GroupAction::kRecover;
      out.packet[g] = {packet_at(next, g), sizes_[next_at]};
      recovered = true;
    } else {
      out.action[g] = GroupAction::kConceal;
      out.packet[g] = {};
      concealed = true;
    }
  }
  if (concealed) {
    if (later_held) {
      ++counters_.frames_concealed_lost;
      underflowing_ = false;
      underflow_run_ = 0;
    } else {
      if (present == 0 && underflow_run_ >= config_.max_underflow_frames) {
        // Nothing has come for a while: stop rather than conceal forever.
        ++counters_.stalls;
        stalled_ = true;
        return false;
      }
      ++counters_.frames_concealed_underflow;
      if (!underflowing_) ++counters_.underflows;
      underflowing_ = true;
      ++underflow_run_;
    }
  } else {
    underflowing_ = false;
    underflow_run_ = 0;
    if (recovered)
      ++counters_.frames_recovered;
    else
      ++counters_.frames_played;
  }
  slots_[frame % config_.capacity_frames].frame = UINT64_MAX;
  next_frame_ = next;
  if (newest_frame_ < next_frame_) newest_frame_ = next_frame_ - 1;
  return true;
}

}  // namespace syncd::audio_codec
