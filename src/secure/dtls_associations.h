// The DTLS associations of one session on one 5-tuple: the live one (its keys are in use) and at
// most one pending (a re-key being negotiated), with every DTLS datagram routed to the right one
// (docs/wan.md "Routing DTLS datagrams between the live and the pending association"):
//  - server: a ClientHello (handshake record, epoch 0) goes to the pending association, made in
//    the listening state if there is none (stateless cookie exchange, RFC 6347 4.2.1);
//  - anything else goes to the pending association while its handshake runs, else to the live
//    one (so a retransmitted final flight reaches the endpoint that just completed).
// When the pending handshake completes it becomes the live association and the old one is
// freed; its SRTP keys live on in the SRTP contexts until the key schedule retires them.
//
// Threads: any thread; not thread-safe; one instance per session, on the session's thread.
#pragma once

#include <memory>

#include "secure/dtls_endpoint.h"

namespace syncd::secure {

class DtlsAssociations {
 public:
  // `sink` gets every datagram any association sends. `context` must outlive this.
  DtlsAssociations(DtlsContext& context, DtlsRole role, const Fingerprint& peer,
                   DtlsEndpoint::DatagramSink sink);

  // Client: starts a handshake (the first, or a re-key on KeyAction::kStartRekey) as the pending
  // association, replacing a pending one that has not completed.
  void start_handshake(uint64_t now_ns);

  // One received DTLS datagram (first byte 20-63). kHandshakeComplete: completed_keys() holds
  // the new epoch's keys (hand them to KeySchedule::on_handshake_complete and the SRTP contexts).
  // kFailed: the pending handshake failed and is gone (failure() says why; the client calls
  // KeySchedule::on_rekey_failed); the live association is unaffected.
  DtlsEvent feed(std::span<const uint8_t> datagram, std::span<const uint8_t> peer_address,
                 uint64_t now_ns);

  // The pending handshake's retransmission deadline (UINT64_MAX if none) and its timer.
  uint64_t next_timeout_ns(uint64_t now_ns) const;
  DtlsEvent handle_timeout(uint64_t now_ns);

  const SrtpKeyMaterial& completed_keys() const { return completed_keys_; }
  DtlsFailure failure() const { return failure_; }
  bool has_live() const { return live_ != nullptr; }
  bool has_pending() const { return pending_ != nullptr; }
  const DtlsEndpoint* live() const { return live_.get(); }
  const DtlsEndpoint* pending() const { return pending_.get(); }

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
  std::unique_ptr<DtlsEndpoint> live_;
  std::unique_ptr<DtlsEndpoint> pending_;
  SrtpKeyMaterial completed_keys_;
  DtlsFailure failure_ = DtlsFailure::kNone;
  uint64_t handshakes_completed_ = 0;
  uint64_t handshakes_failed_ = 0;
};

}  // namespace syncd::secure
