#include "rtp_media/send_stream.h"

#include <algorithm>

namespace syncd::rtp_media {

SendStream::SendStream(SendStreamConfig config, transport::PacketStore& store)
    : config_(config),
      store_(store),
      clock_(config.clock_rate, config.clock_offset),
      next_sequence_(config.first_sequence),
      handles_(std::make_unique<uint32_t[]>(config.history)),
      sequences_(std::make_unique<uint16_t[]>(config.history)),
      resent_ns_(std::make_unique<uint64_t[]>(config.history)) {
  std::fill_n(handles_.get(), config_.history, transport::PacketStore::kNone);
}

SendStream::~SendStream() {
  for (uint32_t i = 0; i < config_.history; ++i)
    if (handles_[i] != transport::PacketStore::kNone) store_.release(handles_[i]);
}

void SendStream::remember(uint16_t sequence, uint32_t handle) {
  const size_t at = sequence % config_.history;
  if (handles_[at] != transport::PacketStore::kNone) store_.release(handles_[at]);
  store_.hold(handle);
  handles_[at] = handle;
  sequences_[at] = sequence;
  resent_ns_[at] = 0;
}

bool SendStream::holds(uint16_t sequence) const {
  const size_t at = sequence % config_.history;
  return handles_[at] != transport::PacketStore::kNone && sequences_[at] == sequence;
}

std::span<uint8_t> SendStream::packet(uint16_t sequence) {
  return store_.packet(handles_[sequence % config_.history]);
}

NackAnswer SendStream::answer_nack(uint16_t sequence, uint64_t now_ns, uint64_t hold_ns) const {
  if (!holds(sequence)) return NackAnswer::kUnavailable;
  const uint64_t resent = resent_ns_[sequence % config_.history];
  if (resent != 0 && now_ns - resent < hold_ns) return NackAnswer::kJustResent;
  return NackAnswer::kResend;
}

void SendStream::mark_resent(uint16_t sequence, uint64_t now_ns) {
  if (holds(sequence)) resent_ns_[sequence % config_.history] = now_ns;
}

rtp::SenderInfo SendStream::sender_info(uint64_t now_ns, uint64_t wall_ntp_ns) const {
  rtp::SenderInfo info;
  info.ntp_timestamp = rtp::ntp_from_ns(wall_ntp_ns);
  info.rtp_timestamp = clock_.at(now_ns);
  info.packet_count = packets_sent_;
  info.octet_count = octets_sent_;
  return info;
}

void SendStream::on_frame(uint64_t now_ns) {
  // A second's gap is a pause, not a rate.
  if (last_frame_ns_ != 0 && now_ns > last_frame_ns_ && now_ns - last_frame_ns_ < 1'000'000'000) {
    const uint64_t gap = now_ns - last_frame_ns_;
    frame_interval_ns_ = frame_interval_ns_ ? (frame_interval_ns_ * 7 + gap) / 8 : gap;
  }
  last_frame_ns_ = now_ns;
}

void SendStream::on_media_sent(uint16_t sequence, bool last_of_frame, uint64_t now_ns) {
  if (!last_of_frame) {
    tail_probe_due_ns_ = kNoProbe;  // a later frame's packet shows any gap before it
    return;
  }
  const uint64_t wait = std::clamp<uint64_t>(
      frame_interval_ns_ ? 2 * frame_interval_ns_ : 50'000'000, 10'000'000, 500'000'000);
  tail_sequence_ = sequence;
  tail_probe_due_ns_ = now_ns + wait;
}

std::optional<uint16_t> SendStream::take_tail_probe() {
  tail_probe_due_ns_ = kNoProbe;
  if (!holds(tail_sequence_)) return std::nullopt;
  return tail_sequence_;
}

}  // namespace syncd::rtp_media
