// One browser of a WHEP egress (or the SFU of a WHIP push) on the egress's transport thread
// (whep_transport.h): its ICE (lite, or controlling for WHIP), its DTLS endpoint and SRTP
// contexts, its video send stream (rtp_media::SendStream: clock, history that NACKs are served
// from, sender-report counts) and audio, the RTCP it reads (RR, NACK, PLI) and its loss-based
// rate estimate.
//
// Thread: the egress's transport thread only; its WhepSessionStats are read anywhere.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "congestion/loss_based_estimator.h"
#include "rtp/h264_packetizer.h"
#include "rtp/rtcp.h"
#include "rtp_media/send_stream.h"
#include "secure/dtls_endpoint.h"
#include "secure/srtp_aead.h"
#include "secure/webrtc_srtp.h"
#include "transport/packet_store.h"
#include "whep/whep_transport.h"

namespace syncd::whep {

class WhepTransport::Session final : public rtp::RtcpSink {
 public:
  Session(WhepTransport& owner, std::unique_ptr<WhepSessionSetup> setup, uint64_t now_ns);

  // Whether a STUN transaction id is one of this session's checks (its first 8 bytes).
  bool owns_check(const std::array<uint8_t, 12>& transaction_id) const;
  const std::string& remote_password() const { return setup_->remote_password; }

  // A success response to one of our checks, from `from` (WHIP: we control ICE). The first pair
  // that answers is nominated (every check carried USE-CANDIDATE) and becomes the session's.
  void on_check_answered(const sockaddr_storage& from, uint64_t now_ns);

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
  void on_consent(const sockaddr_storage& from, bool nominated, uint64_t now_ns);

  // DTLS from the session's address. Returns the session's end when it ended here.
  WhepEnd on_dtls(std::span<const uint8_t> datagram, uint64_t now_ns);

  // SRTCP from the session's address (RTP from a receive-only browser is not expected).
  void on_rtcp(std::span<uint8_t> datagram, uint64_t now_ns);

  // One access unit for this session; returns whether it went out whole.
  bool send_frame(std::span<const uint8_t> access_unit, bool idr, uint64_t accept_ns,
                  uint64_t now_ns);

  // One 20 ms Opus frame, as one RTP packet (RFC 7587 section 4.2), when this session took audio.
  void send_audio(const EncodedAudio& frame);

  // Timers: DTLS retransmission, the sender report, consent. Returns the session's end when it
  // ended here.
  WhepEnd on_tick(uint64_t now_ns);

  void close(WhepEnd why);

  // ---- rtp::RtcpSink ----
  void on_receiver_report(const rtp::ReceiverReport& rr) override;
  void on_nack(const rtp::Nack& nack) override;
  void on_pli(uint32_t, uint32_t media_ssrc) override;

 private:
  void enter_handshaking(uint64_t now_ns);

  // WHIP: checks to every candidate until one answers (RFC 8445 6.1.4, paced at kCheckIntervalNs,
  // a few candidates at most), then one to the chosen address every kConsentIntervalNs (RFC 7675).
  void send_checks(uint64_t now_ns);

  WhepEnd on_handshake_complete(uint64_t now_ns);

  bool drop(WhepDrop reason);

  void set_state(WhepState s);

  bool send_raw(std::span<const uint8_t> datagram);

  void send_rtcp(rtp::RtcpWriter& writer, uint8_t* buffer, size_t capacity);

  // One compound packet: the video's SR, and the audio's when it has a clock, both from the same
  // reading of the wall clock at now_ns (RFC 3550 6.4.1), so the browser can align the audio's
  // capture clock and the video's 90 kHz one (lip sync), and the CNAME both share.
  void send_sender_report(uint64_t now_ns);

  void send_goodbye();

  WhepTransport& owner_;
  std::unique_ptr<WhepSessionSetup> setup_;
  WhepSessionStats& stats_;
  secure::DtlsEndpoint dtls_;
  secure::WebRtcSrtp srtp_;  // both directions, under the profile the handshake chose
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

}  // namespace syncd::whep
