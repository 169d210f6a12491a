// What syncd's own code needs of libsrtp2: its one-time initialization and its status codes as
// ours. The daemon uses libsrtp2 only for WebRTC peers without AES-GCM (webrtc_srtp.h,
// AES-CM-SHA1-80); the reference GCM sender and receiver on it (srtp_libsrtp.h) are the tests'
// and benchmarks' alone, in a library of their own.
//
// Threads: any thread.
#pragma once

#include "secure/srtp_session.h"

namespace syncd::secure {

// Initializes libsrtp2 once per process (every user of it calls this first). Any thread.
bool ensure_libsrtp_initialized();
// A libsrtp2 status (srtp_err_status_t, as an int: its header stays out of this one) as ours.
SrtpStatus srtp_status_from_libsrtp(int status);

}  // namespace syncd::secure
