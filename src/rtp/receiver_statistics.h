// Per-source receiver statistics for RTCP report blocks: sequence validation and loss (RFC 3550
// sections A.1 and A.3) and interarrival jitter (section A.8), from (sequence, RTP timestamp,
// arrival time) inputs. Feed it the original media stream only (after RTX unwrap and FEC
// recovery, a recovered packet counts as received); its arrival time is then the repair's.
//
// Pure: arrival times are passed in as nanoseconds of a monotonic clock. Any thread; not
// thread-safe; one instance per received SSRC.
#pragma once

#include <cstdint>

#include "rtp/rtcp.h"

namespace syncd::rtp {

struct ReceiverStatisticsConfig {
  // RFC 3550 A.1: a source is valid after this many packets in sequence (MIN_SEQUENTIAL);
  // packets during probation are not counted. 1 accepts the first packet at once.
  uint32_t min_sequential = 2;
  // A.1 MAX_DROPOUT and MAX_MISORDER: a jump ahead of less than max_dropout is loss; a number
  // up to max_misorder behind is a late or duplicate packet; anything else is a restart,
  // believed once two packets in a row say so.
  uint16_t max_dropout = 3000;
  uint16_t max_misorder = 100;
};

struct ReceiverStatisticsCounters {
  uint64_t probation = 0;  // packets seen while the source was on probation (not counted)
  uint64_t bad_jump = 0;   // packets refused as a large jump (A.1 bad_seq)
  uint64_t restarts = 0;   // sequence restarts accepted (two in a row after a jump)
  uint64_t late = 0;       // late or duplicate packets (counted in received, as A.1 does)
};

class ReceiverStatistics {
 public:
  explicit ReceiverStatistics(uint32_t clock_rate_hz, ReceiverStatisticsConfig config = {});

  // One received packet. Returns true when A.1 counts it as valid.
  bool on_packet(uint16_t sequence, uint32_t rtp_timestamp, uint64_t arrival_ns);
  // An SR from this source arrived (its NTP timestamp): for LSR and DLSR in the next report.
  void on_sender_report(uint64_t ntp_timestamp, uint64_t arrival_ns);

  // Fills a report block for this source as of now_ns, and starts the next "since the last
  // report" interval for fraction lost (A.3).
  ReportBlock make_report_block(uint32_t source_ssrc, uint64_t now_ns);

  bool valid() const { return probation_ == 0 && started_; }
  uint64_t received() const { return received_; }
  uint64_t expected() const;
  int64_t cumulative_lost() const { return static_cast<int64_t>(expected()) - int64_t(received_); }
  // cycles << 16 | highest sequence, truncated to the 32 bits of a report block.
  uint32_t extended_highest_sequence() const {
    return static_cast<uint32_t>(cycles_ + max_sequence_);
  }
  // Interarrival jitter, RTP timestamp units (A.8), and in nanoseconds.
  uint32_t jitter() const;
  uint64_t jitter_ns() const;
  const ReceiverStatisticsCounters& counters() const { return counters_; }

 private:
  void init_sequence(uint16_t sequence);
  bool update_sequence(uint16_t sequence);
  uint32_t to_rtp_units(uint64_t ns) const;

  uint32_t clock_rate_hz_;
  ReceiverStatisticsConfig config_;
  bool started_ = false;
  uint32_t probation_ = 0;
  uint16_t max_sequence_ = 0;
  uint32_t bad_sequence_ = 0;  // 0x10001 = none (A.1: RTP_SEQ_MOD + 1)
  uint64_t cycles_ = 0;        // wraps * 65536
  uint32_t base_sequence_ = 0;
  uint64_t received_ = 0;
  uint64_t expected_prior_ = 0;
  uint64_t received_prior_ = 0;
  bool have_transit_ = false;
  uint32_t transit_ = 0;
  uint64_t jitter_q4_ = 0;  // jitter * 16, as A.8 keeps it to avoid rounding loss
  bool have_sr_ = false;
  uint32_t last_sr_ = 0;
  uint64_t last_sr_arrival_ns_ = 0;
  ReceiverStatisticsCounters counters_;
};

}  // namespace syncd::rtp
