// A certificate's fingerprint, plain data (certificate.h makes and formats it).
//
// Any thread.
#pragma once

#include <array>
#include <cstdint>

namespace syncd::secure {

// SHA-256 of the DER certificate (RFC 8122 section 5: the fingerprint covers the DER form).
struct Fingerprint {
  std::array<uint8_t, 32> sha256{};
  bool operator==(const Fingerprint&) const = default;
};

}  // namespace syncd::secure
