// The media side of a WHEP egress (docs/whep.md): browsers that POSTed an offer for one stream,
// each an ICE-lite, DTLS-SRTP peer on the egress's UDP socket. It is the
// transport::TransportHandler of the egress's relay thread (transport/transport_thread.h): the same
// thread model as the WAN relay, for the same reasons (paced sends and crypto never on the main
// loop), and the same hand-off of access units from the main loop (egress::EgressPublisher, which
// encodes a raw stream once for every viewer).
//
// Per datagram (RFC 7983 demultiplexing on the first byte):
//   STUN (0-3)     a Binding request naming one of our ufrags, checked with its password
//                  (MESSAGE-INTEGRITY) and FINGERPRINT, answered with a success response; the
//                  address that sent it becomes the session's (ICE-lite, RFC 8445 2.5: we never
//                  send checks; the browser nominates). Consent (RFC 7675): a session that has
//                  not been checked for consent_timeout_ns ends.
//   DTLS (20-63)   the session's DtlsEndpoint, server role (our answer says setup:passive); the
//                  browser's certificate must match the offer's a=fingerprint.
//   RTCP (128-191, RFC 5761 payload types 192-223)  SRTCP from the browser: PLI asks the
//                  encoder for an IDR, NACK resends from the session's history, RR gives the
//                  round trip and loss.
// Per access unit from the main loop: every connected session that has seen an IDR gets it as
// RTP (RFC 6184 packetization mode 1), protected with AEAD_AES_128_GCM without MKI (secure/
// srtp_aead.h); a session that has not is dropped the frame with its reason. Every frame offered
// to a session is sent or dropped by reason (WhepSessionStats).
// Audio (with an audio tap, for sessions whose offer took it): on every tick, each 20 ms Opus
// frame the egress's WhepAudioEncoder makes goes to every such session as one RTP packet (RFC
// 7587) on its own SSRC, in the same SRTP session (BUNDLE), with a sender report of its own on the
// same wall clock as the video's. No NACK or FEC for audio: Opus repairs loss (in-band FEC, PLC).
//
// Threads: constructed on the main loop, then every transport::TransportHandler method on the
// egress's relay thread. WhepSessionStats and WhepTransportCounters are read anywhere (relaxed
// atomics).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "secure/certificate.h"
#include "secure/dtls_endpoint.h"
#include "transport/transport_thread.h"
#include "whep/whep_audio.h"
#include "whep/whep_config.h"

namespace syncd::whep {

// Why a frame offered to a session did not go to it.
enum class WhepDrop : uint8_t {
  kNotConnected,      // no DTLS-SRTP keys yet (ICE or the handshake still under way)
  kAwaitingKeyframe,  // connected, but no IDR has come since: the browser could not decode it
  kPacketizeRefused,  // not an H.264 access unit the packetizer takes
  kSendFailed,        // the kernel refused one of its packets (the rest went)
  kCount,
};
const char* whep_drop_name(WhepDrop reason);

enum class WhepState : uint32_t { kWaitingForIce, kHandshaking, kConnected, kEnded };
const char* whep_state_name(WhepState state);

// Why a session ended.
enum class WhepEnd : uint32_t {
  kNone,
  kDeleted,         // DELETE of its resource
  kConsentExpired,  // no STUN consent check for consent_timeout_ns (the tab closed)
  kIceTimeout,      // never checked at all within ice_timeout_ns
  kDtlsFailed,      // the handshake failed (wrong certificate, no GCM profile, timeout)
  kDtlsClosed,      // the browser sent close_notify
  kStopped,         // syncd stopped
  kStreamClosed,    // the stream closed and did not open again within stream_gone_ns
};
const char* whep_end_name(WhepEnd end);

// One session's figures, shared by the main loop (which made it) and the relay thread.
struct WhepSessionStats {
  std::atomic<uint32_t> state{0};         // WhepState
  std::atomic<uint32_t> end{0};           // WhepEnd
  std::atomic<uint32_t> dtls_failure{0};  // secure::DtlsFailure, when end is kDtlsFailed
  std::atomic<uint32_t> srtp_profile{0};  // secure::SrtpProfile the handshake chose
  std::atomic<uint64_t> created_ns{0};
  std::atomic<uint64_t> connected_ns{0};    // DTLS complete
  std::atomic<uint64_t> first_frame_ns{0};  // the first access unit sent
  std::atomic<uint64_t> stun_requests{0};
  std::atomic<uint64_t> stun_refused{0};  // wrong integrity
  std::atomic<uint64_t> checks_sent{0};   // our own Binding requests (WHIP: controlling)
  std::atomic<uint64_t> checks_answered{0};
  std::atomic<uint64_t> frames_offered{0};
  std::atomic<uint64_t> frames_sent{0};
  std::array<std::atomic<uint64_t>, size_t(WhepDrop::kCount)> frames_dropped{};
  std::atomic<uint64_t> packets_sent{0};
  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> packets_send_failed{0};
  std::atomic<uint64_t> nacked_packets{0};
  std::atomic<uint64_t> packets_retransmitted{0};
  std::atomic<uint64_t> retransmit_unavailable{0};  // asked for, but gone from the history
  std::atomic<uint64_t> plis_received{0};
  std::atomic<uint64_t> rtcp_received{0};
  std::atomic<uint64_t> rtcp_refused{0};  // SRTCP that did not authenticate, or bad RTCP
  std::atomic<uint64_t> rtt_us{0};
  std::atomic<uint64_t> fraction_lost{0};   // of 256, from the browser's latest RR
  std::atomic<uint64_t> loss_based_bps{0};  // what its RRs' loss says its path carries
  // Audio (sessions that took it): 20 ms Opus frames offered = sent + dropped by reason (only
  // kNotConnected and kSendFailed apply).
  std::atomic<uint64_t> audio_frames_offered{0};
  std::atomic<uint64_t> audio_frames_sent{0};
  std::array<std::atomic<uint64_t>, size_t(WhepDrop::kCount)> audio_frames_dropped{};
  std::atomic<uint64_t> audio_bytes_sent{0};
  std::atomic<uint64_t> audio_fraction_lost{0};  // of 256, the browser's latest RR for the audio
};

// A new browser session (main loop -> relay thread).
struct WhepSessionSetup final : transport::HandlerCommand {
  uint64_t id = 0;
  std::string local_ufrag;                 // ours, >= 4 characters (RFC 8839 5.4)
  std::string local_password;              // ours, >= 22 characters
  std::string remote_ufrag;                // the browser's, from the offer
  secure::Fingerprint remote_fingerprint;  // the browser's certificate, from the offer
  uint8_t payload_type = 0;                // H.264's, from the offer
  uint32_t ssrc = 0;
  // WHIP (syncd offered, an SFU answered; docs/whep.md "WHIP"): we are the controlling ICE agent
  // and check the SFU's candidates ourselves (aggressive nomination: USE-CANDIDATE on every
  // check, the first pair that answers is the one), keep consent with a check every 5 s, and take
  // the DTLS role the answer gave us.
  bool ice_controlling = false;
  std::string remote_password;                      // the SFU's ice-pwd: our checks' key
  std::vector<sockaddr_storage> remote_candidates;  // the SFU's UDP candidates, best first
  secure::DtlsRole dtls_role = secure::DtlsRole::kServer;
  bool audio = false;              // the answer accepted the offer's Opus m-line
  uint8_t audio_payload_type = 0;  // Opus's, from the offer
  uint32_t audio_ssrc = 0;
  std::shared_ptr<WhepSessionStats> stats;
};

// Ends a session (main loop -> relay thread): a DELETE of its resource.
struct WhepSessionEnd final : transport::HandlerCommand {
  uint64_t id = 0;
};

// The egress's own figures (read anywhere).
struct WhepTransportCounters {
  std::atomic<uint64_t> sessions_started{0};
  std::atomic<uint64_t> sessions_ended{0};
  std::atomic<uint64_t> foreign_datagrams{0};  // from no session's address, and not STUN
  std::atomic<uint64_t> stun_malformed{0};     // not a well-formed Binding request or response
  std::atomic<uint64_t> stun_indications{0};   // Binding indications (keepalives), ignored
  std::atomic<uint64_t> stun_unknown_user{0};  // a ufrag no session has
  std::atomic<uint64_t> stun_unmatched{0};     // a response to no check of ours (or forged)
  std::atomic<uint64_t> keyframe_requests{0};  // asked of the encoder
  std::atomic<uint64_t> frames_in{0};          // access units from the main loop
  std::atomic<uint64_t> target_bps{0};         // the encoder's rate, the lowest viewer's estimate
  std::atomic<uint64_t> target_changes{0};     // told to the encoder
};

class WhepTransport final : public transport::TransportHandler {
 public:
  // identity: syncd's certificate (the answer's fingerprint); must outlive the transport.
  // audio_tap: two capture channels for the sessions that take audio; nullptr for none.
  WhepTransport(WhepTransportConfig config, const secure::Identity& identity,
                std::shared_ptr<audio::AudioTap> audio_tap = nullptr);
  ~WhepTransport() override;

  void on_start(transport::TransportThread& thread, uint64_t now_ns) override;
  void on_datagram(std::span<uint8_t> datagram, const sockaddr_storage& from,
                   uint64_t now_ns) override;
  void on_message(transport::ToTransport& message, uint64_t now_ns) override;
  void on_timer(uint64_t now_ns) override;
  void on_stop(uint64_t now_ns) override;

  const WhepTransportCounters& counters() const { return counters_; }
  // The egress's audio encoder (its counters are read anywhere), or nullptr without audio.
  const WhepAudioEncoder* audio() const { return audio_.get(); }
  // Sessions at once per egress.
  static constexpr size_t kMaxSessions = 16;
  // How often on_timer runs: audio frames out, DTLS retransmissions, sender reports, consent.
  // Half an audio frame, so a frame leaves at most 10 ms after the tap has it.
  static constexpr uint64_t kTickNs = 10'000'000;

 private:
  class Session;
  Session* find_by_address(const sockaddr_storage& from);
  void on_stun(std::span<uint8_t> datagram, const sockaddr_storage& from, uint64_t now_ns);
  void on_stun_response(std::span<uint8_t> datagram, const sockaddr_storage& from, uint64_t now_ns);
  void send_frame(transport::ToTransport& message, uint64_t now_ns);
  void end(Session& session, WhepEnd why);
  void request_keyframe(uint64_t now_ns);
  void send_audio();
  void follow_loss();

  WhepTransportConfig config_;
  secure::DtlsContext dtls_context_;
  transport::TransportThread* thread_ = nullptr;
  std::vector<std::unique_ptr<Session>> sessions_;
  uint64_t last_keyframe_request_ns_ = 0;
  bool keyframe_request_pending_ = false;
  // When the watched stream closed (0: open). Its sessions wait stream_gone_ns for it to open
  // again (a producer reconnecting) before they end and free their slots.
  uint64_t stream_closed_ns_ = 0;
  uint64_t target_bps_;  // the rate the encoder was last told (max_bps until a viewer's loss)
  WhepTransportCounters counters_;
  std::unique_ptr<WhepAudioEncoder> audio_;
};

}  // namespace syncd::whep
