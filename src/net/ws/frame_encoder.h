// Writers of RFC 6455 frame headers. Pure; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "net/ws/frame_decoder.h"

namespace syncd::ws {

inline constexpr size_t kMaxServerHeaderBytes = 10;
inline constexpr size_t kMaxClientHeaderBytes = 14;

// Server-to-client (unmasked) header; returns its length.
size_t encode_server_header(uint8_t* out, Opcode opcode, uint64_t payload_bytes, bool fin = true);
// Client-to-server header with the masking key (mask_key loaded little-endian, see unmask.h).
size_t encode_client_header(uint8_t* out, Opcode opcode, uint64_t payload_bytes, uint32_t mask_key,
                            bool fin = true);
// A complete server Close frame payload: code in network order followed by reason (truncated to
// fit the 125-byte control limit).
std::string close_payload(uint16_t code, std::string_view reason);

// Sec-WebSocket-Accept for a Sec-WebSocket-Key (RFC 6455 section 4.2.2): base64(SHA-1(key+GUID)).
std::string accept_key(std::string_view client_key);

}  // namespace syncd::ws
