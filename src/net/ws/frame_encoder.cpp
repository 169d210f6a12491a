#include "net/ws/frame_encoder.h"

#include <openssl/evp.h>

#include <memory>

namespace syncd::ws {
namespace {

constexpr uint8_t kFinBit = 0x80;
constexpr uint8_t kMaskBit = 0x80;
constexpr size_t kMaxControlPayload = 125;
constexpr size_t kCloseCodeBytes = 2;
constexpr std::string_view kHandshakeGuid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

// Writes the first two bytes and the minimal extended length (RFC 6455 section 5.2 requires
// the shortest encoding). Returns the bytes written.
size_t encode_length_header(uint8_t* out, Opcode opcode, uint64_t payload_bytes, bool fin,
                            uint8_t mask_bit) {
  out[0] = static_cast<uint8_t>((fin ? kFinBit : 0) | static_cast<uint8_t>(opcode));
  if (payload_bytes < 126) {
    out[1] = static_cast<uint8_t>(mask_bit | payload_bytes);
    return 2;
  }
  if (payload_bytes <= 0xFFFF) {
    out[1] = mask_bit | 126;
    out[2] = static_cast<uint8_t>(payload_bytes >> 8);
    out[3] = static_cast<uint8_t>(payload_bytes);
    return 4;
  }
  out[1] = mask_bit | 127;
  for (int i = 0; i < 8; ++i) out[2 + i] = static_cast<uint8_t>(payload_bytes >> (56 - 8 * i));
  return 10;
}

}  // namespace

size_t encode_server_header(uint8_t* out, Opcode opcode, uint64_t payload_bytes, bool fin) {
  return encode_length_header(out, opcode, payload_bytes, fin, 0);
}

size_t encode_client_header(uint8_t* out, Opcode opcode, uint64_t payload_bytes, uint32_t mask_key,
                            bool fin) {
  size_t n = encode_length_header(out, opcode, payload_bytes, fin, kMaskBit);
  for (int j = 0; j < 4; ++j) out[n + j] = static_cast<uint8_t>(mask_key >> (8 * j));
  return n + 4;
}

std::string close_payload(uint16_t code, std::string_view reason) {
  constexpr size_t kMaxReason = kMaxControlPayload - kCloseCodeBytes;
  if (reason.size() > kMaxReason) {
    // Back up to a character start so a truncated reason is still valid UTF-8; the peer must
    // fail the connection with 1007 otherwise.
    size_t cut = kMaxReason;
    while (cut > 0 && (static_cast<uint8_t>(reason[cut]) & 0xC0) == 0x80) --cut;
    reason = reason.substr(0, cut);
  }
  std::string payload;
  payload.reserve(kCloseCodeBytes + reason.size());
  payload.push_back(static_cast<char>(code >> 8));
  payload.push_back(static_cast<char>(code & 0xFF));
  payload.append(reason);
  return payload;
}

std::string accept_key(std::string_view client_key) {
  // Returns "" if the digest is unavailable (e.g. a provider configuration that forbids SHA-1);
  // the handshake then fails instead of answering with a wrong key.
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_len = 0;
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha1(), nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), client_key.data(), client_key.size()) != 1 ||
      EVP_DigestUpdate(ctx.get(), kHandshakeGuid.data(), kHandshakeGuid.size()) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), digest, &digest_len) != 1) {
    return {};
  }
  // Base64 of a 20-byte SHA-1 is 28 characters; EVP_EncodeBlock adds a NUL.
  unsigned char encoded[4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1];
  int encoded_len = EVP_EncodeBlock(encoded, digest, static_cast<int>(digest_len));
  return std::string(reinterpret_cast<const char*>(encoded), static_cast<size_t>(encoded_len));
}

}  // namespace syncd::ws
