// The receiving end of a relay session (docs/wan.md): takes the sender's media, rebuilds lost
// packets from FEC and RTX, orders them in the jitter buffer (its delay from the path's jitter,
// its clock from the sender's reports with skew compensation), depacketizes each complete access
// unit into a buffer lent to the main loop, and sends the feedback: receiver reports, NACKs
// (twice on a lossy path), REMB from the delay-based estimate, PLI when the decoder needs an IDR.
// The relayed audio goes to its playout (relay_audio.h).
//
// Thread: the relay thread. Its figures are written to the session's RelaySessionStats.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "audio/capture_ring.h"
#include "fec/decoder.h"
#include "jitter/jitter_buffer.h"
#include "relay/relay_audio.h"
#include "relay/relay_path.h"
#include "relay/relay_stats.h"
#include "rtp/h264_depacketizer.h"
#include "rtp_media/receive_stream.h"
#include "transport/packet_store.h"

namespace syncd::relay {

// The receiver's jitter buffer: JitterBufferConfig's defaults but for the repair budget, four
// round trips + 10 ms up to 400 ms (docs/wan.md "Repair budget"): two retries of a lost
// retransmission fit, so at 5 % loss in bursts both ways with an 80-100 ms round trip a frame is
// given up about ten times less often than with one retry (300 %, at most 250 ms); each frame
// given up costs every frame until the next IDR.
jitter::JitterBufferConfig relay_jitter_config();

struct RelayReceiverConfig {
  // Access-unit buffers: frames handed to the main loop at once, at most (RelaySessionConfig).
  uint32_t frame_buffers = 40;
  audio::CaptureRing* audio_ring = nullptr;  // null: audio packets are refused and counted
  uint64_t audio_target_ns = 60'000'000;
};

class RelayReceiver {
 public:
  RelayReceiver(RelayPath& path, RelaySessionStats& stats, RelayReceiverConfig config);
  ~RelayReceiver();

  // An authenticated RTP packet, plain, and the local ordinal of the key epoch it came under
  // (secure::KeySchedule::ordinal_of): a new SSRC under a newer epoch is a restarted sender.
  void on_rtp(std::span<uint8_t> plain, uint64_t epoch_ordinal, uint64_t now_ns);
  // An authenticated RTCP compound from the sender.
  void on_rtcp(const RelayRtcp& rtcp, uint64_t epoch_ordinal, uint64_t now_ns);
  // The main loop is done with access-unit buffer `buffer`.
  void on_buffer_free(uint32_t buffer);
  // The main loop's decoder waits for an IDR: a PLI goes at once.
  void request_keyframe(uint64_t now_ns);
  void on_timer(uint64_t now_ns);
  // The earliest time on_timer has work (at most `next`).
  uint64_t next_wakeup_ns(uint64_t next) const;

  // Our SSRC, the one the reports are sent from.
  uint32_t own_ssrc() const { return own_ssrc_; }
  // The round trip the sender described, when it has.
  bool have_rtt() const { return video_.have_rtt(); }
  uint64_t rtt_ns() const { return video_.rtt_ns(); }

 private:
  class Sink;
  struct RecoveredPackets;

  // A media packet (as received, or rebuilt by FEC or RTX) parsed into view, into the jitter
  // buffer; false when it was not taken (held already, too late, no room).
  bool accept_media(const rtp::RtpPacketView& view, std::span<const uint8_t> packet, bool repaired,
                    uint64_t now_ns);
  // Whether `ssrc`, authenticated under an epoch of local ordinal `ordinal`, is the sender's. A
  // new SSRC under an epoch newer than the one the current SSRC was learned under is a restarted
  // sender: the receive pipeline starts over for it. Else a new SSRC is foreign.
  bool accept_sender_ssrc(uint32_t ssrc, uint64_t ordinal, uint64_t now_ns);
  void on_description(const StreamDescription& d);
  // due_only: called between periodic reports; sends only if something cannot wait.
  void send_feedback(uint64_t now_ns, bool due_only);
  void deliver_frame(const jitter::FrameEvent& frame);
  void free_frame_packets(std::span<const jitter::PacketRef> packets);
  void publish(uint64_t now_ns);

  RelayPath& path_;
  RelaySessionStats& stats_;
  transport::PacketStore store_;
  uint32_t own_ssrc_;
  std::vector<uint8_t> rtcp_buffer_;
  std::vector<uint16_t> nack_list_;
  uint64_t peer_ssrc_ordinal_ = 0;  // the local ordinal of the epoch the sender's SSRC came under
  // The sender's video: SSRC, jitter buffer, NACK schedule, report statistics, clock skew and
  // delay-based estimate (rtp_media/receive_stream.h).
  rtp_media::ReceiveStream video_;
  fec::Decoder fec_decoder_;
  rtp::H264Depacketizer depacketizer_;
  std::unique_ptr<Sink> sink_;
  std::unique_ptr<RecoveredPackets> recovered_;  // what one datagram's FEC rebuilt
  std::vector<std::unique_ptr<uint8_t[]>> frame_buffers_;
  size_t frame_buffer_bytes_ = 0;  // each one's room: the described stream's I420 frame
  std::vector<bool> frame_buffer_lent_;
  uint64_t next_feedback_ns_ = 0;
  bool keyframe_wanted_ = false;      // the main loop asked for a PLI
  bool lost_since_delivery_ = false;  // an access unit lost since the last delivered
  bool peer_described_ = false;
  StreamDescription peer_description_{};
  uint32_t described_by_ssrc_ = 0;  // the sender SSRC whose report described the stream
  uint64_t described_ntp_ = 0;      // and that report's NTP time (the latest that described it)
  // The last NACK-bearing compound, plain, sent once more at nack_repeat_due_ns_ on a lossy
  // path (the loss of the reports' fraction lost, smoothed).
  std::vector<uint8_t> nack_repeat_;
  size_t nack_repeat_size_ = 0;
  uint64_t nack_repeat_due_ns_ = UINT64_MAX;
  double receive_loss_ = 0;
  std::unique_ptr<AudioReceiver> audio_receiver_;
  uint64_t audio_refused_ = 0;  // audio packets with no ring or no description
};

}  // namespace syncd::relay
