// Random RTP identifiers: SSRCs, first sequence numbers and timestamp offsets (RFC 3550 5.1,
// 8.1), which must be unpredictable but are not secrets (keys come from DTLS, ICE passwords from
// OpenSSL). The kernel's randomness through std::random_device, one device per thread.
// Any thread.
#pragma once

#include <cstdint>
#include <random>

namespace syncd::core {

inline uint32_t random_u32() {
  static thread_local std::random_device device;
  return device();
}

}  // namespace syncd::core
