// The sender's pacer: a leaky bucket that spreads packets at pacing_factor x the target rate, so
// a frame's packets leave within a fraction of a frame interval instead of as one burst into the
// path's queue (which the receiver's delay estimate would read as congestion, and a shallow
// bottleneck buffer would drop).
//
// Virtual finish time V: a packet may leave at now when V <= now; sending it sets
//     V = max(V, now - burst_ns) + size x 8 / pacing_rate
// so after an idle spell at most burst_ns worth of credit (plus one packet) goes out back to
// back, and a late timer catches up by the same budget at most. The queue is bounded in packets
// (refused at enqueue, kQueueFull) and in time: a packet older than max_queue_delay_ns when it
// reaches the head is dropped (kDroppedExpired) rather than sent late; the caller is told, so it
// can free the packet's buffer, and both are counted.
//
// Pure code: times are passed in; the queue's storage is allocated once, in the constructor.
// Any thread; not thread-safe; one instance per sent session (the relay thread's timer asks
// pop_due() "what may go now" and next_event_ns() "when next").
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace syncd::congestion {

struct PacerConfig {
  uint32_t capacity_packets = 4096;
  uint64_t max_queue_delay_ns = 150'000'000;  // the sender's share of the latency budget
  double pacing_factor = 2.5;                 // pacing rate = factor x target; below 1 means 1
  uint64_t burst_ns = 2'000'000;              // credit kept over idle time, and timer slack
  uint64_t initial_target_bps = 8'000'000;
  uint64_t min_pacing_bps = 50'000;  // floor: a zero target must not stall the queue
  uint32_t max_packet_bytes = 65'535;
  // When not 0, the pacer goes faster than the pacing rate when it must to send every queued
  // packet within this long of its enqueue: the rate is at least queued bytes / the time the
  // oldest has left. For a source that cannot slow down (a relayed stream of fixed bit rate,
  // before an encoder follows the estimate), a target below its rate would otherwise only
  // build a queue here until packets expire; pacing still spreads each frame's packets.
  uint64_t drain_within_ns = 0;
};

enum class EnqueueResult : uint8_t {
  kQueued,
  kQueueFull,  // capacity_packets already queued
  kEmpty,      // size 0
  kTooLarge,   // above max_packet_bytes
};

enum class PacketDisposition : uint8_t {
  kSend,            // send it now
  kDroppedExpired,  // waited longer than max_queue_delay_ns: drop it
};

struct PacedPacket {
  uint64_t id = 0;  // the caller's handle (a slot index, a sequence number)
  uint32_t size_bytes = 0;
  PacketDisposition disposition = PacketDisposition::kSend;
  uint64_t enqueued_ns = 0;
};

struct PacerCounters {
  uint64_t enqueued = 0;
  uint64_t sent = 0;
  uint64_t sent_bytes = 0;
  uint64_t refused_full = 0;
  uint64_t refused_empty = 0;
  uint64_t refused_too_large = 0;
  uint64_t dropped_expired = 0;
  uint64_t dropped_expired_bytes = 0;
};

class Pacer {
 public:
  static constexpr uint64_t kNoEvent = std::numeric_limits<uint64_t>::max();

  explicit Pacer(PacerConfig config = {});

  // The target rate from SendRateController; the pacer sends at pacing_factor x it (and faster
  // when drain_within_ns says it must).
  void set_target_rate(uint64_t target_bps);
  uint64_t pacing_bps() const { return pacing_bps_; }
  // The bucket's depth (PacerConfig::burst_ns) from now on: a sender may let whole frames out
  // at once on a clean path and spread them again when the path drops packets.
  void set_burst_ns(uint64_t burst_ns) { config_.burst_ns = burst_ns; }
  uint64_t burst_ns() const { return config_.burst_ns; }
  // PacerConfig's pacing_factor and drain_within_ns from now on (the pacing rate follows at
  // once): a sender paces at the rate a policer passes once it knows of one.
  void set_pacing(double pacing_factor, uint64_t drain_within_ns);

  EnqueueResult enqueue(uint64_t now_ns, uint64_t id, uint32_t size_bytes);

  // Fills out with the packets to act on at now_ns, in queue order: those that may be sent now
  // and, before them, any that expired. Returns how many; stops at out.size(). At most out.size()
  // packets are looked at.
  size_t pop_due(uint64_t now_ns, std::span<PacedPacket> out);

  // When pop_due() next has something to return: now_ns when it has now, kNoEvent when empty.
  uint64_t next_event_ns(uint64_t now_ns) const;

  size_t queued_packets() const { return count_; }
  uint64_t queued_bytes() const { return queued_bytes_; }
  // How long the head has waited (0 when empty).
  uint64_t oldest_age_ns(uint64_t now_ns) const;
  const PacerCounters& counters() const { return counters_; }

 private:
  struct Entry {
    uint64_t id;
    uint64_t enqueued_ns;
    uint32_t size_bytes;
  };

  bool expired(const Entry& entry, uint64_t now_ns) const {
    return now_ns > entry.enqueued_ns && now_ns - entry.enqueued_ns > config_.max_queue_delay_ns;
  }
  void pop_head();
  // The rate the head packet leaves at: the pacing rate, or the drain rate when higher.
  uint64_t send_rate_bps(const Entry& head, uint64_t now_ns) const;

  PacerConfig config_;
  std::vector<Entry> ring_;  // capacity_packets entries, sized once
  size_t head_ = 0;
  size_t count_ = 0;
  uint64_t queued_bytes_ = 0;
  uint64_t target_bps_ = 0;
  uint64_t pacing_bps_ = 0;
  bool started_ = false;
  uint64_t virtual_finish_ns_ = 0;
  PacerCounters counters_;
};

}  // namespace syncd::congestion
