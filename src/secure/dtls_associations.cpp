#include "secure/dtls_associations.h"

#include <limits>

namespace syncd::secure {

DtlsAssociations::DtlsAssociations(DtlsContext& context, DtlsRole role, const Fingerprint& peer,
                                   DtlsEndpoint::DatagramSink sink)
    : context_(context), role_(role), peer_(peer), sink_(std::move(sink)) {}

std::unique_ptr<DtlsEndpoint> DtlsAssociations::make_endpoint() {
  return std::make_unique<DtlsEndpoint>(context_, role_, peer_,
                                        [this](std::span<const uint8_t> d) { sink_(d); });
}

void DtlsAssociations::start_handshake(uint64_t now_ns) {
  if (role_ != DtlsRole::kClient) return;
  pending_ = make_endpoint();
  pending_->start(now_ns);
}

DtlsEvent DtlsAssociations::settle(DtlsEndpoint* target, DtlsEvent event) {
  if (target != pending_.get()) return event;  // the live one: alerts, close, retransmissions
  if (event == DtlsEvent::kHandshakeComplete) {
    completed_keys_ = pending_->keys();
    live_ = std::move(pending_);  // the old live association goes; its keys live on in SRTP
    ++handshakes_completed_;
  } else if (event == DtlsEvent::kFailed) {
    failure_ = pending_->failure();
    pending_.reset();
    ++handshakes_failed_;
  }
  return event;
}

DtlsEvent DtlsAssociations::feed(std::span<const uint8_t> datagram,
                                 std::span<const uint8_t> peer_address, uint64_t now_ns) {
  DtlsEndpoint* target = nullptr;
  if (role_ == DtlsRole::kServer &&
      classify_dtls_datagram(datagram) == DtlsRecordKind::kClientHello) {
    // A new association starts: stateless until its cookie verifies. A ClientHello while a
    // handshake is under way is its retransmission (or the cookie-bearing second one).
    if (!pending_) pending_ = make_endpoint();
    target = pending_.get();
  } else if (pending_ && pending_->state() != DtlsState::kListening) {
    target = pending_.get();
  } else {
    target = live_.get();
  }
  if (!target) return DtlsEvent::kNone;
  return settle(target, target->feed(datagram, peer_address, now_ns));
}

uint64_t DtlsAssociations::next_timeout_ns(uint64_t now_ns) const {
  // Only a handshake in progress has a timer; a completed association answers a retransmitted
  // final flight when it arrives (RFC 6347 4.2.4).
  return pending_ ? pending_->next_timeout_ns(now_ns) : std::numeric_limits<uint64_t>::max();
}

DtlsEvent DtlsAssociations::handle_timeout(uint64_t now_ns) {
  if (!pending_) return DtlsEvent::kNone;
  return settle(pending_.get(), pending_->handle_timeout(now_ns));
}

}  // namespace syncd::secure
