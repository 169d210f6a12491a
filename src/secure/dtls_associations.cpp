#include "secure/dtls_associations.h"

#include <algorithm>
#include <limits>

namespace syncd::secure {

namespace {
// ClientHello.random (RFC 6347 4.2.2, RFC 5246 7.4.1.2): after the 13-byte record header, the
// 12-byte handshake header and the 2-byte client_version. Retransmissions repeat it; a new
// attempt has a new one. Empty if the datagram is too short to hold it.
std::span<const uint8_t> client_hello_random(std::span<const uint8_t> datagram) {
  constexpr size_t kOffset = 13 + 12 + 2;
  if (datagram.size() < kOffset + 32) return {};
  return datagram.subspan(kOffset, 32);
}
}  // namespace

bool DtlsAddress::matches(std::span<const uint8_t> other) const {
  return size != 0 && other.size() == size && std::memcmp(bytes.data(), other.data(), size) == 0;
}

void DtlsAddress::assign(std::span<const uint8_t> other) {
  size = std::min(other.size(), bytes.size());
  std::memcpy(bytes.data(), other.data(), size);
}

DtlsAssociations::DtlsAssociations(DtlsContext& context, DtlsRole role, const Fingerprint& peer,
                                   DtlsEndpoint::DatagramSink sink, uint64_t pending_hold_ns)
    : context_(context),
      role_(role),
      peer_(peer),
      sink_(std::move(sink)),
      pending_hold_ns_(pending_hold_ns) {}

std::unique_ptr<DtlsEndpoint> DtlsAssociations::make_endpoint() {
  return std::make_unique<DtlsEndpoint>(context_, role_, peer_,
                                        [this](std::span<const uint8_t> d) { sink_(d); });
}

void DtlsAssociations::start_handshake(uint64_t now_ns) {
  if (role_ != DtlsRole::kClient) return;
  pending_ = make_endpoint();
  pending_bound_ = false;
  pending_->start(now_ns);
}

DtlsEvent DtlsAssociations::settle(DtlsEndpoint* target, DtlsEvent event) {
  if (target != pending_.get()) return event;  // the live one: alerts, close, retransmissions
  if (event == DtlsEvent::kHandshakeComplete) {
    completed_keys_ = pending_->keys();
    live_ = std::move(pending_);  // the old live association goes; its keys live on in SRTP
    live_address_ = pending_address_;
    pending_bound_ = false;
    ++handshakes_completed_;
  } else if (event == DtlsEvent::kFailed) {
    failure_ = pending_->failure();
    failed_fingerprint_checked_ = pending_->peer_fingerprint_checked();
    failed_fingerprint_ = pending_->peer_fingerprint_seen();
    failed_alert_ = pending_->peer_alert();
    failed_address_ = pending_address_;
    pending_.reset();
    pending_bound_ = false;
    ++handshakes_failed_;
  }
  return event;
}

DtlsEvent DtlsAssociations::feed(std::span<const uint8_t> datagram,
                                 std::span<const uint8_t> peer_address, uint64_t now_ns) {
  DtlsEndpoint* target = nullptr;
  if (role_ == DtlsRole::kClient) {
    // One peer (the socket is connected): the handshake in progress, else the live one.
    target = pending_ && pending_->state() != DtlsState::kListening ? pending_.get() : live_.get();
  } else if (classify_dtls_datagram(datagram) == DtlsRecordKind::kClientHello) {
    // A new association starts: stateless until its cookie verifies. A ClientHello from the
    // address a handshake is bound to is its retransmission (or the cookie-bearing second one).
    const std::span<const uint8_t> random = client_hello_random(datagram);
    if (pending_ && pending_bound_) {
      const bool same_address = pending_address_.matches(peer_address);
      if (same_address && (random.size() != 32 ||
                           std::equal(random.begin(), random.end(), pending_random_.begin())))
        return settle(pending_.get(), pending_->feed(datagram, peer_address, now_ns));  // resent
      // Another address's ClientHello within the hold: refused, so a stranger's ClientHellos
      // cannot cost a handshake under way its slot.
      if (!same_address && now_ns - pending_bound_ns_ < pending_hold_ns_) {
        ++routing_.refused_busy;
        return DtlsEvent::kNone;
      }
      // The bound client's new attempt (a new random), or another address once the bound
      // handshake has stalled past the hold: it takes the slot only with a verified cookie (RFC
      // 6347 4.2.1), so only a sender that receives at its address can, never a spoofed one.
      std::unique_ptr<DtlsEndpoint> attempt = make_endpoint();
      const DtlsEvent event = attempt->feed(datagram, peer_address, now_ns);
      if (event == DtlsEvent::kHelloVerifySent) ++routing_.cookie_challenges;
      if (attempt->state() == DtlsState::kListening && event != DtlsEvent::kHelloVerifySent)
        ++routing_.hellos_dropped;
      if (attempt->state() == DtlsState::kListening || attempt->state() == DtlsState::kFailed)
        return event == DtlsEvent::kFailed ? DtlsEvent::kNone : event;
      ++(same_address ? routing_.superseded : routing_.preempted);
      pending_ = std::move(attempt);
      // A new attempt from the same address keeps the time it took the slot: starting over does
      // not renew the hold.
      if (!same_address) pending_bound_ns_ = now_ns;
      pending_address_.assign(peer_address);
      if (random.size() == 32) std::copy(random.begin(), random.end(), pending_random_.begin());
      return settle(pending_.get(), event);
    }
    if (!pending_) pending_ = make_endpoint();
    target = pending_.get();
  } else if (pending_ && pending_bound_ && pending_address_.matches(peer_address)) {
    target = pending_.get();
  } else if (live_ && live_address_.matches(peer_address)) {
    target = live_.get();
  } else {
    ++routing_.stray_records;
    return DtlsEvent::kNone;
  }
  if (!target) return DtlsEvent::kNone;
  const DtlsEvent event = target->feed(datagram, peer_address, now_ns);
  if (role_ == DtlsRole::kServer && target == pending_.get() && !pending_bound_ &&
      pending_->state() != DtlsState::kListening) {
    // The cookie verified: the handshake now belongs to this address (RFC 6347 4.2.1 binds
    // the cookie to it, so the address is the sender's, not a spoofed one).
    pending_bound_ = true;
    pending_bound_ns_ = now_ns;
    pending_address_.assign(peer_address);
    const std::span<const uint8_t> random = client_hello_random(datagram);
    if (random.size() == 32) std::copy(random.begin(), random.end(), pending_random_.begin());
  }
  if (event == DtlsEvent::kHelloVerifySent) ++routing_.cookie_challenges;
  if (role_ == DtlsRole::kServer && target == pending_.get() && !pending_bound_ &&
      event != DtlsEvent::kHelloVerifySent &&
      classify_dtls_datagram(datagram) == DtlsRecordKind::kClientHello)
    ++routing_.hellos_dropped;  // the listener answered nothing: not a ClientHello it could read
  return settle(target, event);
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
