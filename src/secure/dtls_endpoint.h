// DTLS 1.2 endpoint (RFC 6347) keyed for DTLS-SRTP (RFC 5764), driven by datagrams in memory.
//
// Datagrams in (feed), datagrams out (the sink, called synchronously from feed(), start() and
// handle_timeout()), events out (the return value of feed()). The caller owns the socket and the
// timer: it reads next_timeout_ns() after every call and calls handle_timeout() when it passes.
// The one clock inside is OpenSSL's own DTLS retransmission timer (gettimeofday), which the
// caller cannot replace in OpenSSL 3.0; next_timeout_ns() converts it to the caller's clock.
//
// Debian 12's OpenSSL 3.0 has no DTLS 1.3, so this is DTLS 1.2 only.
//
// Threads: any thread; not thread-safe; one endpoint per association, driven by the thread that
// owns the session (the relay thread). DtlsContext may be shared by endpoints on that thread.
#pragma once

#include <openssl/ssl.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "secure/certificate.h"
#include "secure/dtls_config.h"

namespace syncd::secure {

// One direction's SRTP master key and salt for SRTP_AEAD_AES_128_GCM (RFC 7714 section 12).
struct SrtpMasterKey {
  std::array<uint8_t, 16> key{};
  std::array<uint8_t, 12> salt{};
  bool operator==(const SrtpMasterKey&) const = default;
};

// The DTLS-SRTP protection profile a handshake chose (RFC 5764 4.1.2).
enum class SrtpProfile : uint8_t {
  kAeadAes128Gcm,    // SRTP_AEAD_AES_128_GCM (RFC 7714): the relay's, and browsers' first
  kAes128CmSha1_80,  // SRTP_AES128_CM_SHA1_80 (RFC 3711): WebRTC peers that have no GCM
};
const char* srtp_profile_name(SrtpProfile profile);

// An SRTP_AES128_CM_SHA1_80 master key and salt, key first (16 + 14 octets, RFC 3711 8.2), as
// libsrtp2 takes them.
using SrtpCmMasterKey = std::array<uint8_t, 30>;

// The RFC 5764 section 4.2 split of the exporter output: client_write_SRTP_master_key,
// server_write_SRTP_master_key, client_write_SRTP_master_salt, server_write_SRTP_master_salt.
struct SrtpKeyMaterial {
  SrtpProfile profile = SrtpProfile::kAeadAes128Gcm;
  // kAes128CmSha1_80 only (the GCM keys below are then unused).
  SrtpCmMasterKey client_write_cm{};
  SrtpCmMasterKey server_write_cm{};
  SrtpMasterKey client_write;  // the client protects with this; the server unprotects with it
  SrtpMasterKey server_write;  // the server protects with this; the client unprotects with it
  // The key epoch's identity, the SRTP MKI of every packet under these keys (docs/wan.md "Key
  // epochs"): 4 bytes from the same handshake's exporter under our own label, so both ends of
  // the handshake get the same value without counting anything.
  uint32_t epoch_id = 0;
};

// The RFC 5705 exporter label of the epoch identity. RFC 5705 section 4: labels beginning with
// "EXPERIMENTAL" are for private use without registration.
inline constexpr char kEpochIdExporterLabel[] = "EXPERIMENTAL-syncd-srtp-key-epoch";

// The 4 exported bytes as the epoch identity (big-endian, as the MKI carries it).
uint32_t epoch_id_from_exported(std::span<const uint8_t, 4> exported);

// Splits the 56 bytes of SSL_export_keying_material("EXTRACTOR-dtls_srtp") (RFC 5764 4.2).
SrtpKeyMaterial split_srtp_key_material(std::span<const uint8_t, 56> exported);

enum class DtlsRole : uint8_t { kClient, kServer };

enum class DtlsState : uint8_t {
  kListening,    // server: stateless cookie exchange, no association yet (RFC 6347 4.2.1)
  kHandshaking,  // ClientHello sent (client) or cookie verified (server)
  kConnected,    // keys available
  kFailed,       // fatal; see failure()
  kClosed,       // the peer sent close_notify
};

enum class DtlsFailure : uint8_t {
  kNone,
  kFingerprintMismatch,  // the peer's certificate is not the expected one
  kNoPeerCertificate,    // the peer sent none
  kNoSrtpProfile,        // use_srtp did not settle on SRTP_AEAD_AES_128_GCM
  kExportFailed,         // the exporter failed
  kHandshakeFailed,      // any other handshake error (a protocol error)
  kTimedOut,             // the retransmission budget ran out (RFC 6347 4.2.4.1)
  // The peer ended the handshake with a fatal alert (DtlsEndpoint::peer_alert()): e.g.
  // bad_certificate when our certificate is not the one it expects.
  kPeerAlert,
};
const char* to_string(DtlsFailure failure);
// Whether the failure says the two ends do not take each other's identity (a fingerprint, a
// certificate, the SRTP profile, or the peer's fatal alert): retrying will not help until an
// operator changes a command line. Not a lost flight, a timeout or an internal error.
bool is_identity_failure(DtlsFailure failure);
// An alert description's name (RFC 5246 7.2), e.g. "bad certificate".
const char* alert_name(uint8_t description);

// What feed() reports.
enum class DtlsEvent : uint8_t {
  kNone,               // consumed (or silently dropped, RFC 6347 4.1.2.7); nothing new
  kHelloVerifySent,    // server, listening: answered a ClientHello with HelloVerifyRequest
  kHandshakeComplete,  // keys() is now valid; reported once
  kApplicationData,    // ignored application data (syncd sends none over DTLS)
  kFailed,             // failure() says why; the endpoint is dead
  kClosed,             // close_notify from the peer
};

// Per-endpoint counters; the caller reads them at any time (same thread).
struct DtlsCounters {
  uint64_t datagrams_in = 0;
  uint64_t datagrams_out = 0;
  uint64_t bytes_out = 0;
  uint64_t largest_datagram_out = 0;
  uint64_t hello_verify_requests_sent = 0;  // server: ClientHellos answered statelessly
  uint64_t listen_dropped = 0;              // server: non-ClientHello records while listening
  uint64_t fingerprint_mismatches = 0;
  uint64_t retransmit_timeouts = 0;  // handle_timeout() calls that retransmitted
  uint64_t oversize_dropped = 0;     // fed datagrams larger than the input limit
};

// The shared parts: our identity and the cookie secret. Control plane; throws nothing. One per
// process or session; endpoints keep a pointer, so it must outlive them.
class DtlsContext {
 public:
  // Takes the key and certificate from `identity` by reference (they are up-referenced).
  explicit DtlsContext(const Identity& identity, DtlsConfig config = {});
  ~DtlsContext();
  DtlsContext(const DtlsContext&) = delete;
  DtlsContext& operator=(const DtlsContext&) = delete;

  // False if OpenSSL refused the configuration (then no endpoint works).
  bool ok() const { return ctx_ != nullptr; }
  const DtlsConfig& config() const { return config_; }
  SSL_CTX* ssl_ctx() const { return ctx_; }
  // The secret behind the stateless cookies: HMAC-SHA256(secret, peer address) (RFC 6347
  // 4.2.1). Rotating it invalidates cookies in flight: clients just get a new one.
  const std::array<uint8_t, 32>& cookie_secret() const { return cookie_secret_; }
  void rotate_cookie_secret();

 private:
  DtlsConfig config_;
  SSL_CTX* ctx_ = nullptr;
  std::array<uint8_t, 32> cookie_secret_{};
};

// One DTLS association. The sink receives each outgoing datagram (one DTLS flight may be several
// datagrams); the span is valid only during the call.
class DtlsEndpoint {
 public:
  using DatagramSink = std::function<void(std::span<const uint8_t> datagram)>;

  // `peer` is the fingerprint the peer's certificate must have (given out of band). A server
  // endpoint starts in kListening; a client endpoint waits for start().
  DtlsEndpoint(DtlsContext& context, DtlsRole role, const Fingerprint& peer, DatagramSink sink);
  ~DtlsEndpoint();
  DtlsEndpoint(const DtlsEndpoint&) = delete;
  DtlsEndpoint& operator=(const DtlsEndpoint&) = delete;

  // Client: sends the first ClientHello. now_ns: the caller's monotonic clock.
  void start(uint64_t now_ns);

  // One received datagram. `peer_address` is the sender's address as the caller sees it (e.g. the
  // bytes of its sockaddr, at most 32): a server binds its cookie to it, so a cookie earned from
  // one address does not open an association from another.
  DtlsEvent feed(std::span<const uint8_t> datagram, std::span<const uint8_t> peer_address,
                 uint64_t now_ns);

  // The next retransmission deadline on the caller's clock (UINT64_MAX when no timer runs).
  uint64_t next_timeout_ns(uint64_t now_ns) const;
  // Call when next_timeout_ns() has passed: retransmits the last flight (RFC 6347 4.2.4), or
  // fails the handshake after max_retransmits.
  DtlsEvent handle_timeout(uint64_t now_ns);

  // Sends close_notify (through the sink).
  void close();

  DtlsRole role() const { return role_; }
  DtlsState state() const { return state_; }
  DtlsFailure failure() const { return failure_; }
  // Valid once feed() has reported kHandshakeComplete.
  const SrtpKeyMaterial& keys() const { return keys_; }
  const Fingerprint& peer_fingerprint_seen() const { return seen_; }
  // Whether the peer's certificate was checked (peer_fingerprint_seen() is valid).
  bool peer_fingerprint_checked() const { return fingerprint_checked_; }
  // The description of the fatal alert the peer sent (RFC 5246 7.2), or 0 for none.
  uint8_t peer_alert() const { return peer_alert_; }
  const DtlsCounters& counters() const { return counters_; }

  // Largest datagram feed() accepts; larger ones are dropped and counted.
  static constexpr size_t kMaxDatagram = 2048;

 private:
  friend struct DtlsCallbacks;
  DtlsEvent drive(uint64_t now_ns);
  DtlsEvent finish_handshake();
  DtlsEvent fail(DtlsFailure failure);

  DtlsContext& context_;
  DtlsRole role_;
  DtlsState state_;
  DtlsFailure failure_ = DtlsFailure::kNone;
  Fingerprint expected_;
  Fingerprint seen_;
  bool fingerprint_checked_ = false;
  uint8_t peer_alert_ = 0;
  DatagramSink sink_;
  SSL* ssl_ = nullptr;
  BIO* bio_ = nullptr;  // one in-memory datagram BIO for both directions (owned by ssl_)
  SrtpKeyMaterial keys_;
  DtlsCounters counters_;
  uint32_t timeouts_without_progress_ = 0;
  // The datagram being fed, read by the BIO; and the sender's address, read by the cookie code.
  std::span<const uint8_t> input_;
  bool input_consumed_ = true;
  bool peek_mode_ = false;
  std::array<uint8_t, 32> peer_address_{};
  size_t peer_address_size_ = 0;
};

// RFC 7983 demultiplexing and routing of DTLS datagrams between a live and a pending association.
enum class DtlsRecordKind : uint8_t {
  kNotDtls,      // first byte outside 20..63 (RFC 7983 section 7)
  kMalformed,    // too short for a DTLS record header (RFC 6347 4.1: 13 bytes)
  kClientHello,  // handshake record, epoch 0, message type client_hello (1): a new association
  kOther,        // any other DTLS record: belongs to the association in progress
};
// Looks at the first record of a datagram only: 13 bytes of record header and the handshake
// message type. Pure, bounded, no allocation.
DtlsRecordKind classify_dtls_datagram(std::span<const uint8_t> datagram);

}  // namespace syncd::secure
