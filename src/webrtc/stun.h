// The ICE-lite side of STUN for the WHEP endpoint: Binding requests from the browser parsed and
// checked, Binding success and error responses written.
//
// Implements RFC 8489 (RFC 5389) section 5 (message structure), 6 (class and method), 14.2
// (XOR-MAPPED-ADDRESS), 14.5 (MESSAGE-INTEGRITY with a short-term credential, 9.1), 14.7
// (FINGERPRINT), 14.8 (ERROR-CODE); RFC 8445 section 7.1.1 / 16.1 (PRIORITY, USE-CANDIDATE,
// ICE-CONTROLLED, ICE-CONTROLLING) for a lite agent answering checks (section 7.3); RFC 7983
// section 7 (demultiplexing STUN from DTLS and SRTP). The RFC 5769 test vectors are in the tests.
//
// Pure: bytes in, structs out; no sockets, clocks, logs, exceptions or per-call heap use of ours
// (OpenSSL's HMAC context is its own). Any thread; nothing here holds state.
//
// Message header (RFC 8489 section 5):
//  0                   1                   2                   3
//  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
// |0 0|     STUN Message Type     |         Message Length        |
// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
// |                         Magic Cookie                          |
// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
// |                     Transaction ID (96 bits)                  |
// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
// then attributes, each Type (16) | Length (16) | Value padded to 4 bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace syncd::webrtc {

inline constexpr size_t kStunHeaderBytes = 20;
inline constexpr uint32_t kStunMagicCookie = 0x2112A442;
// RFC 8489 section 14.7: the FINGERPRINT value is the CRC-32 XOR this.
inline constexpr uint32_t kStunFingerprintXor = 0x5354554e;

// Message types (RFC 8489 section 6, 18.2) and attribute types (section 18.3, RFC 8445 16.1).
inline constexpr uint16_t kStunBindingRequest = 0x0001;
inline constexpr uint16_t kStunBindingSuccess = 0x0101;
inline constexpr uint16_t kStunBindingError = 0x0111;
inline constexpr uint16_t kStunAttrUsername = 0x0006;
inline constexpr uint16_t kStunAttrMessageIntegrity = 0x0008;
inline constexpr uint16_t kStunAttrErrorCode = 0x0009;
inline constexpr uint16_t kStunAttrXorMappedAddress = 0x0020;
inline constexpr uint16_t kStunAttrPriority = 0x0024;
inline constexpr uint16_t kStunAttrUseCandidate = 0x0025;
inline constexpr uint16_t kStunAttrFingerprint = 0x8028;
inline constexpr uint16_t kStunAttrIceControlled = 0x8029;
inline constexpr uint16_t kStunAttrIceControlling = 0x802A;

enum class StunError : uint8_t {
  kNone,
  kNotStun,  // first 2 bits not 0, or bad magic cookie
  kTooShort,
  kBadLength,  // length field not a multiple of 4 or not the datagram's size less the header
  kNotBindingRequest,
  kMalformedAttribute,  // runs past the message, wrong size for its type, or FINGERPRINT not last
  kNoFingerprint,
  kBadFingerprint,
  kNoUsername,
  kNoIntegrity,
  kBadIntegrity,
};
// snake_case words ("bad_fingerprint"), for counters and logs. Any thread.
const char* to_string(StunError e);

// RFC 7983: a datagram whose first byte is 0..3 is STUN. Any thread.
inline bool looks_like_stun(std::span<const uint8_t> d) {
  return !d.empty() && d[0] < 4;
}

struct StunAddress {
  bool ipv6 = false;
  std::array<uint8_t, 16> ip{};  // IPv4 in ip[0..3], network order
  uint16_t port = 0;
  bool operator==(const StunAddress&) const = default;
};

struct StunBindingRequest {
  std::array<uint8_t, 12> transaction_id{};
  std::string_view username;  // points into the message: "<our ufrag>:<their ufrag>"
  uint32_t priority = 0;
  bool use_candidate = false;
  bool ice_controlling = false;
  bool ice_controlled = false;
  uint64_t tie_breaker = 0;
  // The first comprehension-required attribute (type < 0x8000) this parser does not know, 0 if
  // none. RFC 8489 section 7.3.1 says to answer such a request with 420 (Unknown Attribute); the
  // parse itself still succeeds so the caller can choose.
  uint16_t unknown_required_attribute = 0;
};

// Parses a Binding request (class request, method 0x001), checks its structure and FINGERPRINT
// (CRC-32 of the message up to the attribute, XOR 0x5354554e; required here: browsers always
// send it), requires USERNAME and MESSAGE-INTEGRITY to be present. Unknown comprehension-optional
// attributes are skipped; attributes after MESSAGE-INTEGRITY other than FINGERPRINT are ignored
// (RFC 5389 15.4). Of a repeated attribute only the first counts. Does not check the integrity
// (the caller finds the password by username). `out` is written only on success. Any thread.
StunError parse_stun_binding_request(std::span<const uint8_t> message, StunBindingRequest& out);

// RFC 5389 15.4 short-term credential: HMAC-SHA1 over the message up to MESSAGE-INTEGRITY with
// the length field adjusted to end after MESSAGE-INTEGRITY; key = password. OpenSSL HMAC.
// Constant-time compare (CRYPTO_memcmp). False also when the message is not well-formed STUN or
// has no MESSAGE-INTEGRITY. Any thread.
bool stun_integrity_ok(std::span<const uint8_t> message, std::string_view password);

// Writes a Binding success response: same transaction id, XOR-MAPPED-ADDRESS of `mapped`,
// MESSAGE-INTEGRITY keyed with `password`, FINGERPRINT. Returns the size, or 0 if `out` is too
// small (kMaxStunResponse is always enough). Any thread.
inline constexpr size_t kMaxStunResponse = 128;
size_t write_stun_binding_success(const std::array<uint8_t, 12>& transaction_id,
                                  const StunAddress& mapped, std::string_view password,
                                  std::span<uint8_t> out);

// A Binding error response (e.g. 400 Bad Request, 401 Unauthorized, 487 Role Conflict) with
// ERROR-CODE and FINGERPRINT (no integrity: RFC 5389 10.1.2 for 401). `code` must be 300..699
// (RFC 8489 section 14.8), else 0 is returned; `reason` is cut (at a UTF-8 character boundary)
// to what fits kMaxStunResponse. Returns the size, or 0 if `out` is too small. Any thread.
size_t write_stun_binding_error(const std::array<uint8_t, 12>& transaction_id, uint16_t code,
                                std::string_view reason, std::span<uint8_t> out);

// Writes a Binding request as a browser sends it (USERNAME, PRIORITY, ICE-CONTROLLING or
// ICE-CONTROLLED with the tie breaker, USE-CANDIDATE, MESSAGE-INTEGRITY keyed with `password`,
// FINGERPRINT), for tests, fuzzers and benchmarks: the lite agent never sends checks. The
// username must be 1..513 bytes. Returns the size, or 0 if `out` is too small or the username
// does not fit (kMaxStunRequest is always enough). Any thread.
inline constexpr size_t kMaxStunRequest = 640;
size_t write_stun_binding_request(const StunBindingRequest& request, std::string_view password,
                                  std::span<uint8_t> out);

// A Binding response as read back, for tests, fuzzers and tools: the lite agent itself never
// receives responses. Requires FINGERPRINT like the request parser.
struct StunBindingResponse {
  std::array<uint8_t, 12> transaction_id{};
  bool success = false;  // 0x0101; false: error response 0x0111
  bool has_mapped_address = false;
  StunAddress mapped;  // from XOR-MAPPED-ADDRESS, un-XORed
  bool has_integrity = false;
  uint16_t error_code = 0;  // 300..699 for an error response with ERROR-CODE
  std::string_view reason;  // points into the message
};
// kNotBindingRequest here means "not a Binding success or error response". Any thread.
StunError parse_stun_binding_response(std::span<const uint8_t> message, StunBindingResponse& out);

}  // namespace syncd::webrtc
