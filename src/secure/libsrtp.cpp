#include "secure/libsrtp.h"

#include <srtp2/srtp.h>

namespace syncd::secure {

bool ensure_libsrtp_initialized() {
  // srtp_init() registers libsrtp's ciphers; a second call fails, so it is made once per
  // process, here, and never undone (other sessions may still be alive at exit).
  static const bool ok = srtp_init() == srtp_err_status_ok;
  return ok;
}

SrtpStatus srtp_status_from_libsrtp(int status) {
  switch (srtp_err_status_t(status)) {
    case srtp_err_status_ok:
      return SrtpStatus::kOk;
    case srtp_err_status_auth_fail:
    case srtp_err_status_cipher_fail:
      return SrtpStatus::kAuthFailed;  // GCM tag mismatch
    case srtp_err_status_replay_fail:
    case srtp_err_status_replay_old:
      return SrtpStatus::kReplayed;
    case srtp_err_status_bad_mki:
      return SrtpStatus::kUnknownEpoch;
    case srtp_err_status_bad_param:
    case srtp_err_status_parse_err:
      return SrtpStatus::kMalformed;
    default:
      return SrtpStatus::kFailed;
  }
}

}  // namespace syncd::secure
