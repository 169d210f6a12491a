#include "relay/padding_probe.h"

#include <limits>

namespace syncd::relay {

void PaddingProbe::start(Kind kind, uint64_t bps, uint64_t now_ns, uint64_t bytes_sent) {
  kind_ = kind;
  bps_ = bps;
  padding_ = bps != 0;
  started_ns_ = now_ns;
  start_bytes_ = bytes_sent;
  reached_ = false;
  have_first_ = false;
}

void PaddingProbe::on_media_sent(uint16_t sequence) {
  if (!padding_ || have_first_) return;
  first_sequence_ = sequence;
  have_first_ = true;
}

bool PaddingProbe::lost(uint16_t sequence) const {
  return running() && kind_ == Kind::kCeiling && have_first_ &&
         int16_t(uint16_t(sequence - first_sequence_)) >= 0;
}

PaddingProbe::Step PaddingProbe::advance(uint64_t now_ns, uint64_t bytes_sent, uint64_t rtt_ns) {
  if (!running()) return Step::kNone;
  const uint64_t elapsed = now_ns - started_ns_;
  if (kind_ == Kind::kFasterPath) return elapsed >= kFasterPathNs ? Step::kDone : Step::kNone;
  if (padding_ && elapsed >= kCeilingNs) {
    padding_ = false;  // what was sent has a round trip to be NACKed
    reached_ = double(bytes_sent - start_bytes_) * 8e9 / double(elapsed) >= kReached * double(bps_);
    return Step::kPaddingDone;
  }
  // It must have sent at the rate it tests, and media with it, to say anything: else not
  // carried (it is tried again later).
  if (!padding_ && elapsed >= kCeilingNs + rtt_ns + kGraceNs)
    return have_first_ && reached_ ? Step::kCarried : Step::kLost;
  return Step::kNone;
}

void PaddingProbe::end(uint64_t now_ns, uint16_t newest_media) {
  bps_ = 0;
  padding_ = false;
  ended_ns_ = now_ns;
  last_sequence_ = newest_media;
}

bool PaddingProbe::holds_loss_of(uint64_t span_start_ns, uint32_t span_start_sequence,
                                 uint64_t now_ns) const {
  // Sequence numbers are compared only while they cannot have wrapped since (kTailNs).
  return running() || span_start_ns < ended_ns_ ||
         (ended_ns_ != 0 && now_ns - ended_ns_ < kTailNs &&
          int16_t(uint16_t(span_start_sequence - last_sequence_)) < 0);
}

uint64_t PaddingProbe::next_wakeup_ns() const {
  return running() ? started_ns_ + length_ns() : std::numeric_limits<uint64_t>::max();
}

}  // namespace syncd::relay
