#include "whep/whep_transport.h"

#include <algorithm>
#include <cstring>

#include "core/clock.h"
#include "core/counter.h"
#include "rtp/h264_packetizer.h"
#include "transport/datagram_kind.h"
#include "transport/socket_address.h"
#include "webrtc/stun.h"
#include "whep/whep_session.h"

namespace syncd::whep {

const char* whep_drop_name(WhepDrop reason) {
  switch (reason) {
    case WhepDrop::kNotConnected:
      return "not_connected";
    case WhepDrop::kAwaitingKeyframe:
      return "awaiting_keyframe";
    case WhepDrop::kPacketizeRefused:
      return "packetize_refused";
    case WhepDrop::kSendFailed:
      return "send_failed";
    case WhepDrop::kCount:
      break;
  }
  return "?";
}

const char* whep_state_name(WhepState state) {
  switch (state) {
    case WhepState::kWaitingForIce:
      return "waiting_for_ice";
    case WhepState::kHandshaking:
      return "handshaking";
    case WhepState::kConnected:
      return "connected";
    case WhepState::kEnded:
      return "ended";
  }
  return "?";
}

const char* whep_end_name(WhepEnd end) {
  switch (end) {
    case WhepEnd::kNone:
      return "none";
    case WhepEnd::kDeleted:
      return "deleted";
    case WhepEnd::kConsentExpired:
      return "consent_expired";
    case WhepEnd::kIceTimeout:
      return "ice_timeout";
    case WhepEnd::kDtlsFailed:
      return "dtls_failed";
    case WhepEnd::kDtlsClosed:
      return "dtls_closed";
    case WhepEnd::kStopped:
      return "stopped";
    case WhepEnd::kStreamClosed:
      return "stream_closed";
  }
  return "?";
}

namespace {

using core::count;
constexpr auto kRelaxed = std::memory_order_relaxed;

// Whether an Annex B access unit holds an IDR slice (NAL type 5): a browser can start there.
bool has_idr(std::span<const uint8_t> access_unit) {
  bool idr = false;
  rtp::split_annex_b(access_unit, [&idr](std::span<const uint8_t> nal) {
    if (!nal.empty() && (nal[0] & 0x1f) == 5) idr = true;
  });
  return idr;
}

webrtc::StunAddress stun_address(const sockaddr_storage& from) {
  webrtc::StunAddress a;
  if (from.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(from);
    a.ipv6 = true;
    std::memcpy(a.ip.data(), &in6.sin6_addr, 16);
    a.port = ntohs(in6.sin6_port);
  } else {
    const auto& in = reinterpret_cast<const sockaddr_in&>(from);
    std::memcpy(a.ip.data(), &in.sin_addr, 4);
    a.port = ntohs(in.sin_port);
  }
  return a;
}

}  // namespace

WhepTransport::WhepTransport(WhepTransportConfig config, const secure::Identity& identity,
                             std::shared_ptr<audio::AudioTap> audio_tap)
    : config_(config),
      // Browsers offer GCM first; other WebRTC stacks may have only AES-CM (webrtc_srtp.h).
      dtls_context_(identity,
                    [&] {
                      secure::DtlsConfig c = config.dtls;
                      c.srtp_profiles = secure::DtlsConfig::SrtpProfiles::kGcmOrCm;
                      return c;
                    }()),
      target_bps_(config.max_bps) {
  counters_.target_bps.store(target_bps_, kRelaxed);
  if (audio_tap) audio_ = std::make_unique<WhepAudioEncoder>(std::move(audio_tap));
}

WhepTransport::~WhepTransport() = default;

void WhepTransport::on_start(transport::TransportThread& thread, uint64_t) {
  thread_ = &thread;
}

WhepTransport::Session* WhepTransport::find_by_address(const sockaddr_storage& from) {
  for (auto& s : sessions_)
    if (s->has_address() && transport::same_address(s->address(), from)) return s.get();
  return nullptr;
}

void WhepTransport::on_datagram(std::span<uint8_t> datagram, const sockaddr_storage& from,
                                uint64_t now_ns) {
  const transport::DatagramKind kind = transport::classify_datagram(datagram);
  if (kind == transport::DatagramKind::kStun && webrtc::looks_like_stun(datagram)) {
    on_stun(datagram, from, now_ns);
    return;
  }
  Session* session = find_by_address(from);
  if (!session) {
    count(counters_.foreign_datagrams);
    return;
  }
  if (kind == transport::DatagramKind::kDtls) {
    if (const WhepEnd why = session->on_dtls(datagram, now_ns); why != WhepEnd::kNone)
      end(*session, why);
    return;
  }
  if (kind == transport::DatagramKind::kRtcp) {
    session->on_rtcp(datagram, now_ns);
    return;
  }
  // RTP from a receive-only browser, or anything else: not ours to read.
  count(counters_.foreign_datagrams);
}

void WhepTransport::on_stun_response(std::span<uint8_t> datagram, const sockaddr_storage& from,
                                     uint64_t now_ns) {
  // A Binding indication (RFC 8489 6.2.3, method 0x001 class indication: 0x0011) is a peer's
  // keepalive (RFC 8445 11; libnice sends one): nothing to answer or read.
  if (datagram.size() >= 20 && datagram[0] == 0x00 && datagram[1] == 0x11) {
    count(counters_.stun_indications);
    return;
  }
  webrtc::StunBindingResponse response;
  if (webrtc::parse_stun_binding_response(datagram, response) != webrtc::StunError::kNone) {
    count(counters_.stun_malformed);
    return;
  }
  for (auto& s : sessions_) {
    if (s->state() == WhepState::kEnded || !s->owns_check(response.transaction_id)) continue;
    // Signed with the peer's password, like our request (RFC 8445 7.2.5.2.2 / RFC 8489 9.2.4).
    if (response.success && webrtc::stun_integrity_ok(datagram, s->remote_password())) {
      s->on_check_answered(from, now_ns);
      return;
    }
    break;
  }
  count(counters_.stun_unmatched);
}

void WhepTransport::on_stun(std::span<uint8_t> datagram, const sockaddr_storage& from,
                            uint64_t now_ns) {
  webrtc::StunBindingRequest request;
  const webrtc::StunError parsed = webrtc::parse_stun_binding_request(datagram, request);
  if (parsed == webrtc::StunError::kNotBindingRequest) {
    on_stun_response(datagram, from, now_ns);
    return;
  }
  if (parsed != webrtc::StunError::kNone) {
    count(counters_.stun_malformed);
    return;
  }
  // USERNAME is "<our ufrag>:<the browser's>" (RFC 8445 7.2.2).
  const std::string_view ours = request.username.substr(0, request.username.find(':'));
  Session* session = nullptr;
  for (auto& s : sessions_)
    if (s->ufrag() == ours && s->state() != WhepState::kEnded) session = s.get();
  uint8_t response[webrtc::kMaxStunResponse];
  if (!session) {
    count(counters_.stun_unknown_user);
    return;
  }
  WhepSessionStats& stats = session->stats();
  count(stats.stun_requests);
  if (!webrtc::stun_integrity_ok(datagram, session->password())) {
    count(stats.stun_refused);
    // RFC 8489 10.1.2: 401 without MESSAGE-INTEGRITY (we cannot sign with a key they lack).
    const size_t n =
        webrtc::write_stun_binding_error(request.transaction_id, 401, "Unauthorized", response);
    if (n) thread_->send_datagram({response, n}, reinterpret_cast<const sockaddr*>(&from));
    return;
  }
  session->on_consent(from, request.use_candidate, now_ns);
  const size_t n = webrtc::write_stun_binding_success(request.transaction_id, stun_address(from),
                                                      session->password(), response);
  if (n) thread_->send_datagram({response, n}, reinterpret_cast<const sockaddr*>(&from));
}

void WhepTransport::on_message(transport::ToTransport& m, uint64_t now_ns) {
  switch (m.kind) {
    case transport::ToTransport::Kind::kFrame:
      send_frame(m, now_ns);
      break;
    case transport::ToTransport::Kind::kCommand: {
      std::unique_ptr<transport::HandlerCommand> command(m.command);
      if (auto* setup = dynamic_cast<WhepSessionSetup*>(command.get())) {
        command.release();
        if (sessions_.size() >= kMaxSessions) {  // the service counts sessions before this
          setup->stats->end.store(uint32_t(WhepEnd::kStopped), kRelaxed);
          delete setup;
          break;
        }
        sessions_.push_back(
            std::make_unique<Session>(*this, std::unique_ptr<WhepSessionSetup>(setup), now_ns));
        count(counters_.sessions_started);
        if (sessions_.size() == 1) thread_->arm_timer(kTickNs);  // ticks while sessions live
      } else if (auto* e = dynamic_cast<WhepSessionEnd*>(command.get())) {
        for (auto& s : sessions_)
          if (s->id() == e->id) end(*s, WhepEnd::kDeleted);
      }
      break;
    }
    case transport::ToTransport::Kind::kStreamOpened:
      stream_closed_ns_ = 0;
      break;
    case transport::ToTransport::Kind::kStreamClosed:
      stream_closed_ns_ = std::max<uint64_t>(now_ns, 1);
      break;
    case transport::ToTransport::Kind::kBufferFree:
    case transport::ToTransport::Kind::kKeyframeRequest:
      break;
  }
}

void WhepTransport::send_frame(transport::ToTransport& m, uint64_t now_ns) {
  count(counters_.frames_in);
  transport::FromTransport done;
  done.kind = transport::FromTransport::Kind::kFrameDone;
  done.slot = m.slot;
  done.stream_id = m.stream_id;
  const media::FrameInfo& info = m.slot->info;
  const std::span<const uint8_t> access_unit(m.slot->pixels, info.bytes);
  // The scan for an IDR only while some session still waits for one.
  const bool idr = std::any_of(sessions_.begin(), sessions_.end(),
                               [](const auto& s) { return s->needs_keyframe(); }) &&
                   has_idr(access_unit);
  bool awaiting = false;
  for (auto& s : sessions_) {
    if (s->state() == WhepState::kEnded) continue;
    done.sent |= s->send_frame(access_unit, idr, info.accept_ns, now_ns);
    awaiting |= s->awaiting_keyframe();
  }
  if (awaiting) request_keyframe(now_ns);
  thread_->send_to_main(done);
}

void WhepTransport::request_keyframe(uint64_t now_ns) {
  // At most one per keyframe_interval_ns; one asked for inside it goes out when it ends.
  if (last_keyframe_request_ns_ != 0 &&
      now_ns - last_keyframe_request_ns_ < config_.keyframe_interval_ns) {
    keyframe_request_pending_ = true;
    return;
  }
  keyframe_request_pending_ = false;
  last_keyframe_request_ns_ = now_ns;
  transport::FromTransport m;
  m.kind = transport::FromTransport::Kind::kKeyframeRequest;
  if (thread_->send_to_main(m)) count(counters_.keyframe_requests);
}

void WhepTransport::end(Session& session, WhepEnd why) {
  if (session.state() == WhepState::kEnded) return;
  session.close(why);
  count(counters_.sessions_ended);
  transport::FromTransport m;
  m.kind = transport::FromTransport::Kind::kPeerEnded;
  m.sequence = session.id();
  thread_->send_to_main(m);
}

void WhepTransport::on_timer(uint64_t now_ns) {
  const bool stream_gone =
      stream_closed_ns_ != 0 && now_ns - stream_closed_ns_ >= config_.stream_gone_ns;
  for (auto& s : sessions_) {
    if (s->state() == WhepState::kEnded) continue;
    if (stream_gone) {
      end(*s, WhepEnd::kStreamClosed);
      continue;
    }
    if (const WhepEnd why = s->on_tick(now_ns); why != WhepEnd::kNone) end(*s, why);
  }
  // Ended sessions go once their end has been told (their stats stay with the service).
  std::erase_if(sessions_, [](const auto& s) { return s->state() == WhepState::kEnded; });
  send_audio();
  follow_loss();
  if (keyframe_request_pending_) request_keyframe(now_ns);
  if (!sessions_.empty()) thread_->arm_timer(kTickNs);
}

void WhepTransport::send_audio() {
  if (!audio_) return;
  // Encoded only while some session listens: the tap copies nothing otherwise.
  audio_->set_wanted(
      std::any_of(sessions_.begin(), sessions_.end(), [](const auto& s) { return s->listens(); }));
  // In-band FEC sized for the worst listener's loss (RFC 3550 fraction lost, of 256).
  uint32_t worst = 0;
  for (const auto& s : sessions_)
    if (s->listens())
      worst = std::max(worst, uint32_t(s->stats().audio_fraction_lost.load(kRelaxed)));
  audio_->set_expected_loss((worst * 100 + 255) / 256);
  EncodedAudio frame;
  while (audio_->next(frame, &core::monotonic_ns))
    for (auto& s : sessions_) s->send_audio(frame);
}

void WhepTransport::follow_loss() {
  // One encode serves every viewer: it runs at the rate the lossiest connected viewer's path
  // carries. A change goes to the encoder on the main loop (bitrate and resolution ladder).
  uint64_t lowest = config_.max_bps;
  bool any = false;
  for (const auto& s : sessions_) {
    if (s->state() != WhepState::kConnected) continue;
    lowest = std::min(lowest, s->loss_based_bps());
    any = true;
  }
  if (!any || lowest == target_bps_) return;
  transport::FromTransport m;
  m.kind = transport::FromTransport::Kind::kTargetRate;
  m.target_bps = lowest;
  if (thread_->send_to_main(m)) {
    target_bps_ = lowest;
    counters_.target_bps.store(lowest, kRelaxed);
    count(counters_.target_changes);
  }
}

void WhepTransport::on_stop(uint64_t) {
  for (auto& s : sessions_) end(*s, WhepEnd::kStopped);
  sessions_.clear();
  if (audio_) audio_->set_wanted(false);
}

}  // namespace syncd::whep
