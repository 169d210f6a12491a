#include "whep/whep_session.h"

#include <algorithm>
#include <cstring>

#include "core/counter.h"
#include "core/random.h"
#include "rtp/rtp_packet.h"
#include "transport/socket_address.h"
#include "webrtc/stun.h"

namespace syncd::whep {

namespace {

using core::count;
constexpr auto kRelaxed = std::memory_order_relaxed;

// An RTP packet as sent: the largest the packetizer writes (12-byte header, no extensions, its
// default payload budget) plus the GCM tag. No MKI with a browser.
constexpr size_t kPacketBytes = 12 + rtp::kDefaultMaxPayloadBytes + secure::kSrtpTagBytes;
static_assert(kPacketBytes <= transport::PacketStore::kPacketBytes);
// Sent packets kept for NACK, by sequence number: at 1080p and 8 Mbit/s (~17 packets a frame)
// about half a second, several round trips on any path a browser plays live video over.
constexpr size_t kHistory = 512;
// RTCP sender reports (RFC 3550 6.2: at least every 5 s; browsers use them for A/V sync and RTT).
constexpr uint64_t kReportIntervalNs = 1'000'000'000;

// A viewer's loss-based estimate starts at the encoder's rate and climbs back no higher.
// Browsers' receiver reports count loss before NACK repair, as the relay's do, so the same 2 % /
// 10 % lines apply (congestion/loss_based_estimator.h).
congestion::LossEstimatorConfig loss_config(uint64_t max_bps) {
  congestion::LossEstimatorConfig c;
  c.max_bps = max_bps;
  c.start_bps = max_bps;
  c.min_bps = std::min(c.min_bps, max_bps);
  return c;
}

}  // namespace

WhepTransport::Session::Session(WhepTransport& owner, std::unique_ptr<WhepSessionSetup> setup,
                                uint64_t now_ns)
    : owner_(owner),
      setup_(std::move(setup)),
      stats_(*setup_->stats),
      dtls_(owner.dtls_context_, setup_->dtls_role, setup_->remote_fingerprint,
            [this](std::span<const uint8_t> d) { send_raw(d); }),
      store_(kHistory + 1),
      video_({.ssrc = setup_->ssrc,
              .first_sequence = uint16_t(core::random_u32()),
              .clock_offset = core::random_u32(),
              .history = kHistory},
             store_),
      created_ns_(now_ns),
      rate_(loss_config(owner.config_.max_bps)) {
  audio_sequence_ = uint16_t(core::random_u32());
  audio_timestamp_offset_ = core::random_u32();
  stats_.created_ns.store(now_ns, kRelaxed);
  stats_.state.store(uint32_t(WhepState::kWaitingForIce), kRelaxed);
  for (size_t i = 0; i < sizeof check_prefix_; i += 4) {
    const uint32_t r = core::random_u32();
    std::memcpy(check_prefix_ + i, &r, 4);
  }
  tie_breaker_ = uint64_t(core::random_u32()) << 32 | core::random_u32();
  // RFC 8445 7.2.2: our checks name the peer's ufrag first.
  if (setup_->ice_controlling) check_username_ = setup_->remote_ufrag + ":" + setup_->local_ufrag;
}

bool WhepTransport::Session::owns_check(const std::array<uint8_t, 12>& transaction_id) const {
  return setup_->ice_controlling &&
         std::memcmp(transaction_id.data(), check_prefix_, sizeof check_prefix_) == 0;
}

void WhepTransport::Session::on_check_answered(const sockaddr_storage& from, uint64_t now_ns) {
  count(stats_.checks_answered);
  last_consent_ns_ = now_ns;
  if (!has_address_) {
    address_ = from;
    has_address_ = true;
  }
  if (state_ == WhepState::kWaitingForIce) enter_handshaking(now_ns);
}

void WhepTransport::Session::on_consent(const sockaddr_storage& from, bool nominated,
                                        uint64_t now_ns) {
  last_consent_ns_ = now_ns;
  // ICE-lite (RFC 8445 6.1.3.2): the pair the controlling browser nominates is the one; before
  // a nomination, the first checked address serves (a browser sends DTLS on its first pair).
  // As the controlling agent (WHIP) we nominate: the peer's own checks only refresh consent.
  if (!has_address_ ||
      (nominated && !setup_->ice_controlling && !transport::same_address(from, address_))) {
    address_ = from;
    has_address_ = true;
  }
  if (state_ == WhepState::kWaitingForIce) enter_handshaking(now_ns);
}

WhepEnd WhepTransport::Session::on_dtls(std::span<const uint8_t> datagram, uint64_t now_ns) {
  switch (dtls_.feed(datagram, transport::address_bytes(address_), now_ns)) {
    case secure::DtlsEvent::kHandshakeComplete:
      return on_handshake_complete(now_ns);
    case secure::DtlsEvent::kFailed:
      stats_.dtls_failure.store(uint32_t(dtls_.failure()), kRelaxed);
      return WhepEnd::kDtlsFailed;
    case secure::DtlsEvent::kClosed:
      return WhepEnd::kDtlsClosed;
    default:
      return WhepEnd::kNone;
  }
}

void WhepTransport::Session::on_rtcp(std::span<uint8_t> datagram, uint64_t now_ns) {
  size_t size = datagram.size();
  if (state_ != WhepState::kConnected ||
      srtp_.unprotect_rtcp(datagram.data(), size) != secure::SrtpStatus::kOk) {
    count(stats_.rtcp_refused);
    return;
  }
  now_ns_ = now_ns;
  rtp::RtcpParseOptions options;
  options.allow_reduced_size = true;  // RFC 5506, when the offer asked for rtcp-rsize
  if (rtp::parse_rtcp({datagram.data(), size}, *this, options) != rtp::RtcpParseError::kOk) {
    count(stats_.rtcp_refused);
    return;
  }
  count(stats_.rtcp_received);
}

bool WhepTransport::Session::send_frame(std::span<const uint8_t> access_unit, bool idr,
                                        uint64_t accept_ns, uint64_t now_ns) {
  count(stats_.frames_offered);
  if (state_ != WhepState::kConnected) return drop(WhepDrop::kNotConnected);
  if (!keyframe_seen_ && !idr) return drop(WhepDrop::kAwaitingKeyframe);
  if (packetizer_.begin(access_unit) != rtp::PacketizeError::kOk)
    return drop(WhepDrop::kPacketizeRefused);
  keyframe_seen_ = true;
  rtp::RtpHeader header;
  header.payload_type = setup_->payload_type;
  header.ssrc = video_.ssrc();
  header.timestamp = video_.rtp_time(accept_ns ? accept_ns : now_ns);
  bool all_sent = true;
  while (packetizer_.has_next()) {
    header.sequence = video_.take_sequence();
    // The store has one buffer more than the history holds: there is always one to take.
    const uint32_t h = store_.take();
    uint8_t* packet = store_.room(h).data();
    size_t size = packetizer_.write_next(header, {packet, kPacketBytes});
    if (size == 0 || srtp_.protect_rtp(packet, size, kPacketBytes) != secure::SrtpStatus::kOk) {
      store_.give_back(h);  // the history keeps nothing for this sequence: a NACK finds none
      all_sent = false;
      continue;
    }
    // Kept as protected: a retransmission is the same bytes again (below).
    store_.set_size(h, size);
    video_.remember(header.sequence, h);
    if (send_raw({packet, size})) {
      video_.count_sent(size - 12 - secure::kSrtpTagBytes);
      count(stats_.packets_sent);
      count(stats_.bytes_sent, size);
    } else {
      count(stats_.packets_send_failed);
      all_sent = false;
    }
  }
  if (!all_sent) return drop(WhepDrop::kSendFailed);
  count(stats_.frames_sent);
  if (stats_.first_frame_ns.load(kRelaxed) == 0) stats_.first_frame_ns.store(now_ns, kRelaxed);
  return true;
}

void WhepTransport::Session::send_audio(const EncodedAudio& frame) {
  if (!setup_->audio || state_ == WhepState::kEnded) return;
  count(stats_.audio_frames_offered);
  if (state_ != WhepState::kConnected) {
    count(stats_.audio_frames_dropped[size_t(WhepDrop::kNotConnected)]);
    return;
  }
  rtp::RtpHeader header;
  header.payload_type = setup_->audio_payload_type;
  header.ssrc = setup_->audio_ssrc;
  header.sequence = audio_sequence_++;
  header.timestamp = audio_timestamp_offset_ + uint32_t(frame.capture_index);
  // RFC 3551 4.1 / RFC 7587 4.2: the marker starts a talkspurt; ours after every gap.
  header.marker = frame.discontinuity;
  size_t size = rtp::write_rtp_packet(header, frame.opus, audio_packet_);
  if (size == 0 ||
      srtp_.protect_rtp(audio_packet_, size, sizeof audio_packet_) != secure::SrtpStatus::kOk ||
      !send_raw({audio_packet_, size})) {
    count(stats_.audio_frames_dropped[size_t(WhepDrop::kSendFailed)]);
    return;
  }
  ++audio_packets_sent_;
  audio_octets_sent_ += uint32_t(frame.opus.size());
  count(stats_.audio_frames_sent);
  count(stats_.audio_bytes_sent, size);
}

WhepEnd WhepTransport::Session::on_tick(uint64_t now_ns) {
  if (setup_->ice_controlling) send_checks(now_ns);
  if (state_ == WhepState::kWaitingForIce) {
    if (now_ns - created_ns_ >= owner_.config_.ice_timeout_ns) return WhepEnd::kIceTimeout;
    return WhepEnd::kNone;
  }
  if (now_ns - last_consent_ns_ >= owner_.config_.consent_timeout_ns)
    return WhepEnd::kConsentExpired;
  if (state_ == WhepState::kHandshaking && dtls_.next_timeout_ns(now_ns) <= now_ns &&
      dtls_.handle_timeout(now_ns) == secure::DtlsEvent::kFailed) {
    stats_.dtls_failure.store(uint32_t(dtls_.failure()), kRelaxed);
    return WhepEnd::kDtlsFailed;
  }
  if (state_ == WhepState::kConnected && now_ns >= next_report_ns_) {
    send_sender_report(now_ns);
    next_report_ns_ = now_ns + kReportIntervalNs;
  }
  return WhepEnd::kNone;
}

void WhepTransport::Session::close(WhepEnd why) {
  if (state_ == WhepState::kConnected && why != WhepEnd::kDtlsClosed &&
      why != WhepEnd::kConsentExpired) {
    send_goodbye();
    dtls_.close();
  }
  stats_.end.store(uint32_t(why), kRelaxed);
  set_state(WhepState::kEnded);
}

void WhepTransport::Session::on_receiver_report(const rtp::ReceiverReport& rr) {
  for (const rtp::ReportBlock& b : rr.blocks) {
    if (setup_->audio && b.source_ssrc == setup_->audio_ssrc)
      stats_.audio_fraction_lost.store(b.fraction_lost, kRelaxed);
    if (b.source_ssrc != setup_->ssrc) continue;
    stats_.fraction_lost.store(b.fraction_lost, kRelaxed);
    const uint32_t arrival = rtp::ntp_compact(rtp::ntp_from_ns(transport::wall_clock_ntp_ns()));
    const auto rtt = rtp::round_trip_ns(arrival, b.last_sr, b.delay_since_last_sr);
    if (rtt) stats_.rtt_us.store(*rtt / 1000, kRelaxed);
    rate_.on_report(now_ns_, b.fraction_lost, rtt.value_or(0), owner_.target_bps_);
    stats_.loss_based_bps.store(rate_.estimate_bps(), kRelaxed);
  }
}

void WhepTransport::Session::on_nack(const rtp::Nack& nack) {
  if (nack.media_ssrc != setup_->ssrc) return;
  for (uint16_t lost : nack.lost) {
    count(stats_.nacked_packets);
    // Every NACK is served: a browser repeats one only after a round trip without the packet.
    if (video_.answer_nack(lost, now_ns_, 0) == rtp_media::NackAnswer::kUnavailable) {
      count(stats_.retransmit_unavailable);
      continue;
    }
    // The packet as it was protected: the same bytes again, which the browser's replay window
    // takes only if the first never arrived (no packet index is protected twice).
    if (send_raw(video_.packet(lost))) {
      count(stats_.packets_retransmitted);
      video_.mark_resent(lost, now_ns_);
    }
  }
}

void WhepTransport::Session::on_pli(uint32_t, uint32_t media_ssrc) {
  if (media_ssrc != setup_->ssrc) return;
  count(stats_.plis_received);
  owner_.request_keyframe(now_ns_);
}

void WhepTransport::Session::enter_handshaking(uint64_t now_ns) {
  set_state(WhepState::kHandshaking);
  // The client speaks first (RFC 6347); as the server we wait for its ClientHello.
  if (setup_->dtls_role == secure::DtlsRole::kClient) dtls_.start(now_ns);
}

void WhepTransport::Session::send_checks(uint64_t now_ns) {
  if (now_ns < next_check_ns_) return;
  next_check_ns_ = now_ns + (has_address_ ? kConsentIntervalNs : kCheckIntervalNs);
  webrtc::StunBindingRequest request;
  std::memcpy(request.transaction_id.data(), check_prefix_, sizeof check_prefix_);
  const uint32_t n = ++check_count_;
  std::memcpy(request.transaction_id.data() + sizeof check_prefix_, &n, 4);
  request.username = check_username_;
  // RFC 8445 5.1.2.1: a peer-reflexive candidate's priority, type preference 110.
  request.priority = (110u << 24) | (65535u << 8) | 255u;
  request.use_candidate = true;
  request.ice_controlling = true;
  request.tie_breaker = tie_breaker_;
  uint8_t message[webrtc::kMaxStunRequest];
  const size_t size = webrtc::write_stun_binding_request(request, setup_->remote_password, message);
  if (size == 0) return;
  auto send_to = [&](const sockaddr_storage& to) {
    if (owner_.thread_->send_datagram({message, size}, reinterpret_cast<const sockaddr*>(&to)))
      count(stats_.checks_sent);
  };
  if (has_address_) {
    send_to(address_);
  } else {
    for (const sockaddr_storage& candidate : setup_->remote_candidates) send_to(candidate);
  }
}

WhepEnd WhepTransport::Session::on_handshake_complete(uint64_t now_ns) {
  const secure::SrtpKeyMaterial& keys = dtls_.keys();
  // RFC 5764 4.2: each side protects with its own role's key and reads with the other's.
  const bool server = setup_->dtls_role == secure::DtlsRole::kServer;
  if (!srtp_.init(keys, server)) {
    stats_.dtls_failure.store(uint32_t(secure::DtlsFailure::kExportFailed), kRelaxed);
    return WhepEnd::kDtlsFailed;
  }
  stats_.srtp_profile.store(uint32_t(keys.profile), kRelaxed);
  set_state(WhepState::kConnected);
  stats_.connected_ns.store(now_ns, kRelaxed);
  next_report_ns_ = now_ns;
  // A new viewer needs an IDR to start from.
  owner_.request_keyframe(now_ns);
  return WhepEnd::kNone;
}

bool WhepTransport::Session::drop(WhepDrop reason) {
  count(stats_.frames_dropped[size_t(reason)]);
  return false;
}

void WhepTransport::Session::set_state(WhepState s) {
  state_ = s;
  stats_.state.store(uint32_t(s), kRelaxed);
}

bool WhepTransport::Session::send_raw(std::span<const uint8_t> datagram) {
  if (!has_address_ || !owner_.thread_) return false;
  return owner_.thread_->send_datagram(datagram, reinterpret_cast<const sockaddr*>(&address_));
}

void WhepTransport::Session::send_rtcp(rtp::RtcpWriter& writer, uint8_t* buffer, size_t capacity) {
  size_t size = writer.size();
  if (size == 0 || srtp_.protect_rtcp(buffer, size, capacity) != secure::SrtpStatus::kOk) return;
  send_raw({buffer, size});
}

void WhepTransport::Session::send_sender_report(uint64_t now_ns) {
  uint8_t buffer[256];
  rtp::RtcpWriter writer({buffer, sizeof buffer - secure::kRtcpTrailerBytes});
  const rtp::SenderInfo info = video_.sender_info(now_ns, transport::wall_clock_ntp_ns());
  writer.add_sender_report(setup_->ssrc, info);
  const WhepAudioEncoder* audio = owner_.audio_.get();
  if (setup_->audio && audio && audio->has_clock() && audio_packets_sent_ > 0) {
    rtp::SenderInfo audio_info = info;
    audio_info.rtp_timestamp = audio_timestamp_offset_ + uint32_t(audio->capture_index_at(now_ns));
    audio_info.packet_count = audio_packets_sent_;
    audio_info.octet_count = audio_octets_sent_;
    writer.add_sender_report(setup_->audio_ssrc, audio_info);
  }
  writer.add_cname(setup_->ssrc, "syncd");
  if (setup_->audio) writer.add_cname(setup_->audio_ssrc, "syncd");
  send_rtcp(writer, buffer, sizeof buffer);
}

void WhepTransport::Session::send_goodbye() {
  uint8_t buffer[128];
  rtp::RtcpWriter writer({buffer, sizeof buffer - secure::kRtcpTrailerBytes});
  const uint32_t ssrcs[2] = {setup_->ssrc, setup_->audio_ssrc};
  writer.add_receiver_report(ssrcs[0]);
  writer.add_goodbye({ssrcs, size_t(setup_->audio ? 2 : 1)});
  send_rtcp(writer, buffer, sizeof buffer);
}

}  // namespace syncd::whep
