#include "relay/relay_sender.h"

#include <algorithm>
#include <cstring>

#include "core/clock.h"
#include "core/counter.h"
#include "core/random.h"
#include "rtp/rtx.h"
#include "transport/socket_address.h"

namespace syncd::relay {

namespace {

using core::count;

// A block left with more losses than repairs costs its frame a retransmission round trip (and
// the frames behind it wait): a visible hitch. At 60 blocks a second, 1e-3 is one every 17 s
// on average; 1e-4 (one more repair packet at 1 % loss) makes it one in three minutes.
constexpr fec::PolicyLimits kFecPolicy{.target_block_failure = 1e-4};

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
constexpr size_t kPacedBatch = 64;

}  // namespace

// The encoded audio packets, straight to SRTP and the socket (relay_audio.h: they skip the pacer
// and the FEC/NACK path).
class RelaySender::AudioOut final : public AudioPacketSink {
 public:
  explicit AudioOut(RelaySender& sender) : sender_(sender) {}
  void on_audio_packet(std::span<uint8_t> plain_rtp) override {
    sender_.send_audio_packet(plain_rtp);
  }

 private:
  RelaySender& sender_;
};

RelaySender::RelaySender(RelayPath& path, RelaySessionStats& stats, const AudioSendConfig& audio)
    : path_(path),
      stats_(stats),
      store_(kStorePackets),
      video_({.ssrc = core::random_u32(),
              .first_sequence = uint16_t(core::random_u32()),
              .clock_rate = kVideoClockHz,
              .clock_offset = core::random_u32(),
              .history = kHistory},
             store_),
      rtx_ssrc_(core::random_u32()),
      fec_ssrc_(core::random_u32()),
      rtx_sequence_(uint16_t(core::random_u32())),
      fec_sequence_(uint16_t(core::random_u32())),
      send_buffer_(kRtpBufferBytes),
      rtcp_buffer_(kRtcpBufferBytes),
      packetizer_(rtp::PacketizerConfig{kMaxPayloadBytes}),
      fec_encoder_([this] {
        fec::EncoderConfig c;
        c.media_ssrc = video_.ssrc();
        return c;
      }()) {
  if (audio.ring && audio.channels > 0) {
    audio_sender_ = std::make_unique<AudioSender>(audio, core::random_u32());
    if (!audio_sender_->ok()) audio_sender_.reset();
    audio_out_ = std::make_unique<AudioOut>(*this);
    if (audio_sender_) core::set(stats_.audio.channels, uint64_t(audio.channels));
  }
}

RelaySender::~RelaySender() = default;

void RelaySender::on_start(uint64_t now_ns) {
  video_.set_clock_epoch(now_ns);
}

void RelaySender::on_handshake_complete() {
  audio_described_ = false;
}

void RelaySender::send_frame(transport::ToTransport& m, uint64_t now_ns) {
  transport::FromTransport done;
  done.kind = transport::FromTransport::Kind::kFrameDone;
  done.slot = m.slot;
  done.stream_id = m.stream_id;
  const media::FrameInfo& info = m.slot->info;
  if (!path_.connected()) {
    path_.send_to_main(done);  // not sent: no keys yet
    return;
  }
  video_.on_frame(now_ns);
  const std::span<const uint8_t> access_unit(m.slot->pixels, info.bytes);
  if (packetizer_.begin(access_unit) != rtp::PacketizeError::kOk) {
    count(stats_.frames_refused);
    path_.send_to_main(done);
    return;
  }
  sent_.on_access_unit(info.bytes);
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
  header.timestamp = video_.rtp_time(info.accept_ns ? info.accept_ns : now_ns);
  header.ssrc = video_.ssrc();
  header.has_abs_send_time = true;
  bool first = true;
  bool all_queued = true;
  while (packetizer_.has_next()) {
    const uint32_t h = store_.take();
    if (h == transport::PacketStore::kNone) {
      count(stats_.no_packet_buffer);
      all_queued = false;
      break;
    }
    header.sequence = video_.take_sequence();
    header.extensions = first ? std::span<const rtp::OneByteExtension>(frame_info)
                              : std::span<const rtp::OneByteExtension>();
    first = false;
    const size_t n = packetizer_.write_next(header, store_.room(h));
    store_.set_size(h, n);
    video_.remember(header.sequence, h);  // history for retransmission
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
          count(stats_.fec_packets_sent);
          queue_packet(handles[i], now_ns);
        }
      } else {
        for (size_t i = 0; i < got; ++i) store_.give_back(handles[i]);
        if (got < repairs) count(stats_.no_packet_buffer);
        fec_encoder_.emit_repairs({});  // frees the block (nothing written: out too small)
      }
    }
  }
  if (all_queued) count(stats_.frames_sent);
  done.sent = all_queued;
  path_.send_to_main(done);  // the slot's bytes are in our packets now
  pace(now_ns);
}

bool RelaySender::queue_packet(uint32_t handle, uint64_t now_ns) {
  if (pacer_.enqueue(now_ns, handle, uint32_t(store_.packet(handle).size())) !=
      congestion::EnqueueResult::kQueued) {
    if (store_.holders(handle) == 0) store_.give_back(handle);
    return false;
  }
  store_.hold(handle);
  return true;
}

void RelaySender::pace(uint64_t now_ns) {
  if (!path_.connected()) return;
  std::array<congestion::PacedPacket, kPacedBatch> due;
  for (;;) {
    top_up_padding(now_ns);
    const size_t n = pacer_.pop_due(now_ns, due);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t h = uint32_t(due[i].id);
      if (due[i].disposition == congestion::PacketDisposition::kSend) {
        // Stamped and protected in a copy: the stored packet stays as FEC and RTX read it.
        const std::span<uint8_t> plain = store_.packet(h);
        std::memcpy(send_buffer_.data(), plain.data(), plain.size());
        rtp::set_abs_send_time({send_buffer_.data(), plain.size()},
                               rtp::abs_send_time_from_ns(now_ns));
        if (const size_t sent = path_.send_rtp(send_buffer_, plain.size())) {
          count(stats_.packets_sent);
          video_.count_sent(plain.size());
          sent_.on_sent(sent);
          const bool media = plain.size() > 3 && (plain[1] & 0x7f) == kMediaPayloadType;
          const bool marker = plain.size() > 3 && (plain[1] & 0x80);
          // A frame's last original packet (the marker on the media payload type; RTX has its
          // own): the frame is on the wire. Its time since the relay thread took the encoded
          // frame is packetizing, FEC, the pacer's queue and protection, a stage of glass to glass.
          if (media && marker) {
            const uint64_t waited = now_ns - due[i].enqueued_ns;
            count(stats_.frames_on_wire);
            count(stats_.frame_on_wire_ns_total, waited);
            core::raise_to(stats_.frame_on_wire_ns_max, waited);
          }
          if (media) {
            const uint16_t sequence = uint16_t(plain[2] << 8 | plain[3]);
            video_.on_media_sent(sequence, marker, now_ns);
            newest_media_sequence_ = sequence;
            sent_.on_media_sent(sequence, now_ns);
            probe_.on_media_sent(sequence);
          }
        }
      }
      store_.release(h);
    }
    if (n < due.size()) break;
  }
  // And queued again for the pacer's next event: a probe's padding must not wait for the next
  // frame to be sent.
  top_up_padding(now_ns);
}

void RelaySender::on_stream_opened(const StreamDescription& description, uint64_t now_ns) {
  describing_ = true;
  // A BYE still waiting for the old stream's packets would close this one: the new description
  // ends the old stream at the receiver instead (or continues it, if the same).
  goodbye_pending_ = false;
  description_ = description;
  // Tell the receiver now, before the first frame: it opens its stream from this.
  if (path_.connected()) send_sender_report(now_ns);
}

void RelaySender::on_stream_closed(uint64_t now_ns) {
  // The BYE waits for the stream's last packets to leave the pacer: it closes the receiver's
  // stream, and a frame behind it would have nowhere to go. It also waits kGoodbyeGraceNs, so
  // that a producer reopening at once (its open may reach this thread a timer later) goes on
  // without a BYE between.
  goodbye_pending_ = describing_;
  goodbye_not_before_ns_ = now_ns + kGoodbyeGraceNs;
  describing_ = false;
}

void RelaySender::send_sender_report(uint64_t now_ns, bool goodbye) {
  next_report_ns_ = now_ns + kSenderReportNs;
  rtp::RtcpWriter w({rtcp_buffer_.data(), kRtcpBytes});
  w.add_sender_report(video_.ssrc(), video_.sender_info(now_ns, transport::wall_clock_ntp_ns()));
  w.add_cname(video_.ssrc(), "syncd");
  // The stream is described until its BYE: a report between the close and the BYE (its last
  // packets still in the pacer) must not read to the receiver as the end.
  if ((describing_ || goodbye_pending_) && !goodbye) {
    uint8_t app[kMaxStreamDescriptionBytes];
    StreamDescription d = description_;
    d.ssrc = video_.ssrc();
    d.rtt_100us = have_rtt_ ? uint16_t(std::min<uint64_t>(rtt_ns_ / 100'000, 65535)) : 0;
    if (const size_t n = write_stream_description(d, app)) w.add_application({app, n});
  }
  if (goodbye) {
    const uint32_t ssrcs[] = {video_.ssrc()};
    w.add_goodbye(ssrcs, "stream closed");
  }
  path_.send_rtcp(rtcp_buffer_, w.size());
  send_audio_report();
}

void RelaySender::send_audio_report() {
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
  path_.send_rtcp(rtcp_buffer_, w.size());
}

void RelaySender::send_audio_packet(std::span<uint8_t> plain) {
  if (!path_.connected() || plain.size() > transport::PacketStore::kPacketBytes) return;
  std::memcpy(send_buffer_.data(), plain.data(), plain.size());
  path_.send_rtp(send_buffer_, plain.size());
}

void RelaySender::on_rtcp(const RelayRtcp& rtcp, uint64_t now_ns) {
  if (rtcp.remb) {
    core::set(stats_.remb_bps, *rtcp.remb);
    rate_.on_remb(now_ns, *rtcp.remb);
    core::set(stats_.delay_probes_raised, rate_.counters().delay_probes_raised);
  }
  if (rtcp.block) {
    const uint32_t arrival = rtp::ntp_compact(rtp::ntp_from_ns(transport::wall_clock_ntp_ns()));
    if (auto rtt =
            rtp::round_trip_ns(arrival, rtcp.block->last_sr, rtcp.block->delay_since_last_sr)) {
      rtt_ns_ = *rtt;
      have_rtt_ = true;
    }
    core::set(stats_.peer_fraction_lost, uint64_t(rtcp.block->fraction_lost));
    congestion_report(*rtcp.block, now_ns);  // first: it says whether this loss is congestion
    if (loss_.on_report_counts(rtcp.block->extended_highest_sequence, rtcp.block->cumulative_lost,
                               congestion_since_fec_sample_, now_ns)) {
      congestion_since_fec_sample_ = false;
      core::set(stats_.fec_loss_samples_congested, loss_.congested_samples());
    }
    if (audio_sender_) audio_sender_->on_path_loss(rtcp.block->fraction_lost);
  }
  apply_pacing();
  pacer_.set_burst_ns(loss_.estimate().loss_fraction < kBurstLossLimit ? kCleanBurstNs
                                                                       : kLossyBurstNs);
  report_target_rate(now_ns);
  if (rtcp.pli) {
    // The receiver's decoder waits for an IDR; only an encoder can make one (the egress
    // publisher's, for a stream it encodes; a producer's own H.264 has its periodic IDRs).
    count(stats_.keyframe_requests);
    transport::FromTransport m;
    m.kind = transport::FromTransport::Kind::kKeyframeRequest;
    path_.send_to_main(m);
  }
  for (size_t i = 0; i < rtcp.nack_count; ++i) {
    const uint16_t sequence = (*rtcp.nacks)[i];
    // A media packet sent during a probe past a ceiling was lost: the ceiling still holds.
    if (probe_.lost(sequence)) end_probe(now_ns, false);
    loss_.on_nacked(sequence);
    retransmit(sequence, now_ns);
  }
  pace(now_ns);
}

void RelaySender::retransmit(uint16_t sequence, uint64_t now_ns) {
  count(stats_.nacked_packets);
  // The receiver's repeated NACK (kSecondCopyDelayNs after the first), or one crossing our
  // resend: already on its way. A retry after a round trip is resent.
  switch (video_.answer_nack(sequence, now_ns, rtt_ns_ / 2 + kSecondCopyDelayNs)) {
    case rtp_media::NackAnswer::kUnavailable:
      count(stats_.nacked_unavailable);
      return;
    case rtp_media::NackAnswer::kJustResent:
      count(stats_.nacked_again_at_once);
      return;
    case rtp_media::NackAnswer::kResend:
      break;
  }
  if (!repairs_.take(video_.packet(sequence).size(), rate_.target_bps(), now_ns)) {
    count(stats_.nacked_over_budget);
    return;
  }
  if (!resend(sequence, now_ns)) return;
  count(stats_.rtx_packets_sent);
  video_.mark_resent(sequence, now_ns);
  repairs_.schedule_second_copy(sequence, loss_.estimate().loss_fraction, now_ns);
}

void RelaySender::send_second_copies(uint64_t now_ns) {
  while (const auto sequence = repairs_.take_due_second_copy(now_ns)) {
    if (video_.holds(*sequence) &&
        repairs_.take(video_.packet(*sequence).size(), rate_.target_bps(), now_ns) &&
        resend(*sequence, now_ns)) {
      count(stats_.rtx_packets_sent);
      count(stats_.rtx_second_copies);
    }
  }
}

bool RelaySender::resend(uint16_t sequence, uint64_t now_ns, uint8_t payload_type) {
  rtp::RtpPacketView view;
  if (rtp::parse_rtp(video_.packet(sequence), view) != rtp::RtpParseError::kOk) return false;
  const uint32_t h = store_.take();
  if (h == transport::PacketStore::kNone) {
    count(stats_.no_packet_buffer);
    return false;
  }
  const size_t n = rtp::write_rtx(view, {payload_type, rtx_ssrc_, rtx_sequence_}, store_.room(h));
  if (n == 0) {
    store_.give_back(h);
    return false;
  }
  ++rtx_sequence_;
  store_.set_size(h, n);
  return queue_packet(h, now_ns);
}

void RelaySender::report_target_rate(uint64_t now_ns) {
  // The encoder follows the target (adaptive bitrate): a change of 2 % or more, of the target or
  // of the encoder's part, goes at once, an unchanged one once a second (a publisher that
  // started since hears it).
  const uint64_t target = rate_.target_bps();
  const uint64_t media = media_bps(target);
  core::set(stats_.target_bps, target);
  core::set(stats_.media_bps, media);
  auto moved = [](uint64_t now, uint64_t last) {
    return now * 50 < last * 49 || now * 50 > last * 51;
  };
  const bool changed = reported_target_bps_ == 0 || moved(target, reported_target_bps_) ||
                       moved(media, reported_media_bps_);
  if (!changed && now_ns < next_target_report_ns_) return;
  transport::FromTransport m;
  m.kind = transport::FromTransport::Kind::kTargetRate;
  m.target_bps = target;
  m.media_bps = media;
  if (!path_.send_to_main(m)) return;
  reported_target_bps_ = target;
  reported_media_bps_ = media;
  next_target_report_ns_ = now_ns + 1'000'000'000;
}

void RelaySender::congestion_report(const rtp::ReportBlock& block, uint64_t now_ns) {
  // A span with a probe in it is the probe's (run_probe): its rate was padding's, its loss the
  // probe's own. So is one that reaches back to packets sent before the verdict (compared
  // while sequence numbers cannot have wrapped since). The next sample starts here.
  const std::optional<LossSample> sample = sent_.loss_sample(
      block.extended_highest_sequence, block.cumulative_lost, now_ns,
      probe_.holds_loss_of(sent_.loss_span_start_ns(), sent_.loss_span_start_sequence(), now_ns));
  if (!sample) return;
  const double fraction = sample->fraction;
  const congestion::LossUpdate update = rate_.on_receiver_report(
      now_ns, uint8_t(std::min(255.0, fraction * 256)), rtt_ns_, sample->sent_bps);
  // A decrease is the controller's verdict of congestion; so is lossy feedback it came too soon
  // after one to act on (band loss is held, not "too soon", unless above a policer's ceiling).
  // Whether that loss was the sender's own doing is known only under a policer: a decrease on a
  // path with 5 % loss in bursts is most often the bursts, which FEC is for (dropping those
  // samples took the 720p relay-raw-burst arm's FEC and then its target down to 2 Mbit/s).
  const bool policed = rate_.ceiling_bps() > 0;
  const bool congested =
      update == congestion::LossUpdate::kDecreased ||
      (update == congestion::LossUpdate::kTooSoon && fraction >= kCongestionLoss);
  if (congested) {
    if (now_ns - last_congestion_ns_ > kCongestionEpisodeNs)
      congestion_episode_ns_ = sample->from_ns;
    last_congestion_ns_ = now_ns;
  }
  if (policed && !policer_known_) {
    // Found now: the loss since its episode began, held in the band or not, was its.
    loss_.drop_samples_since(congestion_episode_ns_);
    congestion_since_fec_sample_ = true;
  } else if (policed && congested) {
    congestion_since_fec_sample_ = true;
    // FEC's samples that ended within this span hold some of the same loss.
    loss_.drop_samples_since(sample->from_ns);
  }
  policer_known_ = policed;
}

uint64_t RelaySender::media_bps(uint64_t target) const {
  // Only where what is sent must fit the target: under a policer's ceiling, or a bottleneck's
  // queue that the REMB measures (SendRateController::delay_bound). Under a 10 Mbit/s shaper
  // with the configured share, FEC sized for the queue's overflow (40 % of the packets) took
  // what was sent to 11-13 Mbit/s against a REMB of 8.5, the queue overflowed every second or
  // so, and 92 % of the frames were shown. Elsewhere the encoder keeps its configured share and
  // FEC rides on top: on 5 % loss in bursts (the REMB at its maximum, the loss rule holding)
  // FEC and repairs take half of what is sent, and the measured share took the 720p encoder to
  // under 1 Mbit/s.
  if (rate_.ceiling_bps() == 0 && !rate_.delay_bound()) return 0;
  return uint64_t(double(target) * sent_.media_share());
}

void RelaySender::on_timer(uint64_t now_ns) {
  const bool connected = path_.connected();
  if (audio_sender_ && now_ns >= next_audio_poll_ns_) {
    // Packets go only once the receiver can have the description (sent just before them):
    // before it, they would be refused as unknown.
    audio_sender_->poll(*audio_out_, connected && audio_described_, &core::monotonic_ns);
    if (connected && !audio_described_ && audio_sender_->have_clock()) {
      send_audio_report();
      audio_described_ = true;
    }
    next_audio_poll_ns_ = now_ns + kAudioPollNs;
  }
  if (connected && now_ns >= video_.tail_probe_due_ns()) {
    // A frame's last packet, lost with nothing sent after it, shows the receiver no gap to NACK:
    // after a pause it goes once more as RTX (docs/wan.md, "Jitter buffer").
    if (const auto sequence = video_.take_tail_probe(); sequence && resend(*sequence, now_ns)) {
      count(stats_.tail_probes);
      count(stats_.rtx_packets_sent);
    }
  }
  if (connected) send_second_copies(now_ns);
  run_probe(now_ns);
  pace(now_ns);
  sent_.sample(now_ns);
  if (connected && now_ns >= next_report_ns_) send_sender_report(now_ns);
  if (goodbye_pending_ && now_ns >= goodbye_not_before_ns_ &&
      pacer_.next_event_ns(now_ns) == congestion::Pacer::kNoEvent) {
    send_sender_report(now_ns, true);
    goodbye_pending_ = false;
  }
  core::set(stats_.pacer_expired, pacer_.counters().dropped_expired);
  core::set(stats_.target_bps, rate_.target_bps());
  if (audio_sender_) {
    const AudioSenderCounters& c = audio_sender_->counters();
    RelayAudioStats& a = stats_.audio;
    core::set(a.frames_encoded, c.frames_encoded);
    core::set(a.frames_sent, c.frames_sent);
    core::set(a.packets_sent, c.packets);
    core::set(a.bytes_sent, c.bytes);
    core::set(a.encode_errors, c.encode_errors);
    core::set(a.capture_gaps, c.capture_gaps);
    core::set(a.encode_us, c.encode_ns / 1000);
    core::set(a.expected_loss_percent, c.expected_loss_percent);
  }
}

void RelaySender::apply_pacing() {
  const bool policed = rate_.ceiling_bps() > 0 || probe_.running();
  pacer_.set_pacing(policed ? kPolicedPacing : kPacing, policed ? kPolicedDrainNs : kDrainNs);
  pacer_.set_target_rate(probe_.padding() ? probe_.bps() : rate_.target_bps());
}

void RelaySender::run_probe(uint64_t now_ns) {
  if (!probe_.running()) {
    // Only with a stream being sent: its media packets are what tells.
    if (!path_.connected() || !describing_ || !have_rtt_) return;
    PaddingProbe::Kind kind = PaddingProbe::Kind::kCeiling;
    uint64_t bps = rate_.probe_bps(now_ns);
    if (bps == 0) {
      kind = PaddingProbe::Kind::kFasterPath;
      bps = rate_.delay_probe_bps(now_ns);
    }
    if (bps == 0) return;
    probe_.start(kind, bps, now_ns, sent_.bytes());
    if (kind == PaddingProbe::Kind::kFasterPath) {
      rate_.on_delay_probe_sent(now_ns);
      core::set(stats_.delay_probes, rate_.counters().delay_probes);
    } else {
      count(stats_.probes);
    }
    apply_pacing();
    return;
  }
  switch (probe_.advance(now_ns, sent_.bytes(), rtt_ns_)) {
    case PaddingProbe::Step::kNone:
      break;
    case PaddingProbe::Step::kPaddingDone:
      apply_pacing();
      break;
    case PaddingProbe::Step::kCarried:
      end_probe(now_ns, true);
      break;
    case PaddingProbe::Step::kLost:
      end_probe(now_ns, false);
      break;
    case PaddingProbe::Step::kDone:
      // The receiver measured it, and its REMB says what came of it (SendRateController).
      probe_.end(now_ns, newest_media_sequence_);
      apply_pacing();
      break;
  }
}

void RelaySender::end_probe(uint64_t now_ns, bool carried) {
  rate_.on_probe_result(now_ns, probe_.bps(), carried);
  if (!carried) {
    // Its loss was the probe's own, not the path's: not FEC's to learn from.
    congestion_since_fec_sample_ = true;
    loss_.drop_samples_since(probe_.started_ns());
  }
  probe_.end(now_ns, newest_media_sequence_);
  core::set(stats_.probes_carried, rate_.counters().probes_carried);
  apply_pacing();
  report_target_rate(now_ns);
}

void RelaySender::top_up_padding(uint64_t now_ns) {
  if (!probe_.padding()) return;
  while (pacer_.queued_packets() < kPaddingQueued && queue_padding(now_ns)) {
  }
}

bool RelaySender::queue_padding(uint64_t now_ns) {
  const uint16_t sequence = uint16_t(newest_media_sequence_ - padding_next_++ % kPaddingSpan);
  if (!video_.holds(sequence)) return false;
  const size_t bytes = video_.packet(sequence).size();
  if (!resend(sequence, now_ns, kProbePaddingPayloadType)) return false;
  sent_.on_padding(bytes);
  count(stats_.probe_padding_packets);
  return true;
}

uint64_t RelaySender::next_wakeup_ns(uint64_t now_ns, uint64_t next) const {
  next = std::min(next, pacer_.next_event_ns(now_ns));
  next = std::min(next, probe_.next_wakeup_ns());
  if (path_.connected()) {
    next = std::min({next, next_report_ns_, video_.tail_probe_due_ns()});
    next = std::min(next, repairs_.next_second_copy_ns());
  }
  // Past the grace the pacer's own events wake us; a deadline already passed would spin.
  if (goodbye_pending_ && goodbye_not_before_ns_ > now_ns)
    next = std::min(next, goodbye_not_before_ns_);
  if (audio_sender_) next = std::min(next, next_audio_poll_ns_);
  return next;
}

void RelaySender::on_stop(uint64_t now_ns) {
  if (describing_ || goodbye_pending_) send_sender_report(now_ns, true);
}

}  // namespace syncd::relay
