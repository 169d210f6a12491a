// Incremental UTF-8 validator (RFC 3629), for text messages split across frames and reads.
// Pure; one state per message.
#pragma once

#include <cstddef>
#include <cstdint>

namespace syncd::ws {

inline constexpr uint32_t kUtf8Accept = 0;
inline constexpr uint32_t kUtf8Reject = 1;

// Advances state over bytes. Returns the new state: kUtf8Accept at a character boundary,
// kUtf8Reject once invalid (sticky), anything else inside a multi-byte sequence.
uint32_t utf8_validate(uint32_t state, const uint8_t* data, size_t size);

}  // namespace syncd::ws
