#include "secure/key_schedule.h"

#include <algorithm>

namespace syncd::secure {

KeySchedule::KeySchedule(DtlsRole role, KeyScheduleConfig config) : role_(role), config_(config) {}

uint64_t KeySchedule::switch_fallback_ns() const {
  return role_ == DtlsRole::kClient ? config_.client_switch_fallback_ns
                                    : config_.server_switch_fallback_ns;
}

uint64_t KeySchedule::peer_switch_fallback_ns() const {
  return role_ == DtlsRole::kClient ? config_.server_switch_fallback_ns
                                    : config_.client_switch_fallback_ns;
}

static uint64_t saturating_add(uint64_t a, uint64_t b) {
  return a > KeySchedule::kNever - b ? KeySchedule::kNever : a + b;
}

bool KeySchedule::on_handshake_complete(uint32_t epoch, uint64_t now_ns) {
  if (receive_epoch_live(epoch) || send_epoch_ == epoch || pending_send_epoch_ == epoch) {
    // Two handshakes exported the same 4 bytes: packets could not say which key is theirs.
    ++counters_.collisions;
    if (role_ == DtlsRole::kClient) {
      rekey_in_progress_ = false;
      rekey_at_ns_ = now_ns;
    }
    return false;
  }
  const uint64_t ordinal = counters_.epochs++;

  ReceiveEpoch* slot = nullptr;
  for (ReceiveEpoch& r : receive_)
    if (!r.used) {
      slot = &r;
      break;
    }
  if (!slot) {
    // More epochs than slots (re-keys faster than the grace period): the oldest goes now.
    slot = &*std::min_element(
        receive_.begin(), receive_.end(),
        [](const ReceiveEpoch& a, const ReceiveEpoch& b) { return a.ordinal < b.ordinal; });
    if (evicted_count_ < evicted_.size()) evicted_[evicted_count_++] = slot->epoch;
    ++counters_.retired_early;
  }
  *slot = ReceiveEpoch{true, epoch, ordinal, now_ns, kNever, 0};

  // The older receive keys stay until the peer has switched: at the latest it does so after its
  // own fallback, counted from about now (its completion is within a round trip of ours).
  uint64_t latest_retire =
      saturating_add(saturating_add(now_ns, peer_switch_fallback_ns()), config_.retire_grace_ns);
  for (ReceiveEpoch& r : receive_)
    if (r.used && r.epoch != epoch) r.retire_at_ns = std::min(r.retire_at_ns, latest_retire);

  pending_send_epoch_ = epoch;
  pending_send_ordinal_ = ordinal;
  pending_switch_on_packet_ = false;
  // The client may send under its first epoch at once: the server completed before it (it
  // received the client's Finished). The same after on_peer_lost(): whoever answered has the
  // key, and the old peer is gone. The server waits for the client like at every re-key.
  bool at_once = role_ == DtlsRole::kClient && (!send_epoch_ || switch_at_once_);
  switch_at_once_ = false;
  pending_switch_at_ns_ = at_once ? now_ns : saturating_add(now_ns, switch_fallback_ns());
  if (role_ == DtlsRole::kClient) {
    rekey_in_progress_ = false;
    rekey_at_ns_ = saturating_add(now_ns, config_.rekey_interval_ns);
  }
  return true;
}

void KeySchedule::on_packet_authenticated(uint32_t epoch, uint64_t now_ns) {
  const std::optional<uint64_t> ordinal = ordinal_of(epoch);
  if (!ordinal) return;
  for (ReceiveEpoch& r : receive_)
    if (r.used && r.epoch == epoch) r.last_packet_ns = std::max(r.last_packet_ns, now_ns);
  // The peer sends under `epoch`: we may too (it has the key), from the next packet on.
  if (pending_send_epoch_ && epoch == *pending_send_epoch_) {
    if (now_ns < pending_switch_at_ns_) {
      pending_switch_at_ns_ = now_ns;
      pending_switch_on_packet_ = true;
    }
  } else if ((!send_epoch_ || *ordinal > send_ordinal_) &&
             (!catch_up_epoch_ || *ordinal > catch_up_ordinal_)) {
    // An epoch newer than ours but no longer the pending one: a newer handshake completed here
    // before the peer's first packet under this one arrived (re-keys as often as the peer's
    // switch fallback). Catch up to it at once, or we would keep sending under an epoch the
    // peer retires, waiting for a packet under the newest that only comes a re-key later.
    catch_up_epoch_ = epoch;
    catch_up_ordinal_ = *ordinal;
  }
  // ...and it has left the older epochs: their keys are needed only for packets in flight.
  uint64_t retire_at = saturating_add(now_ns, config_.retire_grace_ns);
  for (ReceiveEpoch& r : receive_)
    if (r.used && r.ordinal < *ordinal) r.retire_at_ns = std::min(r.retire_at_ns, retire_at);
}

void KeySchedule::on_peer_lost(uint64_t now_ns) {
  if (role_ != DtlsRole::kClient) return;
  ++counters_.peer_lost;
  switch_at_once_ = true;
  rekey_in_progress_ = false;
  rekey_at_ns_ = now_ns;
}

void KeySchedule::on_rekey_failed(uint64_t now_ns) {
  if (role_ != DtlsRole::kClient) return;
  ++counters_.rekeys_failed;
  rekey_in_progress_ = false;
  rekey_at_ns_ = saturating_add(now_ns, config_.rekey_retry_ns);
}

size_t KeySchedule::poll(uint64_t now_ns, std::span<KeyEvent> out) {
  size_t n = 0;
  while (evicted_count_ > 0 && n < out.size()) {
    out[n++] = {KeyAction::kRetireReceive, evicted_[--evicted_count_]};
    ++counters_.retired;
  }
  if (catch_up_epoch_ && n < out.size()) {
    if ((!send_epoch_ || catch_up_ordinal_ > send_ordinal_) &&
        receive_epoch_live(*catch_up_epoch_)) {
      out[n++] = {KeyAction::kSendEpoch, *catch_up_epoch_};
      if (send_epoch_) ++counters_.switches_on_packet;
      send_epoch_ = catch_up_epoch_;
      send_ordinal_ = catch_up_ordinal_;
    }
    catch_up_epoch_.reset();
  }
  if (pending_send_epoch_ && now_ns >= pending_switch_at_ns_ && n < out.size()) {
    out[n++] = {KeyAction::kSendEpoch, *pending_send_epoch_};
    if (send_epoch_)
      ++(pending_switch_on_packet_ ? counters_.switches_on_packet : counters_.switches_on_fallback);
    send_epoch_ = pending_send_epoch_;
    send_ordinal_ = pending_send_ordinal_;
    pending_send_epoch_.reset();
    pending_switch_at_ns_ = kNever;
  }
  for (ReceiveEpoch& r : receive_) {
    if (n >= out.size()) break;
    if (r.used && now_ns >= r.retire_at_ns) {
      // The peer still sends under it: it has not switched yet (its handshake completed late),
      // or these are its last packets in flight. Kept a grace period past the latest one.
      const uint64_t quiet_at = saturating_add(r.last_packet_ns, config_.retire_grace_ns);
      if (r.last_packet_ns != 0 && now_ns < quiet_at) {
        r.retire_at_ns = quiet_at;
        ++counters_.retire_postponed;
        continue;
      }
      out[n++] = {KeyAction::kRetireReceive, r.epoch};
      ++counters_.retired;
      r = ReceiveEpoch{};
    }
  }
  if (role_ == DtlsRole::kClient && !rekey_in_progress_ && now_ns >= rekey_at_ns_ &&
      n < out.size()) {
    out[n++] = {KeyAction::kStartRekey, uint32_t(counters_.epochs)};
    ++counters_.rekeys_started;
    rekey_in_progress_ = true;
    rekey_at_ns_ = kNever;
  }
  return n;
}

uint64_t KeySchedule::next_deadline_ns() const {
  uint64_t deadline = evicted_count_ || catch_up_epoch_ ? 0 : kNever;
  deadline = std::min(deadline, pending_switch_at_ns_);
  for (const ReceiveEpoch& r : receive_)
    if (r.used) deadline = std::min(deadline, r.retire_at_ns);
  if (role_ == DtlsRole::kClient && !rekey_in_progress_)
    deadline = std::min(deadline, rekey_at_ns_);
  return deadline;
}

std::optional<uint64_t> KeySchedule::ordinal_of(uint32_t epoch) const {
  for (const ReceiveEpoch& r : receive_)
    if (r.used && r.epoch == epoch) return r.ordinal;
  return std::nullopt;
}

bool KeySchedule::receive_epoch_live(uint32_t epoch) const {
  for (const ReceiveEpoch& r : receive_)
    if (r.used && r.epoch == epoch) return true;
  return false;
}

}  // namespace syncd::secure
