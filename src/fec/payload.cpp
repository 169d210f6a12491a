#include "fec/payload.h"

namespace syncd::fec {

const char* refusal_name(Refusal refusal) {
  switch (refusal) {
    case Refusal::kNone:
      return "none";
    case Refusal::kRepairTooShort:
      return "repair_too_short";
    case Refusal::kRepairBadVersion:
      return "repair_bad_version";
    case Refusal::kRepairBadShape:
      return "repair_bad_shape";
    case Refusal::kRepairBadIndex:
      return "repair_bad_index";
    case Refusal::kRepairBadSymbolLength:
      return "repair_bad_symbol_length";
    case Refusal::kRepairLengthMismatch:
      return "repair_length_mismatch";
    case Refusal::kRepairForeignSsrc:
      return "repair_foreign_ssrc";
    case Refusal::kRepairInconsistent:
      return "repair_inconsistent";
    case Refusal::kRepairOverlap:
      return "repair_overlap";
    case Refusal::kRepairOutOfWindow:
      return "repair_out_of_window";
    case Refusal::kRepairDuplicate:
      return "repair_duplicate";
    case Refusal::kRepairSymbolTooShort:
      return "repair_symbol_too_short";
    case Refusal::kSourceTooShort:
      return "source_too_short";
    case Refusal::kSourceTooLong:
      return "source_too_long";
    case Refusal::kSourceNotRtp:
      return "source_not_rtp";
    case Refusal::kSourceSequenceMismatch:
      return "source_sequence_mismatch";
    case Refusal::kSourceForeignSsrc:
      return "source_foreign_ssrc";
    case Refusal::kRecoveredInvalid:
      return "recovered_invalid";
    case Refusal::kCount:
      break;
  }
  return "unknown";
}

Refusal parse_repair_header(std::span<const uint8_t> payload, RepairHeader* header) {
  if (payload.size() < kHeaderBytes) return Refusal::kRepairTooShort;
  const uint8_t* p = payload.data();
  if (p[0] != (kFormatVersion << 4)) return Refusal::kRepairBadVersion;
  RepairHeader h;
  h.k = p[1];
  h.m = p[2];
  h.repair_index = p[3];
  h.base_sequence = load_be16(p + 4);
  h.symbol_bytes = load_be16(p + 6);
  h.media_ssrc = load_be32(p + 8);
  if (h.k == 0 || h.k > kMaxK || h.m == 0 || h.m > kMaxM) return Refusal::kRepairBadShape;
  if (h.repair_index >= h.m) return Refusal::kRepairBadIndex;
  if (h.symbol_bytes < kMinSymbolBytes || h.symbol_bytes > kMaxSymbolBytes) {
    return Refusal::kRepairBadSymbolLength;
  }
  if (payload.size() != kHeaderBytes + h.symbol_bytes) return Refusal::kRepairLengthMismatch;
  *header = h;
  return Refusal::kNone;
}

void write_repair_header(const RepairHeader& header, uint8_t* out) {
  out[0] = kFormatVersion << 4;
  out[1] = header.k;
  out[2] = header.m;
  out[3] = header.repair_index;
  store_be16(out + 4, header.base_sequence);
  store_be16(out + 6, header.symbol_bytes);
  store_be32(out + 8, header.media_ssrc);
}

bool zero_extension(std::span<uint8_t> packet, uint8_t extension_id) {
  if (extension_id == 0 || extension_id >= 15) return true;
  if (packet.size() < kMinPacketBytes) return false;
  const uint8_t first = packet[0];
  if ((first & 0x10) == 0) return true;  // no extension (RFC 3550 section 5.1, X bit)
  const size_t csrc_count = first & 0x0F;
  const size_t ext_at = kMinPacketBytes + 4 * csrc_count;
  if (packet.size() < ext_at + 4) return false;
  // RFC 8285 section 4.2: profile 0xBEDE, then the length in 32-bit words.
  if (load_be16(&packet[ext_at]) != 0xBEDE) return true;  // two-byte form: not ours to touch
  const size_t ext_bytes = size_t{load_be16(&packet[ext_at + 2])} * 4;
  const size_t begin = ext_at + 4;
  if (packet.size() < begin + ext_bytes) return false;
  const size_t end = begin + ext_bytes;
  // First pass checks the elements fit, second zeroes, so a malformed block changes nothing.
  for (int pass = 0; pass < 2; ++pass) {
    size_t at = begin;
    while (at < end) {
      const uint8_t id = packet[at] >> 4;
      if (packet[at] == 0) {  // padding byte (section 4.2)
        ++at;
        continue;
      }
      if (id == 15) break;  // reserved: stop parsing (section 4.2)
      const size_t len = (packet[at] & 0x0F) + 1u;
      if (at + 1 + len > end) return false;
      if (pass == 1 && id == extension_id) {
        for (size_t i = 0; i < len; ++i) packet[at + 1 + i] = 0;
      }
      at += 1 + len;
    }
  }
  return true;
}

}  // namespace syncd::fec
