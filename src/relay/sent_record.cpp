#include "relay/sent_record.h"

#include <algorithm>

namespace syncd::relay {

void SentRecord::sample(uint64_t now_ns) {
  if (now_ns < next_sample_ns_) return;
  next_sample_ns_ = now_ns + kSampleNs;
  head_ = (head_ + 1) % kSamples;
  samples_[head_] = {now_ns, bytes_, media_bytes_, padding_bytes_};
  count_ = std::min(count_ + 1, kSamples);
}

size_t SentRecord::samples_back(size_t samples) const {
  return std::min(samples, count_ - std::min<size_t>(count_, 1));
}

uint64_t SentRecord::sent_bps(size_t samples) const {
  samples = samples_back(samples);
  if (samples == 0) return 0;
  const Sample& now = samples_[head_];
  const Sample& then = samples_[(head_ + kSamples - samples) % kSamples];
  const uint64_t dt = now.at_ns - then.at_ns;
  return dt > 0 ? (now.bytes - then.bytes) * 8 * 1'000'000'000ull / dt : 0;
}

uint64_t SentRecord::sent_bps_between(uint16_t first, uint16_t last) const {
  const Mark& a = marks_[first % kMarks];
  const Mark& b = marks_[last % kMarks];
  if (!a.valid || !b.valid || a.sequence != first || b.sequence != last) return 0;
  if (b.at_ns < a.at_ns + kMinMarkSpanNs || b.bytes < a.bytes) return 0;
  return (b.bytes - a.bytes) * 8 * 1'000'000'000ull / (b.at_ns - a.at_ns);
}

double SentRecord::media_share() const {
  const size_t samples = samples_back(kSamples - 1);
  if (samples == 0) return 0;
  const Sample& now = samples_[head_];
  const Sample& then = samples_[(head_ + kSamples - samples) % kSamples];
  // Padding is not the encoder's to spend: it goes only while probing.
  const uint64_t total = (now.bytes - then.bytes) - (now.padding_bytes - then.padding_bytes);
  if (total < kMinShareBytes) return 0;
  return std::clamp(double(now.media_bytes - then.media_bytes) / double(total), kMinMediaShare,
                    kMaxMediaShare);
}

std::optional<LossSample> SentRecord::loss_sample(uint32_t extended_highest_sequence,
                                                  int32_t cumulative_lost, uint64_t now_ns,
                                                  bool restart) {
  const uint32_t expected = extended_highest_sequence - span_sequence_;
  std::optional<LossSample> sample;
  if (span_open_ && !restart && expected <= 0x8000'0000u) {
    if (now_ns - span_start_ns_ < kLossSampleNs || expected < kLossSamplePackets)
      return std::nullopt;  // the span goes on
    const double lost = double(cumulative_lost) - span_lost_;
    LossSample s;
    s.fraction = std::clamp(lost / expected, 0.0, 1.0);
    s.from_ns = span_start_ns_;
    // Between the wire times of its first and last packets, or failing that over the last
    // samples of the rate.
    s.sent_bps = sent_bps_between(uint16_t(span_sequence_), uint16_t(extended_highest_sequence));
    if (s.sent_bps == 0) {
      const size_t n = size_t((now_ns - span_start_ns_) / kSampleNs);
      s.sent_bps = sent_bps(std::clamp<size_t>(n, 1, kSamples - 1));
    }
    sample = s;
  }
  span_open_ = true;
  span_sequence_ = extended_highest_sequence;
  span_lost_ = cumulative_lost;
  span_start_ns_ = now_ns;
  return sample;
}

}  // namespace syncd::relay
