// One WAN relay session on the relay thread (docs/wan.md): DTLS keys, SRTP, and either the
// sending media path (client: packetize, FEC, pace, retransmit) or the receiving one (server:
// repair, jitter buffer, depacketize, feedback). It is the transport::TransportHandler the relay
// thread drives; the pure modules do the work (src/secure, src/rtp, src/fec, src/jitter,
// src/congestion), and this class wires them to each other, to the socket and to the main loop.
//
// Thread: the relay thread, apart from stats(), which any thread may read.
#pragma once

#include <sys/socket.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "congestion/delay_based_estimator.h"
#include "congestion/loss_based_estimator.h"
#include "congestion/pacer.h"
#include "core/content_hash.h"
#include "fec/decoder.h"
#include "fec/encoder.h"
#include "fec/policy.h"
#include "jitter/clock_skew.h"
#include "jitter/jitter_buffer.h"
#include "jitter/nack_scheduler.h"
#include "relay/relay_audio.h"
#include "rtp/h264_depacketizer.h"
#include "rtp/h264_packetizer.h"
#include "rtp/receiver_statistics.h"
#include "rtp/rtcp.h"
#include "rtp/sequence.h"
#include "secure/certificate.h"
#include "secure/dtls_associations.h"
#include "secure/dtls_endpoint.h"
#include "secure/key_schedule.h"
#include "secure/srtp_session.h"
#include "transport/packet_store.h"
#include "transport/transport_thread.h"

namespace syncd::relay {

struct RelaySessionConfig {
  bool sender = false;       // --relay-to: DTLS client, sends media; else the receiver (server)
  secure::Fingerprint peer;  // --peer-fingerprint
  secure::KeyScheduleConfig keys;  // --dtls-rekey-interval
  secure::DtlsConfig dtls;
  // The receiver's access-unit buffers: frames handed to the main loop at once, at most. After
  // a repair the jitter buffer releases every frame that waited behind it at once (up to 8
  // within 2 ms measured at 40 ms one way; up to the 400-ms repair budget's 24 at 60 fps): the
  // decoder holds 4 and queues 32 (RelaySource), the rest is margin. Allocated, not zeroed:
  // only the bytes an access unit fills are touched.
  uint32_t frame_buffers = 40;
  // Sender: with no authenticated RTCP from the receiver for this long (it sends a report every
  // 100 ms), the receiver is taken for dead or restarted and a fresh handshake starts; again
  // after liveness_retry_ns, doubling up to liveness_retry_max_ns, until it answers.
  uint64_t liveness_timeout_ns = 3'000'000'000ull;
  uint64_t liveness_retry_ns = 1'000'000'000ull;
  uint64_t liveness_retry_max_ns = 8'000'000'000ull;
  // Sender, before keys: a failed handshake is tried again after handshake_retry_ns, doubling
  // with each failure in a row up to handshake_retry_max_ns (a timed-out one at once: its
  // retransmissions were the wait).
  uint64_t handshake_retry_ns = 100'000'000;
  uint64_t handshake_retry_max_ns = 4'000'000'000ull;
  // Audio (docs/wan.md, "Audio"). Sender: the capture ring (the relay thread becomes its reader)
  // and the channels chosen (audio_send.ring null: no audio). Receiver: the ring the relayed
  // audio is written into (null: audio packets are refused and counted), and its playout target.
  AudioSendConfig audio_send;
  audio::CaptureRing* audio_receive_ring = nullptr;
  uint64_t audio_target_ns = 60'000'000;
};

// The audio's figures (relay.sender.audio / relay.receiver.audio in /stats).
struct RelayAudioStats {
  std::atomic<uint64_t> channels{0};
  // Sender.
  std::atomic<uint64_t> frames_encoded{0};
  std::atomic<uint64_t> frames_sent{0};
  std::atomic<uint64_t> packets_sent{0};
  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> encode_errors{0};
  std::atomic<uint64_t> capture_gaps{0};
  std::atomic<uint64_t> encode_us{0};
  std::atomic<uint64_t> expected_loss_percent{0};  // the Opus encoders' FEC plan (path loss)
  // Receiver: every frame from the first on is played, recovered or concealed by reason.
  std::atomic<uint64_t> packets_received{0};
  std::atomic<uint64_t> packets_late{0};
  std::atomic<uint64_t> packets_duplicate{0};
  std::atomic<uint64_t> packets_overflow{0};
  std::atomic<uint64_t> packets_refused{0};
  std::atomic<uint64_t> frames_played{0};
  std::atomic<uint64_t> frames_recovered_fec{0};
  std::atomic<uint64_t> frames_concealed_lost{0};
  std::atomic<uint64_t> frames_concealed_underflow{0};
  std::atomic<uint64_t> underflows{0};
  // Of frames_recovered_fec: rebuilt from a SILK or hybrid packet, which may carry LBRR (a
  // CELT-only next packet has none: libopus then conceals).
  std::atomic<uint64_t> recovered_lbrr{0};
  std::atomic<uint64_t> stalls{0};
  std::atomic<uint64_t> restarts{0};
  std::atomic<uint64_t> decode_errors{0};
  std::atomic<uint64_t> ring_overflow_frames{0};
  std::atomic<uint64_t> samples_written{0};
  std::atomic<uint64_t> decode_us{0};
  std::atomic<uint64_t> latency_samples{0};
  std::atomic<int64_t> latency_last_us{0}, latency_min_us{0}, latency_max_us{0}, latency_mean_us{0};
};

// Figures for /stats, copied from the relay thread's counters on its timer (relaxed atomics).
struct RelaySessionStats {
  std::atomic<uint32_t> state{0};  // RelaySession::State
  std::atomic<uint64_t> handshakes{0};
  std::atomic<uint64_t> send_epoch{0};
  std::atomic<uint64_t> rekeys{0};          // handshakes completed over live keys, either side
  std::atomic<uint64_t> rekeys_started{0};  // sender: re-keys the key schedule began
  std::atomic<uint64_t> dtls_failures{0};
  std::atomic<uint64_t> fingerprint_mismatches{0};  // our check of the peer's certificate
  std::atomic<uint64_t> peer_alerts{0};   // handshakes the peer refused with a fatal alert
  std::atomic<uint32_t> last_failure{0};  // secure::DtlsFailure of the last failed handshake
  std::atomic<uint32_t> last_alert{0};    // and the alert the peer sent with it (0: none)
  // Sender: the wait before the next handshake after failures in a row (0: none waiting).
  std::atomic<uint64_t> handshake_backoff_ms{0};
  std::atomic<uint64_t> epoch_collisions{0};  // handshakes whose epoch identity was held
  // Receiver: DTLS refused by address (a ClientHello while another address's handshake held
  // the slot, or a record from an address with no association), and stalled handshakes dropped.
  std::atomic<uint64_t> dtls_refused{0};
  std::atomic<uint64_t> dtls_preempted{0};
  std::atomic<uint64_t> dtls_cookie_challenges{0};  // ClientHellos answered with a cookie
  std::atomic<uint64_t> dtls_hellos_dropped{0};     // truncated or malformed ClientHellos
  std::atomic<uint64_t> peer_rebinds{0};       // receiver: a handshake completed from a new address
  std::atomic<uint64_t> peer_restarts{0};      // receiver: a new sender (new SSRC, newer epoch)
  std::atomic<uint64_t> peer_lost{0};          // sender: liveness timeouts (fresh handshakes)
  std::atomic<uint64_t> foreign_datagrams{0};  // the three below, summed
  std::atomic<uint64_t> foreign_unknown{0};    // not DTLS, RTP or RTCP
  std::atomic<uint64_t> foreign_before_keys{0};  // RTP/RTCP before any handshake completed
  std::atomic<uint64_t> foreign_not_peer{0};     // RTP/RTCP from an address not the peer's
  std::atomic<uint64_t> srtp_refused{0};         // auth failures, replays, unknown epochs...
  std::atomic<uint64_t> srtp_auth_failed{0};
  std::atomic<uint64_t> srtp_replayed{0};
  std::atomic<uint64_t> srtp_unknown_epoch{0};  // an epoch never held, or retired (too old)
  std::atomic<uint64_t> srtp_malformed{0};      // too short, malformed, no room
  std::atomic<uint64_t> rtp_refused{0};         // malformed, foreign SSRC or payload type
  std::atomic<uint64_t> rtcp_refused{0};
  std::atomic<uint64_t> rtt_us{0};
  // Sender.
  std::atomic<uint64_t> frames_sent{0};
  std::atomic<uint64_t> frames_refused{0};  // the packetizer refused the access unit
  std::atomic<uint64_t> packets_sent{0};
  std::atomic<uint64_t> fec_packets_sent{0};
  std::atomic<uint64_t> rtx_packets_sent{0};
  std::atomic<uint64_t> nacked_packets{0};
  std::atomic<uint64_t> nacked_unavailable{0};  // asked for but gone from the history
  // Asked for again within half a round trip (+ the repeat's delay): not resent.
  std::atomic<uint64_t> nacked_again_at_once{0};
  std::atomic<uint64_t> rtx_second_copies{0};   // lossy path: each resent packet once more
  std::atomic<uint64_t> nacked_over_budget{0};  // not resent: retransmissions at their share
  std::atomic<uint64_t> pacer_expired{0};
  // Frames whose last packet went out, and the time from the relay thread taking each encoded
  // frame to that packet on the wire (packetize, FEC, pacer queue, protect): sum and max.
  std::atomic<uint64_t> frames_on_wire{0};
  std::atomic<uint64_t> frame_on_wire_ns_total{0};
  std::atomic<uint64_t> frame_on_wire_ns_max{0};
  std::atomic<uint64_t> tail_probes{0};  // a paused stream's last packet sent again (as RTX)
  std::atomic<uint64_t> no_packet_buffer{0};
  std::atomic<uint64_t> target_bps{0};
  std::atomic<uint64_t> remb_bps{0};
  std::atomic<uint64_t> peer_fraction_lost{0};  // of 256, from the latest RR
  // PLIs: received (sender) or sent (receiver).
  std::atomic<uint64_t> keyframe_requests{0};
  // Receiver.
  std::atomic<uint64_t> packets_received{0};
  // Repaired packets the jitter buffer took as missing (lost, or late and not yet in), by FEC
  // and by retransmission; every packet FEC rebuilt and every RTX packet received, taken or
  // not; and originals that came after their repair (late, not lost).
  std::atomic<uint64_t> packets_recovered_fec{0};
  std::atomic<uint64_t> packets_recovered_rtx{0};
  std::atomic<uint64_t> fec_rebuilt{0};
  std::atomic<uint64_t> rtx_received{0};
  std::atomic<uint64_t> originals_after_repair{0};
  std::atomic<uint64_t> frames_complete{0};
  std::atomic<uint64_t> frames_dropped{0};  // the jitter buffer gave up on them
  // The same, by jitter::DropReason: incomplete by their deadline, lost whole, evicted.
  std::array<std::atomic<uint64_t>, size_t(jitter::DropReason::kCount)> frames_dropped_by{};
  std::atomic<uint64_t> frames_malformed{0};  // the depacketizer refused them
  std::atomic<uint64_t> frames_no_buffer{0};  // every access-unit buffer was with the main loop
  std::atomic<uint64_t> nacks_sent{0};
  std::atomic<uint64_t> nacks_repeated{0};  // lossy path: each NACK sent once more, later
  // Missing packets (jitter::NackCounters): asked for once, asked again, given up because their
  // frame's deadline passed or the tries ran out.
  std::atomic<uint64_t> nack_requested{0};
  std::atomic<uint64_t> nack_retried{0};
  std::atomic<uint64_t> nack_given_up_deadline{0};
  std::atomic<uint64_t> nack_given_up_tries{0};
  std::atomic<uint64_t> estimate_bps{0};
  std::atomic<uint64_t> jitter_target_us{0};
  std::atomic<int64_t> skew_ppm_milli{0};
  RelayAudioStats audio;
};

// The receiver's jitter buffer: JitterBufferConfig's defaults but for the repair budget, four
// round trips + 10 ms up to 400 ms (docs/wan.md "Repair budget"): two retries of a lost
// retransmission fit, so at 5 % loss in bursts both ways with an 80-100 ms round trip a frame is
// given up about ten times less often than with one retry (300 %, at most 250 ms); each frame
// given up costs every frame until the next IDR.
jitter::JitterBufferConfig relay_jitter_config();

class RelaySession final : public transport::TransportHandler {
 public:
  enum class State : uint32_t { kWaiting, kHandshaking, kConnected, kFailed };
  static const char* state_name(State state);

  // identity: this syncd's key and certificate (secure::load_or_create_identity); it must
  // outlive the session.
  RelaySession(RelaySessionConfig config, const secure::Identity& identity);
  ~RelaySession() override;

  void on_start(transport::TransportThread& thread, uint64_t now_ns) override;
  void on_datagram(std::span<uint8_t> datagram, const sockaddr_storage& from,
                   uint64_t now_ns) override;
  void on_message(transport::ToTransport& message, uint64_t now_ns) override;
  void on_timer(uint64_t now_ns) override;
  void on_stop(uint64_t now_ns) override;

  const RelaySessionStats& stats() const { return stats_; }

 private:
  class ReceiverSink;
  struct RecoveredPackets;
  class AudioOut;

  // ---- keys ----
  void feed_dtls(std::span<uint8_t> datagram, const sockaddr_storage& from, uint64_t now_ns);
  void on_handshake_complete(uint64_t now_ns);
  void on_handshake_failed(uint64_t now_ns);
  void run_key_schedule(uint64_t now_ns);
  bool connected() const { return state_ == State::kConnected; }
  bool from_peer(const sockaddr_storage& from) const;

  // ---- sending datagrams ----
  void send_plain(std::span<const uint8_t> datagram);  // DTLS
  void send_rtcp(std::span<uint8_t> compound, size_t size);

  // ---- sender path ----
  void send_frame(transport::ToTransport& message, uint64_t now_ns);
  uint32_t rtp_time(uint64_t ns) const;
  bool queue_packet(uint32_t handle, uint64_t now_ns);
  void release_packet(uint32_t handle);
  void pace(uint64_t now_ns);
  void send_sender_report(uint64_t now_ns, bool goodbye = false);
  void send_audio_report(uint64_t now_ns);
  void send_audio_packet(std::span<uint8_t> plain);
  void retransmit(uint16_t sequence, uint64_t now_ns);
  // Sender: the second copies of resent packets that are due (repair redundancy, below).
  void send_second_copies(uint64_t now_ns);
  bool in_history(uint16_t sequence) const;
  // The stored (plain) packet of `sequence`; in_history(sequence) first.
  std::span<uint8_t> history_packet(uint16_t sequence);
  bool resend(uint16_t sequence, uint64_t now_ns);  // as RTX; false when it could not queue
  void probe_tail(uint64_t now_ns);

  // ---- receiver path ----
  void receive_rtp(std::span<uint8_t> packet, uint64_t now_ns);
  // A media packet (as received, or rebuilt by FEC or RTX) parsed into view, into the jitter
  // buffer; false when it was not taken (held already, too late, no room).
  bool accept_media(const rtp::RtpPacketView& view, std::span<const uint8_t> packet, bool repaired,
                    uint64_t now_ns);
  // due_only: called between periodic reports; sends only if something cannot wait.
  void send_receiver_feedback(uint64_t now_ns, bool due_only);
  void report_target_rate(uint64_t now_ns);
  void deliver_frame(const jitter::FrameEvent& frame);
  void free_frame_packets(std::span<const jitter::PacketRef> packets);

  // SRTP/SRTCP unprotect in place (size shrinks to the plain packet), counted when refused;
  // `epoch`: the key epoch it authenticated under.
  bool unprotect(std::span<uint8_t> packet, bool rtcp, size_t& size, uint32_t& epoch,
                 uint64_t now_ns);
  // Receiver: whether `ssrc`, authenticated under `epoch`, is the sender's. A new SSRC under an
  // epoch newer than the one the current SSRC was learned under is a restarted sender: the
  // receive pipeline starts over for it (restart_sender). Else a new SSRC is foreign.
  bool accept_sender_ssrc(uint32_t ssrc, uint32_t epoch, uint64_t now_ns);
  void restart_sender(uint32_t ssrc, uint64_t now_ns);
  // Sender: starts a fresh handshake when the receiver has been silent too long.
  void check_liveness(uint64_t now_ns);
  // Sender: every kRateSampleNs, the bytes sent so far; what went out over the last `samples`
  // of them, in bit/s (0 before two samples).
  void sample_send_rate(uint64_t now_ns);
  uint64_t sent_bps(size_t samples) const;
  // Sender: a receiver report's loss, over a long enough span, to the rate controller.
  void congestion_report(const rtp::ReportBlock& block, uint64_t now_ns);
  // Tells the main loop a handshake failed (transport::FromTransport::kHandshakeFailed).
  void report_failure();
  // Sender: the handshake that waited for its backoff starts now.
  void start_pending_handshake(uint64_t now_ns);
  void receive_rtcp(std::span<uint8_t> packet, uint64_t now_ns);
  void schedule(uint64_t now_ns);
  void publish_stats();

  RelaySessionConfig config_;
  transport::TransportThread* thread_ = nullptr;
  State state_ = State::kWaiting;
  secure::DtlsContext dtls_context_;
  secure::DtlsAssociations dtls_;  // the live association and a re-key's pending one
  secure::KeySchedule keys_;
  secure::SrtpSender srtp_out_;
  secure::SrtpReceiver srtp_in_;
  // The receiver learns it from each completed handshake (docs/wan.md "Re-binding").
  std::optional<sockaddr_storage> peer_;
  sockaddr_storage dtls_to_{};  // receiver: where the DTLS datagrams being produced go
  // Sender: when authenticated RTCP last came, and the next liveness handshake.
  uint64_t peer_heard_ns_ = 0;
  uint64_t next_liveness_try_ns_ = 0;
  uint64_t liveness_retry_ns_ = 0;
  // Sender, before keys: handshakes failed in a row, and when the next one starts (kNever:
  // none waiting). A refused or failing handshake is retried with backoff, not at once: a peer
  // that refuses us would otherwise be asked hundreds of times a second.
  static constexpr uint64_t kNever = UINT64_MAX;
  uint32_t failures_in_row_ = 0;
  uint64_t next_handshake_ns_ = kNever;
  uint64_t handshake_backoff_ns_ = 0;
  secure::DtlsFailure last_failure_ = secure::DtlsFailure::kNone;
  uint8_t last_alert_ = 0;
  uint64_t rtt_ns_ = 50'000'000;
  bool have_rtt_ = false;

  transport::PacketStore store_;
  std::vector<uint8_t> send_buffer_;  // a packet being protected (the stored copy stays plain)
  std::vector<uint8_t> rtcp_buffer_;

  // Sender.
  uint32_t media_ssrc_ = 0, rtx_ssrc_ = 0, fec_ssrc_ = 0;
  uint16_t media_sequence_ = 0, rtx_sequence_ = 0, fec_sequence_ = 0;
  uint64_t rtp_epoch_ns_ = 0;
  uint32_t rtp_offset_ = 0;
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
  congestion::Pacer pacer_{[] {
    congestion::PacerConfig c;
    c.drain_within_ns = 33'000'000;
    return c;
  }()};
  std::vector<uint8_t> packet_refs_;         // per store handle: history + pacer queue
  std::vector<uint32_t> history_;            // media sequence -> handle, kHistory entries
  std::vector<uint16_t> history_sequence_;   // which sequence each history entry holds
  std::vector<uint64_t> history_resent_ns_;  // when each entry was last resent (0: never)
  // Repair redundancy on a lossy path (docs/wan.md "Repair on a lossy path"): with the path's
  // loss at kRedundantRepairLoss or more, a retransmission goes twice (the second copy
  // kSecondCopyDelayNs later, out of the first's loss burst), and so does a receiver's NACK:
  // a repair lost once costs a whole round trip, which at 80-100 ms stalls the stream past a
  // second's quota of frames.
  static constexpr double kRedundantRepairLoss = 0.02;
  // ...and under 10 %: more is congestion (a cap, a policer), where a second copy only adds to
  // what the path cannot carry.
  static constexpr double kRedundantRepairMaxLoss = 0.10;
  // Retransmissions get at most this share of the target rate (a token bucket of 100 ms of it):
  // when a cap starts dropping most of what is sent, every packet is NACKed, and resending them
  // all (the pacer drains its queue within 33 ms whatever the target) multiplied what was sent
  // into a path that was already full (measured: 160 Mbit/s out for a second into a 10 Mbit/s
  // policer). A NACK past the budget is not served (counted); FEC and the next IDR repair.
  static constexpr double kRetransmitShare = 0.25;
  double retransmit_tokens_ = 0;  // bytes
  uint64_t retransmit_refill_ns_ = 0;
  // Takes `bytes` from the retransmission budget; false when it has not that much.
  bool take_retransmit_budget(size_t bytes, uint64_t now_ns);
  static constexpr uint64_t kSecondCopyDelayNs = 8'000'000;
  struct SecondCopy {
    uint16_t sequence;
    uint64_t due_ns;
  };
  static constexpr size_t kSecondCopies = 256;
  std::array<SecondCopy, kSecondCopies> second_copies_{};
  size_t second_copy_head_ = 0, second_copy_count_ = 0;
  bool describing_ = false;
  bool goodbye_pending_ = false;        // sender: the stream closed: BYE once the pacer is empty
  uint64_t goodbye_not_before_ns_ = 0;  // and not before this (kGoodbyeGraceNs after the close)
  bool audio_described_ = false;        // sender: the audio description has gone once
  bool audio_report_due_ = false;       // sender: a handshake completed; describe the audio now
  bool keyframe_wanted_ = false;        // receiver: the main loop asked for a PLI
  bool lost_since_delivery_ = false;    // receiver: an access unit lost since the last delivered
  uint64_t reported_target_bps_ = 0;    // sender: the target the main loop last heard
  uint64_t next_target_report_ns_ = 0;
  StreamDescription description_{};
  uint64_t next_report_ns_ = 0;
  // Tail-loss probe: a frame's last packet, if lost with nothing sent after it, shows the
  // receiver no gap to NACK. When the stream pauses for two frame intervals after a frame's
  // last packet, that packet goes once more as RTX (docs/wan.md, "Jitter buffer").
  static constexpr uint64_t kNoProbe = UINT64_MAX;
  uint64_t tail_probe_due_ns_ = kNoProbe;
  uint16_t tail_sequence_ = 0;
  uint64_t last_frame_ns_ = 0;
  uint64_t frame_interval_ns_ = 0;  // smoothed time between encoded frames handed to us
  uint32_t packets_sent_ = 0, octets_sent_ = 0;
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

  // Receiver.
  bool media_ssrc_known_ = false;
  uint32_t peer_media_ssrc_ = 0;
  uint64_t peer_ssrc_ordinal_ = 0;  // the local ordinal of the epoch it was learned under
  rtp::ReceiverStatistics receiver_stats_;
  congestion::DelayBasedEstimator estimator_;
  fec::Decoder fec_decoder_;
  jitter::JitterBuffer jitter_{relay_jitter_config()};
  jitter::NackScheduler nack_;
  jitter::ClockSkewEstimator skew_;
  rtp::H264Depacketizer depacketizer_;
  std::unique_ptr<ReceiverSink> sink_;
  std::unique_ptr<RecoveredPackets> recovered_;  // what one datagram's FEC rebuilt
  std::vector<std::unique_ptr<uint8_t[]>> frame_buffers_;
  size_t frame_buffer_bytes_ = 0;  // each one's room: the described stream's I420 frame
  std::vector<bool> frame_buffer_lent_;
  uint64_t next_feedback_ns_ = 0;
  bool peer_described_ = false;
  StreamDescription peer_description_{};
  uint32_t described_by_ssrc_ = 0;  // the sender SSRC whose report described the stream
  uint64_t described_ntp_ = 0;      // and that report's NTP time (the latest that described it)
  std::vector<uint16_t> nack_list_;
  // Receiver: the last NACK-bearing compound, plain, sent once more at nack_repeat_due_ns_ on a
  // lossy path (the loss of the reports' fraction lost, smoothed).
  std::vector<uint8_t> nack_repeat_;
  size_t nack_repeat_size_ = 0;
  uint64_t nack_repeat_due_ns_ = UINT64_MAX;
  double receive_loss_ = 0;

  // Counters the relay thread owns; published to stats_ on the timer.
  struct Counters {
    uint64_t foreign_unknown = 0, foreign_before_keys = 0, foreign_not_peer = 0;
    uint64_t srtp_refused = 0, rtp_refused = 0, rtcp_refused = 0;
    uint64_t frames_sent = 0, frames_refused = 0, packets_sent = 0, fec_sent = 0, rtx_sent = 0;
    uint64_t frames_on_wire = 0, frame_on_wire_ns_total = 0, frame_on_wire_ns_max = 0;
    uint64_t tail_probes = 0;
    uint64_t nacked = 0, nacked_unavailable = 0, no_buffer = 0, dtls_failures = 0;
    uint64_t nacked_again_at_once = 0, rtx_second_copies = 0, nacks_repeated = 0,
             nacked_over_budget = 0;
    uint64_t fingerprint_mismatches = 0, epoch_collisions = 0, peer_alerts = 0, rekeys = 0;
    uint64_t peer_rebinds = 0, peer_restarts = 0, peer_lost = 0;
    uint64_t packets_received = 0, recovered_fec = 0, recovered_rtx = 0, fec_rebuilt = 0,
             rtx_received = 0;
    uint64_t frames_complete = 0, frames_dropped = 0, frames_malformed = 0, frames_no_buffer = 0,
             nacks_sent = 0, remb_bps = 0, fraction_lost = 0, keyframe_requests = 0;
    std::array<uint64_t, size_t(jitter::DropReason::kCount)> frames_dropped_by{};
  } counters_;
  // Audio: the sender's encoder side or the receiver's playout side (relay_audio.h).
  std::unique_ptr<AudioSender> audio_sender_;
  std::unique_ptr<AudioOut> audio_out_;
  uint64_t next_audio_poll_ns_ = 0;
  std::unique_ptr<AudioReceiver> audio_receiver_;
  uint64_t audio_refused_ = 0;  // receiver: audio packets with no ring or no description
  RelaySessionStats stats_;
};

}  // namespace syncd::relay
