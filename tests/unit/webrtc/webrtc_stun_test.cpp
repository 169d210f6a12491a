// The ICE-lite STUN core against the RFC 5769 test vectors, hand-built messages (their CRC from
// zlib here, independently of the core), every truncation and every single-byte corruption.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "webrtc/stun.h"

namespace syncd::webrtc {
namespace {

using Bytes = std::vector<uint8_t>;

constexpr std::string_view kRfc5769Password = "VOkJxbRl1RmTxUk/WvJxBt";
constexpr std::array<uint8_t, 12> kRfc5769TransactionId = {0xb7, 0xe7, 0xa7, 0x01, 0xbc, 0x34,
                                                           0xd6, 0x86, 0xfa, 0x87, 0xdf, 0xae};

// RFC 5769 section 2.1: sample request (SOFTWARE, PRIORITY, ICE-CONTROLLED, USERNAME "evtj:h6vY"
// padded with spaces, MESSAGE-INTEGRITY, FINGERPRINT).
const Bytes kSampleRequest = {
    0x00, 0x01, 0x00, 0x58, 0x21, 0x12, 0xa4, 0x42, 0xb7, 0xe7, 0xa7, 0x01, 0xbc, 0x34, 0xd6, 0x86,
    0xfa, 0x87, 0xdf, 0xae, 0x80, 0x22, 0x00, 0x10, 0x53, 0x54, 0x55, 0x4e, 0x20, 0x74, 0x65, 0x73,
    0x74, 0x20, 0x63, 0x6c, 0x69, 0x65, 0x6e, 0x74, 0x00, 0x24, 0x00, 0x04, 0x6e, 0x00, 0x01, 0xff,
    0x80, 0x29, 0x00, 0x08, 0x93, 0x2f, 0xf9, 0xb1, 0x51, 0x26, 0x3b, 0x36, 0x00, 0x06, 0x00, 0x09,
    0x65, 0x76, 0x74, 0x6a, 0x3a, 0x68, 0x36, 0x76, 0x59, 0x20, 0x20, 0x20, 0x00, 0x08, 0x00, 0x14,
    0x9a, 0xea, 0xa7, 0x0c, 0xbf, 0xd8, 0xcb, 0x56, 0x78, 0x1e, 0xf2, 0xb5, 0xb2, 0xd3, 0xf2, 0x49,
    0xc1, 0xb5, 0x71, 0xa2, 0x80, 0x28, 0x00, 0x04, 0xe5, 0x7a, 0x3b, 0xcf};

// RFC 5769 section 2.2: sample IPv4 response, 192.0.2.1:32853 (with SOFTWARE "test vector ").
const Bytes kSampleIpv4Response = {
    0x01, 0x01, 0x00, 0x3c, 0x21, 0x12, 0xa4, 0x42, 0xb7, 0xe7, 0xa7, 0x01, 0xbc, 0x34, 0xd6, 0x86,
    0xfa, 0x87, 0xdf, 0xae, 0x80, 0x22, 0x00, 0x0b, 0x74, 0x65, 0x73, 0x74, 0x20, 0x76, 0x65, 0x63,
    0x74, 0x6f, 0x72, 0x20, 0x00, 0x20, 0x00, 0x08, 0x00, 0x01, 0xa1, 0x47, 0xe1, 0x12, 0xa6, 0x43,
    0x00, 0x08, 0x00, 0x14, 0x2b, 0x91, 0xf5, 0x99, 0xfd, 0x9e, 0x90, 0xc3, 0x8c, 0x74, 0x89, 0xf9,
    0x2a, 0xf9, 0xba, 0x53, 0xf0, 0x6b, 0xe7, 0xd7, 0x80, 0x28, 0x00, 0x04, 0xc0, 0x7d, 0x4c, 0x96};

// RFC 5769 section 2.3: sample IPv6 response, [2001:db8:1234:5678:11:2233:4455:6677]:32853.
const Bytes kSampleIpv6Response = {
    0x01, 0x01, 0x00, 0x48, 0x21, 0x12, 0xa4, 0x42, 0xb7, 0xe7, 0xa7, 0x01, 0xbc, 0x34, 0xd6, 0x86,
    0xfa, 0x87, 0xdf, 0xae, 0x80, 0x22, 0x00, 0x0b, 0x74, 0x65, 0x73, 0x74, 0x20, 0x76, 0x65, 0x63,
    0x74, 0x6f, 0x72, 0x20, 0x00, 0x20, 0x00, 0x14, 0x00, 0x02, 0xa1, 0x47, 0x01, 0x13, 0xa9, 0xfa,
    0xa5, 0xd3, 0xf1, 0x79, 0xbc, 0x25, 0xf4, 0xb5, 0xbe, 0xd2, 0xb9, 0xd9, 0x00, 0x08, 0x00, 0x14,
    0xa3, 0x82, 0x95, 0x4e, 0x4b, 0xe6, 0x7b, 0xf1, 0x17, 0x84, 0xc9, 0x7c, 0x82, 0x92, 0xc2, 0x75,
    0xbf, 0xe3, 0xed, 0x41, 0x80, 0x28, 0x00, 0x04, 0xc8, 0xfb, 0x0b, 0x4c};

StunAddress ipv4(uint8_t a, uint8_t b, uint8_t c, uint8_t d, uint16_t port) {
  StunAddress address;
  address.ip = {a, b, c, d};
  address.port = port;
  return address;
}

StunAddress rfc5769_ipv6() {
  StunAddress address;
  address.ipv6 = true;
  address.ip = {0x20, 0x01, 0x0d, 0xb8, 0x12, 0x34, 0x56, 0x78,
                0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77};
  address.port = 32853;
  return address;
}

// The XOR-MAPPED-ADDRESS attribute of a message, header included, found by walking it here.
Bytes xor_mapped_attribute(const Bytes& m) {
  size_t pos = 20;
  while (pos + 4 <= m.size()) {
    uint16_t type = static_cast<uint16_t>(m[pos] << 8 | m[pos + 1]);
    size_t length = static_cast<size_t>(m[pos + 2] << 8 | m[pos + 3]);
    if (type == kStunAttrXorMappedAddress)
      return Bytes(m.begin() + static_cast<long>(pos),
                   m.begin() + static_cast<long>(pos + 4 + length));
    pos += 4 + ((length + 3) & ~size_t{3});
  }
  return {};
}

// Builds a message from raw attributes; the length field and, when asked, FINGERPRINT (CRC-32 by
// zlib XOR 0x5354554e) are filled in here.
struct MessageBuilder {
  Bytes bytes;
  explicit MessageBuilder(uint16_t type = kStunBindingRequest) {
    bytes.assign(20, 0);
    bytes[0] = static_cast<uint8_t>(type >> 8);
    bytes[1] = static_cast<uint8_t>(type);
    const uint8_t cookie[4] = {0x21, 0x12, 0xa4, 0x42};
    std::copy(std::begin(cookie), std::end(cookie), bytes.begin() + 4);
    std::copy(kRfc5769TransactionId.begin(), kRfc5769TransactionId.end(), bytes.begin() + 8);
  }
  MessageBuilder& attribute(uint16_t type, const Bytes& value) {
    bytes.push_back(static_cast<uint8_t>(type >> 8));
    bytes.push_back(static_cast<uint8_t>(type));
    bytes.push_back(static_cast<uint8_t>(value.size() >> 8));
    bytes.push_back(static_cast<uint8_t>(value.size()));
    bytes.insert(bytes.end(), value.begin(), value.end());
    while (bytes.size() % 4) bytes.push_back(0);
    set_length(bytes.size() - 20);
    return *this;
  }
  MessageBuilder& username(std::string_view u) {
    return attribute(kStunAttrUsername, Bytes(u.begin(), u.end()));
  }
  MessageBuilder& integrity() { return attribute(kStunAttrMessageIntegrity, Bytes(20, 0xab)); }
  Bytes fingerprint() {
    set_length(bytes.size() + 8 - 20);
    uint32_t crc = static_cast<uint32_t>(crc32(0L, bytes.data(), static_cast<uInt>(bytes.size()))) ^
                   0x5354554e;
    return attribute(kStunAttrFingerprint,
                     {static_cast<uint8_t>(crc >> 24), static_cast<uint8_t>(crc >> 16),
                      static_cast<uint8_t>(crc >> 8), static_cast<uint8_t>(crc)})
        .bytes;
  }
  void set_length(size_t length) {
    bytes[2] = static_cast<uint8_t>(length >> 8);
    bytes[3] = static_cast<uint8_t>(length);
  }
};

StunError parse(const Bytes& m) {
  StunBindingRequest request;
  return parse_stun_binding_request(m, request);
}

TEST(WebrtcStun, Rfc5769SampleRequestParsesAndVerifies) {
  ASSERT_TRUE(looks_like_stun(kSampleRequest));
  StunBindingRequest request;
  ASSERT_EQ(parse_stun_binding_request(kSampleRequest, request), StunError::kNone);
  EXPECT_EQ(request.transaction_id, kRfc5769TransactionId);
  EXPECT_EQ(request.username, "evtj:h6vY");
  EXPECT_EQ(request.priority, 0x6e0001ffu);
  EXPECT_TRUE(request.ice_controlled);
  EXPECT_FALSE(request.ice_controlling);
  EXPECT_EQ(request.tie_breaker, 0x932ff9b151263b36ull);
  EXPECT_FALSE(request.use_candidate);
  EXPECT_EQ(request.unknown_required_attribute, 0);  // SOFTWARE is comprehension-optional
  // The username points into the message, as documented.
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(request.username.data()), kSampleRequest.data() + 64);
  EXPECT_TRUE(stun_integrity_ok(kSampleRequest, kRfc5769Password));
}

TEST(WebrtcStun, WrongPasswordFailsIntegrity) {
  EXPECT_FALSE(stun_integrity_ok(kSampleRequest, "VOkJxbRl1RmTxUk/WvJxBu"));
  EXPECT_FALSE(stun_integrity_ok(kSampleRequest, ""));
  EXPECT_FALSE(stun_integrity_ok(kSampleRequest, "VOkJxbRl1RmTxUk/WvJxB"));
}

TEST(WebrtcStun, EveryFlippedByteIsRefused) {
  for (size_t i = 0; i < kSampleRequest.size(); ++i) {
    for (uint8_t mask : {0x01, 0x80}) {
      Bytes m = kSampleRequest;
      m[i] ^= mask;
      StunBindingRequest request;
      StunError e = parse_stun_binding_request(m, request);
      bool integrity = stun_integrity_ok(m, kRfc5769Password);
      EXPECT_TRUE(e != StunError::kNone || !integrity) << "byte " << i << " mask " << int(mask);
      // The CRC covers everything before FINGERPRINT and catches any single-byte change; a
      // change in FINGERPRINT itself breaks its structure or its value.
      EXPECT_NE(e, StunError::kNone) << "byte " << i << " mask " << int(mask);
    }
  }
  // A corrupted MESSAGE-INTEGRITY with a recomputed FINGERPRINT passes the parser, not the HMAC.
  MessageBuilder b;
  b.attribute(kStunAttrUsername, Bytes{'e', 'v', 't', 'j', ':', 'h', '6', 'v', 'Y'});
  b.attribute(kStunAttrMessageIntegrity, Bytes(20, 0));
  Bytes m = b.fingerprint();
  EXPECT_EQ(parse(m), StunError::kNone);
  EXPECT_FALSE(stun_integrity_ok(m, kRfc5769Password));
}

TEST(WebrtcStun, EveryTruncationIsRefused) {
  for (const Bytes* sample : {&kSampleRequest, &kSampleIpv4Response, &kSampleIpv6Response}) {
    for (size_t n = 0; n < sample->size(); ++n) {
      Bytes m(sample->begin(), sample->begin() + static_cast<long>(n));  // exact size for ASan
      StunBindingRequest request;
      EXPECT_NE(parse_stun_binding_request(m, request), StunError::kNone) << n;
      StunBindingResponse response;
      EXPECT_NE(parse_stun_binding_response(m, response), StunError::kNone) << n;
      EXPECT_FALSE(stun_integrity_ok(m, kRfc5769Password)) << n;
    }
  }
  EXPECT_EQ(parse({}), StunError::kTooShort);
  EXPECT_FALSE(looks_like_stun(Bytes{}));
}

TEST(WebrtcStun, Rfc5769SampleResponsesParseAndVerify) {
  StunBindingResponse response;
  ASSERT_EQ(parse_stun_binding_response(kSampleIpv4Response, response), StunError::kNone);
  EXPECT_TRUE(response.success);
  EXPECT_TRUE(response.has_integrity);
  ASSERT_TRUE(response.has_mapped_address);
  EXPECT_EQ(response.mapped, ipv4(192, 0, 2, 1, 32853));
  EXPECT_TRUE(stun_integrity_ok(kSampleIpv4Response, kRfc5769Password));

  ASSERT_EQ(parse_stun_binding_response(kSampleIpv6Response, response), StunError::kNone);
  ASSERT_TRUE(response.has_mapped_address);
  EXPECT_EQ(response.mapped, rfc5769_ipv6());
  EXPECT_TRUE(stun_integrity_ok(kSampleIpv6Response, kRfc5769Password));
}

TEST(WebrtcStun, SuccessResponseMatchesRfc5769Ipv4Fields) {
  std::array<uint8_t, kMaxStunResponse> out{};
  size_t n = write_stun_binding_success(kRfc5769TransactionId, ipv4(192, 0, 2, 1, 32853),
                                        kRfc5769Password, out);
  ASSERT_GT(n, 0u);
  Bytes m(out.begin(), out.begin() + static_cast<long>(n));
  // The RFC's sample also carries SOFTWARE; without it ours is 20 + 12 + 24 + 8 bytes.
  EXPECT_EQ(n, 64u);
  EXPECT_EQ(xor_mapped_attribute(m), xor_mapped_attribute(kSampleIpv4Response));
  StunBindingResponse response;
  ASSERT_EQ(parse_stun_binding_response(m, response), StunError::kNone);
  EXPECT_TRUE(response.success);
  EXPECT_EQ(response.transaction_id, kRfc5769TransactionId);
  EXPECT_TRUE(response.has_integrity);
  EXPECT_EQ(response.mapped, ipv4(192, 0, 2, 1, 32853));
  EXPECT_TRUE(stun_integrity_ok(m, kRfc5769Password));
  EXPECT_FALSE(stun_integrity_ok(m, "wrong password, same length"));
  // Too small an output: nothing written.
  EXPECT_EQ(write_stun_binding_success(kRfc5769TransactionId, ipv4(192, 0, 2, 1, 32853),
                                       kRfc5769Password, std::span(out.data(), n - 1)),
            0u);
}

TEST(WebrtcStun, SuccessResponseMatchesRfc5769Ipv6Fields) {
  std::array<uint8_t, kMaxStunResponse> out{};
  size_t n =
      write_stun_binding_success(kRfc5769TransactionId, rfc5769_ipv6(), kRfc5769Password, out);
  ASSERT_EQ(n, 76u);
  Bytes m(out.begin(), out.begin() + static_cast<long>(n));
  EXPECT_EQ(xor_mapped_attribute(m), xor_mapped_attribute(kSampleIpv6Response));
  StunBindingResponse response;
  ASSERT_EQ(parse_stun_binding_response(m, response), StunError::kNone);
  EXPECT_EQ(response.mapped, rfc5769_ipv6());
  EXPECT_TRUE(stun_integrity_ok(m, kRfc5769Password));
}

TEST(WebrtcStun, ErrorResponses) {
  std::array<uint8_t, kMaxStunResponse> out{};
  const std::pair<uint16_t, std::string_view> cases[] = {
      {400, "Bad Request"}, {401, "Unauthorized"}, {487, "Role Conflict"}};
  for (auto [code, reason] : cases) {
    size_t n = write_stun_binding_error(kRfc5769TransactionId, code, reason, out);
    ASSERT_GT(n, 0u);
    Bytes m(out.begin(), out.begin() + static_cast<long>(n));
    StunBindingResponse response;
    ASSERT_EQ(parse_stun_binding_response(m, response), StunError::kNone);
    EXPECT_FALSE(response.success);
    EXPECT_FALSE(response.has_integrity);
    EXPECT_EQ(response.error_code, code);
    EXPECT_EQ(response.reason, reason);
    EXPECT_EQ(response.transaction_id, kRfc5769TransactionId);
  }
  EXPECT_EQ(write_stun_binding_error(kRfc5769TransactionId, 200, "OK", out), 0u);
  EXPECT_EQ(write_stun_binding_error(kRfc5769TransactionId, 700, "x", out), 0u);
  // A long reason is cut to fit kMaxStunResponse, never inside a UTF-8 character.
  std::string long_reason;
  for (int i = 0; i < 60; ++i) long_reason += "\xc3\xa9";  // "é" x 60: 120 bytes
  size_t n = write_stun_binding_error(kRfc5769TransactionId, 400, long_reason, out);
  ASSERT_GT(n, 0u);
  EXPECT_LE(n, kMaxStunResponse);
  const Bytes cut(out.begin(), out.begin() + static_cast<long>(n));
  StunBindingResponse response;
  ASSERT_EQ(parse_stun_binding_response(cut, response), StunError::kNone);
  EXPECT_EQ(response.reason.size() % 2, 0u);
  EXPECT_GE(response.reason.size(), 80u);
  EXPECT_EQ(response.reason, std::string_view(long_reason).substr(0, response.reason.size()));
}

TEST(WebrtcStun, RequestWriterRoundTrips) {
  StunBindingRequest sent;
  sent.transaction_id = kRfc5769TransactionId;
  sent.username = "abcd:EFGH";
  sent.priority = 1853759231;
  sent.use_candidate = true;
  sent.ice_controlling = true;
  sent.tie_breaker = 0x0123456789abcdefull;
  std::array<uint8_t, kMaxStunRequest> out{};
  size_t n = write_stun_binding_request(sent, "a password of 24 chars..", out);
  ASSERT_GT(n, 0u);
  Bytes m(out.begin(), out.begin() + static_cast<long>(n));
  StunBindingRequest got;
  ASSERT_EQ(parse_stun_binding_request(m, got), StunError::kNone);
  EXPECT_EQ(got.username, sent.username);
  EXPECT_EQ(got.priority, sent.priority);
  EXPECT_TRUE(got.use_candidate);
  EXPECT_TRUE(got.ice_controlling);
  EXPECT_FALSE(got.ice_controlled);
  EXPECT_EQ(got.tie_breaker, sent.tie_breaker);
  EXPECT_TRUE(stun_integrity_ok(m, "a password of 24 chars.."));
  EXPECT_FALSE(stun_integrity_ok(m, "a password of 24 chars.!"));
}

TEST(WebrtcStun, EachParseErrorIsReachable) {
  Bytes not_stun = kSampleRequest;
  not_stun[0] = 0x40;
  EXPECT_EQ(parse(not_stun), StunError::kNotStun);
  Bytes bad_cookie = kSampleRequest;
  bad_cookie[4] = 0x22;
  EXPECT_EQ(parse(bad_cookie), StunError::kNotStun);
  EXPECT_EQ(parse(Bytes(kSampleRequest.begin(), kSampleRequest.begin() + 19)),
            StunError::kTooShort);
  Bytes odd_length = kSampleRequest;
  odd_length[3] = 0x57;
  EXPECT_EQ(parse(odd_length), StunError::kBadLength);
  Bytes extra = kSampleRequest;
  extra.resize(extra.size() + 4);
  EXPECT_EQ(parse(extra), StunError::kBadLength);
  EXPECT_EQ(parse(MessageBuilder(kStunBindingSuccess).username("a:b").integrity().fingerprint()),
            StunError::kNotBindingRequest);
  EXPECT_EQ(parse(MessageBuilder(0x0011).username("a:b").integrity().fingerprint()),
            StunError::kNotBindingRequest);  // a Binding indication
  EXPECT_EQ(parse(MessageBuilder()
                      .attribute(kStunAttrPriority, {1, 2, 3})
                      .username("a:b")
                      .integrity()
                      .fingerprint()),
            StunError::kMalformedAttribute);
  EXPECT_EQ(parse(MessageBuilder()
                      .attribute(kStunAttrUseCandidate, {1})
                      .username("a:b")
                      .integrity()
                      .fingerprint()),
            StunError::kMalformedAttribute);
  EXPECT_EQ(parse(MessageBuilder()
                      .username("a:b")
                      .attribute(kStunAttrMessageIntegrity, Bytes(16, 0))
                      .fingerprint()),
            StunError::kMalformedAttribute);
  {
    // An attribute whose length runs past the message.
    Bytes m = MessageBuilder().username("a:b").integrity().fingerprint();
    m[23] = 0x40;
    EXPECT_EQ(parse(m), StunError::kMalformedAttribute);
  }
  {
    // FINGERPRINT followed by another attribute.
    MessageBuilder b;
    b.username("a:b").integrity().fingerprint();
    b.attribute(0x8022, {'x'});
    EXPECT_EQ(parse(b.bytes), StunError::kMalformedAttribute);
  }
  EXPECT_EQ(parse(MessageBuilder().username("a:b").integrity().bytes), StunError::kNoFingerprint);
  Bytes bad_crc = MessageBuilder().username("a:b").integrity().fingerprint();
  bad_crc.back() ^= 1;
  EXPECT_EQ(parse(bad_crc), StunError::kBadFingerprint);
  EXPECT_EQ(parse(MessageBuilder().integrity().fingerprint()), StunError::kNoUsername);
  EXPECT_EQ(parse(MessageBuilder().username("a:b").fingerprint()), StunError::kNoIntegrity);
  // USERNAME after MESSAGE-INTEGRITY is ignored (RFC 5389 section 15.4).
  EXPECT_EQ(parse(MessageBuilder().integrity().username("a:b").fingerprint()),
            StunError::kNoUsername);
  // Unknown comprehension-optional attributes are skipped, required ones reported.
  StunBindingRequest request;
  Bytes unknown = MessageBuilder()
                      .attribute(0xC057, {0, 1, 0, 9})
                      .attribute(0x7777, {1})
                      .username("a:b")
                      .integrity()
                      .fingerprint();
  ASSERT_EQ(parse_stun_binding_request(unknown, request), StunError::kNone);
  EXPECT_EQ(request.unknown_required_attribute, 0x7777);
  EXPECT_FALSE(stun_integrity_ok(MessageBuilder().username("a:b").fingerprint(), "x"));
}

TEST(WebrtcStun, ErrorNames) {
  EXPECT_STREQ(to_string(StunError::kBadFingerprint), "bad_fingerprint");
  EXPECT_STREQ(to_string(StunError::kNotStun), "not_stun");
  EXPECT_STREQ(to_string(StunError::kBadIntegrity), "bad_integrity");
}

TEST(WebrtcStun, Rfc7983Demultiplexing) {
  EXPECT_TRUE(looks_like_stun(Bytes{0x00, 0x01}));
  EXPECT_TRUE(looks_like_stun(Bytes{0x03}));
  EXPECT_FALSE(looks_like_stun(Bytes{0x16, 0xfe, 0xfd}));  // DTLS handshake
  EXPECT_FALSE(looks_like_stun(Bytes{0x80, 0x60}));        // RTP
}

}  // namespace
}  // namespace syncd::webrtc
