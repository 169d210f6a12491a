#include "net/ws/utf8.h"

#include <array>
#include <cstring>

namespace syncd::ws {
namespace {

// A table-driven DFA over byte classes. The classes split the lead and continuation ranges
// exactly where RFC 3629's well-formed table (section 4) changes the allowed second byte, so
// overlongs (C0, C1, E0 80..9F, F0 80..8F), surrogates (ED A0..BF) and code points above
// U+10FFFF (F4 90..BF, F5..FF) all land in kUtf8Reject without any arithmetic.
enum ByteClass : uint8_t {
  kAscii,      // 00..7F
  kCont80_8F,  // 80..8F
  kCont90_9F,  // 90..9F
  kContA0_BF,  // A0..BF
  kInvalid,    // C0, C1, F5..FF
  kLead2,      // C2..DF
  kLeadE0,     // E0: second byte A0..BF
  kLead3,      // E1..EC, EE..EF
  kLeadED,     // ED: second byte 80..9F
  kLeadF0,     // F0: second byte 90..BF
  kLead4,      // F1..F3
  kLeadF4,     // F4: second byte 80..8F
  kClassCount,
};

// States 0 and 1 are fixed by the header (accept / reject); the rest name what must come next.
enum State : uint8_t {
  kAccept = kUtf8Accept,
  kReject = kUtf8Reject,
  kNeed1,    // one more 80..BF
  kNeed2,    // two more 80..BF
  kNeed3,    // three more 80..BF
  kAfterE0,  // A0..BF, then one more
  kAfterED,  // 80..9F, then one more
  kAfterF0,  // 90..BF, then two more
  kAfterF4,  // 80..8F, then two more
  kStateCount,
};
static_assert(kUtf8Accept == 0 && kUtf8Reject == 1);

constexpr ByteClass classify(unsigned byte) {
  if (byte < 0x80) return kAscii;
  if (byte < 0x90) return kCont80_8F;
  if (byte < 0xA0) return kCont90_9F;
  if (byte < 0xC0) return kContA0_BF;
  if (byte < 0xC2) return kInvalid;
  if (byte < 0xE0) return kLead2;
  if (byte == 0xE0) return kLeadE0;
  if (byte == 0xED) return kLeadED;
  if (byte < 0xF0) return kLead3;
  if (byte == 0xF0) return kLeadF0;
  if (byte < 0xF4) return kLead4;
  if (byte == 0xF4) return kLeadF4;
  return kInvalid;
}

constexpr std::array<uint8_t, 256> kClassOf = [] {
  std::array<uint8_t, 256> table{};
  for (unsigned b = 0; b < 256; ++b) table[b] = classify(b);
  return table;
}();

constexpr std::array<std::array<uint8_t, kClassCount>, kStateCount> kNext = [] {
  std::array<std::array<uint8_t, kClassCount>, kStateCount> next{};
  for (auto& row : next) row.fill(kReject);

  auto& accept = next[kAccept];
  accept[kAscii] = kAccept;
  accept[kLead2] = kNeed1;
  accept[kLeadE0] = kAfterE0;
  accept[kLead3] = kNeed2;
  accept[kLeadED] = kAfterED;
  accept[kLeadF0] = kAfterF0;
  accept[kLead4] = kNeed3;
  accept[kLeadF4] = kAfterF4;

  for (uint8_t cls : {kCont80_8F, kCont90_9F, kContA0_BF}) {
    next[kNeed1][cls] = kAccept;
    next[kNeed2][cls] = kNeed1;
    next[kNeed3][cls] = kNeed2;
  }
  next[kAfterE0][kContA0_BF] = kNeed1;
  next[kAfterED][kCont80_8F] = kNeed1;
  next[kAfterED][kCont90_9F] = kNeed1;
  next[kAfterF0][kCont90_9F] = kNeed2;
  next[kAfterF0][kContA0_BF] = kNeed2;
  next[kAfterF4][kCont80_8F] = kNeed2;
  return next;
}();

constexpr uint64_t kHighBits = 0x8080808080808080ull;

}  // namespace

uint32_t utf8_validate(uint32_t state, const uint8_t* data, size_t size) {
  if (state >= kStateCount) return kUtf8Reject;
  size_t i = 0;
  while (i < size) {
    if (state == kReject) return kUtf8Reject;
    // Text messages are mostly ASCII; skip 8 bytes at a time while between characters.
    if (state == kAccept) {
      while (size - i >= 8) {
        uint64_t word;
        std::memcpy(&word, data + i, 8);
        if (word & kHighBits) break;
        i += 8;
      }
      if (i == size) break;
    }
    state = kNext[state][kClassOf[data[i]]];
    ++i;
  }
  return state;
}

}  // namespace syncd::ws
