#include "secure/webrtc_srtp.h"

#include <srtp2/srtp.h>

#include <climits>

#include "secure/libsrtp.h"

namespace syncd::secure {
namespace {

// AES-CM with an 80-bit HMAC-SHA1 tag: 10 octets after an RTP packet, 4 (E and index) + 10
// after an RTCP one (RFC 3711 3.1, 3.4).
constexpr size_t kCmRtpTrailerBytes = 10;
constexpr size_t kCmRtcpTrailerBytes = 14;

SrtpStatus from_libsrtp(srtp_err_status_t status) {
  return srtp_status_from_libsrtp(status);
}

srtp_ctx_t_* make_cm_session(const SrtpCmMasterKey& key, bool outbound) {
  if (!ensure_libsrtp_initialized()) return nullptr;
  srtp_policy_t policy{};
  srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(&policy.rtp);
  srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(&policy.rtcp);
  policy.ssrc.type = outbound ? ssrc_any_outbound : ssrc_any_inbound;
  // libsrtp only reads the key (its API is not const-correct).
  policy.key = const_cast<unsigned char*>(key.data());
  policy.window_size = 1024;  // RFC 3711 3.3.2 allows 64 and more: reordering on a WAN
  // A NACKed packet goes again as the same protected bytes, never protected twice; this only
  // keeps libsrtp from refusing a sequence number it saw (a wrapped one, a restart).
  policy.allow_repeat_tx = 1;
  srtp_t session = nullptr;
  if (srtp_create(&session, &policy) != srtp_err_status_ok) return nullptr;
  return session;
}

}  // namespace

WebRtcSrtp::WebRtcSrtp() = default;

WebRtcSrtp::~WebRtcSrtp() {
  if (cm_send_) srtp_dealloc(cm_send_);
  if (cm_receive_) srtp_dealloc(cm_receive_);
}

bool WebRtcSrtp::init(const SrtpKeyMaterial& keys, bool server) {
  profile_ = keys.profile;
  if (keys.profile == SrtpProfile::kAeadAes128Gcm) {
    ready_ = gcm_send_.init(0, server ? keys.server_write : keys.client_write, true,
                            /*with_mki=*/false) &&
             gcm_receive_.init(0, server ? keys.client_write : keys.server_write, false,
                               /*with_mki=*/false);
    return ready_;
  }
  cm_send_ = make_cm_session(server ? keys.server_write_cm : keys.client_write_cm, true);
  cm_receive_ = make_cm_session(server ? keys.client_write_cm : keys.server_write_cm, false);
  ready_ = cm_send_ && cm_receive_;
  return ready_;
}

SrtpStatus WebRtcSrtp::protect_rtp(uint8_t* packet, size_t& size, size_t capacity) {
  if (!ready_) return SrtpStatus::kNoSendKey;
  if (profile_ == SrtpProfile::kAeadAes128Gcm) return gcm_send_.protect_rtp(packet, size, capacity);
  if (capacity < size + kCmRtpTrailerBytes || size > INT_MAX) return SrtpStatus::kNoRoom;
  int length = int(size);
  const SrtpStatus status = from_libsrtp(srtp_protect(cm_send_, packet, &length));
  if (status == SrtpStatus::kOk) size = size_t(length);
  return status;
}

SrtpStatus WebRtcSrtp::protect_rtcp(uint8_t* packet, size_t& size, size_t capacity) {
  if (!ready_) return SrtpStatus::kNoSendKey;
  if (profile_ == SrtpProfile::kAeadAes128Gcm)
    return gcm_send_.protect_rtcp(packet, size, capacity);
  if (capacity < size + kCmRtcpTrailerBytes || size > INT_MAX) return SrtpStatus::kNoRoom;
  int length = int(size);
  const SrtpStatus status = from_libsrtp(srtp_protect_rtcp(cm_send_, packet, &length));
  if (status == SrtpStatus::kOk) size = size_t(length);
  return status;
}

SrtpStatus WebRtcSrtp::unprotect_rtp(uint8_t* packet, size_t& size) {
  if (!ready_) return SrtpStatus::kNoSendKey;
  if (profile_ == SrtpProfile::kAeadAes128Gcm) return gcm_receive_.unprotect_rtp(packet, size);
  if (size > INT_MAX) return SrtpStatus::kMalformed;
  int length = int(size);
  const SrtpStatus status = from_libsrtp(srtp_unprotect(cm_receive_, packet, &length));
  if (status == SrtpStatus::kOk) size = size_t(length);
  return status;
}

SrtpStatus WebRtcSrtp::unprotect_rtcp(uint8_t* packet, size_t& size) {
  if (!ready_) return SrtpStatus::kNoSendKey;
  if (profile_ == SrtpProfile::kAeadAes128Gcm) return gcm_receive_.unprotect_rtcp(packet, size);
  if (size > INT_MAX) return SrtpStatus::kMalformed;
  int length = int(size);
  const SrtpStatus status = from_libsrtp(srtp_unprotect_rtcp(cm_receive_, packet, &length));
  if (status == SrtpStatus::kOk) size = size_t(length);
  return status;
}

}  // namespace syncd::secure
