// The SRTP of one WebRTC peer (a WHEP viewer, a WHIP SFU): both directions under the profile its
// DTLS handshake chose (dtls_endpoint.h SrtpProfile), no MKI (RFC 5764 4.1.2: WebRTC never
// negotiates one).
//  - AEAD_AES_128_GCM: our own RFC 7714 framing on OpenSSL's EVP (srtp_aead.h), as the relay's;
//  - AES128_CM_SHA1_80: libsrtp2, the reference implementation, for peers whose DTLS has no GCM
//    profile (GStreamer's webrtcbin up to 1.22). No hand-written AES-CM/HMAC here: libsrtp2 is
//    made for it and this is not the relay's hot path.
//
// Thread: the transport thread that owns the session (not thread-safe).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "secure/dtls_endpoint.h"
#include "secure/srtp_aead.h"
#include "secure/srtp_session.h"

struct srtp_ctx_t_;

namespace syncd::secure {

class WebRtcSrtp {
 public:
  WebRtcSrtp();
  ~WebRtcSrtp();
  WebRtcSrtp(const WebRtcSrtp&) = delete;
  WebRtcSrtp& operator=(const WebRtcSrtp&) = delete;

  // Control plane: the keys of a completed handshake; `server`: we were the DTLS server (we
  // protect with the server's write key, RFC 5764 4.2). False when a context could not be made.
  bool init(const SrtpKeyMaterial& keys, bool server);
  bool ready() const { return ready_; }
  SrtpProfile profile() const { return profile_; }

  // In place; protect needs capacity >= size + the profile's trailer (at most
  // kRtpTrailerBytes / kRtcpTrailerBytes).
  SrtpStatus protect_rtp(uint8_t* packet, size_t& size, size_t capacity);
  SrtpStatus protect_rtcp(uint8_t* packet, size_t& size, size_t capacity);
  SrtpStatus unprotect_rtp(uint8_t* packet, size_t& size);
  SrtpStatus unprotect_rtcp(uint8_t* packet, size_t& size);

 private:
  bool ready_ = false;
  SrtpProfile profile_ = SrtpProfile::kAeadAes128Gcm;
  SrtpAeadContext gcm_send_, gcm_receive_;
  srtp_ctx_t_* cm_send_ = nullptr;
  srtp_ctx_t_* cm_receive_ = nullptr;
};

}  // namespace syncd::secure
