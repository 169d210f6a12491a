#include "whep/whep_transport.h"

#include <algorithm>
#include <cstring>

#include "congestion/loss_based_estimator.h"
#include "core/clock.h"
#include "core/random.h"
#include "rtp/h264_packetizer.h"
#include "rtp/rtcp.h"
#include "rtp/rtp_packet.h"
#include "rtp_media/send_stream.h"
#include "secure/srtp_aead.h"
#include "transport/datagram_kind.h"
#include "transport/packet_store.h"
#include "transport/socket_address.h"
#include "webrtc/stun.h"

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
  }
  return "?";
}

namespace {

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

void bump(std::atomic<uint64_t>& counter, uint64_t by = 1) {
  counter.fetch_add(by, kRelaxed);
}

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

// One browser. Relay thread only.
class WhepTransport::Session final : public rtp::RtcpSink {
 public:
  Session(WhepTransport& owner, std::unique_ptr<WhepSessionSetup> setup, uint64_t now_ns)
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

  // Whether a STUN transaction id is one of this session's checks (its first 8 bytes).
  bool owns_check(const std::array<uint8_t, 12>& transaction_id) const {
    return setup_->ice_controlling &&
           std::memcmp(transaction_id.data(), check_prefix_, sizeof check_prefix_) == 0;
  }
  const std::string& remote_password() const { return setup_->remote_password; }

  // A success response to one of our checks, from `from` (WHIP: we control ICE). The first pair
  // that answers is nominated (every check carried USE-CANDIDATE) and becomes the session's.
  void on_check_answered(const sockaddr_storage& from, uint64_t now_ns) {
    bump(stats_.checks_answered);
    last_consent_ns_ = now_ns;
    if (!has_address_) {
      address_ = from;
      has_address_ = true;
    }
    if (state_ == WhepState::kWaitingForIce) enter_handshaking(now_ns);
  }

  uint64_t id() const { return setup_->id; }
  const std::string& ufrag() const { return setup_->local_ufrag; }
  const std::string& password() const { return setup_->local_password; }
  WhepState state() const { return state_; }
  WhepSessionStats& stats() { return stats_; }
  // The rate this browser's receiver reports say its path carries (loss-based, GCC section 6).
  uint64_t loss_based_bps() const { return rate_.estimate_bps(); }
  bool has_address() const { return has_address_; }
  bool listens() const { return setup_->audio && state_ == WhepState::kConnected; }
  const sockaddr_storage& address() const { return address_; }
  bool awaiting_keyframe() const { return state_ == WhepState::kConnected && !keyframe_seen_; }
  // Not yet sent an IDR (connected or not): the frame's IDR scan matters to it.
  bool needs_keyframe() const { return state_ != WhepState::kEnded && !keyframe_seen_; }

  // A Binding request that passed its integrity check, from `from`.
  void on_consent(const sockaddr_storage& from, bool nominated, uint64_t now_ns) {
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

  // DTLS from the session's address. Returns the session's end when it ended here.
  WhepEnd on_dtls(std::span<const uint8_t> datagram, uint64_t now_ns) {
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

  // SRTCP from the session's address (RTP from a receive-only browser is not expected).
  void on_rtcp(std::span<uint8_t> datagram, uint64_t now_ns) {
    size_t size = datagram.size();
    if (state_ != WhepState::kConnected ||
        receive_.unprotect_rtcp(datagram.data(), size) != secure::SrtpStatus::kOk) {
      bump(stats_.rtcp_refused);
      return;
    }
    now_ns_ = now_ns;
    rtp::RtcpParseOptions options;
    options.allow_reduced_size = true;  // RFC 5506, when the offer asked for rtcp-rsize
    if (rtp::parse_rtcp({datagram.data(), size}, *this, options) != rtp::RtcpParseError::kOk) {
      bump(stats_.rtcp_refused);
      return;
    }
    bump(stats_.rtcp_received);
  }

  // One access unit for this session; returns whether it went out whole.
  bool send_frame(std::span<const uint8_t> access_unit, bool idr, uint64_t accept_ns,
                  uint64_t now_ns) {
    bump(stats_.frames_offered);
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
      if (size == 0 || send_.protect_rtp(packet, size, kPacketBytes) != secure::SrtpStatus::kOk) {
        store_.give_back(h);  // the history keeps nothing for this sequence: a NACK finds none
        all_sent = false;
        continue;
      }
      // Kept as protected: a retransmission is the same bytes again (below).
      store_.set_size(h, size);
      video_.remember(header.sequence, h);
      if (send_raw({packet, size})) {
        video_.count_sent(size - 12 - secure::kSrtpTagBytes);
        bump(stats_.packets_sent);
        bump(stats_.bytes_sent, size);
      } else {
        bump(stats_.packets_send_failed);
        all_sent = false;
      }
    }
    if (!all_sent) return drop(WhepDrop::kSendFailed);
    bump(stats_.frames_sent);
    if (stats_.first_frame_ns.load(kRelaxed) == 0) stats_.first_frame_ns.store(now_ns, kRelaxed);
    return true;
  }

  // One 20 ms Opus frame, as one RTP packet (RFC 7587 section 4.2), when this session took audio.
  void send_audio(const EncodedAudio& frame) {
    if (!setup_->audio || state_ == WhepState::kEnded) return;
    bump(stats_.audio_frames_offered);
    if (state_ != WhepState::kConnected) {
      bump(stats_.audio_frames_dropped[size_t(WhepDrop::kNotConnected)]);
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
        send_.protect_rtp(audio_packet_, size, sizeof audio_packet_) != secure::SrtpStatus::kOk ||
        !send_raw({audio_packet_, size})) {
      bump(stats_.audio_frames_dropped[size_t(WhepDrop::kSendFailed)]);
      return;
    }
    ++audio_packets_sent_;
    audio_octets_sent_ += uint32_t(frame.opus.size());
    bump(stats_.audio_frames_sent);
    bump(stats_.audio_bytes_sent, size);
  }

  // Timers: DTLS retransmission, the sender report, consent. Returns the session's end when it
  // ended here.
  WhepEnd on_tick(uint64_t now_ns) {
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

  void close(WhepEnd why) {
    if (state_ == WhepState::kConnected && why != WhepEnd::kDtlsClosed &&
        why != WhepEnd::kConsentExpired) {
      send_goodbye();
      dtls_.close();
    }
    stats_.end.store(uint32_t(why), kRelaxed);
    set_state(WhepState::kEnded);
  }

  // ---- rtp::RtcpSink ----
  void on_receiver_report(const rtp::ReceiverReport& rr) override {
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
  void on_nack(const rtp::Nack& nack) override {
    if (nack.media_ssrc != setup_->ssrc) return;
    for (uint16_t lost : nack.lost) {
      bump(stats_.nacked_packets);
      // Every NACK is served: a browser repeats one only after a round trip without the packet.
      if (video_.answer_nack(lost, now_ns_, 0) == rtp_media::NackAnswer::kUnavailable) {
        bump(stats_.retransmit_unavailable);
        continue;
      }
      // The packet as it was protected: the same bytes again, which the browser's replay window
      // takes only if the first never arrived (no packet index is protected twice).
      if (send_raw(video_.packet(lost))) {
        bump(stats_.packets_retransmitted);
        video_.mark_resent(lost, now_ns_);
      }
    }
  }
  void on_pli(uint32_t, uint32_t media_ssrc) override {
    if (media_ssrc != setup_->ssrc) return;
    bump(stats_.plis_received);
    owner_.request_keyframe(now_ns_);
  }

 private:
  void enter_handshaking(uint64_t now_ns) {
    set_state(WhepState::kHandshaking);
    // The client speaks first (RFC 6347); as the server we wait for its ClientHello.
    if (setup_->dtls_role == secure::DtlsRole::kClient) dtls_.start(now_ns);
  }

  // WHIP: checks to every candidate until one answers (RFC 8445 6.1.4, paced at kCheckIntervalNs,
  // a few candidates at most), then one to the chosen address every kConsentIntervalNs (RFC 7675).
  void send_checks(uint64_t now_ns) {
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
    const size_t size =
        webrtc::write_stun_binding_request(request, setup_->remote_password, message);
    if (size == 0) return;
    auto send_to = [&](const sockaddr_storage& to) {
      if (owner_.thread_->send_datagram({message, size}, reinterpret_cast<const sockaddr*>(&to)))
        bump(stats_.checks_sent);
    };
    if (has_address_) {
      send_to(address_);
    } else {
      for (const sockaddr_storage& candidate : setup_->remote_candidates) send_to(candidate);
    }
  }

  WhepEnd on_handshake_complete(uint64_t now_ns) {
    const secure::SrtpKeyMaterial& keys = dtls_.keys();
    // RFC 5764 4.2: each side protects with its own role's key and reads with the other's.
    const bool server = setup_->dtls_role == secure::DtlsRole::kServer;
    if (!send_.init(0, server ? keys.server_write : keys.client_write, true, /*with_mki=*/false) ||
        !receive_.init(0, server ? keys.client_write : keys.server_write, false,
                       /*with_mki=*/false)) {
      stats_.dtls_failure.store(uint32_t(secure::DtlsFailure::kExportFailed), kRelaxed);
      return WhepEnd::kDtlsFailed;
    }
    set_state(WhepState::kConnected);
    stats_.connected_ns.store(now_ns, kRelaxed);
    next_report_ns_ = now_ns;
    // A new viewer needs an IDR to start from.
    owner_.request_keyframe(now_ns);
    return WhepEnd::kNone;
  }

  bool drop(WhepDrop reason) {
    bump(stats_.frames_dropped[size_t(reason)]);
    return false;
  }

  void set_state(WhepState s) {
    state_ = s;
    stats_.state.store(uint32_t(s), kRelaxed);
  }

  bool send_raw(std::span<const uint8_t> datagram) {
    if (!has_address_ || !owner_.thread_) return false;
    return owner_.thread_->send_datagram(datagram, reinterpret_cast<const sockaddr*>(&address_));
  }

  void send_rtcp(rtp::RtcpWriter& writer, uint8_t* buffer, size_t capacity) {
    size_t size = writer.size();
    if (size == 0 || send_.protect_rtcp(buffer, size, capacity) != secure::SrtpStatus::kOk) return;
    send_raw({buffer, size});
  }

  // One compound packet: the video's SR, and the audio's when it has a clock, both from the same
  // reading of the wall clock at now_ns (RFC 3550 6.4.1), so the browser can align the audio's
  // capture clock and the video's 90 kHz one (lip sync), and the CNAME both share.
  void send_sender_report(uint64_t now_ns) {
    uint8_t buffer[256];
    rtp::RtcpWriter writer({buffer, sizeof buffer - secure::kRtcpTrailerBytes});
    const rtp::SenderInfo info = video_.sender_info(now_ns, transport::wall_clock_ntp_ns());
    writer.add_sender_report(setup_->ssrc, info);
    const WhepAudioEncoder* audio = owner_.audio_.get();
    if (setup_->audio && audio && audio->has_clock() && audio_packets_sent_ > 0) {
      rtp::SenderInfo audio_info = info;
      audio_info.rtp_timestamp =
          audio_timestamp_offset_ + uint32_t(audio->capture_index_at(now_ns));
      audio_info.packet_count = audio_packets_sent_;
      audio_info.octet_count = audio_octets_sent_;
      writer.add_sender_report(setup_->audio_ssrc, audio_info);
    }
    writer.add_cname(setup_->ssrc, "syncd");
    if (setup_->audio) writer.add_cname(setup_->audio_ssrc, "syncd");
    send_rtcp(writer, buffer, sizeof buffer);
  }

  void send_goodbye() {
    uint8_t buffer[128];
    rtp::RtcpWriter writer({buffer, sizeof buffer - secure::kRtcpTrailerBytes});
    const uint32_t ssrcs[2] = {setup_->ssrc, setup_->audio_ssrc};
    writer.add_receiver_report(ssrcs[0]);
    writer.add_goodbye({ssrcs, size_t(setup_->audio ? 2 : 1)});
    send_rtcp(writer, buffer, sizeof buffer);
  }

  WhepTransport& owner_;
  std::unique_ptr<WhepSessionSetup> setup_;
  WhepSessionStats& stats_;
  secure::DtlsEndpoint dtls_;
  secure::SrtpAeadContext send_;
  secure::SrtpAeadContext receive_;
  rtp::H264Packetizer packetizer_;
  transport::PacketStore store_;  // the video's sent packets, protected
  rtp_media::SendStream video_;   // its clock, sequence numbers, history and report counts
  WhepState state_ = WhepState::kWaitingForIce;
  sockaddr_storage address_{};
  bool has_address_ = false;
  bool keyframe_seen_ = false;
  uint16_t audio_sequence_ = 0;
  uint32_t audio_timestamp_offset_ = 0;
  uint32_t audio_packets_sent_ = 0;
  uint32_t audio_octets_sent_ = 0;
  uint8_t audio_packet_[12 + WhepAudioEncoder::kMaxOpusBytes + secure::kSrtpTagBytes];
  uint64_t created_ns_ = 0;
  uint64_t last_consent_ns_ = 0;
  uint64_t next_report_ns_ = 0;
  uint64_t now_ns_ = 0;  // the time of the datagram being handled (for RtcpSink callbacks)
  // WHIP's checks: transaction ids are this prefix and a counter.
  uint8_t check_prefix_[8] = {};
  uint32_t check_count_ = 0;
  uint64_t tie_breaker_ = 0;
  uint64_t next_check_ns_ = 0;
  std::string check_username_;
  congestion::LossBasedEstimator rate_;
  static constexpr uint64_t kCheckIntervalNs = 50'000'000;
  static constexpr uint64_t kConsentIntervalNs = 5'000'000'000ull;
};

WhepTransport::WhepTransport(WhepTransportConfig config, const secure::Identity& identity,
                             std::shared_ptr<audio::AudioTap> audio_tap)
    : config_(config), dtls_context_(identity, config.dtls), target_bps_(config.max_bps) {
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
    bump(counters_.foreign_datagrams);
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
  bump(counters_.foreign_datagrams);
}

void WhepTransport::on_stun_response(std::span<uint8_t> datagram, const sockaddr_storage& from,
                                     uint64_t now_ns) {
  webrtc::StunBindingResponse response;
  if (webrtc::parse_stun_binding_response(datagram, response) != webrtc::StunError::kNone) {
    bump(counters_.stun_malformed);
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
  bump(counters_.stun_unmatched);
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
    bump(counters_.stun_malformed);
    return;
  }
  // USERNAME is "<our ufrag>:<the browser's>" (RFC 8445 7.2.2).
  const std::string_view ours = request.username.substr(0, request.username.find(':'));
  Session* session = nullptr;
  for (auto& s : sessions_)
    if (s->ufrag() == ours && s->state() != WhepState::kEnded) session = s.get();
  uint8_t response[webrtc::kMaxStunResponse];
  if (!session) {
    bump(counters_.stun_unknown_user);
    return;
  }
  WhepSessionStats& stats = session->stats();
  bump(stats.stun_requests);
  if (!webrtc::stun_integrity_ok(datagram, session->password())) {
    bump(stats.stun_refused);
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
        bump(counters_.sessions_started);
        if (sessions_.size() == 1) thread_->arm_timer(kTickNs);  // ticks while sessions live
      } else if (auto* e = dynamic_cast<WhepSessionEnd*>(command.get())) {
        for (auto& s : sessions_)
          if (s->id() == e->id) end(*s, WhepEnd::kDeleted);
      }
      break;
    }
    case transport::ToTransport::Kind::kStreamOpened:
    case transport::ToTransport::Kind::kStreamClosed:
    case transport::ToTransport::Kind::kBufferFree:
    case transport::ToTransport::Kind::kKeyframeRequest:
      break;
  }
}

void WhepTransport::send_frame(transport::ToTransport& m, uint64_t now_ns) {
  bump(counters_.frames_in);
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
  if (thread_->send_to_main(m)) bump(counters_.keyframe_requests);
}

void WhepTransport::end(Session& session, WhepEnd why) {
  if (session.state() == WhepState::kEnded) return;
  session.close(why);
  bump(counters_.sessions_ended);
  transport::FromTransport m;
  m.kind = transport::FromTransport::Kind::kPeerEnded;
  m.sequence = session.id();
  thread_->send_to_main(m);
}

void WhepTransport::on_timer(uint64_t now_ns) {
  for (auto& s : sessions_) {
    if (s->state() == WhepState::kEnded) continue;
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
    bump(counters_.target_changes);
  }
}

void WhepTransport::on_stop(uint64_t) {
  for (auto& s : sessions_) end(*s, WhepEnd::kStopped);
  sessions_.clear();
  if (audio_) audio_->set_wanted(false);
}

}  // namespace syncd::whep
