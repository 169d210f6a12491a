// Random identifiers of the WHEP and WHIP sessions (whep_service.cpp, whip_push.cpp): ICE
// credentials, session ids and their hex form. OpenSSL's RAND_bytes: these are secrets (ICE
// passwords) or unguessable resource names (RFC 9725 section 4.2's Location).
// Any thread.
#pragma once

#include <openssl/rand.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace syncd::whep {

// RFC 8839 5.4: ice-char is ALPHA / DIGIT / "+" / "/".
inline std::string random_ice_chars(size_t n) {
  static constexpr char kChars[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out(n, 'A');
  uint8_t bytes[64];
  RAND_bytes(bytes, int(n));
  for (size_t i = 0; i < n; ++i) out[i] = kChars[bytes[i] % 64];
  return out;
}

inline uint64_t random_u64() {
  uint64_t v = 0;
  while (v == 0) RAND_bytes(reinterpret_cast<uint8_t*>(&v), sizeof v);
  return v;
}

inline std::string hex_id(uint64_t id) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(id));
  return text;
}

}  // namespace syncd::whep
