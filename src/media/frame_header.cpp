#include "media/frame_header.h"

#include <bit>

namespace syncd::media {

// The wire is little-endian; syncd targets little-endian hosts (x86-64, arm64), where memcpy of
// a field is the decode. A big-endian port would byte-swap here and nowhere else.
static_assert(std::endian::native == std::endian::little, "syncd supports little-endian hosts");

namespace {
template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename T>
void store(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof v);
}
}  // namespace

FrameHeaderError parse_frame_header(const uint8_t* data, FrameHeader& out) {
  out.magic = load<uint32_t>(data + 0);
  out.version = load<uint16_t>(data + 4);
  out.header_bytes = load<uint16_t>(data + 6);
  out.stream_id = load<uint32_t>(data + 8);
  out.flags = load<uint32_t>(data + 12);
  out.sequence = load<uint64_t>(data + 16);
  out.capture_time_us = load<uint64_t>(data + 24);
  out.width = load<uint32_t>(data + 32);
  out.height = load<uint32_t>(data + 36);
  out.format = load<uint32_t>(data + 40);
  out.reserved = load<uint32_t>(data + 44);
  out.content_hash = load<uint64_t>(data + 48);
  if (out.magic != kFrameMagic) return FrameHeaderError::kBadMagic;
  if (out.version != kFrameHeaderVersion) return FrameHeaderError::kBadVersion;
  if (out.header_bytes != kFrameHeaderBytes) return FrameHeaderError::kBadHeaderBytes;
  if (out.format > kPixelFormatMax) return FrameHeaderError::kBadFormat;
  return FrameHeaderError::kNone;
}

void write_frame_header(const FrameHeader& h, uint8_t* out) {
  store(out + 0, h.magic);
  store(out + 4, h.version);
  store(out + 6, h.header_bytes);
  store(out + 8, h.stream_id);
  store(out + 12, h.flags);
  store(out + 16, h.sequence);
  store(out + 24, h.capture_time_us);
  store(out + 32, h.width);
  store(out + 36, h.height);
  store(out + 40, h.format);
  store(out + 44, h.reserved);
  store(out + 48, h.content_hash);
}

const char* frame_header_error_name(FrameHeaderError e) {
  switch (e) {
    case FrameHeaderError::kNone:
      return "none";
    case FrameHeaderError::kBadMagic:
      return "bad magic";
    case FrameHeaderError::kBadVersion:
      return "unsupported header version";
    case FrameHeaderError::kBadHeaderBytes:
      return "bad header size";
    case FrameHeaderError::kBadFormat:
      return "unknown pixel format";
  }
  return "?";
}

}  // namespace syncd::media
