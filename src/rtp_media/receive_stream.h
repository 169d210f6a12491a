// The receiving half of one RTP video stream, as the WAN relay's receiver keeps it (docs/wan.md
// "Jitter buffer and repair") and a WebRTC ingest would: the sender's SSRC, the jitter buffer
// its packets (as received, or rebuilt by FEC or RTX) wait in until their frame is complete, the
// NACK schedule of what is missing, the receiver statistics a report block is made of (RFC 3550
// A.3, A.8), the clock-skew estimate from the sender's reports, and the delay-based bandwidth
// estimate from abs-send-time (REMB). Depacketizing a complete frame, repair formats and what
// the feedback compound holds are the owner's.
//
// Packets live in the owner's transport::PacketStore from accept() until the jitter buffer hands
// them to the FrameSink (a complete frame, or a dropped one), which gives them back.
//
// Pure: no sockets or clocks (times come in). The transport thread only (not thread-safe).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "congestion/delay_based_estimator.h"
#include "jitter/clock_skew.h"
#include "jitter/jitter_buffer.h"
#include "jitter/nack_scheduler.h"
#include "rtp/receiver_statistics.h"
#include "rtp/rtcp.h"
#include "rtp/rtp_packet.h"
#include "transport/packet_store.h"

namespace syncd::rtp_media {

struct ReceiveStreamConfig {
  uint32_t clock_rate = 90'000;
  jitter::JitterBufferConfig jitter;
  // Whether a payload begins a frame (an access unit delimiter, SPS or PPS for H.264): the
  // jitter buffer then knows a frame's first packet even when the frame before it was lost.
  bool (*starts_frame)(std::span<const uint8_t> payload) = nullptr;
};

class ReceiveStream {
 public:
  ReceiveStream(ReceiveStreamConfig config, transport::PacketStore& store);

  // ---- the sender ----
  bool knows_sender() const { return sender_known_; }
  uint32_t sender_ssrc() const { return sender_ssrc_; }
  // The first sender, or a new one (a restart): every per-sender state starts over. The jitter
  // buffer first gives `sink` what it holds (complete frames go out, the rest are dropped).
  // Control plane: a restart allocates (once per restart, not per packet).
  void start_sender(uint32_t ssrc, uint64_t now_ns, jitter::FrameSink& sink);

  // ---- media in ----
  // A packet's arrival (its whole datagram, `bytes`), for the delay-based estimate; whether it
  // is a probe's padding (congestion/probe_meter.h).
  void on_arrival(uint64_t now_ns, std::optional<uint32_t> abs_send_time, uint32_t bytes,
                  bool probe_padding = false);
  // A media packet of the sender's, parsed into view: into the store and the jitter buffer.
  // repaired: rebuilt by FEC or resent (not counted in the report's statistics). False when it
  // was not taken (held already, too late, no buffer: `no_buffer` says which).
  bool accept(const rtp::RtpPacketView& view, std::span<const uint8_t> packet, bool repaired,
              uint64_t now_ns, jitter::FrameSink& sink, bool& no_buffer);
  // Releases what is due (complete frames, frames past their deadline) to the sink.
  void advance(uint64_t now_ns, jitter::FrameSink& sink) { jitter_.advance(now_ns, sink); }

  // ---- the sender's reports and the path ----
  void on_sender_report(uint64_t ntp_timestamp, uint32_t rtp_timestamp, uint64_t now_ns);
  void set_rtt(uint64_t rtt_ns);
  bool have_rtt() const { return have_rtt_; }
  uint64_t rtt_ns() const { return rtt_ns_; }

  // ---- feedback ----
  // The report block about the sender, once its statistics are valid.
  std::optional<rtp::ReportBlock> report_block(uint64_t now_ns);
  // The sequence numbers to NACK now (into `out`, ascending); how many.
  size_t collect_nacks(uint64_t now_ns, std::span<uint16_t> out);
  // Whether the jitter buffer gave up on a frame since the last call (the decoder needs an IDR).
  bool take_keyframe_request() { return jitter_.take_keyframe_request(); }
  std::optional<uint64_t> take_remb(uint64_t now_ns) { return estimator_.take_remb(now_ns); }
  // When advance() or the feedback has work next.
  uint64_t next_wakeup_ns() const;
  uint64_t next_remb_ns() const { return estimator_.next_remb_ns(); }
  uint64_t next_nack_ns() const { return nack_.next_wakeup_ns(rtt_ns_); }

  // ---- figures ----
  const jitter::JitterBufferCounters& jitter_counters() const { return jitter_.counters(); }
  const jitter::NackCounters& nack_counters() const { return nack_.counters(); }
  uint64_t estimate_bps() const { return estimator_.estimate_bps(); }
  // The estimator's figures since the sender's last start (probes measured and raised).
  const congestion::DelayEstimatorCounters& estimator_counters() const {
    return estimator_.counters();
  }
  const congestion::ProbeMeterCounters& estimator_probe_counters() const {
    return estimator_.probe_counters();
  }
  double skew_ppm() const { return skew_.skew_ppm(); }

 private:
  ReceiveStreamConfig config_;
  transport::PacketStore& store_;
  bool sender_known_ = false;
  uint32_t sender_ssrc_ = 0;
  uint64_t rtt_ns_ = 50'000'000;
  bool have_rtt_ = false;
  rtp::ReceiverStatistics statistics_;
  congestion::DelayBasedEstimator estimator_;
  jitter::JitterBuffer jitter_;
  jitter::NackScheduler nack_;
  jitter::ClockSkewEstimator skew_;
};

}  // namespace syncd::rtp_media
