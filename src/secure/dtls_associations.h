// The DTLS associations of one session on one 5-tuple: the live one (its keys are in use) and at
// most one pending (a re-key being negotiated), with every DTLS datagram routed to the right one
// (docs/wan.md "Routing DTLS datagrams between the live and the pending association"):
//  - server: a ClientHello (handshake record, epoch 0) goes to the pending association, made in
//    the listening state if there is none (stateless cookie exchange, RFC 6347 4.2.1). Once a
//    cookie verifies, the pending association is bound to that address. A ClientHello from
//    another address is refused while that address has held the slot for less than
//    pending_hold_ns; after that, one whose cookie verifies takes the slot (preempted: the
//    bound handshake stalled). A ClientHello from the bound address with another random is the
//    same client's new attempt (it gave up on the old one, e.g. a sender's liveness retry): it
//    replaces the bound handshake once its own cookie verifies (superseded), but the hold still
//    counts from when the address first took the slot, so an address that keeps starting over
//    (a stranger with a valid cookie) cannot keep it from the peer for longer than the hold.
//    Either way a spoofed address cannot: the cookie goes to the address;
//  - anything else goes to the pending association while its handshake runs, else to the live
//    one (so a retransmitted final flight reaches the endpoint that just completed); a server
//    takes it only from the address of the association it goes to (else: a stray record).
// A handshake that completes from a new address makes that the live address (the caller's
// peer): only one that passed the fingerprint check can (DtlsEndpoint), so nobody without the
// peer's key can move the session.
// When the pending handshake completes it becomes the live association and the old one is
// freed; its SRTP keys live on in the SRTP contexts until the key schedule retires them.
//
// Threads: any thread; not thread-safe; one instance per session, on the session's thread.
#pragma once

#include <array>
#include <cstring>
#include <memory>

#include "secure/dtls_endpoint.h"

namespace syncd::secure {

// Server: what the address routing refused (the endpoints count the rest, DtlsCounters).
struct DtlsRoutingCounters {
  uint64_t refused_busy = 0;   // ClientHellos from another address within the pending hold
  uint64_t stray_records = 0;  // other records from an address no association belongs to
  uint64_t preempted = 0;      // stalled handshakes replaced by another address's (cookie verified)
  uint64_t cookie_challenges = 0;  // ClientHellos without a valid cookie, answered statelessly
  uint64_t superseded = 0;         // bound handshakes replaced by a new one from the same address
  // ClientHellos the stateless exchange dropped unanswered: truncated or malformed.
  uint64_t hellos_dropped = 0;
};

// A peer address as the caller's bytes (e.g. its sockaddr, at most 32 bytes).
struct DtlsAddress {
  std::array<uint8_t, 32> bytes{};
  size_t size = 0;
  std::span<const uint8_t> view() const { return {bytes.data(), size}; }
  bool matches(std::span<const uint8_t> other) const;
  void assign(std::span<const uint8_t> other);
};

class DtlsAssociations {
 public:
  // How long a bound pending handshake from a stranger's address keeps the slot against a
  // ClientHello from a third address: a handshake takes a few round trips, so 2 s is a stalled
  // one, and a real client retransmits its ClientHello after 1 s, 2 s... (RFC 6347 4.2.4.1).
  static constexpr uint64_t kDefaultPendingHoldNs = 2'000'000'000ull;

  // `sink` gets every datagram any association sends. `context` must outlive this.
  DtlsAssociations(DtlsContext& context, DtlsRole role, const Fingerprint& peer,
                   DtlsEndpoint::DatagramSink sink,
                   uint64_t pending_hold_ns = kDefaultPendingHoldNs);

  // Client: starts a handshake (the first, or a re-key on KeyAction::kStartRekey) as the pending
  // association, replacing a pending one that has not completed.
  void start_handshake(uint64_t now_ns);

  // One received DTLS datagram (first byte 20-63) from peer_address (a server routes by it; a
  // client's socket is connected, so it has one peer). kHandshakeComplete: completed_keys()
  // holds the new epoch's keys (hand them to KeySchedule::on_handshake_complete and the SRTP
  // contexts) and live_address() is where the handshake came from.
  // kFailed: the pending handshake failed and is gone (failure() says why; the client calls
  // KeySchedule::on_rekey_failed); the live association is unaffected.
  DtlsEvent feed(std::span<const uint8_t> datagram, std::span<const uint8_t> peer_address,
                 uint64_t now_ns);

  // The pending handshake's retransmission deadline (UINT64_MAX if none) and its timer.
  uint64_t next_timeout_ns(uint64_t now_ns) const;
  DtlsEvent handle_timeout(uint64_t now_ns);

  const SrtpKeyMaterial& completed_keys() const { return completed_keys_; }
  DtlsFailure failure() const { return failure_; }
  // Of the handshake that failed last: the certificate fingerprint the peer presented (when
  // failed_fingerprint_checked()), and the fatal alert it sent (0: none).
  const Fingerprint& failed_fingerprint() const { return failed_fingerprint_; }
  bool failed_fingerprint_checked() const { return failed_fingerprint_checked_; }
  uint8_t failed_alert() const { return failed_alert_; }
  // Server: the address of the handshake that failed last.
  std::span<const uint8_t> failed_address() const { return failed_address_.view(); }
  bool has_live() const { return live_ != nullptr; }
  bool has_pending() const { return pending_ != nullptr; }
  const DtlsEndpoint* live() const { return live_.get(); }
  const DtlsEndpoint* pending() const { return pending_.get(); }

  // Server: the address the pending handshake is bound to (empty while none is, or while it is
  // still in the stateless cookie exchange), and the live association's.
  std::span<const uint8_t> pending_address() const {
    return pending_bound_ ? pending_address_.view() : std::span<const uint8_t>();
  }
  std::span<const uint8_t> live_address() const { return live_address_.view(); }
  const DtlsRoutingCounters& routing_counters() const { return routing_; }

  // Sums over the associations this session has had.
  uint64_t handshakes_completed() const { return handshakes_completed_; }
  uint64_t handshakes_failed() const { return handshakes_failed_; }

 private:
  std::unique_ptr<DtlsEndpoint> make_endpoint();
  DtlsEvent settle(DtlsEndpoint* target, DtlsEvent event);

  DtlsContext& context_;
  DtlsRole role_;
  Fingerprint peer_;
  DtlsEndpoint::DatagramSink sink_;
  uint64_t pending_hold_ns_;
  DtlsAddress live_address_;
  DtlsAddress pending_address_;
  std::array<uint8_t, 32> pending_random_{};  // the bound handshake's ClientHello.random
  bool pending_bound_ = false;
  uint64_t pending_bound_ns_ = 0;  // when the bound address took the slot (kept on superseding)
  DtlsRoutingCounters routing_;
  std::unique_ptr<DtlsEndpoint> live_;
  std::unique_ptr<DtlsEndpoint> pending_;
  SrtpKeyMaterial completed_keys_;
  DtlsFailure failure_ = DtlsFailure::kNone;
  Fingerprint failed_fingerprint_{};
  bool failed_fingerprint_checked_ = false;
  uint8_t failed_alert_ = 0;
  DtlsAddress failed_address_;
  uint64_t handshakes_completed_ = 0;
  uint64_t handshakes_failed_ = 0;
};

}  // namespace syncd::secure
