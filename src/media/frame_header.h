// Binary video frame header, control protocol v1 (docs/protocol.md, "Binary video frames").
//
// Every binary WebSocket message from a producer is this fixed little-endian header followed by
// the pixels. Pure; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "media/pixel_format.h"

namespace syncd::media {

inline constexpr uint32_t kFrameMagic = 0x464E5953;  // "SYNF" on the wire
inline constexpr uint16_t kFrameHeaderVersion = 1;
inline constexpr size_t kFrameHeaderBytes = 56;

namespace frame_flag {
inline constexpr uint32_t kHasContentHash = 1u << 0;  // content_hash holds XXH3-64 of the pixels
// The pixels carry the sequence's column marker (media/column_marker.h), which survives lossy
// coding: the relay's decoder keeps this flag and clears kHasContentHash.
inline constexpr uint32_t kColumnMarker = 1u << 1;
// syncd's decoder made these pixels (a decoded twin, a relayed stream decoded at the receiver):
// only a column marker can verify them. Set by syncd only; cleared on frames producers send.
inline constexpr uint32_t kDecoded = 1u << 31;
// An encoded stream's access unit after one its source lost (the relay's receiver gave one up):
// a decoder must wait for an IDR. Set by syncd only; cleared on frames producers send.
inline constexpr uint32_t kDiscontinuity = 1u << 30;
}  // namespace frame_flag

// Wire layout (offsets in bytes, all little-endian):
//   0 magic u32 | 4 version u16 | 6 header_bytes u16 | 8 stream_id u32 | 12 flags u32
//  16 sequence u64 | 24 capture_time_us u64 | 32 width u32 | 36 height u32 | 40 format u32
//  44 reserved u32 (0) | 48 content_hash u64 | 56 pixels...
// width/height/format 0 mean "as set up for the stream".
struct FrameHeader {
  uint32_t magic = kFrameMagic;
  uint16_t version = kFrameHeaderVersion;
  uint16_t header_bytes = kFrameHeaderBytes;
  uint32_t stream_id = 0;
  uint32_t flags = 0;
  uint64_t sequence = 0;
  uint64_t capture_time_us = 0;
  uint32_t width = 0;
  uint32_t height = 0;
  uint32_t format = 0;
  uint32_t reserved = 0;
  uint64_t content_hash = 0;
};
static_assert(sizeof(FrameHeader) == kFrameHeaderBytes);
static_assert(offsetof(FrameHeader, stream_id) == 8);
static_assert(offsetof(FrameHeader, sequence) == 16);
static_assert(offsetof(FrameHeader, width) == 32);
static_assert(offsetof(FrameHeader, content_hash) == 48);

enum class FrameHeaderError { kNone, kBadMagic, kBadVersion, kBadHeaderBytes, kBadFormat };

// Parses and checks the fixed part (magic, version, header size, format value).
// The struct's layout equals the wire layout on little-endian hosts; the copy goes field by field
// through memcpy so that the code stays correct on any host alignment.
FrameHeaderError parse_frame_header(const uint8_t* data, FrameHeader& out);
void write_frame_header(const FrameHeader& header, uint8_t* out);
const char* frame_header_error_name(FrameHeaderError e);

// The sequence marker stamped into the first 16 bytes of a frame's pixels by producers:
// sequence u64 LE, then its bitwise complement, so a reader can tell a marker from noise.
inline constexpr size_t kSequenceMarkerBytes = 16;
inline void stamp_sequence_marker(uint8_t* pixels, uint64_t sequence) {
  const uint64_t inverse = ~sequence;
  std::memcpy(pixels, &sequence, 8);
  std::memcpy(pixels + 8, &inverse, 8);
}
inline bool read_sequence_marker(const uint8_t* pixels, uint64_t& sequence) {
  uint64_t inverse;
  std::memcpy(&sequence, pixels, 8);
  std::memcpy(&inverse, pixels + 8, 8);
  return inverse == ~sequence;
}

}  // namespace syncd::media
