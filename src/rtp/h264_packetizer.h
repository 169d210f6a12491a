// H.264 RTP packetizer, RFC 6184 packetization-mode 1 (non-interleaved): single NAL unit packets
// and FU-A fragments.
//
// Pure, allocation-free: the NAL boundaries of one access unit go into a fixed table inside the
// object; packets are written one at a time into the caller's buffer. Any thread; not
// thread-safe; one instance per sending stream (reuse it for every access unit).
//
// Use:
//   H264Packetizer packetizer;                  // or with a PacketizerConfig
//   if (packetizer.begin(access_unit) != PacketizeError::kOk) { count and drop; }
//   header.timestamp = rtp_timestamp_90khz;     // the same for every packet of the AU
//   while (packetizer.has_next()) {
//     header.sequence = next_sequence++;
//     size_t n = packetizer.write_next(header, buffer);  // marker set on the AU's last packet
//   }
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "rtp/rtp_packet.h"

namespace syncd::rtp {

// The RTP payload budget, so that one packet fits a 1200-byte IP datagram (docs/wan.md):
// 1200 - IPv6 40 - UDP 8 - RTP 12 - abs-send-time extension 8 - SRTP GCM tag 16 - MKI 4 = 1112.
inline constexpr size_t kDatagramBudgetBytes = 1200;
inline constexpr size_t kDefaultMaxPayloadBytes = 1200 - 40 - 8 - 12 - 8 - 16 - 4;
static_assert(kDefaultMaxPayloadBytes == 1112);
// A FU-A carries at least one byte of NAL payload after its two header bytes.
inline constexpr size_t kMinMaxPayloadBytes = 3;
// NAL units of one access unit the packetizer accepts (a 1080p frame has a few slices plus
// SPS/PPS/SEI; 256 leaves room for 200+ slices).
inline constexpr size_t kMaxNalUnitsPerAccessUnit = 256;

// RFC 6184 section 5.2 payload structure types.
inline constexpr uint8_t kNalTypeStapA = 24;
inline constexpr uint8_t kNalTypeFuA = 28;

struct PacketizerConfig {
  size_t max_payload_bytes = kDefaultMaxPayloadBytes;  // >= kMinMaxPayloadBytes
};

// Why begin() refused an access unit. Values index PacketizerCounters::refused.
enum class PacketizeError : uint8_t {
  kOk = 0,
  kNoStartCode,      // the AU does not begin with 00 00 01 or 00 00 00 01 (after zero bytes)
  kNoNalUnits,       // only start codes and zero bytes
  kForbiddenBit,     // a NAL header with F = 1 (H.264 7.4.1: forbidden_zero_bit)
  kReservedNalType,  // NAL type 0 or 24..31: unspecified in H.264 and taken by RFC 6184 payload
                     // structures, so it cannot be sent as itself
  kTooManyNalUnits,  // more than kMaxNalUnitsPerAccessUnit
  kCount,
};
const char* to_string(PacketizeError error);

struct PacketizerCounters {
  uint64_t access_units = 0;
  uint64_t single_nal_packets = 0;
  uint64_t fu_a_packets = 0;
  uint64_t refused[static_cast<size_t>(PacketizeError::kCount)] = {};
};

// Splits an Annex B byte stream (ITU-T H.264 Annex B) into NAL units: a start code is 00 00 01,
// and zero bytes before it (the 4-byte form's leading zero, trailing_zero_8bits) belong to no
// NAL unit. Empty NAL units are skipped. Calls on_nal(std::span<const uint8_t>) per NAL unit and
// returns false (having called it for none) when the data does not begin with a start code.
// Bounded: one pass over the data. Any thread.
template <typename OnNal>
bool split_annex_b(std::span<const uint8_t> data, OnNal&& on_nal);

// Whether an Annex B access unit holds an IDR slice (NAL type 5): a decoder can start there.
// Any thread.
inline bool access_unit_has_idr(std::span<const uint8_t> access_unit) {
  bool idr = false;
  split_annex_b(access_unit, [&](std::span<const uint8_t> nal) { idr |= (nal[0] & 0x1f) == 5; });
  return idr;
}

class H264Packetizer {
 public:
  explicit H264Packetizer(PacketizerConfig config = {});

  // Takes one access unit in Annex B form. The bytes must stay valid until the last packet has
  // been written. Refuses the whole AU (writes nothing) on a bad NAL header; see PacketizeError.
  PacketizeError begin(std::span<const uint8_t> access_unit);

  // Packets the current access unit makes in total (known after begin()), e.g. for FEC.
  size_t packet_count() const { return packet_count_; }
  bool has_next() const { return packets_written_ < packet_count_; }
  // Largest RTP payload the next packet can have; a buffer of header + this always suffices.
  size_t max_payload_bytes() const { return config_.max_payload_bytes; }

  // Writes the next packet's RTP payload into out and returns its size, or 0 when there is no
  // next packet or out is too small (nothing consumed then). last is set on the AU's last one.
  size_t write_next_payload(std::span<uint8_t> out, bool& last);
  // Writes a whole RTP packet: header (its marker is replaced: set only on the AU's last packet,
  // RFC 6184 section 5.1) and the next payload. Returns the packet size or 0 as above.
  size_t write_next(const RtpHeader& header, std::span<uint8_t> out);

  const PacketizerCounters& counters() const { return counters_; }

 private:
  struct NalUnit {
    uint32_t offset;
    uint32_t size;
  };
  size_t next_payload_size() const;

  PacketizerConfig config_;
  std::span<const uint8_t> access_unit_;
  NalUnit nal_units_[kMaxNalUnitsPerAccessUnit] = {};
  size_t nal_count_ = 0;
  size_t packet_count_ = 0;
  size_t packets_written_ = 0;
  // Position: current NAL unit, bytes of its payload (after the NAL header) already sent, and
  // for FU-A the fragment size chosen for this NAL (all fragments but the last have it).
  size_t nal_index_ = 0;
  size_t nal_sent_ = 0;
  size_t fragment_bytes_ = 0;
  PacketizerCounters counters_;
};

// ---------------------------------------------------------------------------------------------

template <typename OnNal>
bool split_annex_b(std::span<const uint8_t> data, OnNal&& on_nal) {
  const uint8_t* const begin = data.data();
  const size_t size = data.size();
  // Finds the next 00 00 01 at or after from; returns size when there is none. memchr finds the
  // candidate 01 bytes (vectorized in libc), then the two bytes before each are checked: a
  // byte-at-a-time scan with data-dependent branches ran at a tenth of memory speed.
  auto find_start_code = [&](size_t from) -> size_t {
    size_t i = from + 2;
    while (i < size) {
      const void* hit = std::memchr(begin + i, 1, size - i);
      if (hit == nullptr) return size;
      i = static_cast<size_t>(static_cast<const uint8_t*>(hit) - begin);
      if (begin[i - 1] == 0 && begin[i - 2] == 0) return i - 2;
      ++i;
    }
    return size;
  };
  size_t first_nonzero = 0;
  while (first_nonzero < size && begin[first_nonzero] == 0) ++first_nonzero;
  if (first_nonzero >= size || first_nonzero < 2 || begin[first_nonzero] != 1) return false;
  size_t nal_begin = first_nonzero + 1;
  while (nal_begin < size) {
    const size_t next = find_start_code(nal_begin);
    size_t nal_end = next;
    // Zero bytes before a start code (or at the end) are trailing_zero_8bits, not NAL data: a
    // NAL unit ends with rbsp_stop_one_bit or cabac_zero_word 0x0000 03 (H.264 7.4.2.10).
    while (nal_end > nal_begin && begin[nal_end - 1] == 0) --nal_end;
    if (nal_end > nal_begin) on_nal(data.subspan(nal_begin, nal_end - nal_begin));
    nal_begin = next + 3;
  }
  return true;
}

}  // namespace syncd::rtp
