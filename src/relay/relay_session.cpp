#include "relay/relay_session.h"

#include <netinet/in.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/clock.h"
#include "core/random.h"
#include "rtp/rtx.h"
#include "transport/datagram_kind.h"
#include "transport/socket_address.h"

namespace syncd::relay {

namespace {

// Payload types and extension ids (docs/wan.md, "Wire decisions").
constexpr uint8_t kMediaPayloadType = 96;
constexpr uint8_t kRtxPayloadType = 97;
constexpr uint8_t kFecPayloadType = 115;
// A block left with more losses than repairs costs its frame a retransmission round trip (and
// the frames behind it wait): a visible hitch. At 60 blocks a second, 1e-3 is one every 17 s
// on average; 1e-4 (one more repair packet at 1 % loss) makes it one in three minutes.
constexpr fec::PolicyLimits kFecPolicy{.target_block_failure = 1e-4};
constexpr uint32_t kVideoClockHz = 90'000;

// The first packet of an access unit carries the frame info (id 4, 5, 6: 40 bytes with their
// element headers and padding) besides abs-send-time, so the H.264 payload budget is the
// datagram budget's (rtp::kDefaultMaxPayloadBytes) less those 40 bytes, on every packet: one
// budget keeps every datagram under 1200 bytes whichever packet it is.
constexpr size_t kFrameInfoExtensionBytes = 40;
constexpr size_t kMaxPayloadBytes = rtp::kDefaultMaxPayloadBytes - kFrameInfoExtensionBytes;

constexpr uint32_t kStorePackets = 8192;
constexpr uint32_t kHistory = 2048;  // media packets kept for retransmission (~1 s at 20 Mbit/s)
constexpr uint64_t kSenderReportNs = 500'000'000;
constexpr uint64_t kGoodbyeGraceNs = 50'000'000;  // a stream closed waits this for a reopen
// The sender reads the capture ring this often: half an Opus frame, so a frame leaves at most
// ~5 ms after its last sample was captured.
constexpr uint64_t kAudioPollNs = 5'000'000;
constexpr uint64_t kReceiverReportNs = 100'000'000;
constexpr size_t kRtcpBytes = 1200;
constexpr size_t kPacedBatch = 64;

// The SRTP trailer: a 16-byte GCM tag and the 4-byte MKI (src/secure).
constexpr size_t kSrtpTrailerBytes = 20;

// Whether an H.264 RTP payload begins an access unit: an access unit delimiter, SPS or PPS
// first (as single NAL, the first unit of a STAP-A, or a starting FU-A). The jitter buffer then
// knows a frame's first packet even when the frame before it was lost (jitter::PacketIn).
bool starts_access_unit(std::span<const uint8_t> payload) {
  if (payload.empty()) return false;
  uint8_t type = payload[0] & 0x1F;
  if (type == rtp::kNalTypeStapA && payload.size() > 3) type = payload[3] & 0x1F;
  if (type == rtp::kNalTypeFuA) {
    if (payload.size() < 2 || !(payload[1] & 0x80)) return false;
    type = payload[1] & 0x1F;
  }
  return type == 9 || type == 7 || type == 8;
}

}  // namespace

// The jitter buffer's events, back into the session.
// The sender's encoded audio packets, straight to SRTP and the socket (relay_audio.h: they skip
// the pacer and the FEC/NACK path).
class RelaySession::AudioOut final : public AudioPacketSink {
 public:
  explicit AudioOut(RelaySession& session) : session_(session) {}
  void on_audio_packet(std::span<uint8_t> plain_rtp) override {
    session_.send_audio_packet(plain_rtp);
  }

 private:
  RelaySession& session_;
};

class RelaySession::ReceiverSink final : public jitter::FrameSink {
 public:
  explicit ReceiverSink(RelaySession& session) : session_(session) {}
  void on_frame(const jitter::FrameEvent& frame) override { session_.deliver_frame(frame); }
  void on_drop(const jitter::DropEvent& drop) override {
    ++session_.counters_.frames_dropped;
    ++session_.counters_.frames_dropped_by[size_t(drop.reason)];
    session_.lost_since_delivery_ = true;
    session_.free_frame_packets(drop.packets);
  }

 private:
  RelaySession& session_;
};

jitter::JitterBufferConfig relay_jitter_config() {
  jitter::JitterBufferConfig c;
  c.rtt_factor_percent = 400;
  c.repair_budget_max_ns = 400'000'000;
  return c;
}

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
      store_(kStorePackets),
      send_buffer_(transport::PacketStore::kPacketBytes + kSrtpTrailerBytes + 16),
      rtcp_buffer_(kRtcpBytes + kSrtpTrailerBytes + 16),
      media_ssrc_(core::random_u32()),
      rtx_ssrc_(core::random_u32()),
      fec_ssrc_(core::random_u32()),
      media_sequence_(uint16_t(core::random_u32())),
      rtx_sequence_(uint16_t(core::random_u32())),
      fec_sequence_(uint16_t(core::random_u32())),
      rtp_offset_(core::random_u32()),
      packetizer_(rtp::PacketizerConfig{kMaxPayloadBytes}),
      fec_encoder_([this] {
        fec::EncoderConfig c;
        c.media_ssrc = media_ssrc_;
        return c;
      }()),
      receiver_stats_(kVideoClockHz),
      sink_(std::make_unique<ReceiverSink>(*this)),
      recovered_(std::make_unique<RecoveredPackets>()) {
  packet_refs_.assign(kStorePackets, 0);
  history_.assign(kHistory, transport::PacketStore::kNone);
  history_sequence_.assign(kHistory, 0);
  history_resent_ns_.assign(kHistory, 0);
  nack_repeat_.resize(kRtcpBytes + kSrtpTrailerBytes + 16);
  nack_list_.resize(rtp::kNackEventCapacity);
  if (!config_.sender) {
    frame_buffers_.resize(config_.frame_buffers);
    frame_buffer_lent_.assign(config_.frame_buffers, false);
  }
  if (config_.sender && config_.audio_send.ring && config_.audio_send.channels > 0) {
    audio_sender_ = std::make_unique<AudioSender>(config_.audio_send, core::random_u32());
    if (!audio_sender_->ok()) audio_sender_.reset();
    audio_out_ = std::make_unique<AudioOut>(*this);
  }
  if (!config_.sender && config_.audio_receive_ring) {
    AudioReceiveConfig c;
    c.ring = config_.audio_receive_ring;
    c.target_ns = config_.audio_target_ns;
    audio_receiver_ = std::make_unique<AudioReceiver>(c);
  }
}

RelaySession::~RelaySession() = default;

// ---------------------------------------------------------------------------------------------
// Keys

void RelaySession::on_start(transport::TransportThread& thread, uint64_t now_ns) {
  thread_ = &thread;
  rtp_epoch_ns_ = now_ns;
  if (config_.sender) {
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
  audio_described_ =
      false;  // a new receiver (or a restarted one) hears the audio description first
  const secure::SrtpKeyMaterial& material = dtls_.completed_keys();
  // Both ends derived the same identity from this handshake (docs/wan.md "Key epochs").
  const uint32_t epoch = material.epoch_id;
  if (!keys_.on_handshake_complete(epoch, now_ns)) {
    // It names an epoch still held: its packets could not be told apart. The client re-keys at
    // once (the key schedule says so); the server keeps what it has.
    ++counters_.epoch_collisions;
    if (connected())
      run_key_schedule(now_ns);
    else if (config_.sender)
      dtls_.start_handshake(now_ns);
    return;
  }
  if (connected()) ++counters_.rekeys;
  failures_in_row_ = 0;
  next_handshake_ns_ = kNever;
  handshake_backoff_ns_ = 0;
  srtp_out_.install(epoch, config_.sender ? material.client_write : material.server_write);
  srtp_in_.install(epoch, config_.sender ? material.server_write : material.client_write);
  if (!config_.sender) {
    // Only a handshake that passed the fingerprint check gets here: whoever completed it holds
    // the peer's key, so its address is the peer's now (a restart, a NAT rebinding).
    const sockaddr_storage from = transport::address_from_bytes(dtls_.live_address());
    if (peer_ && !transport::same_address(*peer_, from)) ++counters_.peer_rebinds;
    peer_ = from;
  } else {
    peer_heard_ns_ = now_ns;  // the receiver just answered: its reports have a timeout to come
  }
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
  ++counters_.dtls_failures;
  if (failure == secure::DtlsFailure::kFingerprintMismatch) ++counters_.fingerprint_mismatches;
  if (failure == secure::DtlsFailure::kPeerAlert) ++counters_.peer_alerts;
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

void RelaySession::send_rtcp(std::span<uint8_t> compound, size_t size) {
  if (!connected() || !thread_) return;
  if (srtp_out_.protect_rtcp(compound.data(), size, compound.size()) != secure::SrtpStatus::kOk)
    return;
  const sockaddr* to = config_.sender ? nullptr : reinterpret_cast<const sockaddr*>(&*peer_);
  thread_->send_datagram(compound.first(size), to);
}

void RelaySession::on_datagram(std::span<uint8_t> datagram, const sockaddr_storage& from,
                               uint64_t now_ns) {
  const transport::DatagramKind kind = transport::classify_datagram(datagram);
  if (kind == transport::DatagramKind::kDtls) {
    feed_dtls(datagram, from, now_ns);
  } else if (kind == transport::DatagramKind::kUnknown || kind == transport::DatagramKind::kStun) {
    ++counters_.foreign_unknown;  // not DTLS, RTP or RTCP (RFC 7983): the relay speaks no ICE
  } else if (!connected()) {
    ++counters_.foreign_before_keys;
  } else if (!from_peer(from)) {
    ++counters_.foreign_not_peer;
  } else if (kind == transport::DatagramKind::kRtp) {
    receive_rtp(datagram, now_ns);
  } else {
    receive_rtcp(datagram, now_ns);
  }
  schedule(now_ns);
}

void RelaySession::on_message(transport::ToTransport& m, uint64_t now_ns) {
  switch (m.kind) {
    case transport::ToTransport::Kind::kFrame:
      send_frame(m, now_ns);
      break;
    case transport::ToTransport::Kind::kStreamOpened:
      describing_ = true;
      // A BYE still waiting for the old stream's packets would close this one: the new
      // description ends the old stream at the receiver instead (or continues it, if the same).
      goodbye_pending_ = false;
      description_ = m.description;
      // Tell the receiver now, before the first frame: it opens its stream from this.
      if (connected()) send_sender_report(now_ns);
      break;
    case transport::ToTransport::Kind::kStreamClosed:
      // The BYE waits for the stream's last packets to leave the pacer: it closes the
      // receiver's stream, and a frame behind it would have nowhere to go. It also waits
      // kGoodbyeGraceNs, so that a producer reopening at once (its open may reach this thread
      // a timer later) goes on without a BYE between.
      goodbye_pending_ = describing_;
      goodbye_not_before_ns_ = now_ns + kGoodbyeGraceNs;
      describing_ = false;
      break;
    case transport::ToTransport::Kind::kBufferFree:
      if (m.buffer < frame_buffer_lent_.size()) frame_buffer_lent_[m.buffer] = false;
      break;
    case transport::ToTransport::Kind::kKeyframeRequest:
      // Goes out with the next feedback, at once (send_receiver_feedback: urgent).
      keyframe_wanted_ = !config_.sender;
      if (keyframe_wanted_ && connected()) send_receiver_feedback(now_ns, true);
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
  if (config_.sender) {
    if (now_ns >= next_handshake_ns_) start_pending_handshake(now_ns);
    check_liveness(now_ns);
  }
  if (connected()) run_key_schedule(now_ns);
  if (config_.sender) {
    if (audio_sender_ && now_ns >= next_audio_poll_ns_) {
      // Packets go only once the receiver can have the description (sent just before them):
      // before it, they would be refused as unknown.
      audio_sender_->poll(*audio_out_, connected() && audio_described_, &core::monotonic_ns);
      if (connected() && (audio_report_due_ || !audio_described_) && audio_sender_->have_clock()) {
        send_audio_report(now_ns);
        audio_described_ = true;
        audio_report_due_ = false;
      }
      next_audio_poll_ns_ = now_ns + kAudioPollNs;
    }
    if (connected() && now_ns >= tail_probe_due_ns_) probe_tail(now_ns);
    if (connected()) send_second_copies(now_ns);
    pace(now_ns);
    sample_send_rate(now_ns);
    if (connected() && now_ns >= next_report_ns_) send_sender_report(now_ns);
    if (goodbye_pending_ && now_ns >= goodbye_not_before_ns_ &&
        pacer_.next_event_ns(now_ns) == congestion::Pacer::kNoEvent) {
      send_sender_report(now_ns, true);
      goodbye_pending_ = false;
    }
  } else if (connected()) {
    if (audio_receiver_) audio_receiver_->poll(now_ns, transport::wall_clock_ntp_ns());
    jitter_.advance(now_ns, *sink_);
    fec_decoder_.expire(now_ns);
    if (now_ns >= next_feedback_ns_ || nack_.next_wakeup_ns(rtt_ns_) <= now_ns ||
        estimator_.next_remb_ns() <= now_ns)
      send_receiver_feedback(now_ns, now_ns < next_feedback_ns_);
    if (now_ns >= nack_repeat_due_ns_) {
      nack_repeat_due_ns_ = UINT64_MAX;
      std::memcpy(rtcp_buffer_.data(), nack_repeat_.data(), nack_repeat_size_);
      send_rtcp(rtcp_buffer_, nack_repeat_size_);
      ++counters_.nacks_repeated;
    }
  }
  publish_stats();
  schedule(now_ns);
}

void RelaySession::report_target_rate(uint64_t now_ns) {
  // The encoder follows the target (adaptive bitrate): a change of 2 % or more goes at once, an
  // unchanged target once a second (a publisher that started since hears it).
  const uint64_t target = rate_.target_bps();
  const uint64_t last = reported_target_bps_;
  const bool changed = last == 0 || target * 50 < last * 49 || target * 50 > last * 51;
  if (!changed && now_ns < next_target_report_ns_) return;
  transport::FromTransport m;
  m.kind = transport::FromTransport::Kind::kTargetRate;
  m.target_bps = target;
  if (!thread_->send_to_main(m)) return;
  reported_target_bps_ = target;
  next_target_report_ns_ = now_ns + 1'000'000'000;
}

void RelaySession::congestion_report(const rtp::ReportBlock& block, uint64_t now_ns) {
  // The receiver reports early when it sees a loss, so its RRs come a few dozen packets apart
  // and each one's fraction lost is 0 or a spike: under a policer dropping most of what was
  // sent, the first RR past the estimator's interval said 0 as often as not, and the rate
  // climbed 8 % into the cap again (measured: the target 10-27 Mbit/s against 10). So the
  // fraction comes from the running counts, over at least kCongestionSampleNs and
  // kCongestionSamplePackets.
  const uint32_t expected = block.extended_highest_sequence - congestion_base_sequence_;
  if (!congestion_sampled_ || expected > 0x8000'0000u) {
    congestion_sampled_ = true;
    congestion_base_sequence_ = block.extended_highest_sequence;
    congestion_base_lost_ = block.cumulative_lost;
    congestion_base_ns_ = now_ns;
    return;
  }
  if (now_ns - congestion_base_ns_ < kCongestionSampleNs || expected < kCongestionSamplePackets)
    return;
  const double lost = double(block.cumulative_lost) - congestion_base_lost_;
  const double fraction = std::clamp(lost / expected, 0.0, 1.0);
  // What was sent over the span the sample covers, the loss estimate's base.
  const size_t samples = size_t((now_ns - congestion_base_ns_) / kRateSampleNs);
  rate_.on_receiver_report(now_ns, uint8_t(std::min(255.0, fraction * 256)), rtt_ns_,
                           sent_bps(std::clamp<size_t>(samples, 1, kRateSamples - 1)));
  congestion_base_sequence_ = block.extended_highest_sequence;
  congestion_base_lost_ = block.cumulative_lost;
  congestion_base_ns_ = now_ns;
}

void RelaySession::sample_send_rate(uint64_t now_ns) {
  if (now_ns < next_rate_sample_ns_) return;
  next_rate_sample_ns_ = now_ns + kRateSampleNs;
  rate_sample_head_ = (rate_sample_head_ + 1) % kRateSamples;
  rate_samples_[rate_sample_head_] = {now_ns, bytes_out_};
  rate_sample_count_ = std::min(rate_sample_count_ + 1, kRateSamples);
}

uint64_t RelaySession::sent_bps(size_t samples) const {
  samples = std::min(samples, rate_sample_count_ - std::min<size_t>(rate_sample_count_, 1));
  if (samples == 0) return 0;  // not measured yet: the estimator takes its own estimate
  const RateSample& now = rate_samples_[rate_sample_head_];
  const RateSample& then =
      rate_samples_[(rate_sample_head_ + kRateSamples - samples) % kRateSamples];
  const uint64_t dt = now.at_ns - then.at_ns;
  return dt > 0 ? (now.bytes - then.bytes) * 8 * 1'000'000'000ull / dt : 0;
}

void RelaySession::check_liveness(uint64_t now_ns) {
  // A receiver reports every 100 ms (kReceiverReportNs); silence for the timeout means it died
  // or restarted and holds none of our keys (the SRTP we send it is refused unread). A fresh
  // handshake finds out: a restarted receiver answers it like a first one, and its epoch is
  // sent under at once (KeySchedule::on_peer_lost). Retried with backoff while nobody answers.
  if (!connected() || now_ns - peer_heard_ns_ < config_.liveness_timeout_ns ||
      now_ns < next_liveness_try_ns_)
    return;
  ++counters_.peer_lost;
  keys_.on_peer_lost(now_ns);
  if (liveness_retry_ns_ == 0) liveness_retry_ns_ = config_.liveness_retry_ns;
  next_liveness_try_ns_ = now_ns + liveness_retry_ns_;
  liveness_retry_ns_ = std::min(liveness_retry_ns_ * 2, config_.liveness_retry_max_ns);
}

void RelaySession::on_stop(uint64_t now_ns) {
  if (config_.sender && (describing_ || goodbye_pending_)) send_sender_report(now_ns, true);
  publish_stats();
}

void RelaySession::schedule(uint64_t now_ns) {
  if (!thread_) return;
  uint64_t next = now_ns + 100'000'000;  // at least every 100 ms: stats, timers
  next = std::min({next, dtls_.next_timeout_ns(now_ns), next_handshake_ns_});
  if (connected()) next = std::min(next, keys_.next_deadline_ns());
  if (config_.sender) {
    next = std::min(next, pacer_.next_event_ns(now_ns));
    if (connected()) next = std::min({next, next_report_ns_, tail_probe_due_ns_});
    if (connected() && second_copy_count_ > 0)
      next = std::min(next, second_copies_[second_copy_head_].due_ns);
    // Past the grace the pacer's own events wake us; a deadline already passed would spin.
    if (goodbye_pending_ && goodbye_not_before_ns_ > now_ns)
      next = std::min(next, goodbye_not_before_ns_);
    if (audio_sender_) next = std::min(next, next_audio_poll_ns_);
  } else if (connected()) {
    next = std::min({next, jitter_.next_wakeup_ns(), nack_.next_wakeup_ns(rtt_ns_),
                     estimator_.next_remb_ns(), next_feedback_ns_, nack_repeat_due_ns_});
    if (audio_receiver_) next = std::min(next, audio_receiver_->next_wakeup_ns());
  }
  thread_->arm_timer(next > now_ns ? next - now_ns : 0);
}

// ---------------------------------------------------------------------------------------------
// Sender

uint32_t RelaySession::rtp_time(uint64_t ns) const {
  // 90 kHz from the sender's monotonic clock; the random offset is RFC 3550 5.1's.
  const uint64_t elapsed = ns > rtp_epoch_ns_ ? ns - rtp_epoch_ns_ : 0;
  return rtp_offset_ + uint32_t(elapsed * 9 / 100'000);
}

void RelaySession::send_frame(transport::ToTransport& m, uint64_t now_ns) {
  transport::FromTransport done;
  done.kind = transport::FromTransport::Kind::kFrameDone;
  done.slot = m.slot;
  done.stream_id = m.stream_id;
  const media::FrameInfo& info = m.slot->info;
  if (!config_.sender || !connected()) {
    thread_->send_to_main(done);  // not sent: no keys yet
    return;
  }
  // The frame interval, for the tail-loss probe's delay (a second's gap is a pause, not a rate).
  if (last_frame_ns_ != 0 && now_ns > last_frame_ns_ && now_ns - last_frame_ns_ < 1'000'000'000) {
    const uint64_t gap = now_ns - last_frame_ns_;
    frame_interval_ns_ = frame_interval_ns_ ? (frame_interval_ns_ * 7 + gap) / 8 : gap;
  }
  last_frame_ns_ = now_ns;
  const std::span<const uint8_t> access_unit(m.slot->pixels, info.bytes);
  if (packetizer_.begin(access_unit) != rtp::PacketizeError::kOk) {
    ++counters_.frames_refused;
    thread_->send_to_main(done);
    return;
  }
  // FEC redundancy for this frame, from the loss the receiver reports.
  fec_encoder_.set_shape(
      fec::choose_block_shape(loss_.estimate(), uint32_t(packetizer_.packet_count()), kFecPolicy));
  // RTP carries NAL units, not the byte stream: the receiver rebuilds the access unit with a
  // 4-byte start code before every NAL unit (RFC 6184 has no room for the original's 3-byte
  // ones or trailing zeros). The hash the receiver checks is therefore of that form, computed
  // here from the same bytes; the producer's own hash was checked on this side's ingest.
  uint64_t content_hash = info.content_hash;
  if (info.flags & media::frame_flag::kHasContentHash) {
    static constexpr uint8_t kStartCode[4] = {0, 0, 0, 1};
    hasher_.reset();
    rtp::split_annex_b(access_unit, [this](std::span<const uint8_t> nal) {
      hasher_.update(kStartCode, sizeof(kStartCode));
      hasher_.update(nal.data(), nal.size());
    });
    content_hash = hasher_.digest();
  }
  FrameInfoWire wire{info.sequence, content_hash, info.capture_time_us, info.flags, info.accept_ns};
  uint8_t frame_id[kFrameIdBytes], frame_time[kFrameTimeBytes], sender_time[kSenderTimeBytes];
  write_frame_id(wire, frame_id);
  write_frame_time(wire, frame_time);
  write_sender_time(wire, sender_time);
  const rtp::OneByteExtension frame_info[] = {{kFrameIdExtension, frame_id},
                                              {kFrameTimeExtension, frame_time},
                                              {kSenderTimeExtension, sender_time}};
  rtp::RtpHeader header;
  header.payload_type = kMediaPayloadType;
  header.timestamp = rtp_time(info.accept_ns ? info.accept_ns : now_ns);
  header.ssrc = media_ssrc_;
  header.has_abs_send_time = true;
  bool first = true;
  bool all_queued = true;
  while (packetizer_.has_next()) {
    const uint32_t h = store_.take();
    if (h == transport::PacketStore::kNone) {
      ++counters_.no_buffer;
      all_queued = false;
      break;
    }
    header.sequence = media_sequence_++;
    header.extensions = first ? std::span<const rtp::OneByteExtension>(frame_info)
                              : std::span<const rtp::OneByteExtension>();
    first = false;
    const size_t n = packetizer_.write_next(header, store_.room(h));
    store_.set_size(h, n);
    // History for retransmission: the slot this sequence lands on lets go of what it held.
    const size_t at = header.sequence % kHistory;
    if (history_[at] != transport::PacketStore::kNone) release_packet(history_[at]);
    history_[at] = h;
    history_sequence_[at] = header.sequence;
    history_resent_ns_[at] = 0;
    ++packet_refs_[h];
    // FEC over the plain packet (abs-send-time counts as zero: it is stamped at send time).
    const fec::AddStatus fec_status = fec_encoder_.add_source(header.sequence, store_.packet(h));
    all_queued &= queue_packet(h, now_ns);
    if (fec_status == fec::AddStatus::kBlockReady ||
        (!packetizer_.has_next() && fec_encoder_.close_block())) {
      // The block's repairs, each behind its own RTP header (PT 115, the FEC SSRC).
      std::array<uint32_t, fec::kMaxM> handles;
      std::array<uint8_t*, fec::kMaxM> outs;
      const size_t repairs = fec_encoder_.ready_repair_count();
      const size_t repair_bytes = fec_encoder_.ready_payload_bytes();  // emit_repairs frees it
      rtp::RtpHeader fh;
      fh.payload_type = kFecPayloadType;
      fh.ssrc = fec_ssrc_;
      fh.timestamp = header.timestamp;
      fh.has_abs_send_time = true;
      const size_t fec_header = rtp::rtp_header_size(fh);
      size_t got = 0;
      for (; got < repairs; ++got) {
        handles[got] = store_.take();
        if (handles[got] == transport::PacketStore::kNone) break;
        outs[got] = store_.room(handles[got]).data() + fec_header;
      }
      if (got == repairs && fec_encoder_.emit_repairs(std::span(outs.data(), repairs)) == repairs) {
        for (size_t i = 0; i < repairs; ++i) {
          fh.sequence = fec_sequence_++;
          rtp::write_rtp_header(fh, store_.room(handles[i]));
          store_.set_size(handles[i], fec_header + repair_bytes);
          ++counters_.fec_sent;
          queue_packet(handles[i], now_ns);
        }
      } else {
        for (size_t i = 0; i < got; ++i) store_.give_back(handles[i]);
        if (got < repairs) ++counters_.no_buffer;
        fec_encoder_.emit_repairs({});  // frees the block (nothing written: out too small)
      }
    }
  }
  if (all_queued) ++counters_.frames_sent;
  done.sent = all_queued;
  thread_->send_to_main(done);  // the slot's bytes are in our packets now
  pace(now_ns);
}

bool RelaySession::queue_packet(uint32_t handle, uint64_t now_ns) {
  if (pacer_.enqueue(now_ns, handle, uint32_t(store_.packet(handle).size())) !=
      congestion::EnqueueResult::kQueued) {
    if (packet_refs_[handle] == 0) store_.give_back(handle);
    return false;
  }
  ++packet_refs_[handle];
  return true;
}

void RelaySession::release_packet(uint32_t handle) {
  if (packet_refs_[handle] > 0 && --packet_refs_[handle] == 0) store_.give_back(handle);
}

void RelaySession::pace(uint64_t now_ns) {
  if (!connected()) return;
  std::array<congestion::PacedPacket, kPacedBatch> due;
  for (;;) {
    const size_t n = pacer_.pop_due(now_ns, due);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t h = uint32_t(due[i].id);
      if (due[i].disposition == congestion::PacketDisposition::kSend) {
        const std::span<uint8_t> plain = store_.packet(h);
        std::memcpy(send_buffer_.data(), plain.data(), plain.size());
        size_t size = plain.size();
        rtp::set_abs_send_time({send_buffer_.data(), size}, rtp::abs_send_time_from_ns(now_ns));
        if (srtp_out_.protect_rtp(send_buffer_.data(), size, send_buffer_.size()) ==
                secure::SrtpStatus::kOk &&
            thread_->send_datagram({send_buffer_.data(), size})) {
          ++counters_.packets_sent;
          ++packets_sent_;
          octets_sent_ += uint32_t(plain.size());
          bytes_out_ += size;
          // A frame's last original packet (the marker on the media payload type; RTX has its
          // own): the frame is on the wire. Its time since the relay thread took the encoded
          // frame is packetizing, FEC, the pacer's queue and protection, a stage of glass to glass.
          if (plain.size() > 3 && plain[1] == (0x80 | kMediaPayloadType)) {
            const uint64_t waited = now_ns - due[i].enqueued_ns;
            ++counters_.frames_on_wire;
            counters_.frame_on_wire_ns_total += waited;
            counters_.frame_on_wire_ns_max = std::max(counters_.frame_on_wire_ns_max, waited);
            // The tail probe waits for two frame intervals of silence (50 ms before the rate
            // is known), at least 10 ms and at most 500 ms.
            const uint64_t wait = std::clamp<uint64_t>(
                frame_interval_ns_ ? 2 * frame_interval_ns_ : 50'000'000, 10'000'000, 500'000'000);
            tail_sequence_ = uint16_t(plain[2] << 8 | plain[3]);
            tail_probe_due_ns_ = now_ns + wait;
          } else if (plain.size() > 1 && (plain[1] & 0x7f) == kMediaPayloadType) {
            tail_probe_due_ns_ = kNoProbe;  // a later frame's packet shows any gap before it
          }
        }
      }
      release_packet(h);
    }
    if (n < due.size()) break;
  }
}

void RelaySession::send_sender_report(uint64_t now_ns, bool goodbye) {
  next_report_ns_ = now_ns + kSenderReportNs;
  rtp::RtcpWriter w({rtcp_buffer_.data(), kRtcpBytes});
  rtp::SenderInfo info;
  info.ntp_timestamp = rtp::ntp_from_ns(transport::wall_clock_ntp_ns());
  info.rtp_timestamp = rtp_time(now_ns);
  info.packet_count = packets_sent_;
  info.octet_count = octets_sent_;
  w.add_sender_report(media_ssrc_, info);
  w.add_cname(media_ssrc_, "syncd");
  // The stream is described until its BYE: a report between the close and the BYE (its last
  // packets still in the pacer) must not read to the receiver as the end.
  if ((describing_ || goodbye_pending_) && !goodbye) {
    uint8_t app[kMaxStreamDescriptionBytes];
    StreamDescription d = description_;
    d.ssrc = media_ssrc_;
    d.rtt_100us = have_rtt_ ? uint16_t(std::min<uint64_t>(rtt_ns_ / 100'000, 65535)) : 0;
    if (const size_t n = write_stream_description(d, app)) w.add_application({app, n});
  }
  if (goodbye) {
    const uint32_t ssrcs[] = {media_ssrc_};
    w.add_goodbye(ssrcs, "stream closed");
  }
  send_rtcp(rtcp_buffer_, w.size());
  send_audio_report(now_ns);
}

void RelaySession::send_audio_report(uint64_t now_ns) {
  // Its own compound: the audio SSRC's SR (capture clock against the same wall clock as the
  // video's SR) and the audio description, so the receiver knows the channels before it decodes.
  if (!audio_sender_ || !audio_sender_->have_clock()) return;
  rtp::RtcpWriter w({rtcp_buffer_.data(), kRtcpBytes});
  rtp::SenderInfo info;
  info.ntp_timestamp = rtp::ntp_from_ns(transport::wall_clock_ntp_ns());
  info.rtp_timestamp = audio_sender_->rtp_time(core::monotonic_ns());
  info.packet_count = audio_sender_->packets_sent();
  info.octet_count = audio_sender_->octets_sent();
  w.add_sender_report(audio_sender_->ssrc(), info);
  w.add_cname(audio_sender_->ssrc(), "syncd");
  AudioDescription d;
  audio_sender_->describe(d);
  uint8_t app[kMaxAudioDescriptionBytes];
  if (const size_t n = write_audio_description(d, app)) w.add_application({app, n});
  send_rtcp(rtcp_buffer_, w.size());
  (void)now_ns;
}

void RelaySession::send_audio_packet(std::span<uint8_t> plain) {
  if (!connected() || !thread_ || plain.size() > transport::PacketStore::kPacketBytes) return;
  std::memcpy(send_buffer_.data(), plain.data(), plain.size());
  size_t size = plain.size();
  if (srtp_out_.protect_rtp(send_buffer_.data(), size, send_buffer_.size()) ==
      secure::SrtpStatus::kOk)
    thread_->send_datagram({send_buffer_.data(), size});
}

void RelaySession::retransmit(uint16_t sequence, uint64_t now_ns) {
  ++counters_.nacked;
  if (!in_history(sequence)) {
    ++counters_.nacked_unavailable;
    return;
  }
  // The receiver's repeated NACK (kSecondCopyDelayNs after the first), or one crossing our
  // resend: already on its way. A retry after a round trip is resent.
  uint64_t& resent_ns = history_resent_ns_[sequence % kHistory];
  if (resent_ns != 0 && now_ns - resent_ns < rtt_ns_ / 2 + kSecondCopyDelayNs) {
    ++counters_.nacked_again_at_once;
    return;
  }
  if (!take_retransmit_budget(history_packet(sequence).size(), now_ns)) {
    ++counters_.nacked_over_budget;
    return;
  }
  if (!resend(sequence, now_ns)) return;
  ++counters_.rtx_sent;
  resent_ns = now_ns;
  const double loss = loss_.estimate().loss_fraction;
  if (loss >= kRedundantRepairLoss && loss < kRedundantRepairMaxLoss &&
      second_copy_count_ < kSecondCopies) {
    second_copies_[(second_copy_head_ + second_copy_count_++) % kSecondCopies] = {
        sequence, now_ns + kSecondCopyDelayNs};
  }
}

bool RelaySession::take_retransmit_budget(size_t bytes, uint64_t now_ns) {
  const double rate = double(rate_.target_bps()) * kRetransmitShare / 8 / 1e9;  // bytes a ns
  const double depth = rate * 100'000'000;                                      // 100 ms of it
  if (retransmit_refill_ns_ == 0)
    retransmit_tokens_ = depth;
  else if (now_ns > retransmit_refill_ns_)
    retransmit_tokens_ =
        std::min(depth, retransmit_tokens_ + rate * double(now_ns - retransmit_refill_ns_));
  retransmit_refill_ns_ = now_ns;
  if (retransmit_tokens_ < double(bytes)) return false;
  retransmit_tokens_ -= double(bytes);
  return true;
}

void RelaySession::send_second_copies(uint64_t now_ns) {
  while (second_copy_count_ > 0 && second_copies_[second_copy_head_].due_ns <= now_ns) {
    const uint16_t sequence = second_copies_[second_copy_head_].sequence;
    second_copy_head_ = (second_copy_head_ + 1) % kSecondCopies;
    --second_copy_count_;
    if (in_history(sequence) && take_retransmit_budget(history_packet(sequence).size(), now_ns) &&
        resend(sequence, now_ns)) {
      ++counters_.rtx_sent;
      ++counters_.rtx_second_copies;
    }
  }
}

std::span<uint8_t> RelaySession::history_packet(uint16_t sequence) {
  return store_.packet(history_[sequence % kHistory]);
}

bool RelaySession::in_history(uint16_t sequence) const {
  const size_t at = sequence % kHistory;
  return history_[at] != transport::PacketStore::kNone && history_sequence_[at] == sequence;
}

bool RelaySession::resend(uint16_t sequence, uint64_t now_ns) {
  rtp::RtpPacketView view;
  if (rtp::parse_rtp(history_packet(sequence), view) != rtp::RtpParseError::kOk) return false;
  const uint32_t h = store_.take();
  if (h == transport::PacketStore::kNone) {
    ++counters_.no_buffer;
    return false;
  }
  const size_t n =
      rtp::write_rtx(view, {kRtxPayloadType, rtx_ssrc_, rtx_sequence_}, store_.room(h));
  if (n == 0) {
    store_.give_back(h);
    return false;
  }
  ++rtx_sequence_;
  store_.set_size(h, n);
  return queue_packet(h, now_ns);
}

void RelaySession::probe_tail(uint64_t now_ns) {
  tail_probe_due_ns_ = kNoProbe;
  if (in_history(tail_sequence_) && resend(tail_sequence_, now_ns)) {
    ++counters_.tail_probes;
    ++counters_.rtx_sent;
  }
}

// ---------------------------------------------------------------------------------------------
// RTCP, both ways

namespace {
struct RtcpEvents final : rtp::RtcpSink {
  std::optional<rtp::SenderReport> sr;
  std::optional<rtp::ReportBlock> block;
  uint32_t media_ssrc = 0;
  std::vector<uint16_t>* nacks = nullptr;
  size_t nack_count = 0;
  std::optional<uint64_t> remb;
  bool bye = false;
  bool pli = false;
  std::optional<StreamDescription> description;
  std::optional<AudioDescription> audio_description;
  void on_sender_report(const rtp::SenderReport& r) override { sr = r; }
  void on_receiver_report(const rtp::ReceiverReport& r) override {
    for (const rtp::ReportBlock& b : r.blocks)
      if (b.source_ssrc == media_ssrc) block = b;
  }
  void on_nack(const rtp::Nack& n) override {
    for (uint16_t s : n.lost)
      if (nack_count < nacks->size()) (*nacks)[nack_count++] = s;
  }
  void on_remb(const rtp::Remb& r) override { remb = r.bitrate_bps; }
  void on_goodbye(const rtp::Goodbye&) override { bye = true; }
  void on_pli(uint32_t, uint32_t) override { pli = true; }
  void on_application(std::span<const uint8_t> packet) override {
    StreamDescription d;
    if (parse_stream_description(packet, d) == DescriptionError::kNone) description = d;
    AudioDescription a;
    if (parse_audio_description(packet, a) == AudioDescriptionError::kNone) audio_description = a;
  }
};
}  // namespace

bool RelaySession::unprotect(std::span<uint8_t> packet, bool rtcp, size_t& size, uint32_t& epoch,
                             uint64_t now_ns) {
  const secure::SrtpStatus status = rtcp ? srtp_in_.unprotect_rtcp(packet.data(), size, &epoch)
                                         : srtp_in_.unprotect_rtp(packet.data(), size, &epoch);
  if (status != secure::SrtpStatus::kOk) {
    ++counters_.srtp_refused;
    return false;
  }
  // A packet authenticated under a new epoch is what moves the key schedule (docs/wan.md).
  keys_.on_packet_authenticated(epoch, now_ns);
  return true;
}

void RelaySession::receive_rtcp(std::span<uint8_t> packet, uint64_t now_ns) {
  size_t size = packet.size();
  uint32_t epoch = 0;
  if (!unprotect(packet, true, size, epoch, now_ns)) return;
  RtcpEvents events;
  events.media_ssrc = media_ssrc_;
  events.nacks = &nack_list_;
  if (rtp::parse_rtcp(packet.first(size), events) != rtp::RtcpParseError::kOk) {
    ++counters_.rtcp_refused;
    return;
  }
  if (config_.sender) {
    // The receiver is alive and holds our keys.
    peer_heard_ns_ = now_ns;
    next_liveness_try_ns_ = 0;
    liveness_retry_ns_ = 0;
    if (events.remb) {
      counters_.remb_bps = *events.remb;
      rate_.on_remb(now_ns, *events.remb);
    }
    if (events.block) {
      const uint32_t arrival = rtp::ntp_compact(rtp::ntp_from_ns(transport::wall_clock_ntp_ns()));
      if (auto rtt = rtp::round_trip_ns(arrival, events.block->last_sr,
                                        events.block->delay_since_last_sr)) {
        rtt_ns_ = *rtt;
        have_rtt_ = true;
      }
      counters_.fraction_lost = events.block->fraction_lost;
      loss_.on_report_counts(events.block->extended_highest_sequence,
                             events.block->cumulative_lost);
      congestion_report(*events.block, now_ns);
      if (audio_sender_) audio_sender_->on_path_loss(events.block->fraction_lost);
    }
    pacer_.set_target_rate(rate_.target_bps());
    report_target_rate(now_ns);
    if (events.pli) {
      // The receiver's decoder waits for an IDR; only an encoder can make one (the relay
      // publisher's, for a stream it encodes; a producer's own H.264 has its periodic IDRs).
      ++counters_.keyframe_requests;
      transport::FromTransport m;
      m.kind = transport::FromTransport::Kind::kKeyframeRequest;
      thread_->send_to_main(m);
    }
    for (size_t i = 0; i < events.nack_count; ++i) {
      loss_.on_nacked(nack_list_[i]);
      retransmit(nack_list_[i], now_ns);
    }
    pace(now_ns);
    return;
  }
  // Receiver. The audio's compound (its SR and description) first: its SSRC is not the video's.
  if (events.audio_description) {
    if (!audio_receiver_ || !audio_receiver_->on_description(*events.audio_description)) {
      ++audio_refused_;
      return;
    }
    if (events.sr && events.sr->sender_ssrc == audio_receiver_->ssrc())
      audio_receiver_->on_sender_report(jitter::ntp_to_ns(events.sr->info.ntp_timestamp),
                                        events.sr->info.rtp_timestamp);
    return;
  }
  if (events.sr && !accept_sender_ssrc(events.sr->sender_ssrc, epoch, now_ns)) {
    ++counters_.rtcp_refused;
    return;
  }
  if (events.sr) {
    receiver_stats_.on_sender_report(events.sr->info.ntp_timestamp, now_ns);
    if (skew_.on_sender_report(jitter::ntp_to_ns(events.sr->info.ntp_timestamp),
                               events.sr->info.rtp_timestamp, now_ns))
      jitter_.set_local_ns_per_tick(skew_.local_ns_per_tick());
  }
  if (events.description) {
    const StreamDescription& d = *events.description;
    if (d.rtt_100us) {
      rtt_ns_ = uint64_t(d.rtt_100us) * 100'000;
      have_rtt_ = true;
      jitter_.set_rtt(rtt_ns_);
      estimator_.set_rtt(rtt_ns_);
    }
    if (!peer_described_ || d.name_view() != peer_description_.name_view() ||
        d.format != peer_description_.format || d.width != peer_description_.width ||
        d.height != peer_description_.height) {
      peer_described_ = true;
      peer_description_ = d;
      // Room for the largest access unit the stream can carry (an I420 frame's size).
      const size_t room =
          size_t(d.width) * d.height + 2 * (size_t(d.width + 1) / 2) * ((d.height + 1) / 2);
      frame_buffer_bytes_ = room;
      for (auto& b : frame_buffers_) b.reset(new uint8_t[room]);  // default-initialized: untouched
      transport::FromTransport m;
      m.kind = transport::FromTransport::Kind::kDescription;
      m.description = d;
      thread_->send_to_main(m);
    }
  }
  if (events.description && events.sr) {
    described_by_ssrc_ = events.sr->sender_ssrc;
    described_ntp_ = events.sr->info.ntp_timestamp;
  }
  // The BYE goes once and may be lost; every report after it comes without the description
  // (kSenderReportNs), so one of those ends the stream too. Only from the SSRC that described
  // it and sent after it did: a restarted sender (another SSRC) that has not opened its stream
  // yet leaves it open for its frames, and a report from before the description that was
  // overtaken on the path is older than it.
  const bool undescribed = events.sr && !events.description &&
                           events.sr->sender_ssrc == described_by_ssrc_ &&
                           events.sr->info.ntp_timestamp > described_ntp_;
  if ((events.bye || undescribed) && peer_described_) {
    // The sender sent its last packets before its BYE: whatever is complete goes out before the
    // stream closes (what is not, never will be).
    jitter_.advance(UINT64_MAX, *sink_);
    peer_described_ = false;
    transport::FromTransport m;
    m.kind = transport::FromTransport::Kind::kPeerEnded;
    thread_->send_to_main(m);
  }
}

// ---------------------------------------------------------------------------------------------
// Receiver

// The packets FEC rebuilt while one datagram was taken in (at most one block's repairs), copied
// out of the decoder's callback so they enter the jitter buffer after the datagram's own packet.
struct RelaySession::RecoveredPackets final : fec::RecoverySink {
  std::array<std::array<uint8_t, transport::PacketStore::kPacketBytes>, fec::kMaxM> packets;
  std::array<size_t, fec::kMaxM> sizes{};
  size_t count = 0;
  void on_recovered(uint16_t, std::span<const uint8_t> rtp_packet) override {
    if (count == packets.size() || rtp_packet.size() > transport::PacketStore::kPacketBytes) return;
    std::memcpy(packets[count].data(), rtp_packet.data(), rtp_packet.size());
    sizes[count++] = rtp_packet.size();
  }
};

void RelaySession::receive_rtp(std::span<uint8_t> packet, uint64_t now_ns) {
  if (config_.sender) {  // a receiver sends no media
    ++counters_.rtp_refused;
    return;
  }
  size_t size = packet.size();
  uint32_t epoch = 0;
  if (!unprotect(packet, false, size, epoch, now_ns)) return;
  const std::span<uint8_t> plain = packet.first(size);
  rtp::RtpPacketView view;
  if (rtp::parse_rtp(plain, view) != rtp::RtpParseError::kOk) {
    ++counters_.rtp_refused;
    return;
  }
  uint32_t abs_send_time = 0;
  if (rtp::read_abs_send_time(view, abs_send_time))
    estimator_.on_packet(now_ns, abs_send_time, uint32_t(size + kSrtpTrailerBytes));
  ++counters_.packets_received;
  RecoveredPackets& recovered = *recovered_;
  recovered.count = 0;
  switch (view.payload_type) {
    case kAudioPayloadType:
      if (!audio_receiver_ || !audio_receiver_->described() ||
          view.ssrc != audio_receiver_->ssrc()) {
        ++audio_refused_;
        return;
      }
      audio_receiver_->on_packet(view.timestamp, view.payload, now_ns);
      return;
    case kMediaPayloadType: {
      if (!accept_sender_ssrc(view.ssrc, epoch, now_ns)) {
        ++counters_.rtp_refused;  // a foreign SSRC
        return;
      }
      fec_decoder_.add_source(view.sequence, plain, now_ns, recovered);
      accept_media(view, plain, false, now_ns);
      break;
    }
    case kFecPayloadType:
      if (!media_ssrc_known_) return;
      fec_decoder_.add_repair(view.payload, now_ns, recovered);
      break;
    case kRtxPayloadType: {
      if (!media_ssrc_known_) return;
      uint8_t original[transport::PacketStore::kPacketBytes];
      size_t original_size = 0;
      if (rtp::restore_original(view, kMediaPayloadType, peer_media_ssrc_, original,
                                &original_size) != rtp::RtxError::kOk) {
        ++counters_.rtp_refused;
        return;
      }
      const std::span<const uint8_t> restored(original, original_size);
      rtp::RtpPacketView rv;
      if (rtp::parse_rtp(restored, rv) != rtp::RtpParseError::kOk) {
        ++counters_.rtp_refused;
        return;
      }
      ++counters_.rtx_received;
      fec_decoder_.add_source(rv.sequence, restored, now_ns, recovered);
      if (accept_media(rv, restored, true, now_ns)) ++counters_.recovered_rtx;
      break;
    }
    default:
      ++counters_.rtp_refused;
      return;
  }
  for (size_t i = 0; i < recovered.count; ++i) {
    const std::span<const uint8_t> rebuilt(recovered.packets[i].data(), recovered.sizes[i]);
    rtp::RtpPacketView rv;
    if (rtp::parse_rtp(rebuilt, rv) != rtp::RtpParseError::kOk) {
      ++counters_.rtp_refused;  // rebuilt from authenticated packets, so never expected
      continue;
    }
    ++counters_.fec_rebuilt;
    if (accept_media(rv, rebuilt, true, now_ns)) ++counters_.recovered_fec;
  }
}

bool RelaySession::accept_sender_ssrc(uint32_t ssrc, uint32_t epoch, uint64_t now_ns) {
  const uint64_t ordinal = keys_.ordinal_of(epoch).value_or(0);
  if (!media_ssrc_known_) {
    media_ssrc_known_ = true;
    peer_media_ssrc_ = ssrc;
    peer_ssrc_ordinal_ = ordinal;
    fec_decoder_.reset(ssrc);
    return true;
  }
  if (ssrc == peer_media_ssrc_) return true;
  // A new SSRC: a sender that restarted picks new random ones (RFC 3550 8.1). It is that only
  // under an epoch newer than the one the current SSRC was learned under, i.e. from a handshake
  // completed since with the peer's certificate; the old sender's packets in flight under the
  // old keys are refused, not taken for another restart.
  if (ordinal <= peer_ssrc_ordinal_) return false;
  peer_ssrc_ordinal_ = ordinal;
  restart_sender(ssrc, now_ns);
  return true;
}

void RelaySession::restart_sender(uint32_t ssrc, uint64_t now_ns) {
  ++counters_.peer_restarts;
  // The old sender's frames: the complete ones go out, the rest are dropped (their packets go
  // back to the store); then every per-sender state starts over, as for a first sender. The
  // stream description stays: if the new sender describes the same stream (name, format,
  // size), its frames go on into the same local stream and its consumers see no change.
  // Control plane: this allocates (once per restart, not per packet).
  jitter_.advance(now_ns + 3'600'000'000'000ull, *sink_);
  jitter_ = jitter::JitterBuffer(relay_jitter_config());
  nack_ = jitter::NackScheduler();
  skew_ = jitter::ClockSkewEstimator();
  receiver_stats_ = rtp::ReceiverStatistics(kVideoClockHz);
  estimator_ = congestion::DelayBasedEstimator();
  if (have_rtt_) {
    jitter_.set_rtt(rtt_ns_);
    estimator_.set_rtt(rtt_ns_);
  }
  peer_media_ssrc_ = ssrc;
  fec_decoder_.reset(ssrc);
  lost_since_delivery_ = true;  // a new sender's stream: its own chain of references
}

bool RelaySession::accept_media(const rtp::RtpPacketView& view, std::span<const uint8_t> packet,
                                bool repaired, uint64_t now_ns) {
  if (!repaired) receiver_stats_.on_packet(view.sequence, view.timestamp, now_ns);
  const uint32_t h = store_.take();
  if (h == transport::PacketStore::kNone) {
    ++counters_.no_buffer;
    return false;
  }
  std::memcpy(store_.room(h).data(), packet.data(), packet.size());
  store_.set_size(h, packet.size());
  jitter::PacketIn in;
  in.sequence = view.sequence;
  in.rtp_timestamp = view.timestamp;
  in.marker = view.marker;
  in.starts_frame = starts_access_unit(view.payload);
  in.repaired = repaired;
  in.arrival_ns = now_ns;
  in.handle = h;
  in.length = uint32_t(packet.size());
  const bool accepted = jitter_.insert(in, now_ns, *sink_) == jitter::InsertResult::kAccepted;
  if (!accepted) store_.give_back(h);
  nack_.on_packet(jitter_.last_extended_sequence(), now_ns, repaired);
  return accepted;
}

void RelaySession::free_frame_packets(std::span<const jitter::PacketRef> packets) {
  for (const jitter::PacketRef& p : packets) store_.give_back(p.handle);
}

void RelaySession::deliver_frame(const jitter::FrameEvent& frame) {
  uint32_t b = 0;
  while (b < frame_buffer_lent_.size() && frame_buffer_lent_[b]) ++b;
  if (b == frame_buffer_lent_.size() || !frame_buffers_[b]) {
    ++counters_.frames_no_buffer;
    lost_since_delivery_ = true;
    free_frame_packets(frame.packets);
    return;
  }
  FrameInfoWire info;
  bool have_info = false;
  depacketizer_.begin(std::span(frame_buffers_[b].get(), frame_buffer_bytes_));
  bool ok = true;
  for (const jitter::PacketRef& p : frame.packets) {
    rtp::RtpPacketView view;
    if (rtp::parse_rtp(store_.packet(p.handle), view) != rtp::RtpParseError::kOk ||
        depacketizer_.push(view) != rtp::DepacketizeError::kOk) {
      ok = false;
      break;
    }
    std::span<const uint8_t> e;
    if (!have_info && rtp::find_one_byte_extension(view, kFrameIdExtension, e) &&
        read_frame_id(e, info)) {
      have_info = true;
      if (rtp::find_one_byte_extension(view, kFrameTimeExtension, e)) read_frame_time(e, info);
      if (rtp::find_one_byte_extension(view, kSenderTimeExtension, e)) read_sender_time(e, info);
    }
  }
  ok = ok && depacketizer_.finish() == rtp::DepacketizeError::kOk;
  free_frame_packets(frame.packets);
  if (!ok) {
    ++counters_.frames_malformed;
    lost_since_delivery_ = true;
    return;
  }
  ++counters_.frames_complete;
  transport::FromTransport m;
  m.kind = transport::FromTransport::Kind::kFrameIn;
  m.buffer = b;
  m.data = frame_buffers_[b].get();
  m.bytes = depacketizer_.access_unit().size();
  m.sequence = info.sequence;
  m.content_hash = info.content_hash;
  m.capture_time_us = info.capture_time_us;
  m.flags = have_info ? info.flags : 0;
  m.sender_accept_ns = info.sender_accept_ns;
  m.complete_ns = frame.completion_ns;
  m.loss_before = lost_since_delivery_;
  frame_buffer_lent_[b] = true;
  if (thread_->send_to_main(m)) {
    lost_since_delivery_ = false;
  } else {
    frame_buffer_lent_[b] = false;
    lost_since_delivery_ = true;
  }
}

void RelaySession::send_receiver_feedback(uint64_t now_ns, bool due_only) {
  rtp::RtcpWriter w({rtcp_buffer_.data(), kRtcpBytes});
  std::array<rtp::ReportBlock, 1> blocks;
  size_t block_count = 0;
  if (media_ssrc_known_ && receiver_stats_.valid()) {
    blocks[0] = receiver_stats_.make_report_block(peer_media_ssrc_, now_ns);
    block_count = 1;
    // The path's loss, smoothed over reports (each covers ~100 ms): what decides whether
    // NACKs go twice.
    receive_loss_ += 0.1 * (blocks[0].fraction_lost / 256.0 - receive_loss_);
  }
  const uint32_t own_ssrc = media_ssrc_;  // the receiver's SSRC for its reports
  w.add_receiver_report(own_ssrc, std::span(blocks.data(), block_count));
  const size_t lost = nack_.collect(now_ns, rtt_ns_, jitter_, nack_list_);
  if (lost > 0 && media_ssrc_known_) {
    w.add_nack(own_ssrc, peer_media_ssrc_, std::span(nack_list_.data(), lost));
    ++counters_.nacks_sent;
  }
  bool urgent = lost > 0;
  if (auto remb = estimator_.take_remb(now_ns)) {
    const uint32_t ssrcs[] = {peer_media_ssrc_};
    urgent |= w.add_remb(own_ssrc, *remb, ssrcs);
  }
  const bool keyframe = jitter_.take_keyframe_request() || keyframe_wanted_;
  if (keyframe && media_ssrc_known_) {
    urgent |= w.add_pli(own_ssrc, peer_media_ssrc_);
    keyframe_wanted_ = false;
    ++counters_.keyframe_requests;
  }
  // Between the periodic reports, a packet goes only for what cannot wait: NACKs, a REMB the
  // estimator wants out (a drop goes at once), a key frame request.
  if (lost > 0 && media_ssrc_known_ && receive_loss_ >= kRedundantRepairLoss) {
    // The NACK alone once more, out of this one's loss burst: behind an empty RR (a report
    // block sent again later would skew the sender's round trip), without the PLI or REMB.
    // Kept plain: send_rtcp protects in place.
    rtp::RtcpWriter repeat({nack_repeat_.data(), kRtcpBytes});
    repeat.add_receiver_report(own_ssrc, {});
    repeat.add_nack(own_ssrc, peer_media_ssrc_, std::span(nack_list_.data(), lost));
    nack_repeat_size_ = repeat.size();
    nack_repeat_due_ns_ = now_ns + kSecondCopyDelayNs;
  }
  if (!due_only || urgent) send_rtcp(rtcp_buffer_, w.size());
  if (!due_only) next_feedback_ns_ = now_ns + kReceiverReportNs;
}

// ---------------------------------------------------------------------------------------------

void RelaySession::publish_stats() {
  auto set = [](auto& atomic, auto value) { atomic.store(value, std::memory_order_relaxed); };
  const Counters& c = counters_;
  set(stats_.state, uint32_t(state_));
  set(stats_.handshakes, keys_.counters().epochs);
  set(stats_.send_epoch, keys_.send_ordinal());
  set(stats_.rekeys, c.rekeys);
  set(stats_.rekeys_started, keys_.counters().rekeys_started);
  set(stats_.dtls_failures, c.dtls_failures);
  set(stats_.fingerprint_mismatches, c.fingerprint_mismatches);
  set(stats_.peer_alerts, c.peer_alerts);
  set(stats_.last_failure, uint32_t(last_failure_));
  set(stats_.last_alert, uint32_t(last_alert_));
  set(stats_.handshake_backoff_ms,
      next_handshake_ns_ == kNever ? uint64_t(0) : handshake_backoff_ns_ / 1'000'000);
  set(stats_.dtls_hellos_dropped, dtls_.routing_counters().hellos_dropped);
  set(stats_.epoch_collisions, c.epoch_collisions);
  set(stats_.dtls_refused,
      dtls_.routing_counters().refused_busy + dtls_.routing_counters().stray_records);
  set(stats_.dtls_preempted, dtls_.routing_counters().preempted);
  set(stats_.dtls_cookie_challenges, dtls_.routing_counters().cookie_challenges);
  set(stats_.peer_rebinds, c.peer_rebinds);
  set(stats_.peer_restarts, c.peer_restarts);
  set(stats_.peer_lost, c.peer_lost);
  set(stats_.foreign_datagrams, c.foreign_unknown + c.foreign_before_keys + c.foreign_not_peer);
  set(stats_.foreign_unknown, c.foreign_unknown);
  set(stats_.foreign_before_keys, c.foreign_before_keys);
  set(stats_.foreign_not_peer, c.foreign_not_peer);
  set(stats_.srtp_refused, c.srtp_refused);
  set(stats_.srtp_auth_failed, srtp_in_.counters().auth_failed);
  set(stats_.srtp_replayed, srtp_in_.counters().replayed);
  set(stats_.srtp_unknown_epoch, srtp_in_.counters().unknown_epoch);
  set(stats_.srtp_malformed,
      srtp_in_.counters().too_short + srtp_in_.counters().malformed + srtp_in_.counters().no_room);
  set(stats_.rtp_refused, c.rtp_refused);
  set(stats_.rtcp_refused, c.rtcp_refused);
  set(stats_.rtt_us, have_rtt_ ? rtt_ns_ / 1000 : 0);
  set(stats_.frames_sent, c.frames_sent);
  set(stats_.frames_refused, c.frames_refused);
  set(stats_.packets_sent, c.packets_sent);
  set(stats_.fec_packets_sent, c.fec_sent);
  set(stats_.rtx_packets_sent, c.rtx_sent);
  set(stats_.nacked_packets, c.nacked);
  set(stats_.nacked_unavailable, c.nacked_unavailable);
  set(stats_.nacked_again_at_once, c.nacked_again_at_once);
  set(stats_.rtx_second_copies, c.rtx_second_copies);
  set(stats_.nacked_over_budget, c.nacked_over_budget);
  set(stats_.nacks_repeated, c.nacks_repeated);
  set(stats_.pacer_expired, pacer_.counters().dropped_expired);
  set(stats_.frames_on_wire, c.frames_on_wire);
  set(stats_.frame_on_wire_ns_total, c.frame_on_wire_ns_total);
  set(stats_.frame_on_wire_ns_max, c.frame_on_wire_ns_max);
  set(stats_.tail_probes, c.tail_probes);
  set(stats_.no_packet_buffer, c.no_buffer);
  set(stats_.target_bps, rate_.target_bps());
  set(stats_.remb_bps, c.remb_bps);
  set(stats_.peer_fraction_lost, c.fraction_lost);
  set(stats_.packets_received, c.packets_received);
  set(stats_.packets_recovered_fec, c.recovered_fec);
  set(stats_.packets_recovered_rtx, c.recovered_rtx);
  set(stats_.fec_rebuilt, c.fec_rebuilt);
  set(stats_.rtx_received, c.rtx_received);
  set(stats_.originals_after_repair, jitter_.counters().originals_after_repair);
  set(stats_.frames_complete, c.frames_complete);
  set(stats_.frames_dropped, c.frames_dropped);
  for (size_t r = 0; r < c.frames_dropped_by.size(); ++r)
    set(stats_.frames_dropped_by[r], c.frames_dropped_by[r]);
  set(stats_.frames_malformed, c.frames_malformed);
  set(stats_.frames_no_buffer, c.frames_no_buffer);
  set(stats_.nacks_sent, c.nacks_sent);
  set(stats_.nack_requested, nack_.counters().requested);
  set(stats_.nack_retried, nack_.counters().retried);
  set(stats_.nack_given_up_deadline, nack_.counters().given_up_deadline);
  set(stats_.nack_given_up_tries, nack_.counters().given_up_tries);
  set(stats_.keyframe_requests, c.keyframe_requests);
  set(stats_.estimate_bps, estimator_.estimate_bps());
  set(stats_.jitter_target_us, jitter_.counters().target_delay_ns / 1000);
  set(stats_.skew_ppm_milli, int64_t(std::llround(skew_.skew_ppm() * 1000)));
  RelayAudioStats& a = stats_.audio;
  if (audio_sender_) {
    const AudioSenderCounters& sc = audio_sender_->counters();
    set(a.channels, uint64_t(config_.audio_send.channels));
    set(a.frames_encoded, sc.frames_encoded);
    set(a.frames_sent, sc.frames_sent);
    set(a.packets_sent, sc.packets);
    set(a.bytes_sent, sc.bytes);
    set(a.encode_errors, sc.encode_errors);
    set(a.capture_gaps, sc.capture_gaps);
    set(a.encode_us, sc.encode_ns / 1000);
    set(a.expected_loss_percent, sc.expected_loss_percent);
  }
  if (audio_receiver_) {
    const AudioReceiverCounters& rc = audio_receiver_->counters();
    const audio_codec::PlayoutCounters& p = rc.playout;
    set(a.channels, rc.channels);
    set(a.packets_received, p.packets_in);
    set(a.packets_late, p.packets_late);
    set(a.packets_duplicate, p.packets_duplicate);
    set(a.packets_overflow, p.packets_overflow);
    set(a.packets_refused,
        p.packets_refused + p.packets_misaligned + rc.packets_refused + audio_refused_);
    set(a.frames_played, p.frames_played);
    set(a.frames_recovered_fec, p.frames_recovered);
    set(a.frames_concealed_lost, p.frames_concealed_lost);
    set(a.frames_concealed_underflow, p.frames_concealed_underflow);
    set(a.underflows, p.underflows);
    set(a.stalls, p.stalls);
    set(a.recovered_lbrr, rc.recovered_lbrr);
    set(a.restarts, p.restarts);
    set(a.decode_errors, rc.decode_errors);
    set(a.ring_overflow_frames, rc.ring_overflow_frames);
    set(a.samples_written, rc.frames_written);
    set(a.decode_us, rc.decode_ns / 1000);
    set(a.latency_samples, rc.latency_samples);
    set(a.latency_last_us, rc.latency_last_us);
    set(a.latency_min_us, rc.latency_min_us);
    set(a.latency_max_us, rc.latency_max_us);
    set(a.latency_mean_us,
        rc.latency_samples ? rc.latency_sum_us / int64_t(rc.latency_samples) : int64_t(0));
  } else {
    set(a.packets_refused, audio_refused_);
  }
}

}  // namespace syncd::relay
