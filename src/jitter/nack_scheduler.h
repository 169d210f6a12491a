// NACK scheduling for one RTP media stream: from the gaps in the received sequence numbers,
// which packets to ask the sender for again (RFC 4585 section 6.2.1, generic NACK), and when.
//
// A missing packet is first requested after a reorder allowance (it may only be late), which
// adapts to the reordering seen: a high percentile of how long, and by how many packets, the
// originals that did turn up late were overtaken. Then it is requested again every round trip while
// it can still arrive before its frame's deadline (from the jitter buffer, through DeadlineSource),
// up to a number of tries. docs/wan.md, "Jitter buffer and repair", gives the defaults and why.
//
// Pure code: no sockets, clocks, threads, logs, exceptions or allocation after construction;
// bounded work per call. Threads: any thread; not thread-safe; one instance per received stream,
// driven by the thread that owns the session.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "jitter/jitter_buffer.h"

namespace syncd::jitter {

struct NackConfig {
  uint32_t capacity = 1024;  // missing packets tracked at most; the oldest are forgotten
  // First request once either allowance is exceeded: this long since the gap was seen, or this
  // many newer packets have arrived (0: time only). These are the floors; each rises to the
  // `reorder_percentile` of the late originals of the last `reorder_window` (time: up to
  // reorder_allowance_max_ns).
  uint64_t reorder_allowance_ns = 2'000'000;
  uint32_t reorder_allowance_packets = 5;
  uint64_t reorder_allowance_max_ns = 30'000'000;
  uint32_t reorder_percentile = 99;
  uint32_t reorder_window = 128;  // at most 4096
  // A retry waits rtt * retry_rtt_percent / 100 + retry_margin_ns after the previous request.
  uint32_t retry_rtt_percent = 100;
  uint64_t retry_margin_ns = 5'000'000;
  uint32_t max_tries = 10;
  // A jump forward by more than this many sequence numbers is not NACKed: the sender restarted
  // or skipped, and a keyframe request is the cheaper repair.
  uint32_t max_gap = 1000;
};

struct NackCounters {
  uint64_t missing = 0;              // packets found missing (gaps), in all
  uint64_t requested = 0;            // first requests
  uint64_t retried = 0;              // further requests for the same packet
  uint64_t recovered = 0;            // arrived after having been requested
  uint64_t spurious = 0;             // of those, the original, late (not a retransmission)
  uint64_t arrived_unrequested = 0;  // arrived late, before any request (reordering)
  uint64_t given_up_deadline = 0;    // could no longer arrive before its frame's deadline
  uint64_t given_up_tries = 0;       // max_tries requests went unanswered
  uint64_t forgotten = 0;            // pushed out by capacity
  uint64_t gaps_too_large = 0;       // jumps beyond max_gap, not requested
  uint64_t truncated = 0;            // collect() calls that had more to send than room
};

class NackScheduler {
 public:
  // Allocates all storage. Not for the data plane.
  explicit NackScheduler(const NackConfig& config = {});

  // Every received packet's extended sequence number (JitterBuffer::last_extended_sequence()),
  // whatever the jitter buffer made of it; `repaired`: it came from a retransmission or FEC, so
  // its lateness says nothing about reordering.
  void on_packet(uint64_t sequence, uint64_t now_ns, bool repaired = false);

  // Writes the 16-bit sequence numbers to request now into `out`, ascending, and returns how
  // many; the caller packs them into one generic NACK (PID + BLP, RFC 4585 6.2.1). At most
  // out.size(); the rest waits for the next call. `rtt_ns` is the current round-trip estimate.
  size_t collect(uint64_t now_ns, uint64_t rtt_ns, const DeadlineSource& deadlines,
                 std::span<uint16_t> out);

  // When collect() may next have something to send (UINT64_MAX: nothing tracked).
  uint64_t next_wakeup_ns(uint64_t rtt_ns) const;

  size_t tracked() const { return count_; }
  // The reorder allowance in force (time, packets).
  uint64_t reorder_allowance_ns() const { return allowance_ns_; }
  uint32_t reorder_allowance_packets() const { return allowance_packets_; }
  const NackCounters& counters() const { return counters_; }

 private:
  struct Entry {
    uint64_t sequence = 0;
    uint64_t detected_ns = 0;
    uint64_t last_sent_ns = 0;
    uint32_t tries = 0;
    bool resolved = false;
  };

  Entry& at(size_t i) { return entries_[(head_ + i) % entries_.size()]; }
  const Entry& at(size_t i) const { return entries_[(head_ + i) % entries_.size()]; }
  void push(uint64_t sequence, uint64_t now_ns);
  void pop_resolved();
  uint64_t retry_at(const Entry& entry, uint64_t rtt_ns) const;
  void record_reorder(uint64_t delay_ns, uint64_t distance);

  NackConfig config_;
  NackCounters counters_;
  std::vector<Entry> entries_;  // a ring, ascending by sequence
  size_t head_ = 0;
  size_t count_ = 0;
  uint64_t highest_ = 0;
  bool started_ = false;
  // Late originals: how long after the gap was seen, and how many newer packets had arrived.
  std::vector<uint64_t> reorder_delays_;
  std::vector<uint64_t> reorder_distances_;
  std::vector<uint64_t> reorder_scratch_;
  size_t reorder_count_ = 0;
  size_t reorder_next_ = 0;
  uint64_t allowance_ns_ = 0;
  uint32_t allowance_packets_ = 0;
};

}  // namespace syncd::jitter
