// The sending end of a relay session (docs/wan.md): packetizes each access unit (RFC 6184) with
// the frame-info extensions, protects it with FEC sized from the receiver's reported loss, paces
// it out, answers NACKs from its send stream's history (as RTX, within a budget, twice on a lossy
// path), probes a lost tail, sends sender reports with the stream description, follows the
// receiver's reports with its send-rate target, and sends the capture ring's audio.
//
// Thread: the relay thread. Its figures are written to the session's RelaySessionStats.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "congestion/loss_based_estimator.h"
#include "congestion/pacer.h"
#include "core/content_hash.h"
#include "fec/encoder.h"
#include "fec/policy.h"
#include "relay/padding_probe.h"
#include "relay/relay_audio.h"
#include "relay/relay_path.h"
#include "relay/relay_stats.h"
#include "relay/repair_budget.h"
#include "relay/sent_record.h"
#include "rtp/h264_packetizer.h"
#include "rtp_media/send_stream.h"
#include "transport/packet_store.h"

namespace syncd::relay {

class RelaySender {
 public:
  // audio: the capture ring and channels to send (audio.ring null: no audio).
  RelaySender(RelayPath& path, RelaySessionStats& stats, const AudioSendConfig& audio);
  ~RelaySender();

  // The relay thread's loop started (the media clock's epoch).
  void on_start(uint64_t now_ns);
  // Keys from a completed handshake: a new (or restarted) receiver hears the audio description
  // before any audio.
  void on_handshake_complete();
  // An encoded access unit from the main loop: packetized and queued, and its slot given back
  // (kFrameDone) either way.
  void send_frame(transport::ToTransport& message, uint64_t now_ns);
  void on_stream_opened(const StreamDescription& description, uint64_t now_ns);
  void on_stream_closed(uint64_t now_ns);
  // An authenticated RTCP compound from the receiver.
  void on_rtcp(const RelayRtcp& rtcp, uint64_t now_ns);
  void on_timer(uint64_t now_ns);
  // The earliest time on_timer has work (at most `next`).
  uint64_t next_wakeup_ns(uint64_t now_ns, uint64_t next) const;
  // The relay is stopping: a described stream gets its BYE.
  void on_stop(uint64_t now_ns);

  uint32_t media_ssrc() const { return video_.ssrc(); }
  // The round trip from the receiver's reports, when measured.
  bool have_rtt() const { return have_rtt_; }
  uint64_t rtt_ns() const { return rtt_ns_; }

 private:
  class AudioOut;

  bool queue_packet(uint32_t handle, uint64_t now_ns);
  void pace(uint64_t now_ns);
  void send_sender_report(uint64_t now_ns, bool goodbye = false);
  void send_audio_report();
  void send_audio_packet(std::span<uint8_t> plain);
  void retransmit(uint16_t sequence, uint64_t now_ns);
  // The second copies of resent packets that are due (repair redundancy).
  void send_second_copies(uint64_t now_ns);
  // As RTX (or as a probe's padding); false when it could not queue.
  bool resend(uint16_t sequence, uint64_t now_ns, uint8_t payload_type = kRtxPayloadType);
  void report_target_rate(uint64_t now_ns);
  // What the encoder may spend of `target`: the target times the share of what went out over
  // the last second that was access units, not FEC, retransmissions or headers (0 while too
  // little has gone out to say, or while neither a policer's ceiling nor the REMB binds it).
  uint64_t media_bps(uint64_t target) const;
  // A receiver report's loss, over a long enough span, to the rate controller. Notes when it
  // took the loss for congestion (congestion_since_fec_sample_).
  void congestion_report(const rtp::ReportBlock& block, uint64_t now_ns);
  // Probing with padding (padding_probe.h), past a policer's ceiling (congestion::
  // LossBasedEstimator::probe_bps) or for a faster path while the receiver's estimate binds
  // (SendRateController::delay_probe_bps): starts one when due, and acts on its steps.
  void run_probe(uint64_t now_ns);
  // A ceiling probe's verdict.
  void end_probe(uint64_t now_ns, bool carried);
  // Queues one padding packet (an RTX copy of a recent media packet); false when it could not.
  bool queue_padding(uint64_t now_ns);
  // While a probe pads: keeps kPaddingQueued packets in the pacer.
  void top_up_padding(uint64_t now_ns);
  // The pacer's rate and drain from the controller's target, a policer's ceiling and a probe.
  void apply_pacing();

  RelayPath& path_;
  RelaySessionStats& stats_;
  transport::PacketStore store_;
  rtp_media::SendStream video_;
  uint32_t rtx_ssrc_, fec_ssrc_;
  uint16_t rtx_sequence_, fec_sequence_;
  std::vector<uint8_t> send_buffer_;  // a packet being stamped and protected (kRtpBufferBytes)
  std::vector<uint8_t> rtcp_buffer_;
  uint64_t rtt_ns_ = 50'000'000;
  bool have_rtt_ = false;
  rtp::H264Packetizer packetizer_;
  core::ContentHasher hasher_;
  fec::Encoder fec_encoder_;
  // From RRs (their running counts, sampled every 600 packets: the receiver's early feedback
  // makes reports a few dozen packets apart) and NACK runs: the FEC redundancy. Quick to rise,
  // slow to decay (a half-life of ~14 samples), and 1 % assumed until the first sample: with a
  // symmetric EWMA FEC lapsed after a few loss-free reports, and each frame that then lost a
  // packet waited a round trip for its retransmission (docs/wan.md, "FEC payload format").
  fec::LossEstimator loss_{fec::LossEstimatorConfig{0.5, 0.05, 0.01}};
  // Under a known policer, the rate controller took loss for congestion since loss_'s current
  // sample began (or a probe failed): that sample is dropped (fec::LossEstimator::
  // on_report_counts). Elsewhere FEC learns from every sample, as a decrease on a bursty path is
  // mostly the bursts (congestion_report).
  bool congestion_since_fec_sample_ = false;
  // Congestion episodes (a first verdict after kCongestionEpisodeNs without one): when the
  // current one began, for the FEC samples to drop once a policer is found in it.
  static constexpr uint64_t kCongestionEpisodeNs = 10'000'000'000;
  uint64_t congestion_episode_ns_ = 0;
  uint64_t last_congestion_ns_ = 0;
  bool policer_known_ = false;
  PaddingProbe probe_;
  // Its padding: RTX copies of the newest media packets, which the receiver already has (unless
  // lost), under their own payload type.
  static constexpr size_t kPaddingQueued = 2;   // packets kept in the pacer while padding
  static constexpr uint16_t kPaddingSpan = 32;  // the newest media packets copied, in turn
  uint16_t newest_media_sequence_ = 0;
  uint16_t padding_next_ = 0;
  // It probes past a policer's ceiling with padding (run_probe), not with the encoder's rate.
  congestion::SendRateController rate_{[] {
    congestion::SendRateConfig c;
    c.loss.padding_probes = true;
    c.delay_probes = true;
    return c;
  }()};
  // Every packet leaves within two frame intervals (at 60 fps) of its enqueue even when the
  // estimate is below the stream's rate: the relayed stream's bit rate is the producer's, so a
  // lower pacing rate would only queue it here until it expired (measured: a 19 Mbit/s stream
  // against the 8 Mbit/s start estimate lost frames and reached 170 ms for 5 s).
  //
  // On a clean path a frame's packets leave together when the pacer has been idle: credit for
  // half a frame interval at 60 fps (kCleanBurstNs: 8 ms at 2.5 x the target, a whole P-frame
  // at the encoder's share) instead of 2 ms, which spread a 720p frame over 3.2 ms on average,
  // all of it glass-to-glass latency (measured at 1 % loss, 20 +/- 5 ms: p50 41.2 -> 35.0 ms).
  // Once the path drops kBurstLossLimit or more, frames are spread again (kLossyBurstNs): bursts
  // into a policer's bucket cost it (measured under a 10 Mbit/s policer, 8 ms throughout: 90 %
  // of frames shown during the cap, the target over it 38 % of the time; 2 ms: 94 %, 9 %).
  //
  // Once the loss rule has found a policer, packets leave at no more than its ceiling
  // (kPolicedPacing x the target, which sits at 0.9 of it) and a frame may take up to
  // kPolicedDrainNs: at 2.5 x the target, the IDR every 2 s (100 ms of the target rate over a
  // P-frame, FEC on top) left as a burst that overflowed the policer's bucket, lost half its
  // packets and set off a decrease, a see-saw of the target every 2 s (measured, 32-KB bucket).
  static constexpr double kPacing = 2.5;
  static constexpr uint64_t kDrainNs = 33'000'000;
  static constexpr double kPolicedPacing = 1.05;
  static constexpr uint64_t kPolicedDrainNs = 120'000'000;
  static constexpr uint64_t kCleanBurstNs = 8'000'000;
  static constexpr uint64_t kLossyBurstNs = 2'000'000;
  static constexpr double kBurstLossLimit = 0.02;
  congestion::Pacer pacer_{[] {
    congestion::PacerConfig c;
    c.pacing_factor = kPacing;
    c.drain_within_ns = kDrainNs;
    c.burst_ns = kLossyBurstNs;  // until the receiver's reports say the path is clean
    return c;
  }()};
  RepairBudget repairs_;  // the retransmissions' budget and second copies (repair_budget.h)
  bool describing_ = false;
  bool goodbye_pending_ = false;        // the stream closed: BYE once the pacer is empty
  uint64_t goodbye_not_before_ns_ = 0;  // and not before this (kGoodbyeGraceNs after the close)
  bool audio_described_ = false;        // the audio description has gone once
  uint64_t reported_target_bps_ = 0;    // the target the main loop last heard
  uint64_t reported_media_bps_ = 0;     // and the encoder's part of it
  uint64_t next_target_report_ns_ = 0;
  StreamDescription description_{};
  uint64_t next_report_ns_ = 0;
  // What went out (sent_record.h): the loss estimate's "what was sent" (the target is not it:
  // FEC and retransmissions ride on top of the encoder's share, and the encoder follows a new
  // target a frame or more late), the access units' share within it (media_bps), and the loss
  // samples. With a fixed share (0.8) FEC sized for a lossy path (up to 35 % of the packets)
  // took what was sent 20-50 % over the target, into the cap the target had found (measured
  // under a 10 Mbit/s policer: 11-17 Mbit/s sent against a target of 7-11).
  SentRecord sent_;
  // Lossy feedback the controller found too soon to act on is congestion from this loss up (its
  // low_loss: below it, the path carries what is sent).
  static constexpr double kCongestionLoss = 0.02;
  // Audio: the encoder side (relay_audio.h), polled on the timer.
  std::unique_ptr<AudioSender> audio_sender_;
  std::unique_ptr<AudioOut> audio_out_;
  uint64_t next_audio_poll_ns_ = 0;
};

}  // namespace syncd::relay
