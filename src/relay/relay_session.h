// One WAN relay session on the relay thread (docs/wan.md): the DTLS/peer association (handshakes
// and their backoff, the key schedule, SRTP, the peer's address and liveness, RFC 7983
// demultiplexing) and one media end on it, the sender (client: relay_sender.h) or the receiver
// (server: relay_receiver.h), to which it is the RelayPath. It is the transport::TransportHandler
// the relay thread drives; the pure modules do the work (src/secure, src/rtp, src/fec, src/jitter,
// src/congestion), and these classes wire them to each other, to the socket and to the main loop.
//
// Thread: the relay thread, apart from stats(), which any thread may read.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "relay/relay_audio.h"
#include "relay/relay_path.h"
#include "relay/relay_receiver.h"
#include "relay/relay_sender.h"
#include "relay/relay_stats.h"
#include "secure/certificate.h"
#include "secure/dtls_associations.h"
#include "secure/dtls_endpoint.h"
#include "secure/key_schedule.h"
#include "secure/srtp_session.h"
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

class RelaySession final : public transport::TransportHandler, private RelayPath {
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
  // ---- RelayPath: what the sender or receiver sends through ----
  bool connected() const override { return state_ == State::kConnected; }
  size_t send_rtp(std::span<uint8_t> buffer, size_t size) override;
  void send_rtcp(std::span<uint8_t> buffer, size_t size) override;
  bool send_to_main(const transport::FromTransport& message) override;

  // ---- keys ----
  void feed_dtls(std::span<uint8_t> datagram, const sockaddr_storage& from, uint64_t now_ns);
  void on_handshake_complete(uint64_t now_ns);
  void on_handshake_failed(uint64_t now_ns);
  void run_key_schedule(uint64_t now_ns);
  // Tells the main loop a handshake failed (transport::FromTransport::kHandshakeFailed).
  void report_failure();
  // Sender: the handshake that waited for its backoff starts now.
  void start_pending_handshake(uint64_t now_ns);
  // Sender: starts a fresh handshake when the receiver has been silent too long.
  void check_liveness(uint64_t now_ns);

  // ---- datagrams ----
  bool from_peer(const sockaddr_storage& from) const;
  void send_plain(std::span<const uint8_t> datagram);  // DTLS
  // SRTP/SRTCP unprotect in place (size shrinks to the plain packet), counted when refused;
  // `epoch`: the key epoch it authenticated under.
  bool unprotect(std::span<uint8_t> packet, bool rtcp, size_t& size, uint32_t& epoch,
                 uint64_t now_ns);
  void receive_rtp(std::span<uint8_t> packet, uint64_t now_ns);
  void receive_rtcp(std::span<uint8_t> packet, uint64_t now_ns);
  void refuse_foreign(std::atomic<uint64_t>& reason);
  void schedule(uint64_t now_ns);
  void publish_stats();

  RelaySessionConfig config_;
  RelaySessionStats stats_;
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
  std::vector<uint16_t> nack_list_;  // a parsed compound's NACKed sequence numbers
  // One of the two, by role.
  std::unique_ptr<RelaySender> sender_;
  std::unique_ptr<RelayReceiver> receiver_;
};

}  // namespace syncd::relay
