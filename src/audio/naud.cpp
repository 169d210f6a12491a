#include "audio/naud.h"

#include <cstring>

namespace syncd::audio {

namespace {
template <typename T>
void put(uint8_t* out, size_t offset, T v) {
  std::memcpy(out + offset, &v, sizeof v);  // host is little-endian (static_assert in naud.h)
}
template <typename T>
T get(const uint8_t* in, size_t offset) {
  T v;
  std::memcpy(&v, in + offset, sizeof v);
  return v;
}
}  // namespace

void encode_naud_header(const NaudHeader& h, uint8_t out[kNaudHeaderBytes]) {
  put<uint32_t>(out, 0, kNaudMagic);
  put<uint16_t>(out, 4, kNaudVersion);
  put<uint16_t>(out, 6, uint16_t(kNaudHeaderBytes));
  put<uint16_t>(out, 8, h.channels);
  put<uint16_t>(out, 10, h.sample_format);
  put<uint32_t>(out, 12, h.rate);
  put<uint8_t>(out, 16, h.layout);
  put<uint8_t>(out, 17, 0);
  put<uint16_t>(out, 18, h.flags);
  put<uint32_t>(out, 20, h.frames);
  put<uint64_t>(out, 24, h.first_frame);
  put<uint64_t>(out, 32, h.dropped_frames);
  put<uint64_t>(out, 40, h.gap_frames);
  put<uint64_t>(out, 48, h.timestamp_ns);
  put<uint32_t>(out, 56, h.sequence);
  put<uint32_t>(out, 60, h.xruns);
}

size_t encode_naud_packet(const NaudHeader& h, const RingSpan& samples, std::span<uint8_t> out) {
  const size_t total = kNaudHeaderBytes + h.payload_bytes();
  if (out.size() < total || samples.total() != h.frames) return 0;
  encode_naud_header(h, out.data());
  const size_t frame_bytes = size_t(h.channels) * sizeof(float);
  uint8_t* dst = out.data() + kNaudHeaderBytes;
  for (int i = 0; i < 2; ++i) {
    if (samples.frames[i] == 0) continue;
    const size_t n = samples.frames[i] * frame_bytes;
    std::memcpy(dst, samples.part[i], n);
    dst += n;
  }
  return total;
}

const char* naud_error_name(NaudError e) {
  switch (e) {
    case NaudError::kNone:
      return "none";
    case NaudError::kTooShort:
      return "too_short";
    case NaudError::kBadMagic:
      return "bad_magic";
    case NaudError::kBadVersion:
      return "bad_version";
    case NaudError::kBadHeaderSize:
      return "bad_header_size";
    case NaudError::kBadFormat:
      return "bad_format";
    case NaudError::kBadLayout:
      return "bad_layout";
    case NaudError::kBadChannels:
      return "bad_channels";
    case NaudError::kSizeMismatch:
      return "size_mismatch";
  }
  return "unknown";
}

NaudError parse_naud_packet(std::span<const uint8_t> packet, NaudHeader& h) {
  if (packet.size() < kNaudHeaderBytes) return NaudError::kTooShort;
  const uint8_t* p = packet.data();
  if (get<uint32_t>(p, 0) != kNaudMagic) return NaudError::kBadMagic;
  if (get<uint16_t>(p, 4) != kNaudVersion) return NaudError::kBadVersion;
  if (get<uint16_t>(p, 6) != kNaudHeaderBytes) return NaudError::kBadHeaderSize;
  h.channels = get<uint16_t>(p, 8);
  h.sample_format = get<uint16_t>(p, 10);
  h.rate = get<uint32_t>(p, 12);
  h.layout = get<uint8_t>(p, 16);
  h.flags = get<uint16_t>(p, 18);
  h.frames = get<uint32_t>(p, 20);
  h.first_frame = get<uint64_t>(p, 24);
  h.dropped_frames = get<uint64_t>(p, 32);
  h.gap_frames = get<uint64_t>(p, 40);
  h.timestamp_ns = get<uint64_t>(p, 48);
  h.sequence = get<uint32_t>(p, 56);
  h.xruns = get<uint32_t>(p, 60);
  if (h.sample_format != kSampleFormatF32) return NaudError::kBadFormat;
  if (h.layout != kLayoutInterleaved) return NaudError::kBadLayout;
  if (h.channels == 0 || h.channels > 64) return NaudError::kBadChannels;
  if (packet.size() - kNaudHeaderBytes != h.payload_bytes()) return NaudError::kSizeMismatch;
  return NaudError::kNone;
}

}  // namespace syncd::audio
