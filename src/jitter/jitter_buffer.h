// Jitter buffer for one RTP media stream (one SSRC, e.g. H.264 at 90 kHz): packets in, complete
// frames out, in order, at their playout time; frames that cannot be completed by their deadline
// are dropped so they never hold up the ones behind them for long. docs/wan.md, "Jitter buffer
// and repair", describes the rules and the defaults.
//
// Pure code: no sockets, clocks, threads, logs or exceptions; times come in as uint64
// nanoseconds of a monotonic clock. Everything is allocated at construction; insert() and
// advance() never allocate and do bounded work. The buffer does not hold payload bytes: the caller
// keeps them and passes a handle (an index into its own storage); each accepted handle comes back
// exactly once, in a released or a dropped frame. A refused packet's handle stays the caller's.
//
// Threads: any thread; not thread-safe; one instance per received stream, driven by the thread
// that owns the session (the relay thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "jitter/sequence.h"

namespace syncd::jitter {

// One received RTP packet, after SRTP unprotect and, for a retransmission, RTX unwrapping (RFC
// 4588 section 4: the original sequence number replaces the RTX one).
struct PacketIn {
  uint16_t sequence = 0;       // RTP sequence number (RFC 3550 section 5.1)
  uint32_t rtp_timestamp = 0;  // shared by every packet of a frame (access unit)
  bool marker = false;         // last packet of the frame (RFC 6184 section 5.1)
  // The caller knows this packet starts a frame (H.264: the depacketizer saw an access-unit
  // delimiter, SPS, or a slice with first_mb_in_slice 0 at its start). Optional; see
  // docs/wan.md for how a frame's first packet is otherwise known.
  bool starts_frame = false;
  bool repaired = false;  // came from FEC or a retransmission, not as sent first
  uint64_t arrival_ns = 0;
  uint32_t handle = 0;  // the caller's index for the payload bytes
  uint32_t length = 0;  // payload length, carried back in the events
};

// Why insert() refused a packet. The caller keeps (and frees) a refused packet's payload.
enum class InsertResult : uint8_t {
  kAccepted,
  kDuplicate,  // this sequence number is already held
  kLate,       // its frame was already released or dropped, or it is below the window
  kConflict,   // contradicts what is held: the sequence falls inside another frame's range, a
               // packet after its frame's marker, or a timestamp reused by a distant frame
  kNoRoom,     // all frame records are in use by frames that come after it
};

// Why a frame was dropped.
enum class DropReason : uint8_t {
  kIncomplete,  // some of its packets arrived, not all, by its deadline
  kLost,        // none of its packets arrived: a gap of sequence numbers before the next frame
                // stayed open past that frame's deadline (one event per gap, whatever it held)
  kEvicted,     // pushed out before its deadline: the window or the frame table overflowed
                // (a jump in sequence numbers, or more frames in flight than configured)
  kCount,
};

struct PacketRef {
  uint64_t sequence = 0;  // extended (unwrapped) sequence number
  uint32_t handle = 0;
  uint32_t length = 0;
};

// A frame going out. `packets` is in sequence order and valid only during the callback.
struct FrameEvent {
  std::span<const PacketRef> packets;
  uint32_t rtp_timestamp = 0;
  uint64_t first_arrival_ns = 0;  // earliest arrival of any of its packets
  uint64_t completion_ns = 0;     // arrival of the packet that completed it
  uint64_t release_ns = 0;        // the `now` of the advance() that released it
  uint64_t playout_ns = 0;        // the playout time it was held for (0: none yet)
  bool repaired = false;          // at least one packet came from FEC or retransmission
};

// A dropped frame: the handles of the packets it held (maybe none, for kLost), to be freed.
struct DropEvent {
  std::span<const PacketRef> packets;
  uint32_t rtp_timestamp = 0;  // 0 for kLost (unknown)
  DropReason reason = DropReason::kIncomplete;
  uint64_t now_ns = 0;
};

// Receives the buffer's events; called only from inside insert() and advance(), on their
// thread. A callback must not call back into the buffer.
class FrameSink {
 public:
  virtual ~FrameSink() = default;
  virtual void on_frame(const FrameEvent& frame) = 0;
  virtual void on_drop(const DropEvent& drop) = 0;
};

// When a frame's deadline lies, for the NACK scheduler: the latest time a missing packet can
// still be used. Implemented by JitterBuffer.
class DeadlineSource {
 public:
  virtual ~DeadlineSource() = default;
  // The deadline of the frame the missing packet `sequence` (extended) may belong to, or 0 when
  // it can no longer be used (its frame is gone).
  virtual uint64_t deadline_for(uint64_t sequence) const = 0;
};

enum class ReleaseMode : uint8_t {
  kPlayout,       // at max(completion, playout time): smooth, adds the target delay
  kWhenComplete,  // as soon as complete and in order: no added delay
};

struct JitterBufferConfig {
  uint32_t packet_capacity = 4096;  // packets held at most; rounded up to a power of two
  uint32_t frame_capacity = 128;    // frames in flight at most
  uint32_t clock_rate_hz = 90000;   // RTP clock of the payload format (H.264: RFC 6184 8.2.1)
  ReleaseMode mode = ReleaseMode::kPlayout;
  // Target delay: this percentile of the frames' lateness over the last `window_frames`
  // frames, above the lowest lateness in that window, clamped to [floor, ceiling].
  uint32_t window_frames = 120;  // 2 s at 60 fps; at most 1024
  uint32_t percentile = 95;
  uint64_t target_floor_ns = 2'000'000;
  uint64_t target_ceiling_ns = 80'000'000;
  // Repair budget, added to the playout time to make the deadline: rtt * rtt_factor_percent /
  // 100 + repair_margin_ns, clamped to [min, max]. The RTT comes from set_rtt().
  uint64_t initial_rtt_ns = 50'000'000;
  uint32_t rtt_factor_percent = 300;
  uint64_t repair_margin_ns = 10'000'000;
  uint64_t repair_budget_min_ns = 10'000'000;
  uint64_t repair_budget_max_ns = 250'000'000;
  // An incomplete frame with nothing after it is held this long past its deadline (its tail may
  // only be late), then dropped: the stream has paused or ended, and a tail lost there cannot
  // be NACKed (no later packet shows the gap). Bounded, so nothing is held forever.
  uint64_t lone_frame_hold_ns = 2'000'000'000;
};

struct JitterBufferCounters {
  uint64_t packets_in = 0;
  uint64_t packets_accepted = 0;
  uint64_t duplicates = 0;
  uint64_t late = 0;
  uint64_t conflicts = 0;
  uint64_t no_room = 0;
  uint64_t repaired_accepted = 0;  // accepted packets flagged repaired
  // Originals refused as duplicates of a repaired packet held: they were late, not lost, and
  // their repair came first.
  uint64_t originals_after_repair = 0;
  uint64_t frames_released = 0;
  uint64_t packets_released = 0;
  uint64_t frames_dropped[static_cast<size_t>(DropReason::kCount)] = {};
  uint64_t packets_dropped = 0;  // accepted packets handed back in drop events
  uint64_t keyframe_requests = 0;
  uint64_t target_delay_ns = 0;   // current target above the lowest lateness
  uint64_t repair_budget_ns = 0;  // current repair budget
};

class JitterBuffer final : public DeadlineSource {
 public:
  // Allocates all storage. Not for the data plane.
  explicit JitterBuffer(const JitterBufferConfig& config = {});

  // Files one packet and releases or drops whatever that settles (through `sink`). Never
  // throws or allocates. `now_ns` is the caller's clock (normally the packet's arrival).
  InsertResult insert(const PacketIn& packet, uint64_t now_ns, FrameSink& sink);

  // Releases frames whose playout time has come and drops frames past their deadline. Call at
  // next_wakeup_ns() (and after each batch of inserts); extra calls are harmless.
  void advance(uint64_t now_ns, FrameSink& sink);

  // When advance() next has something to do (UINT64_MAX: nothing pending).
  uint64_t next_wakeup_ns() const;

  // The extended sequence number insert() gave (or would give) `sequence`.
  uint64_t extend(uint16_t sequence) const { return sequences_.peek(sequence); }
  // The extended sequence of the last packet insert() looked at.
  uint64_t last_extended_sequence() const { return last_extended_; }

  // Round-trip time to the sender, for the repair budget (from RTCP RR's DLSR, RFC 3550 6.4.1).
  void set_rtt(uint64_t rtt_ns);
  // Local nanoseconds per RTP tick (nominally 1e9 / clock rate), from ClockSkewEstimator; the
  // mapping is re-anchored at the newest frame so that playout times do not jump.
  void set_local_ns_per_tick(double ns_per_tick);

  // True once after one or more drops: time to ask the sender for a keyframe (RFC 4585 PLI).
  bool take_keyframe_request();

  uint64_t deadline_for(uint64_t sequence) const override;

  const JitterBufferCounters& counters() const { return counters_; }
  size_t frames_in_flight() const { return order_count_; }
  size_t packets_held() const { return packets_held_; }

 private:
  static constexpr uint64_t kNoSequence = UINT64_MAX;

  struct Slot {
    uint64_t sequence = kNoSequence;  // kNoSequence: empty
    uint64_t arrival_ns = 0;
    uint32_t handle = 0;
    uint32_t length = 0;
    uint32_t frame = 0;  // index into frames_
    bool marker = false;
    bool starts_frame = false;
    bool repaired = false;
  };
  struct Frame {
    uint64_t timestamp = 0;  // extended RTP timestamp
    uint64_t min_sequence = 0;
    uint64_t max_sequence = 0;
    uint64_t first_arrival_ns = 0;
    uint64_t last_arrival_ns = 0;           // of any packet: completion when complete
    uint64_t last_original_arrival_ns = 0;  // of packets not repaired: the lateness sample
    uint32_t packets = 0;
    bool repaired = false;
    bool has_original = false;
  };

  struct Boundaries {
    bool start_known = false;
    bool end_known = false;
    bool complete = false;
    bool gap_before = false;  // the boundary before it is known and packets are missing there
  };

  Boundaries boundaries(const Frame& frame) const;
  int64_t playout_ns(const Frame& frame) const;  // may be negative before any history
  uint64_t deadline_ns(const Frame& frame) const;
  // When a lone incomplete frame is given up: its deadline plus the hold (saturating).
  uint64_t lone_frame_release_ns(const Frame& frame) const;
  int64_t mapped_ns(uint64_t timestamp) const;
  uint64_t repair_budget_ns() const;
  void record_lateness(const Frame& frame);
  void update_target();

  size_t find_frame(uint64_t timestamp) const;     // index into frames_, or SIZE_MAX
  size_t order_position(uint64_t sequence) const;  // first order_ index with min >= sequence
  bool make_room_for(uint64_t sequence, uint64_t now_ns, FrameSink& sink);
  void evict_head(uint64_t now_ns, FrameSink& sink);
  void release_head(uint64_t now_ns, FrameSink& sink);
  void drop_head(DropReason reason, uint64_t now_ns, FrameSink& sink);
  void report_lost_gap(uint64_t now_ns, FrameSink& sink);
  void retire_head();
  size_t gather_packets(const Frame& frame);
  Slot& slot(uint64_t sequence) { return slots_[sequence & slot_mask_]; }
  const Slot& slot(uint64_t sequence) const { return slots_[sequence & slot_mask_]; }

  JitterBufferConfig config_;
  JitterBufferCounters counters_;
  SequenceUnwrapper sequences_;
  TimestampUnwrapper timestamps_;
  uint64_t last_extended_ = 0;

  std::vector<Slot> slots_;
  uint64_t slot_mask_ = 0;
  size_t packets_held_ = 0;
  std::vector<Frame> frames_;
  std::vector<uint32_t> order_;  // indices into frames_, by min_sequence ascending
  size_t order_count_ = 0;
  std::vector<uint32_t> free_frames_;  // a stack of unused indices into frames_
  size_t free_count_ = 0;
  std::vector<PacketRef> scratch_;  // the packets of the frame being reported

  // Everything below `floor_` is released, dropped or out of the window. `floor_starts_frame_`:
  // the packet at floor_ - 1 was seen and retired with its frame, so a packet at floor_ with
  // another timestamp starts a frame (one with the retired timestamp is refused as late).
  uint64_t floor_ = 0;
  bool floor_starts_frame_ = false;
  bool started_ = false;
  uint64_t last_retired_timestamp_ = 0;
  bool retired_any_ = false;
  uint64_t min_frame_ticks_ = 0;  // shortest timestamp step between consecutive frames; 0: none

  // Mapping of extended RTP timestamps to local time: anchor + (ts - anchor_ts) * ns_per_tick.
  bool anchored_ = false;
  uint64_t anchor_timestamp_ = 0;
  int64_t anchor_local_ns_ = 0;
  double ns_per_tick_ = 0;

  // Lateness of recent frames (last original arrival minus mapped sender time): a ring in
  // arrival order and the same values sorted.
  std::vector<int64_t> lateness_;
  std::vector<int64_t> lateness_sorted_;
  size_t lateness_count_ = 0;
  size_t lateness_next_ = 0;
  int64_t lateness_base_ns_ = 0;  // lowest in the window
  uint64_t target_ns_ = 0;
  uint64_t rtt_ns_ = 0;
  bool keyframe_request_ = false;
};

}  // namespace syncd::jitter
