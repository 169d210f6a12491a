#include "relay/relay_receiver.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/counter.h"
#include "core/random.h"
#include "rtp/h264_packetizer.h"
#include "rtp/rtx.h"
#include "transport/socket_address.h"

namespace syncd::relay {

namespace {

using core::count;

constexpr uint32_t kStorePackets = 8192;
constexpr uint64_t kReceiverReportNs = 100'000'000;

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

jitter::JitterBufferConfig relay_jitter_config() {
  jitter::JitterBufferConfig c;
  c.rtt_factor_percent = 400;
  c.repair_budget_max_ns = 400'000'000;
  return c;
}

// The jitter buffer's events, back into the receiver.
class RelayReceiver::Sink final : public jitter::FrameSink {
 public:
  explicit Sink(RelayReceiver& receiver) : receiver_(receiver) {}
  void on_frame(const jitter::FrameEvent& frame) override { receiver_.deliver_frame(frame); }
  void on_drop(const jitter::DropEvent& drop) override {
    count(receiver_.stats_.frames_dropped);
    count(receiver_.stats_.frames_dropped_by[size_t(drop.reason)]);
    receiver_.lost_since_delivery_ = true;
    receiver_.free_frame_packets(drop.packets);
  }

 private:
  RelayReceiver& receiver_;
};

// The packets FEC rebuilt while one datagram was taken in (at most one block's repairs), copied
// out of the decoder's callback so they enter the jitter buffer after the datagram's own packet.
struct RelayReceiver::RecoveredPackets final : fec::RecoverySink {
  std::array<std::array<uint8_t, transport::PacketStore::kPacketBytes>, fec::kMaxM> packets;
  std::array<size_t, fec::kMaxM> sizes{};
  size_t count = 0;
  void on_recovered(uint16_t, std::span<const uint8_t> rtp_packet) override {
    if (count == packets.size() || rtp_packet.size() > transport::PacketStore::kPacketBytes) return;
    std::memcpy(packets[count].data(), rtp_packet.data(), rtp_packet.size());
    sizes[count++] = rtp_packet.size();
  }
};

RelayReceiver::RelayReceiver(RelayPath& path, RelaySessionStats& stats, RelayReceiverConfig config)
    : path_(path),
      stats_(stats),
      store_(kStorePackets),
      own_ssrc_(core::random_u32()),
      rtcp_buffer_(kRtcpBufferBytes),
      nack_list_(rtp::kNackEventCapacity),
      video_({kVideoClockHz, relay_jitter_config(), &starts_access_unit}, store_),
      sink_(std::make_unique<Sink>(*this)),
      recovered_(std::make_unique<RecoveredPackets>()),
      frame_buffers_(config.frame_buffers),
      frame_buffer_lent_(config.frame_buffers, false),
      nack_repeat_(kRtcpBufferBytes) {
  if (config.audio_ring) {
    AudioReceiveConfig c;
    c.ring = config.audio_ring;
    c.target_ns = config.audio_target_ns;
    audio_receiver_ = std::make_unique<AudioReceiver>(c);
  }
}

RelayReceiver::~RelayReceiver() = default;

void RelayReceiver::on_rtp(std::span<uint8_t> plain, uint64_t epoch_ordinal, uint64_t now_ns) {
  rtp::RtpPacketView view;
  if (rtp::parse_rtp(plain, view) != rtp::RtpParseError::kOk) {
    count(stats_.rtp_refused);
    return;
  }
  uint32_t abs_send_time = 0;
  video_.on_arrival(
      now_ns,
      rtp::read_abs_send_time(view, abs_send_time) ? std::optional(abs_send_time) : std::nullopt,
      uint32_t(plain.size() + kSrtpTrailerBytes), view.payload_type == kProbePaddingPayloadType);
  count(stats_.packets_received);
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
      if (!accept_sender_ssrc(view.ssrc, epoch_ordinal, now_ns)) {
        count(stats_.rtp_refused);  // a foreign SSRC
        return;
      }
      fec_decoder_.add_source(view.sequence, plain, now_ns, recovered);
      accept_media(view, plain, false, now_ns);
      break;
    }
    case kFecPayloadType:
      if (!video_.knows_sender()) return;
      fec_decoder_.add_repair(view.payload, now_ns, recovered);
      break;
    case kProbePaddingPayloadType:
    case kRtxPayloadType: {
      // A probe's padding was measured above as part of its probe. It copies a recent media
      // packet, so it repairs that packet when the original was lost (as before it had its own
      // payload type: under a cap that held, the padding was many of the repairs).
      if (!video_.knows_sender()) return;
      uint8_t original[transport::PacketStore::kPacketBytes];
      size_t original_size = 0;
      if (rtp::restore_original(view, kMediaPayloadType, video_.sender_ssrc(), original,
                                &original_size) != rtp::RtxError::kOk) {
        count(stats_.rtp_refused);
        return;
      }
      const std::span<const uint8_t> restored(original, original_size);
      rtp::RtpPacketView rv;
      if (rtp::parse_rtp(restored, rv) != rtp::RtpParseError::kOk) {
        count(stats_.rtp_refused);
        return;
      }
      count(view.payload_type == kProbePaddingPayloadType ? stats_.probe_padding_received
                                                          : stats_.rtx_received);
      fec_decoder_.add_source(rv.sequence, restored, now_ns, recovered);
      if (accept_media(rv, restored, true, now_ns)) count(stats_.packets_recovered_rtx);
      break;
    }
    default:
      count(stats_.rtp_refused);
      return;
  }
  for (size_t i = 0; i < recovered.count; ++i) {
    const std::span<const uint8_t> rebuilt(recovered.packets[i].data(), recovered.sizes[i]);
    rtp::RtpPacketView rv;
    if (rtp::parse_rtp(rebuilt, rv) != rtp::RtpParseError::kOk) {
      count(stats_.rtp_refused);  // rebuilt from authenticated packets, so never expected
      continue;
    }
    count(stats_.fec_rebuilt);
    if (accept_media(rv, rebuilt, true, now_ns)) count(stats_.packets_recovered_fec);
  }
}

void RelayReceiver::on_rtcp(const RelayRtcp& rtcp, uint64_t epoch_ordinal, uint64_t now_ns) {
  // The audio's compound (its SR and description) first: its SSRC is not the video's.
  if (rtcp.audio_description) {
    if (!audio_receiver_ || !audio_receiver_->on_description(*rtcp.audio_description)) {
      ++audio_refused_;
      return;
    }
    if (rtcp.sr && rtcp.sr->sender_ssrc == audio_receiver_->ssrc())
      audio_receiver_->on_sender_report(jitter::ntp_to_ns(rtcp.sr->info.ntp_timestamp),
                                        rtcp.sr->info.rtp_timestamp);
    return;
  }
  if (rtcp.sr && !accept_sender_ssrc(rtcp.sr->sender_ssrc, epoch_ordinal, now_ns)) {
    count(stats_.rtcp_refused);
    return;
  }
  if (rtcp.sr)
    video_.on_sender_report(rtcp.sr->info.ntp_timestamp, rtcp.sr->info.rtp_timestamp, now_ns);
  if (rtcp.description) on_description(*rtcp.description);
  if (rtcp.description && rtcp.sr) {
    described_by_ssrc_ = rtcp.sr->sender_ssrc;
    described_ntp_ = rtcp.sr->info.ntp_timestamp;
  }
  // The BYE goes once and may be lost; every report after it comes without the description
  // (kSenderReportNs), so one of those ends the stream too. Only from the SSRC that described
  // it and sent after it did: a restarted sender (another SSRC) that has not opened its stream
  // yet leaves it open for its frames, and a report from before the description that was
  // overtaken on the path is older than it.
  const bool undescribed = rtcp.sr && !rtcp.description &&
                           rtcp.sr->sender_ssrc == described_by_ssrc_ &&
                           rtcp.sr->info.ntp_timestamp > described_ntp_;
  if ((rtcp.bye || undescribed) && peer_described_) {
    // The sender sent its last packets before its BYE: whatever is complete goes out before the
    // stream closes (what is not, never will be).
    video_.advance(UINT64_MAX, *sink_);
    peer_described_ = false;
    transport::FromTransport m;
    m.kind = transport::FromTransport::Kind::kPeerEnded;
    path_.send_to_main(m);
  }
}

void RelayReceiver::on_description(const StreamDescription& d) {
  if (d.rtt_100us) video_.set_rtt(uint64_t(d.rtt_100us) * 100'000);
  if (peer_described_ && d.name_view() == peer_description_.name_view() &&
      d.format == peer_description_.format && d.width == peer_description_.width &&
      d.height == peer_description_.height)
    return;
  peer_described_ = true;
  peer_description_ = d;
  // Room for the largest access unit the stream can carry (an I420 frame's size). Control
  // plane: once per stream described.
  const size_t room =
      size_t(d.width) * d.height + 2 * (size_t(d.width + 1) / 2) * ((d.height + 1) / 2);
  frame_buffer_bytes_ = room;
  for (auto& b : frame_buffers_) b.reset(new uint8_t[room]);  // default-initialized: untouched
  transport::FromTransport m;
  m.kind = transport::FromTransport::Kind::kDescription;
  m.description = d;
  path_.send_to_main(m);
}

bool RelayReceiver::accept_sender_ssrc(uint32_t ssrc, uint64_t ordinal, uint64_t now_ns) {
  if (!video_.knows_sender()) {
    peer_ssrc_ordinal_ = ordinal;
    video_.start_sender(ssrc, now_ns, *sink_);
    fec_decoder_.reset(ssrc);
    return true;
  }
  if (ssrc == video_.sender_ssrc()) return true;
  // A new SSRC: a sender that restarted picks new random ones (RFC 3550 8.1). It is that only
  // under an epoch newer than the one the current SSRC was learned under, i.e. from a handshake
  // completed since with the peer's certificate; the old sender's packets in flight under the
  // old keys are refused, not taken for another restart.
  if (ordinal <= peer_ssrc_ordinal_) return false;
  peer_ssrc_ordinal_ = ordinal;
  // The stream description stays: if the new sender describes the same stream (name, format,
  // size), its frames go on into the same local stream and its consumers see no change.
  count(stats_.peer_restarts);
  video_.start_sender(ssrc, now_ns, *sink_);
  fec_decoder_.reset(ssrc);
  lost_since_delivery_ = true;  // a new sender's stream: its own chain of references
  return true;
}

bool RelayReceiver::accept_media(const rtp::RtpPacketView& view, std::span<const uint8_t> packet,
                                 bool repaired, uint64_t now_ns) {
  bool no_buffer = false;
  const bool accepted = video_.accept(view, packet, repaired, now_ns, *sink_, no_buffer);
  if (no_buffer) count(stats_.no_packet_buffer);
  return accepted;
}

void RelayReceiver::free_frame_packets(std::span<const jitter::PacketRef> packets) {
  for (const jitter::PacketRef& p : packets) store_.give_back(p.handle);
}

void RelayReceiver::deliver_frame(const jitter::FrameEvent& frame) {
  uint32_t b = 0;
  while (b < frame_buffer_lent_.size() && frame_buffer_lent_[b]) ++b;
  if (b == frame_buffer_lent_.size() || !frame_buffers_[b]) {
    count(stats_.frames_no_buffer);
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
    count(stats_.frames_malformed);
    lost_since_delivery_ = true;
    return;
  }
  count(stats_.frames_complete);
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
  if (path_.send_to_main(m)) {
    lost_since_delivery_ = false;
  } else {
    frame_buffer_lent_[b] = false;
    lost_since_delivery_ = true;
  }
}

void RelayReceiver::on_buffer_free(uint32_t buffer) {
  if (buffer < frame_buffer_lent_.size()) frame_buffer_lent_[buffer] = false;
}

void RelayReceiver::request_keyframe(uint64_t now_ns) {
  // Goes out with the next feedback, at once (send_feedback: urgent).
  keyframe_wanted_ = true;
  if (path_.connected()) send_feedback(now_ns, true);
}

void RelayReceiver::send_feedback(uint64_t now_ns, bool due_only) {
  rtp::RtcpWriter w({rtcp_buffer_.data(), kRtcpBytes});
  std::array<rtp::ReportBlock, 1> blocks;
  size_t block_count = 0;
  if (const auto block = video_.report_block(now_ns)) {
    blocks[0] = *block;
    block_count = 1;
    // The path's loss, smoothed over reports (each covers ~100 ms): what decides whether
    // NACKs go twice.
    receive_loss_ += 0.1 * (blocks[0].fraction_lost / 256.0 - receive_loss_);
  }
  w.add_receiver_report(own_ssrc_, std::span(blocks.data(), block_count));
  const bool known = video_.knows_sender();
  const uint32_t sender = video_.sender_ssrc();
  const size_t lost = video_.collect_nacks(now_ns, nack_list_);
  if (lost > 0 && known) {
    w.add_nack(own_ssrc_, sender, std::span(nack_list_.data(), lost));
    count(stats_.nacks_sent);
  }
  bool urgent = lost > 0;
  if (auto remb = video_.take_remb(now_ns)) {
    const uint32_t ssrcs[] = {sender};
    urgent |= w.add_remb(own_ssrc_, *remb, ssrcs);
  }
  const bool keyframe = video_.take_keyframe_request() || keyframe_wanted_;
  if (keyframe && known) {
    urgent |= w.add_pli(own_ssrc_, sender);
    keyframe_wanted_ = false;
    count(stats_.keyframe_requests);
  }
  // Between the periodic reports, a packet goes only for what cannot wait: NACKs, a REMB the
  // estimator wants out (a drop goes at once), a key frame request.
  if (lost > 0 && known && receive_loss_ >= kRedundantRepairLoss) {
    // The NACK alone once more, out of this one's loss burst: behind an empty RR (a report
    // block sent again later would skew the sender's round trip), without the PLI or REMB.
    // Kept plain: send_rtcp protects in place.
    rtp::RtcpWriter repeat({nack_repeat_.data(), kRtcpBytes});
    repeat.add_receiver_report(own_ssrc_, {});
    repeat.add_nack(own_ssrc_, sender, std::span(nack_list_.data(), lost));
    nack_repeat_size_ = repeat.size();
    nack_repeat_due_ns_ = now_ns + kSecondCopyDelayNs;
  }
  if (!due_only || urgent) path_.send_rtcp(rtcp_buffer_, w.size());
  if (!due_only) next_feedback_ns_ = now_ns + kReceiverReportNs;
}

void RelayReceiver::on_timer(uint64_t now_ns) {
  if (path_.connected()) {
    if (audio_receiver_) audio_receiver_->poll(now_ns, transport::wall_clock_ntp_ns());
    video_.advance(now_ns, *sink_);
    fec_decoder_.expire(now_ns);
    if (now_ns >= next_feedback_ns_ || video_.next_nack_ns() <= now_ns ||
        video_.next_remb_ns() <= now_ns)
      send_feedback(now_ns, now_ns < next_feedback_ns_);
    if (now_ns >= nack_repeat_due_ns_) {
      nack_repeat_due_ns_ = UINT64_MAX;
      std::memcpy(rtcp_buffer_.data(), nack_repeat_.data(), nack_repeat_size_);
      path_.send_rtcp(rtcp_buffer_, nack_repeat_size_);
      count(stats_.nacks_repeated);
    }
  }
  publish(now_ns);
}

uint64_t RelayReceiver::next_wakeup_ns(uint64_t next) const {
  if (!path_.connected()) return next;
  next = std::min({next, video_.next_wakeup_ns(), next_feedback_ns_, nack_repeat_due_ns_});
  if (audio_receiver_) next = std::min(next, audio_receiver_->next_wakeup_ns());
  return next;
}

// The cores' own counters, copied into the session's figures.
void RelayReceiver::publish(uint64_t) {
  using core::set;
  const jitter::NackCounters& nack = video_.nack_counters();
  set(stats_.originals_after_repair, video_.jitter_counters().originals_after_repair);
  set(stats_.nack_requested, nack.requested);
  set(stats_.nack_retried, nack.retried);
  set(stats_.nack_given_up_deadline, nack.given_up_deadline);
  set(stats_.nack_given_up_tries, nack.given_up_tries);
  set(stats_.estimate_bps, video_.estimate_bps());
  const congestion::DelayEstimatorCounters& estimator = video_.estimator_counters();
  set(stats_.probes_measured, video_.estimator_probe_counters().clusters);
  set(stats_.probes_raised, estimator.probes_raised);
  set(stats_.last_probe_send_bps, estimator.last_probe_send_bps);
  set(stats_.last_probe_receive_bps, estimator.last_probe_receive_bps);
  set(stats_.jitter_target_us, video_.jitter_counters().target_delay_ns / 1000);
  set(stats_.skew_ppm_milli, int64_t(std::llround(video_.skew_ppm() * 1000)));
  RelayAudioStats& a = stats_.audio;
  if (!audio_receiver_) {
    set(a.packets_refused, audio_refused_);
    return;
  }
  const AudioReceiverCounters& rc = audio_receiver_->counters();
  const audio_codec::PlayoutCounters& p = rc.playout;
  set(a.channels, uint64_t(rc.channels));
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
}

}  // namespace syncd::relay
