#include "relay/relay_session.h"

#include <netinet/in.h>

#include <algorithm>

#include "core/counter.h"
#include "transport/datagram_kind.h"
#include "transport/socket_address.h"

namespace syncd::relay {

using core::count;

const char* RelaySession::state_name(State state) {
  switch (state) {
    case State::kWaiting:
      return "waiting";
    case State::kHandshaking:
      return "handshaking";
    case State::kConnected:
      return "connected";
    case State::kFailed:
      return "failed";
  }
  return "?";
}

RelaySession::RelaySession(RelaySessionConfig config, const secure::Identity& identity)
    : config_(std::move(config)),
      dtls_context_(identity, config_.dtls),
      dtls_(dtls_context_, config_.sender ? secure::DtlsRole::kClient : secure::DtlsRole::kServer,
            config_.peer, [this](std::span<const uint8_t> d) { send_plain(d); }),
      keys_(config_.sender ? secure::DtlsRole::kClient : secure::DtlsRole::kServer, config_.keys),
      nack_list_(rtp::kNackEventCapacity) {
  RelayPath& path = *this;
  if (config_.sender) {
    sender_ = std::make_unique<RelaySender>(path, stats_, config_.audio_send);
  } else {
    receiver_ = std::make_unique<RelayReceiver>(
        path, stats_,
        RelayReceiverConfig{config_.frame_buffers, config_.audio_receive_ring,
                            config_.audio_target_ns});
  }
}

RelaySession::~RelaySession() = default;

// ---------------------------------------------------------------------------------------------
// Keys

void RelaySession::on_start(transport::TransportThread& thread, uint64_t now_ns) {
  thread_ = &thread;
  if (sender_) {
    sender_->on_start(now_ns);
    dtls_.start_handshake(now_ns);
    state_ = State::kHandshaking;
  }
  schedule(now_ns);
}

bool RelaySession::from_peer(const sockaddr_storage& from) const {
  // A sender's socket is connected: the kernel drops anyone else's datagrams. The receiver's
  // peer is the address of the last completed handshake: once a sender has re-bound from a new
  // address, media from the old one is foreign.
  return config_.sender || (peer_ && transport::same_address(*peer_, from));
}

void RelaySession::feed_dtls(std::span<uint8_t> datagram, const sockaddr_storage& from,
                             uint64_t now_ns) {
  // Handshakes come from any address: a sender that restarted or moved (NAT rebinding) comes
  // back from a new one. A stranger's ClientHello meets the stateless cookie exchange (RFC 6347
  // 4.2.1) and, past it, a handshake that cannot complete without the pinned certificate; the
  // live association and its keys are untouched meanwhile (DtlsAssociations routes by address).
  dtls_to_ = from;
  switch (dtls_.feed(datagram, transport::address_bytes(from), now_ns)) {
    case secure::DtlsEvent::kHandshakeComplete:
      on_handshake_complete(now_ns);
      break;
    case secure::DtlsEvent::kFailed:
      on_handshake_failed(now_ns);
      break;
    default:
      // A session failed for its identity says so until a handshake completes.
      if (state_ == State::kWaiting && dtls_.has_pending() &&
          dtls_.pending()->state() == secure::DtlsState::kHandshaking)
        state_ = State::kHandshaking;
      break;
  }
}

void RelaySession::on_handshake_complete(uint64_t now_ns) {
  const secure::SrtpKeyMaterial& material = dtls_.completed_keys();
  // Both ends derived the same identity from this handshake (docs/wan.md "Key epochs").
  const uint32_t epoch = material.epoch_id;
  if (!keys_.on_handshake_complete(epoch, now_ns)) {
    // It names an epoch still held: its packets could not be told apart. The client re-keys at
    // once (the key schedule says so); the server keeps what it has.
    count(stats_.epoch_collisions);
    if (connected())
      run_key_schedule(now_ns);
    else if (config_.sender)
      dtls_.start_handshake(now_ns);
    return;
  }
  if (connected()) count(stats_.rekeys);
  failures_in_row_ = 0;
  next_handshake_ns_ = kNever;
  handshake_backoff_ns_ = 0;
  srtp_out_.install(epoch, config_.sender ? material.client_write : material.server_write);
  srtp_in_.install(epoch, config_.sender ? material.server_write : material.client_write);
  if (!config_.sender) {
    // Only a handshake that passed the fingerprint check gets here: whoever completed it holds
    // the peer's key, so its address is the peer's now (a restart, a NAT rebinding).
    const sockaddr_storage from = transport::address_from_bytes(dtls_.live_address());
    if (peer_ && !transport::same_address(*peer_, from)) count(stats_.peer_rebinds);
    peer_ = from;
  } else {
    peer_heard_ns_ = now_ns;  // the receiver just answered: its reports have a timeout to come
  }
  // A new receiver (or a restarted one) hears the audio description first.
  if (sender_) sender_->on_handshake_complete();
  if (!connected() && thread_) {
    transport::FromTransport m;
    m.kind = transport::FromTransport::Kind::kConnected;
    thread_->send_to_main(m);
  }
  state_ = State::kConnected;
  // The key schedule says when to send under the new epoch (at once for the client's first;
  // the server waits for the client's first packet under it, which proves the client has it).
  run_key_schedule(now_ns);
}

void RelaySession::on_handshake_failed(uint64_t now_ns) {
  const secure::DtlsFailure failure = dtls_.failure();
  count(stats_.dtls_failures);
  if (failure == secure::DtlsFailure::kFingerprintMismatch) count(stats_.fingerprint_mismatches);
  if (failure == secure::DtlsFailure::kPeerAlert) count(stats_.peer_alerts);
  last_failure_ = failure;
  last_alert_ = dtls_.failed_alert();
  // Before any keys, a peer that does not take us (or that we do not take) fails the session
  // until a handshake completes: /stats says so, and the main loop says why once.
  if (!connected() && secure::is_identity_failure(failure)) state_ = State::kFailed;
  report_failure();
  if (connected()) {
    if (config_.sender) keys_.on_rekey_failed(now_ns);  // the live keys go on
    return;
  }
  if (!config_.sender) return;  // a server listens again for the right peer
  // Tried again, later each time in a row: a receiver not up yet times out (its retransmissions
  // were the wait, so at once), one that refuses us is asked at most once every few seconds
  // rather than hundreds of times a second, and the right peer, once there, is found.
  ++failures_in_row_;
  if (failure == secure::DtlsFailure::kTimedOut) {
    handshake_backoff_ns_ = 0;
  } else {
    const uint32_t doublings = std::min<uint32_t>(failures_in_row_ - 1, 20);
    handshake_backoff_ns_ =
        std::min(config_.handshake_retry_ns << doublings, config_.handshake_retry_max_ns);
  }
  next_handshake_ns_ = now_ns + handshake_backoff_ns_;
  if (handshake_backoff_ns_ == 0) start_pending_handshake(now_ns);
}

void RelaySession::start_pending_handshake(uint64_t now_ns) {
  next_handshake_ns_ = kNever;
  dtls_.start_handshake(now_ns);
  if (state_ == State::kWaiting) state_ = State::kHandshaking;
}

void RelaySession::report_failure() {
  if (!thread_) return;
  transport::FromTransport m;
  m.kind = transport::FromTransport::Kind::kHandshakeFailed;
  m.failure = uint8_t(dtls_.failure());
  m.alert = dtls_.failed_alert();
  m.fingerprint_seen = dtls_.failed_fingerprint_checked();
  m.fingerprint = dtls_.failed_fingerprint();
  m.session_failed = state_ == State::kFailed;
  const std::span<const uint8_t> from = dtls_.failed_address();
  m.address_size = uint8_t(std::min(from.size(), m.address.size()));
  std::copy_n(from.begin(), m.address_size, m.address.begin());
  thread_->send_to_main(m);
}

void RelaySession::run_key_schedule(uint64_t now_ns) {
  std::array<secure::KeyEvent, 8> events;
  const size_t n = keys_.poll(now_ns, events);
  for (size_t i = 0; i < n; ++i) {
    switch (events[i].action) {
      case secure::KeyAction::kStartRekey:
        dtls_.start_handshake(now_ns);
        break;
      case secure::KeyAction::kSendEpoch:
        srtp_out_.use_epoch(events[i].epoch);
        break;
      case secure::KeyAction::kRetireReceive:
        srtp_in_.retire(events[i].epoch);
        break;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Datagrams

void RelaySession::send_plain(std::span<const uint8_t> datagram) {
  if (!thread_) return;
  // The receiver's socket is not connected: it answers whoever it is handshaking with.
  const sockaddr* to = config_.sender ? nullptr : reinterpret_cast<const sockaddr*>(&dtls_to_);
  thread_->send_datagram(datagram, to);
}

// ---------------------------------------------------------------------------------------------
// Datagrams

size_t RelaySession::send_rtp(std::span<uint8_t> buffer, size_t size) {
  if (!connected() || !thread_) return 0;
  if (srtp_out_.protect_rtp(buffer.data(), size, buffer.size()) != secure::SrtpStatus::kOk)
    return 0;
  const sockaddr* to = config_.sender ? nullptr : reinterpret_cast<const sockaddr*>(&*peer_);
  return thread_->send_datagram(buffer.first(size), to) ? size : 0;
}

void RelaySession::send_rtcp(std::span<uint8_t> compound, size_t size) {
  if (!connected() || !thread_) return;
  if (srtp_out_.protect_rtcp(compound.data(), size, compound.size()) != secure::SrtpStatus::kOk)
    return;
  const sockaddr* to = config_.sender ? nullptr : reinterpret_cast<const sockaddr*>(&*peer_);
  thread_->send_datagram(compound.first(size), to);
}

bool RelaySession::send_to_main(const transport::FromTransport& message) {
  return thread_ && thread_->send_to_main(message);
}

void RelaySession::refuse_foreign(std::atomic<uint64_t>& reason) {
  count(reason);
  count(stats_.foreign_datagrams);
}

void RelaySession::on_datagram(std::span<uint8_t> datagram, const sockaddr_storage& from,
                               uint64_t now_ns) {
  const transport::DatagramKind kind = transport::classify_datagram(datagram);
  if (kind == transport::DatagramKind::kDtls) {
    feed_dtls(datagram, from, now_ns);
  } else if (kind == transport::DatagramKind::kUnknown || kind == transport::DatagramKind::kStun) {
    refuse_foreign(stats_.foreign_unknown);  // not DTLS, RTP or RTCP: the relay speaks no ICE
  } else if (!connected()) {
    refuse_foreign(stats_.foreign_before_keys);
  } else if (!from_peer(from)) {
    refuse_foreign(stats_.foreign_not_peer);
  } else if (kind == transport::DatagramKind::kRtp) {
    receive_rtp(datagram, now_ns);
  } else {
    receive_rtcp(datagram, now_ns);
  }
  schedule(now_ns);
}

void RelaySession::receive_rtp(std::span<uint8_t> packet, uint64_t now_ns) {
  if (!receiver_) {  // a receiver sends no media
    count(stats_.rtp_refused);
    return;
  }
  size_t size = packet.size();
  uint32_t epoch = 0;
  if (!unprotect(packet, false, size, epoch, now_ns)) return;
  receiver_->on_rtp(packet.first(size), keys_.ordinal_of(epoch).value_or(0), now_ns);
}

void RelaySession::receive_rtcp(std::span<uint8_t> packet, uint64_t now_ns) {
  size_t size = packet.size();
  uint32_t epoch = 0;
  if (!unprotect(packet, true, size, epoch, now_ns)) return;
  RelayRtcp rtcp;
  rtcp.media_ssrc = sender_ ? sender_->media_ssrc() : 0;
  rtcp.nacks = &nack_list_;
  if (rtp::parse_rtcp(packet.first(size), rtcp) != rtp::RtcpParseError::kOk) {
    count(stats_.rtcp_refused);
    return;
  }
  if (sender_) {
    // The receiver is alive and holds our keys.
    peer_heard_ns_ = now_ns;
    next_liveness_try_ns_ = 0;
    liveness_retry_ns_ = 0;
    sender_->on_rtcp(rtcp, now_ns);
  } else {
    receiver_->on_rtcp(rtcp, keys_.ordinal_of(epoch).value_or(0), now_ns);
  }
}

bool RelaySession::unprotect(std::span<uint8_t> packet, bool rtcp, size_t& size, uint32_t& epoch,
                             uint64_t now_ns) {
  const secure::SrtpStatus status = rtcp ? srtp_in_.unprotect_rtcp(packet.data(), size, &epoch)
                                         : srtp_in_.unprotect_rtp(packet.data(), size, &epoch);
  if (status != secure::SrtpStatus::kOk) {
    count(stats_.srtp_refused);
    return false;
  }
  // A packet authenticated under a new epoch is what moves the key schedule (docs/wan.md).
  keys_.on_packet_authenticated(epoch, now_ns);
  return true;
}

void RelaySession::on_message(transport::ToTransport& m, uint64_t now_ns) {
  switch (m.kind) {
    case transport::ToTransport::Kind::kFrame:
      if (sender_) {
        sender_->send_frame(m, now_ns);
      } else {
        transport::FromTransport done;  // a receiver sends no media: the slot goes back
        done.kind = transport::FromTransport::Kind::kFrameDone;
        done.slot = m.slot;
        done.stream_id = m.stream_id;
        send_to_main(done);
      }
      break;
    case transport::ToTransport::Kind::kStreamOpened:
      if (sender_) sender_->on_stream_opened(m.description, now_ns);
      break;
    case transport::ToTransport::Kind::kStreamClosed:
      if (sender_) sender_->on_stream_closed(now_ns);
      break;
    case transport::ToTransport::Kind::kBufferFree:
      if (receiver_) receiver_->on_buffer_free(m.buffer);
      break;
    case transport::ToTransport::Kind::kKeyframeRequest:
      if (receiver_) receiver_->request_keyframe(now_ns);
      break;
    case transport::ToTransport::Kind::kCommand:
      delete m.command;  // the relay session takes none
      break;
  }
  schedule(now_ns);
}

void RelaySession::on_timer(uint64_t now_ns) {
  if (dtls_.next_timeout_ns(now_ns) <= now_ns) {
    // A retransmitted flight goes to the address the handshake is bound to.
    if (!config_.sender) dtls_to_ = transport::address_from_bytes(dtls_.pending_address());
    const secure::DtlsEvent e = dtls_.handle_timeout(now_ns);
    if (e == secure::DtlsEvent::kFailed) on_handshake_failed(now_ns);
    if (e == secure::DtlsEvent::kHandshakeComplete) on_handshake_complete(now_ns);
  }
  if (sender_) {
    if (now_ns >= next_handshake_ns_) start_pending_handshake(now_ns);
    check_liveness(now_ns);
  }
  if (connected()) run_key_schedule(now_ns);
  if (sender_) sender_->on_timer(now_ns);
  if (receiver_) receiver_->on_timer(now_ns);
  publish_stats();
  schedule(now_ns);
}

void RelaySession::check_liveness(uint64_t now_ns) {
  // A receiver reports every 100 ms (kReceiverReportNs); silence for the timeout means it died
  // or restarted and holds none of our keys (the SRTP we send it is refused unread). A fresh
  // handshake finds out: a restarted receiver answers it like a first one, and its epoch is
  // sent under at once (KeySchedule::on_peer_lost). Retried with backoff while nobody answers.
  if (!connected() || now_ns - peer_heard_ns_ < config_.liveness_timeout_ns ||
      now_ns < next_liveness_try_ns_)
    return;
  count(stats_.peer_lost);
  keys_.on_peer_lost(now_ns);
  if (liveness_retry_ns_ == 0) liveness_retry_ns_ = config_.liveness_retry_ns;
  next_liveness_try_ns_ = now_ns + liveness_retry_ns_;
  liveness_retry_ns_ = std::min(liveness_retry_ns_ * 2, config_.liveness_retry_max_ns);
}

void RelaySession::on_stop(uint64_t now_ns) {
  if (sender_) sender_->on_stop(now_ns);
  publish_stats();
}

void RelaySession::schedule(uint64_t now_ns) {
  if (!thread_) return;
  uint64_t next = now_ns + 100'000'000;  // at least every 100 ms: stats, timers
  next = std::min({next, dtls_.next_timeout_ns(now_ns), next_handshake_ns_});
  if (connected()) next = std::min(next, keys_.next_deadline_ns());
  if (sender_) next = sender_->next_wakeup_ns(now_ns, next);
  if (receiver_) next = receiver_->next_wakeup_ns(next);
  thread_->arm_timer(next > now_ns ? next - now_ns : 0);
}

// The association's state and the cores' own counters (keys, SRTP, DTLS routing), copied into
// the figures; every other counter is counted where it happens.
void RelaySession::publish_stats() {
  using core::set;
  set(stats_.state, uint32_t(state_));
  set(stats_.handshakes, keys_.counters().epochs);
  set(stats_.send_epoch, keys_.send_ordinal());
  set(stats_.rekeys_started, keys_.counters().rekeys_started);
  set(stats_.last_failure, uint32_t(last_failure_));
  set(stats_.last_alert, uint32_t(last_alert_));
  set(stats_.handshake_backoff_ms,
      next_handshake_ns_ == kNever ? uint64_t(0) : handshake_backoff_ns_ / 1'000'000);
  const secure::DtlsRoutingCounters& routing = dtls_.routing_counters();
  set(stats_.dtls_hellos_dropped, routing.hellos_dropped);
  set(stats_.dtls_refused, routing.refused_busy + routing.stray_records);
  set(stats_.dtls_preempted, routing.preempted);
  set(stats_.dtls_cookie_challenges, routing.cookie_challenges);
  const auto& srtp = srtp_in_.counters();
  set(stats_.srtp_auth_failed, srtp.auth_failed);
  set(stats_.srtp_replayed, srtp.replayed);
  set(stats_.srtp_unknown_epoch, srtp.unknown_epoch);
  set(stats_.srtp_malformed, srtp.too_short + srtp.malformed + srtp.no_room);
  const bool have_rtt = sender_ ? sender_->have_rtt() : receiver_->have_rtt();
  const uint64_t rtt_ns = sender_ ? sender_->rtt_ns() : receiver_->rtt_ns();
  set(stats_.rtt_us, have_rtt ? rtt_ns / 1000 : 0);
}

}  // namespace syncd::relay
