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
#include "relay/relay_audio.h"
#include "relay/relay_path.h"
#include "relay/relay_stats.h"
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
  bool resend(uint16_t sequence, uint64_t now_ns);  // as RTX; false when it could not queue
  // Takes `bytes` from the retransmission budget; false when it has not that much.
  bool take_retransmit_budget(size_t bytes, uint64_t now_ns);
  void report_target_rate(uint64_t now_ns);
  // Every kRateSampleNs, the bytes sent so far; what went out over the last `samples` of them,
  // in bit/s (0 before two samples).
  void sample_send_rate(uint64_t now_ns);
  uint64_t sent_bps(size_t samples) const;
  // A receiver report's loss, over a long enough span, to the rate controller.
  void congestion_report(const rtp::ReportBlock& block, uint64_t now_ns);

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
  congestion::SendRateController rate_;
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
  static constexpr uint64_t kCleanBurstNs = 8'000'000;
  static constexpr uint64_t kLossyBurstNs = 2'000'000;
  static constexpr double kBurstLossLimit = 0.02;
  congestion::Pacer pacer_{[] {
    congestion::PacerConfig c;
    c.drain_within_ns = 33'000'000;
    c.burst_ns = kLossyBurstNs;  // until the receiver's reports say the path is clean
    return c;
  }()};
  // A second copy of a retransmission goes only under 10 % loss: more is congestion (a cap, a
  // policer), where a second copy only adds to what the path cannot carry.
  static constexpr double kRedundantRepairMaxLoss = 0.10;
  // Retransmissions get at most this share of the target rate (a token bucket of 100 ms of it):
  // when a cap starts dropping most of what is sent, every packet is NACKed, and resending them
  // all (the pacer drains its queue within 33 ms whatever the target) multiplied what was sent
  // into a path that was already full (measured: 160 Mbit/s out for a second into a 10 Mbit/s
  // policer). A NACK past the budget is not served (counted); FEC and the next IDR repair.
  static constexpr double kRetransmitShare = 0.25;
  double retransmit_tokens_ = 0;  // bytes
  uint64_t retransmit_refill_ns_ = 0;
  struct SecondCopy {
    uint16_t sequence;
    uint64_t due_ns;
  };
  static constexpr size_t kSecondCopies = 256;
  std::array<SecondCopy, kSecondCopies> second_copies_{};
  size_t second_copy_head_ = 0, second_copy_count_ = 0;
  bool describing_ = false;
  bool goodbye_pending_ = false;        // the stream closed: BYE once the pacer is empty
  uint64_t goodbye_not_before_ns_ = 0;  // and not before this (kGoodbyeGraceNs after the close)
  bool audio_described_ = false;        // the audio description has gone once
  uint64_t reported_target_bps_ = 0;    // the target the main loop last heard
  uint64_t next_target_report_ns_ = 0;
  StreamDescription description_{};
  uint64_t next_report_ns_ = 0;
  // The send rate as it left (datagram bytes), the loss estimate's "what was sent" (the target
  // is not it: FEC and retransmissions ride on top of the encoder's share, and the encoder
  // follows a new target a frame or more late).
  static constexpr uint64_t kRateSampleNs = 100'000'000;
  static constexpr size_t kRateSamples = 11;  // a second of them, and the one before
  struct RateSample {
    uint64_t at_ns = 0;
    uint64_t bytes = 0;
  };
  std::array<RateSample, kRateSamples> rate_samples_{};
  size_t rate_sample_count_ = 0, rate_sample_head_ = 0;
  uint64_t bytes_out_ = 0, next_rate_sample_ns_ = 0;
  // The rate controller's loss sample: from the counts at the last one (congestion_report).
  static constexpr uint64_t kCongestionSampleNs = 300'000'000;  // the estimator's interval
  static constexpr uint32_t kCongestionSamplePackets = 50;
  bool congestion_sampled_ = false;
  uint32_t congestion_base_sequence_ = 0;
  int32_t congestion_base_lost_ = 0;
  uint64_t congestion_base_ns_ = 0;
  // Audio: the encoder side (relay_audio.h), polled on the timer.
  std::unique_ptr<AudioSender> audio_sender_;
  std::unique_ptr<AudioOut> audio_out_;
  uint64_t next_audio_poll_ns_ = 0;
};

}  // namespace syncd::relay
