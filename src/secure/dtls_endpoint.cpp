#include "secure/dtls_endpoint.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/srtp.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>

namespace syncd::secure {

// The static trampolines OpenSSL calls; friends of DtlsEndpoint.
struct DtlsCallbacks {
  static DtlsEndpoint* from_bio(BIO* bio) { return static_cast<DtlsEndpoint*>(BIO_get_data(bio)); }
  static DtlsEndpoint* from_ssl(SSL* ssl) {
    return static_cast<DtlsEndpoint*>(SSL_get_app_data(ssl));
  }

  // Outgoing: every BIO_write from the DTLS record layer is exactly one datagram (it flushes each
  // datagram it builds), so the sink gets datagram boundaries that BIO_s_mem would lose.
  static int bio_write(BIO* bio, const char* data, int size) {
    DtlsEndpoint* self = from_bio(bio);
    if (!self || size < 0) return -1;
    auto bytes =
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data), static_cast<size_t>(size));
    ++self->counters_.datagrams_out;
    self->counters_.bytes_out += bytes.size();
    self->counters_.largest_datagram_out =
        std::max<uint64_t>(self->counters_.largest_datagram_out, bytes.size());
    if (self->state_ == DtlsState::kListening) ++self->counters_.hello_verify_requests_sent;
    if (self->sink_) self->sink_(bytes);
    return size;
  }

  // Incoming: one read returns the datagram being fed, whole. In peek mode (which DTLSv1_listen
  // turns on) it stays readable, so a ClientHello whose cookie verified is read again by the
  // handshake: BIO_s_mem in OpenSSL 3.0 ignores peek mode and would lose it.
  static int bio_read(BIO* bio, char* out, int capacity) {
    DtlsEndpoint* self = from_bio(bio);
    BIO_clear_retry_flags(bio);
    if (!self || self->input_consumed_) {
      BIO_set_retry_read(bio);
      return -1;
    }
    size_t n = std::min(self->input_.size(), static_cast<size_t>(std::max(capacity, 0)));
    std::memcpy(out, self->input_.data(), n);
    if (!self->peek_mode_) self->input_consumed_ = true;
    return static_cast<int>(n);
  }

  static long bio_ctrl(BIO* bio, int command, long num, void*) {
    DtlsEndpoint* self = from_bio(bio);
    switch (command) {
      case BIO_CTRL_FLUSH:
        return 1;
      case BIO_CTRL_PENDING:
        return self && !self->input_consumed_ ? static_cast<long>(self->input_.size()) : 0;
      case BIO_CTRL_WPENDING:
        return 0;
      case BIO_CTRL_DGRAM_SET_PEEK_MODE:
        if (self) self->peek_mode_ = num != 0;
        return 1;
      case BIO_CTRL_DGRAM_GET_MTU_OVERHEAD:
        // The configured MTU is the DTLS datagram's own size limit (no IP/UDP headers to take
        // off), so DTLS_set_link_mtu(mtu) yields records of at most mtu bytes.
        return 0;
      default:
        return 0;
    }
  }

  static int bio_create(BIO* bio) {
    BIO_set_init(bio, 1);
    return 1;
  }

  static int bio_destroy(BIO* bio) {
    BIO_set_data(bio, nullptr);
    return 1;
  }

  static BIO_METHOD* bio_method() {
    static BIO_METHOD* method = [] {
      BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "syncd dgram mem");
      BIO_meth_set_write(m, bio_write);
      BIO_meth_set_read(m, bio_read);
      BIO_meth_set_ctrl(m, bio_ctrl);
      BIO_meth_set_create(m, bio_create);
      BIO_meth_set_destroy(m, bio_destroy);
      return m;
    }();
    return method;
  }

  // RFC 6347 4.2.1: the cookie is HMAC(secret, the client's address), so the server keeps no
  // state for a client until it proves it receives at that address.
  static void cookie_for(DtlsEndpoint* self, uint8_t* out, unsigned int* size) {
    const auto& secret = self->context_.cookie_secret();
    HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), self->peer_address_.data(),
         self->peer_address_size_, out, size);
  }

  static int generate_cookie(SSL* ssl, unsigned char* cookie, unsigned int* size) {
    DtlsEndpoint* self = from_ssl(ssl);
    if (!self) return 0;
    cookie_for(self, cookie, size);
    return 1;
  }

  static int verify_cookie(SSL* ssl, const unsigned char* cookie, unsigned int size) {
    DtlsEndpoint* self = from_ssl(ssl);
    if (!self) return 0;
    uint8_t expected[EVP_MAX_MD_SIZE];
    unsigned int expected_size = 0;
    cookie_for(self, expected, &expected_size);
    return size == expected_size && CRYPTO_memcmp(cookie, expected, size) == 0;
  }

  // The peer's certificate is self-signed, so chain verification fails by design; it is accepted
  // only for its fingerprint (RFC 5763 section 5: the fingerprint is the authentication).
  static int verify_certificate(int, X509_STORE_CTX* store) {
    SSL* ssl =
        static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
    DtlsEndpoint* self = ssl ? from_ssl(ssl) : nullptr;
    X509* cert = X509_STORE_CTX_get_current_cert(store);
    if (!self || !cert) return 0;
    // A self-signed leaf is the whole chain; anything above it has no business here.
    if (X509_STORE_CTX_get_error_depth(store) != 0) return 0;
    Fingerprint seen = fingerprint_of(cert);
    if (!self->fingerprint_checked_) {
      self->fingerprint_checked_ = true;
      self->seen_ = seen;
      if (seen != self->expected_) ++self->counters_.fingerprint_mismatches;
    }
    if (seen != self->expected_) return 0;
    X509_STORE_CTX_set_error(store, X509_V_OK);
    return 1;
  }

  // RFC 6347 4.2.4.1: start at the configured timeout, double each time, at most 60 s.
  // A fatal alert from the peer (RFC 5246 7.2: level 2) is kept, so a failed handshake says
  // the peer refused it, and why (a warning, such as close_notify, is not a refusal).
  static void info(const SSL* ssl, int where, int value) {
    if (!(where & SSL_CB_READ_ALERT) || (value >> 8) != SSL3_AL_FATAL) return;
    if (DtlsEndpoint* self = from_ssl(const_cast<SSL*>(ssl))) self->peer_alert_ = uint8_t(value);
  }

  static unsigned int next_timer_us(SSL* ssl, unsigned int timer_us) {
    DtlsEndpoint* self = from_ssl(ssl);
    unsigned int initial = self ? self->context_.config().initial_retransmit_ms * 1000u : 1000000u;
    if (timer_us == 0) return initial;
    return std::min(timer_us * 2u, 60u * 1000000u);
  }
};

const char* to_string(DtlsFailure failure) {
  switch (failure) {
    case DtlsFailure::kNone:
      return "none";
    case DtlsFailure::kFingerprintMismatch:
      return "peer certificate fingerprint mismatch";
    case DtlsFailure::kNoPeerCertificate:
      return "peer sent no certificate";
    case DtlsFailure::kNoSrtpProfile:
      return "no SRTP_AEAD_AES_128_GCM profile negotiated";
    case DtlsFailure::kExportFailed:
      return "keying material export failed";
    case DtlsFailure::kHandshakeFailed:
      return "handshake failed";
    case DtlsFailure::kTimedOut:
      return "handshake timed out";
    case DtlsFailure::kPeerAlert:
      return "the peer refused the handshake";
  }
  return "?";
}

bool is_identity_failure(DtlsFailure failure) {
  return failure == DtlsFailure::kFingerprintMismatch ||
         failure == DtlsFailure::kNoPeerCertificate || failure == DtlsFailure::kNoSrtpProfile ||
         failure == DtlsFailure::kPeerAlert;
}

const char* alert_name(uint8_t description) {
  return SSL_alert_desc_string_long(description);
}

uint32_t epoch_id_from_exported(std::span<const uint8_t, 4> exported) {
  return uint32_t(exported[0]) << 24 | uint32_t(exported[1]) << 16 | uint32_t(exported[2]) << 8 |
         exported[3];
}

const char* srtp_profile_name(SrtpProfile profile) {
  switch (profile) {
    case SrtpProfile::kAeadAes128Gcm:
      return "aead_aes_128_gcm";
    case SrtpProfile::kAes128CmSha1_80:
      return "aes128_cm_sha1_80";
  }
  return "?";
}

SrtpKeyMaterial split_srtp_key_material(std::span<const uint8_t, 56> exported) {
  // RFC 5764 4.2: client_write_SRTP_master_key[16] | server_write_SRTP_master_key[16] |
  // client_write_SRTP_master_salt[12] | server_write_SRTP_master_salt[12] (RFC 7714 section 12:
  // 16-byte key, 12-byte salt for AEAD_AES_128_GCM).
  SrtpKeyMaterial material;
  const uint8_t* p = exported.data();
  std::memcpy(material.client_write.key.data(), p, 16);
  std::memcpy(material.server_write.key.data(), p + 16, 16);
  std::memcpy(material.client_write.salt.data(), p + 32, 12);
  std::memcpy(material.server_write.salt.data(), p + 44, 12);
  return material;
}

namespace {
const char* srtp_profile_list(DtlsConfig::SrtpProfiles profiles) {
  switch (profiles) {
    case DtlsConfig::SrtpProfiles::kGcmOrCm:
      return "SRTP_AEAD_AES_128_GCM:SRTP_AES128_CM_SHA1_80";
    case DtlsConfig::SrtpProfiles::kCmOnly:
      return "SRTP_AES128_CM_SHA1_80";
    case DtlsConfig::SrtpProfiles::kGcm:
      break;
  }
  return "SRTP_AEAD_AES_128_GCM";
}
}  // namespace

DtlsContext::DtlsContext(const Identity& identity, DtlsConfig config) : config_(config) {
  rotate_cookie_secret();
  SSL_CTX* ctx = SSL_CTX_new(DTLS_method());
  if (!ctx) return;
  bool ok = SSL_CTX_set_min_proto_version(ctx, DTLS1_2_VERSION) == 1 &&
            SSL_CTX_set_max_proto_version(ctx, DTLS1_2_VERSION) == 1 &&
            // ECDSA certificates, AEAD ciphers, ephemeral ECDH: forward secrecy per epoch.
            SSL_CTX_set_cipher_list(ctx,
                                    "ECDHE-ECDSA-AES128-GCM-SHA256:"
                                    "ECDHE-ECDSA-CHACHA20-POLY1305") == 1 &&
            SSL_CTX_set1_groups_list(ctx, "X25519:P-256") == 1 &&
            SSL_CTX_use_certificate(ctx, identity.certificate.get()) == 1 &&
            SSL_CTX_use_PrivateKey(ctx, identity.key.get()) == 1 &&
            SSL_CTX_check_private_key(ctx) == 1 &&
            // RFC 5764 4.1.2: offer (client) and accept (server) RFC 7714's AES-128-GCM, and
            // for WebRTC peers without it RFC 3711's AES-CM with an 80-bit HMAC-SHA1 tag; a
            // server takes the first of ours the client offers. (This call returns 0 on success.)
            SSL_CTX_set_tlsext_use_srtp(ctx, srtp_profile_list(config.srtp_profiles)) == 0;
  if (!ok) {
    SSL_CTX_free(ctx);
    return;
  }
  // Both sides present certificates (the server asks for the client's).
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                     DtlsCallbacks::verify_certificate);
  SSL_CTX_set_cookie_generate_cb(ctx, DtlsCallbacks::generate_cookie);
  SSL_CTX_set_cookie_verify_cb(ctx, DtlsCallbacks::verify_cookie);
  SSL_CTX_set_info_callback(ctx, DtlsCallbacks::info);
  // Every re-key is a full handshake with fresh ECDHE: no resumption, no renegotiation.
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_QUERY_MTU |
                               SSL_OP_COOKIE_EXCHANGE);
  ctx_ = ctx;
}

DtlsContext::~DtlsContext() {
  SSL_CTX_free(ctx_);
}

void DtlsContext::rotate_cookie_secret() {
  RAND_bytes(cookie_secret_.data(), cookie_secret_.size());
}

DtlsEndpoint::DtlsEndpoint(DtlsContext& context, DtlsRole role, const Fingerprint& peer,
                           DatagramSink sink)
    : context_(context),
      role_(role),
      state_(role == DtlsRole::kServer ? DtlsState::kListening : DtlsState::kHandshaking),
      expected_(peer),
      sink_(std::move(sink)) {
  if (!context.ok() || !(ssl_ = SSL_new(context.ssl_ctx()))) {
    state_ = DtlsState::kFailed;
    failure_ = DtlsFailure::kHandshakeFailed;
    return;
  }
  SSL_set_app_data(ssl_, this);
  bio_ = BIO_new(DtlsCallbacks::bio_method());
  BIO_set_data(bio_, this);
  SSL_set_bio(ssl_, bio_, bio_);  // one reference, owned by ssl_ from here
  SSL_set_options(ssl_, SSL_OP_NO_QUERY_MTU);
  DTLS_set_link_mtu(ssl_, static_cast<long>(context.config().mtu));
  DTLS_set_timer_cb(ssl_, DtlsCallbacks::next_timer_us);
  if (role == DtlsRole::kServer)
    SSL_set_accept_state(ssl_);
  else
    SSL_set_connect_state(ssl_);
}

DtlsEndpoint::~DtlsEndpoint() {
  if (ssl_) SSL_free(ssl_);
}

void DtlsEndpoint::start(uint64_t now_ns) {
  if (role_ != DtlsRole::kClient || state_ != DtlsState::kHandshaking) return;
  drive(now_ns);
}

DtlsEvent DtlsEndpoint::fail(DtlsFailure failure) {
  state_ = DtlsState::kFailed;
  failure_ = failure;
  ERR_clear_error();
  return DtlsEvent::kFailed;
}

DtlsEvent DtlsEndpoint::finish_handshake() {
  X509* peer = SSL_get0_peer_certificate(ssl_);
  if (!peer) return fail(DtlsFailure::kNoPeerCertificate);
  // Checked again here, after the handshake, so no path through OpenSSL's verification logic
  // can complete without the fingerprint matching.
  seen_ = fingerprint_of(peer);
  if (seen_ != expected_) {
    ++counters_.fingerprint_mismatches;
    return fail(DtlsFailure::kFingerprintMismatch);
  }
  SRTP_PROTECTION_PROFILE* profile = SSL_get_selected_srtp_profile(ssl_);
  const bool gcm = profile && profile->id == SRTP_AEAD_AES_128_GCM;
  const bool cm = profile && profile->id == SRTP_AES128_CM_SHA1_80 &&
                  context_.config().srtp_profiles != DtlsConfig::SrtpProfiles::kGcm;
  if (!gcm && !cm) return fail(DtlsFailure::kNoSrtpProfile);
  static constexpr char kLabel[] = "EXTRACTOR-dtls_srtp";  // RFC 5764 section 4.2
  // GCM: 2 x (16 + 12) octets; AES-CM: 2 x (16 + 14).
  std::array<uint8_t, 60> exported{};
  const size_t length = gcm ? 56 : 60;
  if (SSL_export_keying_material(ssl_, exported.data(), length, kLabel, sizeof kLabel - 1, nullptr,
                                 0, 0) != 1)
    return fail(DtlsFailure::kExportFailed);
  if (gcm) {
    keys_ = split_srtp_key_material(std::span<const uint8_t, 56>(exported.data(), 56));
  } else {
    keys_ = SrtpKeyMaterial{};
    keys_.profile = SrtpProfile::kAes128CmSha1_80;
    const uint8_t* p = exported.data();
    std::memcpy(keys_.client_write_cm.data(), p, 16);
    std::memcpy(keys_.server_write_cm.data(), p + 16, 16);
    std::memcpy(keys_.client_write_cm.data() + 16, p + 32, 14);
    std::memcpy(keys_.server_write_cm.data() + 16, p + 46, 14);
  }
  OPENSSL_cleanse(exported.data(), exported.size());
  // The epoch identity: a second export under our label (RFC 5705 section 4), no context. It is
  // not secret (it goes on the wire as the MKI) and reveals nothing of the SRTP keys: the
  // exporter's outputs under different labels are independent (RFC 5705 section 1).
  std::array<uint8_t, 4> epoch_id{};
  if (SSL_export_keying_material(ssl_, epoch_id.data(), epoch_id.size(), kEpochIdExporterLabel,
                                 sizeof kEpochIdExporterLabel - 1, nullptr, 0, 0) != 1)
    return fail(DtlsFailure::kExportFailed);
  keys_.epoch_id = epoch_id_from_exported(epoch_id);
  state_ = DtlsState::kConnected;
  return DtlsEvent::kHandshakeComplete;
}

DtlsEvent DtlsEndpoint::drive(uint64_t) {
  int result = SSL_do_handshake(ssl_);
  if (result == 1) return finish_handshake();
  int error = SSL_get_error(ssl_, result);
  if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) return DtlsEvent::kNone;
  if (fingerprint_checked_ && seen_ != expected_) return fail(DtlsFailure::kFingerprintMismatch);
  if (peer_alert_ != 0) return fail(DtlsFailure::kPeerAlert);
  return fail(DtlsFailure::kHandshakeFailed);
}

DtlsEvent DtlsEndpoint::feed(std::span<const uint8_t> datagram,
                             std::span<const uint8_t> peer_address, uint64_t now_ns) {
  ++counters_.datagrams_in;
  if (datagram.size() > kMaxDatagram) {
    ++counters_.oversize_dropped;
    return DtlsEvent::kNone;
  }
  if (state_ == DtlsState::kFailed || state_ == DtlsState::kClosed) return DtlsEvent::kNone;
  peer_address_size_ = std::min(peer_address.size(), peer_address_.size());
  if (peer_address_size_)
    std::memcpy(peer_address_.data(), peer_address.data(), peer_address_size_);
  input_ = datagram;
  input_consumed_ = false;
  peek_mode_ = false;

  DtlsEvent event = DtlsEvent::kNone;
  if (state_ == DtlsState::kListening) {
    // DTLSv1_listen is stateless (RFC 6347 4.2.1): it answers a cookie-less or wrong-cookie
    // ClientHello with HelloVerifyRequest and drops anything else, keeping nothing; its BIO_ADDR
    // is left empty since the address is ours to track.
    uint64_t answered = counters_.hello_verify_requests_sent;
    BIO_ADDR* unused = BIO_ADDR_new();
    int result = DTLSv1_listen(ssl_, unused);
    BIO_ADDR_free(unused);
    if (result > 0) {
      state_ = DtlsState::kHandshaking;
      timeouts_without_progress_ = 0;
      event = drive(now_ns);  // reads the same ClientHello, left in the BIO by peek mode
    } else if (counters_.hello_verify_requests_sent != answered) {
      event = DtlsEvent::kHelloVerifySent;
    } else {
      ++counters_.listen_dropped;
    }
    ERR_clear_error();
  } else if (state_ == DtlsState::kHandshaking) {
    timeouts_without_progress_ = 0;
    event = drive(now_ns);
  } else {  // kConnected: retransmitted final flights (answered inside), alerts, close_notify
    uint8_t scratch[kMaxDatagram];
    int result = SSL_read(ssl_, scratch, sizeof scratch);
    if (result > 0) {
      event = DtlsEvent::kApplicationData;
    } else {
      int error = SSL_get_error(ssl_, result);
      if (error == SSL_ERROR_ZERO_RETURN) {
        state_ = DtlsState::kClosed;
        event = DtlsEvent::kClosed;
      } else if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) {
        event = fail(peer_alert_ != 0 ? DtlsFailure::kPeerAlert : DtlsFailure::kHandshakeFailed);
      }
    }
    ERR_clear_error();
  }
  input_ = {};
  input_consumed_ = true;
  peek_mode_ = false;
  return event;
}

uint64_t DtlsEndpoint::next_timeout_ns(uint64_t now_ns) const {
  if (!ssl_ || state_ != DtlsState::kHandshaking) return std::numeric_limits<uint64_t>::max();
  timeval remaining{};
  if (DTLSv1_get_timeout(ssl_, &remaining) != 1) return std::numeric_limits<uint64_t>::max();
  return now_ns + static_cast<uint64_t>(remaining.tv_sec) * 1000000000ull +
         static_cast<uint64_t>(remaining.tv_usec) * 1000ull;
}

DtlsEvent DtlsEndpoint::handle_timeout(uint64_t) {
  if (!ssl_ || state_ != DtlsState::kHandshaking) return DtlsEvent::kNone;
  int result = DTLSv1_handle_timeout(ssl_);
  if (result > 0) {
    ++counters_.retransmit_timeouts;
    if (++timeouts_without_progress_ > context_.config().max_retransmits)
      return fail(DtlsFailure::kTimedOut);
  } else if (result < 0) {
    return fail(DtlsFailure::kTimedOut);
  }
  ERR_clear_error();
  return DtlsEvent::kNone;
}

void DtlsEndpoint::close() {
  if (ssl_ && state_ == DtlsState::kConnected) {
    SSL_shutdown(ssl_);
    state_ = DtlsState::kClosed;
  }
  ERR_clear_error();
}

DtlsRecordKind classify_dtls_datagram(std::span<const uint8_t> datagram) {
  if (datagram.empty() || datagram[0] < 20 || datagram[0] > 63) return DtlsRecordKind::kNotDtls;
  // RFC 6347 4.1: type(1) version(2) epoch(2) sequence_number(6) length(2), then the fragment;
  // a handshake fragment starts with msg_type (RFC 6347 4.2.2).
  constexpr size_t kRecordHeader = 13;
  if (datagram.size() < kRecordHeader) return DtlsRecordKind::kMalformed;
  constexpr uint8_t kHandshake = 22;
  constexpr uint8_t kClientHello = 1;
  bool epoch_zero = datagram[3] == 0 && datagram[4] == 0;
  if (datagram[0] == kHandshake && epoch_zero && datagram.size() > kRecordHeader &&
      datagram[kRecordHeader] == kClientHello)
    return DtlsRecordKind::kClientHello;
  return DtlsRecordKind::kOther;
}

}  // namespace syncd::secure
