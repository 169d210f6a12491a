// What the relay sender may spend on repairs beyond its media (docs/wan.md, "Repair on a lossy
// path" and "Caps"): a budget for retransmissions, and the queue of second copies.
//
//  - Retransmissions get at most kShare of the target rate (a token bucket of 100 ms of it):
//    when a cap starts dropping most of what is sent, every packet is NACKed, and resending them
//    all (the pacer drains its queue within 33 ms whatever the target) multiplied what was sent
//    into a path that was already full (measured: 160 Mbit/s out for a second into a 10 Mbit/s
//    policer). A NACK past the budget is not served (counted by the sender); FEC and the next
//    IDR repair.
//  - On a lossy path (kRedundantRepairLoss up to kMaxLoss) each retransmission goes twice, the
//    second copy kSecondCopyDelayNs later, out of the first's loss burst. Not above kMaxLoss:
//    more is congestion (a cap, a policer), where a second copy only adds to what the path
//    cannot carry.
//
// Pure: times are passed in; no allocation. Thread: the relay thread (one per sender).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>

namespace syncd::relay {

class RepairBudget {
 public:
  static constexpr double kShare = 0.25;
  static constexpr double kMaxLoss = 0.10;

  // Takes `bytes` at now_ns from a budget refilled at kShare x target_bps; false when it has
  // not that much (nothing is taken).
  bool take(size_t bytes, uint64_t target_bps, uint64_t now_ns);

  // A retransmission of `sequence` went at now_ns on a path losing `loss`: its second copy is
  // queued when the loss calls for one (and the queue has room). Whether it was.
  bool schedule_second_copy(uint16_t sequence, double loss, uint64_t now_ns);
  // The next second copy due by now_ns, taken off the queue.
  std::optional<uint16_t> take_due_second_copy(uint64_t now_ns);
  // When the next second copy is due (UINT64_MAX: none queued).
  uint64_t next_second_copy_ns() const {
    return count_ ? copies_[head_].due_ns : std::numeric_limits<uint64_t>::max();
  }

 private:
  double tokens_ = 0;  // bytes
  uint64_t refill_ns_ = 0;
  struct SecondCopy {
    uint16_t sequence;
    uint64_t due_ns;
  };
  static constexpr size_t kSecondCopies = 256;
  std::array<SecondCopy, kSecondCopies> copies_{};
  size_t head_ = 0, count_ = 0;
};

}  // namespace syncd::relay
