// When to re-key, when to switch the send key and when to retire a receive key: a pure state
// machine (times in, actions out) for one session. docs/wan.md "Re-key sequence" draws it.
//
// An epoch is named by its identity, which both sides derive from the handshake itself
// (SrtpKeyMaterial::epoch_id, an RFC 5705 exporter output under our own label) and every packet
// carries as the SRTP MKI: nothing is counted, so a side that restarts, or a handshake one side
// completes and the other abandons, cannot put the two sides' numbering out of step. Inside, each
// epoch also gets a local ordinal (0, 1, 2... in the order its handshake completed here) for
// "newer than"; ordinals never leave this side. The rule:
//  - a side installs an epoch's receive (and send) key when its handshake completes
//    (on_handshake_complete);
//  - it sends under the new epoch from the first packet after it has authenticated a packet of
//    the peer's under it, or after a fallback overlap, whichever is first (kSendEpoch); also
//    under any held epoch newer than its own that the peer is seen sending under (a newer
//    handshake may complete before the peer's first packet under the last one arrives);
//  - it retires an old receive key a grace period after the peer's first packet under a newer
//    epoch, or at the latest a grace period after the peer's fallback (kRetireReceive), but
//    never within a grace period of a packet authenticated under it: a peer whose handshake
//    completes late (its final flight lost, retransmitted a second or more later on a lossy
//    path) still sends under the old key past our fallback, and retiring it then refused all
//    its media until it switched;
//  - the client starts a new handshake every rekey interval (kStartRekey), at once when the
//    peer seems gone (on_peer_lost: the next epoch is then sent under at once, like the first),
//    and at once when a completed handshake's identity collides with an epoch still held.
//
// Threads: any thread; not thread-safe; one instance per session, on the session's thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>

#include "secure/dtls_endpoint.h"

namespace syncd::secure {

struct KeyScheduleConfig {
  // --dtls-rekey-interval: from one epoch's completion to the next handshake's start (client).
  uint64_t rekey_interval_ns = 300'000'000'000ull;
  // The client switches sending to a new epoch at most this long after its handshake completed:
  // the server completed first (it sent the last flight), so the server has the key.
  uint64_t client_switch_fallback_ns = 1'000'000'000ull;
  // The server switches on the client's first new-epoch packet; this fallback only matters when
  // the client sends nothing. It is longer than a lost final flight's retransmission (1 s, then
  // 2 s: RFC 6347 4.2.4.1) so the client has the key by then.
  uint64_t server_switch_fallback_ns = 4'000'000'000ull;
  // How long an old receive key outlives the peer's switch: packets sent under it just before
  // the switch may arrive late (reordering, jitter) and must still decrypt.
  uint64_t retire_grace_ns = 2'000'000'000ull;
  // After a failed re-key handshake, the client tries again this much later.
  uint64_t rekey_retry_ns = 5'000'000'000ull;
};

enum class KeyAction : uint8_t {
  kStartRekey,     // client: start a DTLS handshake beside the live one (`epoch`: its ordinal)
  kSendEpoch,      // protect with `epoch` from the next packet on (SrtpSender::use_epoch)
  kRetireReceive,  // forget the receive key of `epoch` (SrtpReceiver::retire)
};

struct KeyEvent {
  KeyAction action;
  uint32_t epoch;
  bool operator==(const KeyEvent&) const = default;
};

struct KeyScheduleCounters {
  uint64_t epochs = 0;      // handshakes completed and accepted (the next ordinal)
  uint64_t collisions = 0;  // handshakes refused: their identity named an epoch still held
  uint64_t peer_lost = 0;   // on_peer_lost() calls (client)
  uint64_t rekeys_started = 0;
  uint64_t rekeys_failed = 0;
  uint64_t switches_on_packet = 0;    // send switch triggered by the peer's new-epoch packet
  uint64_t switches_on_fallback = 0;  // send switch by the overlap timer
  uint64_t retired = 0;
  uint64_t retired_early = 0;     // receive keys retired to make room (too many epochs)
  uint64_t retire_postponed = 0;  // retirements put off: the peer still sent under the key
};

class KeySchedule {
 public:
  static constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();
  // Most receive epochs held at once (the live one, the next, one retiring, one spare).
  static constexpr size_t kMaxReceiveEpochs = 4;

  KeySchedule(DtlsRole role, KeyScheduleConfig config = {});

  // A DTLS handshake of this session completed at now_ns; `epoch` is its identity
  // (SrtpKeyMaterial::epoch_id). True: the caller installs the keys, receive and send, under
  // `epoch`; the first epoch is used for sending at once, a later one after the rule above.
  // False: `epoch` names an epoch still held (a 32-bit collision, about one in a billion per
  // handshake while four epochs are held): nothing changes and the caller installs nothing; a
  // client starts another handshake at once (poll() says kStartRekey).
  bool on_handshake_complete(uint32_t epoch, uint64_t now_ns);
  // A packet from the peer authenticated under `epoch` (SrtpReceiver reported it).
  void on_packet_authenticated(uint32_t epoch, uint64_t now_ns);
  // Client: the re-key handshake failed or timed out; the next try is rekey_retry_ns later.
  void on_rekey_failed(uint64_t now_ns);
  // Client: nothing authenticated has come from the peer for the liveness timeout (it died or
  // restarted with nothing of ours): a handshake starts at once, replacing one under way, and
  // its epoch is sent under as soon as it completes (the server completed first, so whoever
  // answers has the key; nobody is left to wait for).
  void on_peer_lost(uint64_t now_ns);

  // Writes the actions due at now_ns into `out` (at most out.size(); the rest stay due) and
  // returns how many. Call before protecting each packet, or at next_deadline_ns().
  size_t poll(uint64_t now_ns, std::span<KeyEvent> out);
  // The earliest time poll() has something to do (kNever if nothing is scheduled).
  uint64_t next_deadline_ns() const;

  std::optional<uint32_t> send_epoch() const { return send_epoch_; }
  // The local ordinal of the send epoch (0 before any).
  uint64_t send_ordinal() const { return send_ordinal_; }
  // The local ordinal of a held receive epoch: larger is newer.
  std::optional<uint64_t> ordinal_of(uint32_t epoch) const;
  bool rekey_in_progress() const { return rekey_in_progress_; }
  bool receive_epoch_live(uint32_t epoch) const;
  const KeyScheduleCounters& counters() const { return counters_; }

 private:
  struct ReceiveEpoch {
    bool used = false;
    uint32_t epoch = 0;
    uint64_t ordinal = 0;
    uint64_t installed_ns = 0;
    uint64_t retire_at_ns = kNever;
    uint64_t last_packet_ns = 0;  // the peer's latest packet authenticated under it
  };
  uint64_t switch_fallback_ns() const;
  uint64_t peer_switch_fallback_ns() const;

  DtlsRole role_;
  KeyScheduleConfig config_;
  std::optional<uint32_t> send_epoch_;
  uint64_t send_ordinal_ = 0;
  std::optional<uint32_t> pending_send_epoch_;
  uint64_t pending_send_ordinal_ = 0;
  bool switch_at_once_ = false;  // on_peer_lost(): the next epoch is sent under at once
  // A held epoch newer than the send epoch that the peer sends under, though no longer the
  // pending one: poll() switches to it at once.
  std::optional<uint32_t> catch_up_epoch_;
  uint64_t catch_up_ordinal_ = 0;
  uint64_t pending_switch_at_ns_ = kNever;
  bool pending_switch_on_packet_ = false;
  std::array<ReceiveEpoch, kMaxReceiveEpochs> receive_{};
  // Receive epochs evicted to make room, reported by the next poll().
  std::array<uint32_t, kMaxReceiveEpochs> evicted_{};
  size_t evicted_count_ = 0;
  uint64_t rekey_at_ns_ = kNever;
  bool rekey_in_progress_ = false;
  KeyScheduleCounters counters_;
};

}  // namespace syncd::secure
