#include "webrtc/stun.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>

namespace syncd::webrtc {
namespace {

constexpr size_t kAttributeHeaderBytes = 4;
constexpr size_t kIntegrityBytes = 20;  // HMAC-SHA1
constexpr size_t kIntegrityAttributeBytes = kAttributeHeaderBytes + kIntegrityBytes;
constexpr size_t kFingerprintAttributeBytes = kAttributeHeaderBytes + 4;
// RFC 8489 section 14.3: USERNAME is at most 513 bytes.
constexpr size_t kMaxUsernameBytes = 513;

uint16_t load_be16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] << 8 | p[1]);
}
uint32_t load_be32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) << 24 | static_cast<uint32_t>(p[1]) << 16 |
         static_cast<uint32_t>(p[2]) << 8 | p[3];
}
uint64_t load_be64(const uint8_t* p) {
  return static_cast<uint64_t>(load_be32(p)) << 32 | load_be32(p + 4);
}
void store_be16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
void store_be32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}
size_t padded(size_t n) {
  return (n + 3) & ~size_t{3};
}

// zlib's CRC-32 is the ISO-HDLC one RFC 8489 section 14.7 names.
uint32_t stun_crc(const uint8_t* data, size_t size) {
  return static_cast<uint32_t>(crc32(0L, data, static_cast<uInt>(size))) ^ kStunFingerprintXor;
}

// Header checks shared by every parser: RFC 8489 section 5 and 6.
StunError check_header(std::span<const uint8_t> m) {
  if (m.empty()) return StunError::kTooShort;
  if (m[0] & 0xC0) return StunError::kNotStun;
  if (m.size() < kStunHeaderBytes) return StunError::kTooShort;
  if (load_be32(m.data() + 4) != kStunMagicCookie) return StunError::kNotStun;
  size_t length = load_be16(m.data() + 2);
  if (length % 4 != 0 || length + kStunHeaderBytes != m.size()) return StunError::kBadLength;
  return StunError::kNone;
}

struct Attribute {
  uint16_t type;
  size_t offset;  // of the attribute's type field within the message
  std::span<const uint8_t> value;
};

// Walks the attributes after a checked header; each must fit the message with its padding, and
// FINGERPRINT must be the last (RFC 8489 section 14.7). Calls visit(attribute) for each one,
// FINGERPRINT included, and stops at the first error visit returns.
template <typename Visit>
StunError walk_attributes(std::span<const uint8_t> m, Visit&& visit) {
  size_t pos = kStunHeaderBytes;
  while (pos < m.size()) {
    if (m.size() - pos < kAttributeHeaderBytes) return StunError::kMalformedAttribute;
    uint16_t type = load_be16(m.data() + pos);
    size_t length = load_be16(m.data() + pos + 2);
    if (padded(length) > m.size() - pos - kAttributeHeaderBytes)
      return StunError::kMalformedAttribute;
    if (type == kStunAttrFingerprint &&
        (length != 4 || pos + kFingerprintAttributeBytes != m.size()))
      return StunError::kMalformedAttribute;
    StunError e = visit(Attribute{type, pos, m.subspan(pos + kAttributeHeaderBytes, length)});
    if (e != StunError::kNone) return e;
    pos += kAttributeHeaderBytes + padded(length);
  }
  return StunError::kNone;
}

StunError check_fingerprint(std::span<const uint8_t> m, const Attribute& a) {
  return stun_crc(m.data(), a.offset) == load_be32(a.value.data()) ? StunError::kNone
                                                                   : StunError::kBadFingerprint;
}

// HMAC-SHA1 of `header` (the 20 header bytes, length already adjusted) then `rest`.
bool hmac_sha1(std::string_view key, std::span<const uint8_t> header, std::span<const uint8_t> rest,
               uint8_t (&out)[kIntegrityBytes]) {
  // Fetched once for the process (thread-safe static init); an EVP_MAC may be shared by threads.
  static EVP_MAC* const mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (!mac) return false;
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(mac);
  if (!ctx) return false;
  char digest[] = "SHA1";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                         OSSL_PARAM_construct_end()};
  // A null key means "keep the previous key" to OpenSSL; an empty password is a zero-length key.
  static const unsigned char kNoKey = 0;
  const auto* key_bytes =
      key.empty() ? &kNoKey : reinterpret_cast<const unsigned char*>(key.data());
  size_t written = 0;
  bool ok = EVP_MAC_init(ctx, key_bytes, key.size(), params) == 1 &&
            EVP_MAC_update(ctx, header.data(), header.size()) == 1 &&
            (rest.empty() || EVP_MAC_update(ctx, rest.data(), rest.size()) == 1) &&
            EVP_MAC_final(ctx, out, &written, sizeof out) == 1 && written == kIntegrityBytes;
  EVP_MAC_CTX_free(ctx);
  return ok;
}

void write_header(uint8_t* p, uint16_t type, const std::array<uint8_t, 12>& transaction_id) {
  store_be16(p, type);
  store_be16(p + 2, 0);
  store_be32(p + 4, kStunMagicCookie);
  std::memcpy(p + 8, transaction_id.data(), transaction_id.size());
}

// Appends FINGERPRINT at `pos` after setting the length field to cover it; returns the size.
size_t finish_with_fingerprint(uint8_t* p, size_t pos) {
  store_be16(p + 2, static_cast<uint16_t>(pos + kFingerprintAttributeBytes - kStunHeaderBytes));
  store_be16(p + pos, kStunAttrFingerprint);
  store_be16(p + pos + 2, 4);
  store_be32(p + pos + 4, stun_crc(p, pos));
  return pos + kFingerprintAttributeBytes;
}

}  // namespace

const char* to_string(StunError e) {
  switch (e) {
    case StunError::kNone:
      return "none";
    case StunError::kNotStun:
      return "not_stun";
    case StunError::kTooShort:
      return "too_short";
    case StunError::kBadLength:
      return "bad_length";
    case StunError::kNotBindingRequest:
      return "not_binding_request";
    case StunError::kMalformedAttribute:
      return "malformed_attribute";
    case StunError::kNoFingerprint:
      return "no_fingerprint";
    case StunError::kBadFingerprint:
      return "bad_fingerprint";
    case StunError::kNoUsername:
      return "no_username";
    case StunError::kNoIntegrity:
      return "no_integrity";
    case StunError::kBadIntegrity:
      return "bad_integrity";
  }
  return "unknown";
}

StunError parse_stun_binding_request(std::span<const uint8_t> m, StunBindingRequest& out) {
  if (StunError e = check_header(m); e != StunError::kNone) return e;
  if (load_be16(m.data()) != kStunBindingRequest) return StunError::kNotBindingRequest;

  StunBindingRequest request;
  std::memcpy(request.transaction_id.data(), m.data() + 8, request.transaction_id.size());
  bool has_username = false, has_integrity = false, has_fingerprint = false;
  bool has_priority = false, has_role = false;
  StunError e = walk_attributes(m, [&](const Attribute& a) {
    if (a.type == kStunAttrFingerprint) {
      has_fingerprint = true;
      return check_fingerprint(m, a);
    }
    // RFC 5389 section 15.4: whatever follows MESSAGE-INTEGRITY, but FINGERPRINT, is ignored.
    if (has_integrity) return StunError::kNone;
    switch (a.type) {
      case kStunAttrUsername:
        if (a.value.empty() || a.value.size() > kMaxUsernameBytes)
          return StunError::kMalformedAttribute;
        if (!has_username)
          request.username = {reinterpret_cast<const char*>(a.value.data()), a.value.size()};
        has_username = true;
        break;
      case kStunAttrMessageIntegrity:
        if (a.value.size() != kIntegrityBytes) return StunError::kMalformedAttribute;
        has_integrity = true;
        break;
      case kStunAttrPriority:
        if (a.value.size() != 4) return StunError::kMalformedAttribute;
        if (!has_priority) request.priority = load_be32(a.value.data());
        has_priority = true;
        break;
      case kStunAttrUseCandidate:
        if (!a.value.empty()) return StunError::kMalformedAttribute;
        request.use_candidate = true;
        break;
      case kStunAttrIceControlled:
      case kStunAttrIceControlling:
        if (a.value.size() != 8) return StunError::kMalformedAttribute;
        if (!has_role) {
          (a.type == kStunAttrIceControlling ? request.ice_controlling : request.ice_controlled) =
              true;
          request.tie_breaker = load_be64(a.value.data());
        }
        has_role = true;
        break;
      default:
        // Comprehension-optional (0x8000-0xFFFF) are skipped; a required one is reported.
        if (a.type < 0x8000 && request.unknown_required_attribute == 0)
          request.unknown_required_attribute = a.type;
        break;
    }
    return StunError::kNone;
  });
  if (e != StunError::kNone) return e;
  if (!has_fingerprint) return StunError::kNoFingerprint;
  if (!has_username) return StunError::kNoUsername;
  if (!has_integrity) return StunError::kNoIntegrity;
  out = request;
  return StunError::kNone;
}

bool stun_integrity_ok(std::span<const uint8_t> m, std::string_view password) {
  if (check_header(m) != StunError::kNone) return false;
  const Attribute* found = nullptr;
  Attribute integrity{};
  StunError e = walk_attributes(m, [&](const Attribute& a) {
    if (!found && a.type == kStunAttrMessageIntegrity) {
      if (a.value.size() != kIntegrityBytes) return StunError::kMalformedAttribute;
      integrity = a;
      found = &integrity;
    }
    return StunError::kNone;
  });
  if (e != StunError::kNone || !found) return false;
  // The HMAC covers the header with its length field as if MESSAGE-INTEGRITY were the last
  // attribute (RFC 8489 section 14.5), then everything up to MESSAGE-INTEGRITY.
  uint8_t header[kStunHeaderBytes];
  std::memcpy(header, m.data(), kStunHeaderBytes);
  store_be16(header + 2,
             static_cast<uint16_t>(integrity.offset + kIntegrityAttributeBytes - kStunHeaderBytes));
  uint8_t expected[kIntegrityBytes];
  if (!hmac_sha1(password, header, m.subspan(kStunHeaderBytes, integrity.offset - kStunHeaderBytes),
                 expected))
    return false;
  return CRYPTO_memcmp(expected, integrity.value.data(), kIntegrityBytes) == 0;
}

namespace {

// Appends MESSAGE-INTEGRITY (RFC 8489 section 14.5: HMAC-SHA1 keyed with the password over the
// message so far, its length field counting the attribute) and then FINGERPRINT; the message's
// attributes end at pos. Returns the size, or 0 if the HMAC failed.
size_t finish_with_integrity(uint8_t* p, size_t pos, std::string_view password) {
  store_be16(p + 2, static_cast<uint16_t>(pos + kIntegrityAttributeBytes - kStunHeaderBytes));
  uint8_t mac[kIntegrityBytes];
  if (!hmac_sha1(password, {p, kStunHeaderBytes}, {p + kStunHeaderBytes, pos - kStunHeaderBytes},
                 mac))
    return 0;
  store_be16(p + pos, kStunAttrMessageIntegrity);
  store_be16(p + pos + 2, kIntegrityBytes);
  std::memcpy(p + pos + kAttributeHeaderBytes, mac, kIntegrityBytes);
  return finish_with_fingerprint(p, pos + kIntegrityAttributeBytes);
}

}  // namespace

size_t write_stun_binding_success(const std::array<uint8_t, 12>& transaction_id,
                                  const StunAddress& mapped, std::string_view password,
                                  std::span<uint8_t> out) {
  const size_t address_bytes = mapped.ipv6 ? 16 : 4;
  const size_t size = kStunHeaderBytes + kAttributeHeaderBytes + 4 + address_bytes +
                      kIntegrityAttributeBytes + kFingerprintAttributeBytes;
  if (out.size() < size) return 0;
  uint8_t* p = out.data();
  write_header(p, kStunBindingSuccess, transaction_id);

  // XOR-MAPPED-ADDRESS (RFC 8489 section 14.2): port XOR the cookie's top 16 bits, address XOR
  // the cookie (IPv4) or the cookie then the transaction id (IPv6).
  size_t pos = kStunHeaderBytes;
  store_be16(p + pos, kStunAttrXorMappedAddress);
  store_be16(p + pos + 2, static_cast<uint16_t>(4 + address_bytes));
  p[pos + 4] = 0;
  p[pos + 5] = mapped.ipv6 ? 0x02 : 0x01;
  store_be16(p + pos + 6, static_cast<uint16_t>(mapped.port ^ (kStunMagicCookie >> 16)));
  for (size_t i = 0; i < address_bytes; ++i) p[pos + 8 + i] = mapped.ip[i] ^ p[4 + i];
  pos += kAttributeHeaderBytes + 4 + address_bytes;

  return finish_with_integrity(p, pos, password);
}

size_t write_stun_binding_error(const std::array<uint8_t, 12>& transaction_id, uint16_t code,
                                std::string_view reason, std::span<uint8_t> out) {
  if (code < 300 || code > 699) return 0;
  constexpr size_t kFixed =
      kStunHeaderBytes + kAttributeHeaderBytes + 4 + kFingerprintAttributeBytes;
  size_t reason_bytes = std::min(reason.size(), kMaxStunResponse - kFixed);
  // Never cut a UTF-8 character in two (RFC 8489 section 14.8: the reason is UTF-8).
  while (reason_bytes > 0 && reason_bytes < reason.size() &&
         (static_cast<uint8_t>(reason[reason_bytes]) & 0xC0) == 0x80)
    --reason_bytes;
  const size_t size = kFixed + padded(reason_bytes);
  if (out.size() < size) return 0;
  uint8_t* p = out.data();
  write_header(p, kStunBindingError, transaction_id);
  size_t pos = kStunHeaderBytes;
  store_be16(p + pos, kStunAttrErrorCode);
  store_be16(p + pos + 2, static_cast<uint16_t>(4 + reason_bytes));
  p[pos + 4] = 0;
  p[pos + 5] = 0;
  p[pos + 6] = static_cast<uint8_t>(code / 100);
  p[pos + 7] = static_cast<uint8_t>(code % 100);
  if (reason_bytes) std::memcpy(p + pos + 8, reason.data(), reason_bytes);
  std::memset(p + pos + 8 + reason_bytes, 0, padded(reason_bytes) - reason_bytes);
  pos += kAttributeHeaderBytes + 4 + padded(reason_bytes);
  return finish_with_fingerprint(p, pos);
}

size_t write_stun_binding_request(const StunBindingRequest& request, std::string_view password,
                                  std::span<uint8_t> out) {
  const size_t user = request.username.size();
  if (user == 0 || user > kMaxUsernameBytes) return 0;
  const bool role = request.ice_controlling || request.ice_controlled;
  const size_t size = kStunHeaderBytes + kAttributeHeaderBytes + padded(user) +
                      kAttributeHeaderBytes + 4 + (role ? kAttributeHeaderBytes + 8 : 0) +
                      (request.use_candidate ? kAttributeHeaderBytes : 0) +
                      kIntegrityAttributeBytes + kFingerprintAttributeBytes;
  if (out.size() < size) return 0;
  uint8_t* p = out.data();
  write_header(p, kStunBindingRequest, request.transaction_id);
  size_t pos = kStunHeaderBytes;
  store_be16(p + pos, kStunAttrUsername);
  store_be16(p + pos + 2, static_cast<uint16_t>(user));
  std::memcpy(p + pos + kAttributeHeaderBytes, request.username.data(), user);
  std::memset(p + pos + kAttributeHeaderBytes + user, 0, padded(user) - user);
  pos += kAttributeHeaderBytes + padded(user);
  store_be16(p + pos, kStunAttrPriority);
  store_be16(p + pos + 2, 4);
  store_be32(p + pos + 4, request.priority);
  pos += kAttributeHeaderBytes + 4;
  if (role) {
    store_be16(p + pos, request.ice_controlling ? kStunAttrIceControlling : kStunAttrIceControlled);
    store_be16(p + pos + 2, 8);
    store_be32(p + pos + 4, static_cast<uint32_t>(request.tie_breaker >> 32));
    store_be32(p + pos + 8, static_cast<uint32_t>(request.tie_breaker));
    pos += kAttributeHeaderBytes + 8;
  }
  if (request.use_candidate) {
    store_be16(p + pos, kStunAttrUseCandidate);
    store_be16(p + pos + 2, 0);
    pos += kAttributeHeaderBytes;
  }
  return finish_with_integrity(p, pos, password);
}

StunError parse_stun_binding_response(std::span<const uint8_t> m, StunBindingResponse& out) {
  if (StunError e = check_header(m); e != StunError::kNone) return e;
  uint16_t type = load_be16(m.data());
  if (type != kStunBindingSuccess && type != kStunBindingError)
    return StunError::kNotBindingRequest;
  StunBindingResponse response;
  response.success = type == kStunBindingSuccess;
  std::memcpy(response.transaction_id.data(), m.data() + 8, response.transaction_id.size());
  bool has_fingerprint = false;
  StunError e = walk_attributes(m, [&](const Attribute& a) {
    switch (a.type) {
      case kStunAttrFingerprint:
        has_fingerprint = true;
        return check_fingerprint(m, a);
      case kStunAttrMessageIntegrity:
        if (a.value.size() != kIntegrityBytes) return StunError::kMalformedAttribute;
        response.has_integrity = true;
        break;
      case kStunAttrXorMappedAddress: {
        if (a.value.size() < 4) return StunError::kMalformedAttribute;
        bool ipv6 = a.value[1] == 0x02;
        if ((a.value[1] != 0x01 && !ipv6) || a.value.size() != (ipv6 ? 20u : 8u))
          return StunError::kMalformedAttribute;
        if (response.has_mapped_address) break;
        response.has_mapped_address = true;
        response.mapped.ipv6 = ipv6;
        response.mapped.port =
            static_cast<uint16_t>(load_be16(a.value.data() + 2) ^ (kStunMagicCookie >> 16));
        for (size_t i = 0; i < (ipv6 ? 16u : 4u); ++i)
          response.mapped.ip[i] = a.value[4 + i] ^ m[4 + i];
        break;
      }
      case kStunAttrErrorCode: {
        if (a.value.size() < 4) return StunError::kMalformedAttribute;
        uint8_t hundreds = a.value[2] & 0x07, rest = a.value[3];
        if (hundreds < 3 || hundreds > 6 || rest > 99) return StunError::kMalformedAttribute;
        if (response.error_code) break;
        response.error_code = static_cast<uint16_t>(hundreds * 100 + rest);
        response.reason = {reinterpret_cast<const char*>(a.value.data() + 4), a.value.size() - 4};
        break;
      }
      default:
        break;
    }
    return StunError::kNone;
  });
  if (e != StunError::kNone) return e;
  if (!has_fingerprint) return StunError::kNoFingerprint;
  out = response;
  return StunError::kNone;
}

}  // namespace syncd::webrtc
