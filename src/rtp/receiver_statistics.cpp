#include "rtp/receiver_statistics.h"

#include <algorithm>

namespace syncd::rtp {

namespace {
constexpr uint32_t kSequenceMod = 1u << 16;  // RTP_SEQ_MOD
constexpr uint64_t kNanosPerSecond = 1'000'000'000;
}  // namespace

ReceiverStatistics::ReceiverStatistics(uint32_t clock_rate_hz, ReceiverStatisticsConfig config)
    : clock_rate_hz_(clock_rate_hz == 0 ? 1 : clock_rate_hz), config_(config) {
  config_.min_sequential = std::max<uint32_t>(config_.min_sequential, 1);
}

void ReceiverStatistics::init_sequence(uint16_t sequence) {
  base_sequence_ = sequence;
  max_sequence_ = sequence;
  bad_sequence_ = kSequenceMod + 1;
  cycles_ = 0;
  received_ = 0;
  received_prior_ = 0;
  expected_prior_ = 0;
}

// RFC 3550 section A.1, update_seq(), with the 64-bit cycle count.
bool ReceiverStatistics::update_sequence(uint16_t sequence) {
  const auto udelta = static_cast<uint16_t>(sequence - max_sequence_);
  if (probation_ > 0) {
    // Packets must be in sequence to leave probation.
    if (sequence == static_cast<uint16_t>(max_sequence_ + 1)) {
      --probation_;
      max_sequence_ = sequence;
      if (probation_ == 0) {
        init_sequence(sequence);
        ++received_;
        return true;
      }
    } else {
      probation_ = config_.min_sequential - 1;
      max_sequence_ = sequence;
    }
    ++counters_.probation;
    return false;
  }
  if (udelta < config_.max_dropout) {
    // In order, with a permissible gap; a smaller number means the 16-bit counter wrapped.
    if (sequence < max_sequence_) cycles_ += kSequenceMod;
    max_sequence_ = sequence;
  } else if (udelta <= kSequenceMod - config_.max_misorder) {
    // A very large jump: believe it only when the next packet follows it (the source restarted).
    if (sequence == bad_sequence_) {
      init_sequence(sequence);
      ++counters_.restarts;
    } else {
      bad_sequence_ = (uint32_t{sequence} + 1) & (kSequenceMod - 1);
      ++counters_.bad_jump;
      return false;
    }
  } else {
    ++counters_.late;  // duplicate or reordered
  }
  ++received_;
  return true;
}

uint32_t ReceiverStatistics::to_rtp_units(uint64_t ns) const {
  // Split so nothing overflows; the result wraps like an RTP timestamp.
  const uint64_t seconds = ns / kNanosPerSecond;
  const uint64_t fraction = ns % kNanosPerSecond;
  return static_cast<uint32_t>(seconds * clock_rate_hz_ +
                               fraction * clock_rate_hz_ / kNanosPerSecond);
}

bool ReceiverStatistics::on_packet(uint16_t sequence, uint32_t rtp_timestamp, uint64_t arrival_ns) {
  if (!started_) {
    // A.1: a new source starts on probation, as if the packet before this one had been seen.
    started_ = true;
    init_sequence(sequence);
    max_sequence_ = static_cast<uint16_t>(sequence - 1);
    probation_ = config_.min_sequential;
  }
  if (!update_sequence(sequence)) return false;
  // A.8: transit = arrival - timestamp in RTP units; D = difference of consecutive transits;
  // J += (|D| - J) / 16, kept scaled by 16.
  const uint32_t transit = to_rtp_units(arrival_ns) - rtp_timestamp;
  if (have_transit_) {
    const int64_t d = static_cast<int32_t>(transit - transit_);
    const uint64_t magnitude = static_cast<uint64_t>(d < 0 ? -d : d);
    jitter_q4_ = jitter_q4_ + magnitude - ((jitter_q4_ + 8) >> 4);
  }
  transit_ = transit;
  have_transit_ = true;
  return true;
}

void ReceiverStatistics::on_sender_report(uint64_t ntp_timestamp, uint64_t arrival_ns) {
  have_sr_ = true;
  last_sr_ = ntp_compact(ntp_timestamp);
  last_sr_arrival_ns_ = arrival_ns;
}

uint64_t ReceiverStatistics::expected() const {
  if (!valid()) return 0;
  return cycles_ + max_sequence_ - base_sequence_ + 1;
}

uint32_t ReceiverStatistics::jitter() const {
  return static_cast<uint32_t>(std::min<uint64_t>(jitter_q4_ >> 4, UINT32_MAX));
}

uint64_t ReceiverStatistics::jitter_ns() const {
  return (jitter_q4_ >> 4) * kNanosPerSecond / clock_rate_hz_;
}

ReportBlock ReceiverStatistics::make_report_block(uint32_t source_ssrc, uint64_t now_ns) {
  ReportBlock block;
  block.source_ssrc = source_ssrc;
  const uint64_t expected_now = expected();
  // A.3: fraction lost over the interval since the last report; 0 when duplicates outnumber
  // losses.
  const uint64_t expected_interval = expected_now - expected_prior_;
  const uint64_t received_interval = received_ - received_prior_;
  expected_prior_ = expected_now;
  received_prior_ = received_;
  const int64_t lost_interval =
      static_cast<int64_t>(expected_interval) - static_cast<int64_t>(received_interval);
  if (expected_interval != 0 && lost_interval > 0) {
    block.fraction_lost = static_cast<uint8_t>(
        std::min<uint64_t>((static_cast<uint64_t>(lost_interval) << 8) / expected_interval, 255));
  }
  block.cumulative_lost = static_cast<int32_t>(
      std::clamp<int64_t>(cumulative_lost(), kMinCumulativeLost, kMaxCumulativeLost));
  block.extended_highest_sequence = valid() ? extended_highest_sequence() : 0;
  block.jitter = jitter();
  if (have_sr_) {
    block.last_sr = last_sr_;
    block.delay_since_last_sr =
        now_ns >= last_sr_arrival_ns_ ? compact_from_ns(now_ns - last_sr_arrival_ns_) : 0;
  }
  return block;
}

}  // namespace syncd::rtp
