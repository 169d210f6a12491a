// A relay session's figures for /stats and /metrics (docs/wan.md "Figures"): each counter is
// declared here once, counted where it happens by its one writer on the relay thread (the
// session, its sender or its receiver, core/counter.h), and read anywhere (relaxed atomics).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "jitter/jitter_buffer.h"

namespace syncd::relay {

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

// One session's figures; the cores' own counters (keys, SRTP, DTLS routing, jitter buffer, NACK
// scheduler, pacer) are copied in on the relay thread's timer.
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
  std::atomic<uint64_t> media_bps{0};  // the encoder's part of the target (0: not measured yet)
  // Probes past a policer's ceiling (padding on top of the target), those the path carried, and
  // the padding packets they sent.
  std::atomic<uint64_t> probes{0};
  std::atomic<uint64_t> probes_carried{0};
  std::atomic<uint64_t> probe_padding_packets{0};  // of both kinds of probe
  // Probes for a faster path while the receiver's estimate binds the target (twice the target
  // for a moment), and those whose REMB came back raised.
  std::atomic<uint64_t> delay_probes{0};
  std::atomic<uint64_t> delay_probes_raised{0};
  // FEC's loss samples dropped because the rate control took their loss for congestion.
  std::atomic<uint64_t> fec_loss_samples_congested{0};
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
  // The sender's probes as measured here (congestion/probe_meter.h): padding packets received,
  // clusters measured, those that raised the estimate, and the last one's rates.
  std::atomic<uint64_t> probe_padding_received{0};
  std::atomic<uint64_t> probes_measured{0};
  std::atomic<uint64_t> probes_raised{0};
  std::atomic<uint64_t> last_probe_send_bps{0};
  std::atomic<uint64_t> last_probe_receive_bps{0};
  std::atomic<uint64_t> jitter_target_us{0};
  std::atomic<int64_t> skew_ppm_milli{0};
  RelayAudioStats audio;
};

}  // namespace syncd::relay
