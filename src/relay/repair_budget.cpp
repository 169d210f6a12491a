#include "relay/repair_budget.h"

#include <algorithm>

#include "relay/relay_path.h"

namespace syncd::relay {

bool RepairBudget::take(size_t bytes, uint64_t target_bps, uint64_t now_ns) {
  const double rate = double(target_bps) * kShare / 8 / 1e9;  // bytes a ns
  const double depth = rate * 100'000'000;                    // 100 ms of it
  if (refill_ns_ == 0)
    tokens_ = depth;
  else if (now_ns > refill_ns_)
    tokens_ = std::min(depth, tokens_ + rate * double(now_ns - refill_ns_));
  refill_ns_ = now_ns;
  if (tokens_ < double(bytes)) return false;
  tokens_ -= double(bytes);
  return true;
}

bool RepairBudget::schedule_second_copy(uint16_t sequence, double loss, uint64_t now_ns) {
  if (loss < kRedundantRepairLoss || loss >= kMaxLoss || count_ == kSecondCopies) return false;
  copies_[(head_ + count_++) % kSecondCopies] = {sequence, now_ns + kSecondCopyDelayNs};
  return true;
}

std::optional<uint16_t> RepairBudget::take_due_second_copy(uint64_t now_ns) {
  if (count_ == 0 || copies_[head_].due_ns > now_ns) return std::nullopt;
  const uint16_t sequence = copies_[head_].sequence;
  head_ = (head_ + 1) % kSecondCopies;
  --count_;
  return sequence;
}

}  // namespace syncd::relay
