// libFuzzer target for the STUN core (src/webrtc/stun.h): any datagram through the Binding
// request parser, the integrity check with a fixed password and the response parser; then, for
// the transaction id it carries, a success response (IPv4 and IPv6 mapped addresses taken from
// the input) and an error response are written and must parse back with the same fields, the
// success one passing the integrity check. Inputs ending in a FINGERPRINT attribute also go
// through a second time with the length field and CRC repaired, so mutations reach past it.
//
// Input: the whole input is the datagram, copied into its own exact-size allocation so a read
// past it trips ASan.
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string_view>

#include "fuzz_check.h"
#include "webrtc/stun.h"

namespace {

using namespace syncd::webrtc;

constexpr std::string_view kPassword = "VOkJxbRl1RmTxUk/WvJxBt";

bool inside(std::string_view part, std::span<const uint8_t> whole) {
  auto* p = reinterpret_cast<const uint8_t*>(part.data());
  return part.empty() || (p >= whole.data() && p + part.size() <= whole.data() + whole.size());
}

void check_written(std::span<const uint8_t> bytes, const std::array<uint8_t, 12>& id,
                   const StunAddress* mapped, uint16_t code) {
  FUZZ_CHECK(bytes.size() >= kStunHeaderBytes && bytes.size() <= kMaxStunResponse);
  FUZZ_CHECK(looks_like_stun(bytes));
  StunBindingResponse response;
  FUZZ_CHECK(parse_stun_binding_response(bytes, response) == StunError::kNone);
  FUZZ_CHECK(response.transaction_id == id);
  StunBindingRequest request;
  FUZZ_CHECK(parse_stun_binding_request(bytes, request) == StunError::kNotBindingRequest);
  if (mapped) {
    FUZZ_CHECK(response.success && response.has_integrity && response.has_mapped_address);
    FUZZ_CHECK(response.mapped == *mapped);
    FUZZ_CHECK(stun_integrity_ok(bytes, kPassword));
  } else {
    FUZZ_CHECK(!response.success && !response.has_integrity && response.error_code == code);
  }
}

void exercise(std::span<const uint8_t> datagram) {
  const size_t size = datagram.size();

  StunBindingRequest request;
  StunError e = parse_stun_binding_request(datagram, request);
  FUZZ_CHECK(to_string(e)[0] != '\0');
  bool integrity = stun_integrity_ok(datagram, kPassword);
  StunBindingResponse response;
  StunError response_error = parse_stun_binding_response(datagram, response);
  if (response_error == StunError::kNone) FUZZ_CHECK(inside(response.reason, datagram));
  if (e != StunError::kNone) {
    if (size < kStunHeaderBytes) FUZZ_CHECK(!integrity);
    return;
  }
  FUZZ_CHECK(looks_like_stun(datagram));
  FUZZ_CHECK(!request.username.empty() && inside(request.username, datagram));
  FUZZ_CHECK(!(request.ice_controlling && request.ice_controlled));

  StunAddress mapped;
  mapped.ipv6 = size % 2 == 1;
  for (size_t i = 0; i < mapped.ip.size(); ++i) mapped.ip[i] = datagram[i % size];
  if (!mapped.ipv6) std::fill(mapped.ip.begin() + 4, mapped.ip.end(), 0);
  mapped.port = static_cast<uint16_t>(size * 257);
  std::array<uint8_t, kMaxStunResponse> out{};
  size_t n = write_stun_binding_success(request.transaction_id, mapped, kPassword, out);
  FUZZ_CHECK(n > 0);
  check_written({out.data(), n}, request.transaction_id, &mapped, 0);
  // One byte short: nothing is written.
  FUZZ_CHECK(write_stun_binding_success(request.transaction_id, mapped, kPassword,
                                        {out.data(), n - 1}) == 0);

  uint16_t code = integrity ? (request.unknown_required_attribute ? 420 : 487) : 401;
  n = write_stun_binding_error(request.transaction_id, code, request.username, out);
  FUZZ_CHECK(n > 0);
  check_written({out.data(), n}, request.transaction_id, nullptr, code);

  // A request written with the parsed fields reads back the same.
  std::array<uint8_t, kMaxStunRequest> again{};
  n = write_stun_binding_request(request, kPassword, again);
  FUZZ_CHECK(n > 0);
  StunBindingRequest reparsed;
  FUZZ_CHECK(parse_stun_binding_request({again.data(), n}, reparsed) == StunError::kNone);
  FUZZ_CHECK(reparsed.username == request.username && reparsed.priority == request.priority);
  FUZZ_CHECK(reparsed.use_candidate == request.use_candidate);
  FUZZ_CHECK(reparsed.tie_breaker ==
             (request.ice_controlling || request.ice_controlled ? request.tie_breaker : 0));
  FUZZ_CHECK(stun_integrity_ok({again.data(), n}, kPassword));
  return;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<uint8_t[]> copy(new uint8_t[size ? size : 1]);
  if (size) std::memcpy(copy.get(), data, size);
  exercise({copy.get(), size});
  // Mutations almost never keep FINGERPRINT right, which would leave everything after its check
  // unexplored: when the input ends in a FINGERPRINT attribute header and value, the same bytes
  // go through again with the length field and the CRC (zlib, like the core) made to match.
  if (size >= kStunHeaderBytes + 8 && size - kStunHeaderBytes <= 0xffff && copy[size - 8] == 0x80 &&
      copy[size - 7] == 0x28 && copy[size - 6] == 0 && copy[size - 5] == 4) {
    copy[2] = static_cast<uint8_t>((size - kStunHeaderBytes) >> 8);
    copy[3] = static_cast<uint8_t>(size - kStunHeaderBytes);
    uint32_t crc = static_cast<uint32_t>(crc32(0L, copy.get(), static_cast<uInt>(size - 8))) ^
                   kStunFingerprintXor;
    for (int i = 0; i < 4; ++i) copy[size - 4 + i] = static_cast<uint8_t>(crc >> (24 - 8 * i));
    exercise({copy.get(), size});
  }
  return 0;
}
