#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "net/ws/frame_encoder.h"
#include "net/ws/utf8.h"

namespace syncd::ws {
namespace {

std::vector<uint8_t> server_header(Opcode opcode, uint64_t payload_bytes, bool fin = true) {
  std::vector<uint8_t> out(kMaxServerHeaderBytes);
  out.resize(encode_server_header(out.data(), opcode, payload_bytes, fin));
  return out;
}

std::vector<uint8_t> client_header(Opcode opcode, uint64_t payload_bytes, uint32_t key,
                                   bool fin = true) {
  std::vector<uint8_t> out(kMaxClientHeaderBytes);
  out.resize(encode_client_header(out.data(), opcode, payload_bytes, key, fin));
  return out;
}

using Bytes = std::vector<uint8_t>;

TEST(WsFrameEncoder, ServerHeaderUsesSevenBitLengthUpTo125) {
  EXPECT_EQ(server_header(Opcode::kBinary, 0), (Bytes{0x82, 0x00}));
  EXPECT_EQ(server_header(Opcode::kText, 5), (Bytes{0x81, 0x05}));
  EXPECT_EQ(server_header(Opcode::kPong, 125), (Bytes{0x8A, 0x7D}));
}

TEST(WsFrameEncoder, ServerHeaderUsesSixteenBitLengthFrom126To65535) {
  EXPECT_EQ(server_header(Opcode::kText, 126), (Bytes{0x81, 0x7E, 0x00, 0x7E}));
  EXPECT_EQ(server_header(Opcode::kBinary, 65535), (Bytes{0x82, 0x7E, 0xFF, 0xFF}));
}

TEST(WsFrameEncoder, ServerHeaderUsesSixtyFourBitLengthFrom65536) {
  EXPECT_EQ(server_header(Opcode::kBinary, 65536),
            (Bytes{0x82, 0x7F, 0, 0, 0, 0, 0, 0x01, 0x00, 0x00}));
  EXPECT_EQ(server_header(Opcode::kBinary, 8294400),
            (Bytes{0x82, 0x7F, 0, 0, 0, 0, 0x00, 0x7E, 0x90, 0x00}));
  EXPECT_EQ(server_header(Opcode::kBinary, 0x0123456789ABCDEFull),
            (Bytes{0x82, 0x7F, 0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF}));
  EXPECT_EQ(server_header(Opcode::kBinary, ~0ull >> 1).size(), kMaxServerHeaderBytes);
}

TEST(WsFrameEncoder, ServerHeaderFinBit) {
  EXPECT_EQ(server_header(Opcode::kText, 3, false), (Bytes{0x01, 0x03}));
  EXPECT_EQ(server_header(Opcode::kContinuation, 3, false), (Bytes{0x00, 0x03}));
  EXPECT_EQ(server_header(Opcode::kContinuation, 3, true), (Bytes{0x80, 0x03}));
  EXPECT_EQ(server_header(Opcode::kClose, 2), (Bytes{0x88, 0x02}));
  EXPECT_EQ(server_header(Opcode::kPing, 0), (Bytes{0x89, 0x00}));
}

TEST(WsFrameEncoder, ClientHeaderSetsMaskBitAndWritesKeyInWireOrder) {
  EXPECT_EQ(client_header(Opcode::kText, 5, 0x3d21fa37),
            (Bytes{0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d}));  // RFC 6455 section 5.7
  EXPECT_EQ(client_header(Opcode::kBinary, 256, 0x44332211, false),
            (Bytes{0x02, 0xFE, 0x01, 0x00, 0x11, 0x22, 0x33, 0x44}));
  EXPECT_EQ(client_header(Opcode::kBinary, 1ull << 32, 0x44332211),
            (Bytes{0x82, 0xFF, 0, 0, 0, 0x01, 0, 0, 0, 0, 0x11, 0x22, 0x33, 0x44}));
}

TEST(WsFrameEncoder, ClosePayloadIsBigEndianCodeThenReason) {
  EXPECT_EQ(close_payload(1000, "bye"), std::string("\x03\xE8"
                                                    "bye"));
  EXPECT_EQ(close_payload(4999, ""), std::string("\x13\x87"));
  EXPECT_EQ(close_payload(close_code::kMessageTooBig, "too big"), std::string("\x03\xF1too big"));
}

TEST(WsFrameEncoder, ClosePayloadTruncatesReasonToControlFrameLimit) {
  const std::string exact(123, 'r');
  EXPECT_EQ(close_payload(1000, exact).size(), 125u);
  EXPECT_EQ(close_payload(1000, exact).substr(2), exact);
  const std::string long_reason(300, 'r');
  EXPECT_EQ(close_payload(1000, long_reason), std::string("\x03\xE8") + exact);
}

TEST(WsFrameEncoder, ClosePayloadNeverSplitsACharacter) {
  // A 3-byte character placed at every position around the cut; the result must stay valid
  // UTF-8 and keep as much of the reason as fits.
  for (size_t prefix = 115; prefix <= 125; ++prefix) {
    std::string reason(prefix, 'a');
    reason += "\xE2\x82\xAC";  // U+20AC
    reason += std::string(20, 'b');
    const std::string payload = close_payload(1011, reason);
    ASSERT_LE(payload.size(), 125u);
    const std::string kept = payload.substr(2);
    EXPECT_EQ(kept, reason.substr(0, kept.size())) << prefix;
    EXPECT_GE(kept.size(), 121u) << prefix;  // drops at most the partial character
    EXPECT_EQ(
        utf8_validate(kUtf8Accept, reinterpret_cast<const uint8_t*>(kept.data()), kept.size()),
        kUtf8Accept)
        << prefix;
  }
  // All 4-byte characters: 31 of them is 124 bytes, so only 30 fit.
  std::string emoji;
  for (int i = 0; i < 31; ++i) emoji += "\xF0\x9F\x98\x80";
  EXPECT_EQ(close_payload(1000, emoji).size(), 2u + 120u);
}

TEST(WsFrameEncoder, AcceptKeyRfcVector) {
  // RFC 6455 section 1.3.
  EXPECT_EQ(accept_key("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
  // Cross-checked with `openssl dgst -sha1 -binary | base64`.
  EXPECT_EQ(accept_key("x3JJHMbDL1EzLkh9GBhXDw=="), "HSmrc0sMlYUkAGmm5OPpG2HaGWk=");
}

TEST(WsFrameEncoder, AcceptKeyIsAlways28Base64Characters) {
  EXPECT_EQ(accept_key("").size(), 28u);
  EXPECT_EQ(accept_key("x3JJHMbDL1EzLkh9GBhXDw==").size(), 28u);
  EXPECT_NE(accept_key("x3JJHMbDL1EzLkh9GBhXDw=="), accept_key("dGhlIHNhbXBsZSBub25jZQ=="));
}

}  // namespace
}  // namespace syncd::ws
