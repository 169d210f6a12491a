// NAUD packets: the binary reply to audio.read (docs/protocol.md, "Audio: NAUD packets").
//
//  0               1               2               3
//  +---------------+---------------+---------------+---------------+
//  | magic "NAUD"                                                  |  0
//  | version (u16)                 | header bytes (u16) = 64       |  4
//  | channels (u16)                | sample format (u16), 1 = f32le|  8
//  | sample rate (u32)                                             | 12
//  | layout (u8) 0=interleaved| rsv | flags (u16)                  | 16
//  | frame count (u32)                                             | 20
//  | first_frame (u64)                                             | 24
//  | dropped_frames (u64), cumulative for this reader              | 32
//  | gap_frames (u64), cumulative for this reader                  | 40
//  | capture timestamp of first_frame, ns, CLOCK_MONOTONIC (u64)   | 48
//  | packet sequence (u32)                                         | 56
//  | backend xruns (u32), cumulative                               | 60
//  +---------------------------------------------------------------+ 64
//  | frame count x channels float32 LE, interleaved                |
//
// Pure: no I/O, no clock, no allocation. Thread-safe (no shared state).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

#include "audio/capture_ring.h"

namespace syncd::audio {

static_assert(std::endian::native == std::endian::little, "NAUD is little-endian on the wire");

inline constexpr uint32_t kNaudMagic = 0x4455414E;  // bytes 'N' 'A' 'U' 'D'
inline constexpr uint16_t kNaudVersion = 1;
inline constexpr size_t kNaudHeaderBytes = 64;
inline constexpr uint16_t kSampleFormatF32 = 1;
inline constexpr uint8_t kLayoutInterleaved = 0;
// flags bit 0: frames are missing right before first_frame (dropped or gap grew since the
// previous packet of this reader).
inline constexpr uint16_t kNaudFlagDiscontinuity = 1;

struct NaudHeader {
  uint16_t channels = 0;
  uint16_t sample_format = kSampleFormatF32;
  uint32_t rate = 0;
  uint8_t layout = kLayoutInterleaved;
  uint16_t flags = 0;
  uint32_t frames = 0;
  uint64_t first_frame = 0;
  uint64_t dropped_frames = 0;
  uint64_t gap_frames = 0;
  uint64_t timestamp_ns = 0;
  uint32_t sequence = 0;
  uint32_t xruns = 0;

  size_t payload_bytes() const { return size_t(frames) * channels * sizeof(float); }
};

// Writes the 64-byte header. One memcpy per field; no loops.
void encode_naud_header(const NaudHeader& h, uint8_t out[kNaudHeaderBytes]);

// Header plus the samples of `samples` (up to two ring pieces) into out, which must hold
// kNaudHeaderBytes + h.payload_bytes(); h.frames must equal samples.total(). Bulk memcpy.
// Returns the bytes written, or 0 when out is too small or the counts disagree.
size_t encode_naud_packet(const NaudHeader& h, const RingSpan& samples, std::span<uint8_t> out);

enum class NaudError {
  kNone,
  kTooShort,
  kBadMagic,
  kBadVersion,
  kBadHeaderSize,
  kBadFormat,
  kBadLayout,
  kBadChannels,
  kSizeMismatch
};
const char* naud_error_name(NaudError e);

// Parses and validates a whole packet (header and exact payload size).
NaudError parse_naud_packet(std::span<const uint8_t> packet, NaudHeader& out);

}  // namespace syncd::audio
