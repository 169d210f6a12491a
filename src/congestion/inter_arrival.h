// Packet groups and the delay variation between them (draft-ietf-rmcat-gcc-02 section 5.2).
//
// A video frame leaves the pacer as a short burst; the delay-based estimate compares whole groups,
// not single packets, so that the spacing inside a burst (the pacer's, not the path's) does not
// read as queueing. A group is the packets sent within `burst_ns` of its first packet, plus the
// packets that arrive in a burst right behind it (arrived within `burst_ns` of the group's last
// packet while having been sent later than that packet by more than they arrived later: they
// were queued together on the path). When a group completes, the change in the one-way delay
// between it and the group before is
//     d(i) = (t(i) - t(i-1)) - (T(i) - T(i-1))
// with t the arrival and T the send time of each group's last packet.
//
// Pure code: any thread; not thread-safe; one instance per received stream.
#pragma once

#include <cstdint>

namespace syncd::congestion {

struct InterArrivalConfig {
  // Packets sent within this much of a group's first packet belong to it (the draft's 5 ms).
  uint64_t burst_ns = 5'000'000;
  // A burst that arrives together may make a group span at most this much arrival time.
  uint64_t max_burst_span_ns = 100'000'000;
  // A change of the send-to-arrival offset larger than this is a clock jump or a stream restart,
  // not queueing: the groups are forgotten and grouping starts again.
  uint64_t max_offset_jump_ns = 3'000'000'000ull;
};

// The delay variation between two consecutive completed groups.
struct GroupDelta {
  int64_t send_delta_ns = 0;     // T(i) - T(i-1), > 0
  int64_t arrival_delta_ns = 0;  // t(i) - t(i-1), >= 0
  int64_t size_delta_bytes = 0;  // size(i) - size(i-1)
  uint64_t arrival_ns = 0;       // t(i): when the later group completed
};

enum class GroupVerdict : uint8_t {
  kAddedToGroup,  // joined the current group
  kStartedGroup,  // began a new group (a delta comes out when there was a complete pair)
  kReordered,     // sent before the current group began: ignored by the delay estimate
  kReset,         // the send-to-arrival offset jumped; grouping restarted from this packet
};

struct GroupResult {
  GroupVerdict verdict = GroupVerdict::kAddedToGroup;
  bool has_delta = false;
  GroupDelta delta;
};

class InterArrival {
 public:
  explicit InterArrival(InterArrivalConfig config = {}) : config_(config) {}

  // One received packet. arrival_ns must not go backwards (the caller refuses such packets).
  GroupResult add(int64_t send_ns, uint64_t arrival_ns, uint32_t size_bytes);

  void reset();

 private:
  struct Group {
    bool valid = false;
    int64_t first_send_ns = 0;
    int64_t last_send_ns = 0;
    uint64_t first_arrival_ns = 0;
    uint64_t last_arrival_ns = 0;
    uint64_t size_bytes = 0;
  };

  bool belongs_to_current(int64_t send_ns, uint64_t arrival_ns) const;
  void start_current(int64_t send_ns, uint64_t arrival_ns, uint32_t size_bytes);

  InterArrivalConfig config_;
  Group current_;
  Group previous_;
};

}  // namespace syncd::congestion
