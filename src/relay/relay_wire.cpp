#include "relay/relay_wire.h"

#include <charconv>
#include <cstring>

namespace syncd::relay {

namespace {

void put_be(uint8_t* out, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) out[i] = uint8_t(value >> (8 * (bytes - 1 - i)));
}

uint64_t get_be(const uint8_t* in, size_t bytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < bytes; ++i) v = (v << 8) | in[i];
  return v;
}

constexpr uint8_t kAppPacketType = 204;  // RFC 3550 section 12.1
constexpr uint8_t kDescriptionVersion = 1;
constexpr size_t kDescriptionFixedBytes = 32;  // header, SSRC, name, the 5 fixed words

}  // namespace

void write_frame_id(const FrameInfoWire& info, uint8_t out[kFrameIdBytes]) {
  put_be(out, info.sequence, 8);
  put_be(out + 8, info.content_hash, 8);
}

void write_frame_time(const FrameInfoWire& info, uint8_t out[kFrameTimeBytes]) {
  put_be(out, info.capture_time_us, 8);
  put_be(out + 8, info.flags, 4);
}

void write_sender_time(const FrameInfoWire& info, uint8_t out[kSenderTimeBytes]) {
  put_be(out, info.sender_accept_ns, 8);
}

bool read_frame_id(std::span<const uint8_t> e, FrameInfoWire& info) {
  if (e.size() != kFrameIdBytes) return false;
  info.sequence = get_be(e.data(), 8);
  info.content_hash = get_be(e.data() + 8, 8);
  return true;
}

bool read_frame_time(std::span<const uint8_t> e, FrameInfoWire& info) {
  if (e.size() != kFrameTimeBytes) return false;
  info.capture_time_us = get_be(e.data(), 8);
  info.flags = uint32_t(get_be(e.data() + 8, 4));
  return true;
}

bool read_sender_time(std::span<const uint8_t> e, FrameInfoWire& info) {
  if (e.size() != kSenderTimeBytes) return false;
  info.sender_accept_ns = get_be(e.data(), 8);
  return true;
}

const char* description_error_name(DescriptionError error) {
  switch (error) {
    case DescriptionError::kNone:
      return "none";
    case DescriptionError::kTooShort:
      return "too_short";
    case DescriptionError::kNotApp:
      return "not_app";
    case DescriptionError::kNotSync:
      return "not_sync";
    case DescriptionError::kBadLength:
      return "bad_length";
    case DescriptionError::kBadVersion:
      return "bad_version";
    case DescriptionError::kBadName:
      return "bad_name";
    case DescriptionError::kBadGeometry:
      return "bad_geometry";
  }
  return "?";
}

size_t write_stream_description(const StreamDescription& d, std::span<uint8_t> out) {
  if (d.name_bytes == 0 || d.name_bytes > kMaxStreamNameBytes) return 0;
  const size_t bytes = kDescriptionFixedBytes + ((d.name_bytes + 3u) & ~size_t(3));
  if (out.size() < bytes) return 0;
  uint8_t* p = out.data();
  std::memset(p, 0, bytes);
  p[0] = 0x80;  // V=2, P=0, subtype 0
  p[1] = kAppPacketType;
  put_be(p + 2, bytes / 4 - 1, 2);  // RFC 3550 6.4.1: length in 32-bit words minus one
  put_be(p + 4, d.ssrc, 4);
  std::memcpy(p + 8, "SYNC", 4);
  p[12] = kDescriptionVersion;
  p[13] = d.format;
  p[14] = d.name_bytes;
  p[15] = d.source_format;  // reserved (0) in the first syncd with relays: readers ignored it
  put_be(p + 16, d.width, 4);
  put_be(p + 20, d.height, 4);
  put_be(p + 24, d.fps_millihertz, 4);
  put_be(p + 28, d.rtt_100us, 2);
  std::memcpy(p + 32, d.name, d.name_bytes);
  return bytes;
}

DescriptionError parse_stream_description(std::span<const uint8_t> packet, StreamDescription& out) {
  if (packet.size() < 12) return DescriptionError::kTooShort;
  const uint8_t* p = packet.data();
  if ((p[0] >> 6) != 2 || (p[0] & 0x1F) != 0 || p[1] != kAppPacketType)
    return DescriptionError::kNotApp;
  if (std::memcmp(p + 8, "SYNC", 4) != 0) return DescriptionError::kNotSync;
  const size_t declared = (get_be(p + 2, 2) + 1) * 4;
  if (declared != packet.size()) return DescriptionError::kBadLength;
  if (packet.size() < kDescriptionFixedBytes) return DescriptionError::kTooShort;
  if (p[12] != kDescriptionVersion) return DescriptionError::kBadVersion;
  const uint8_t name_bytes = p[14];
  if (name_bytes == 0 || name_bytes > kMaxStreamNameBytes ||
      kDescriptionFixedBytes + name_bytes > packet.size())
    return DescriptionError::kBadName;
  StreamDescription d;
  d.ssrc = uint32_t(get_be(p + 4, 4));
  d.format = p[13];
  d.source_format = p[15];
  d.width = uint32_t(get_be(p + 16, 4));
  d.height = uint32_t(get_be(p + 20, 4));
  d.fps_millihertz = uint32_t(get_be(p + 24, 4));
  d.rtt_100us = uint16_t(get_be(p + 28, 2));
  if (d.width == 0 || d.height == 0 || d.fps_millihertz == 0) return DescriptionError::kBadGeometry;
  d.name_bytes = name_bytes;
  std::memcpy(d.name, p + 32, name_bytes);
  out = d;
  return DescriptionError::kNone;
}

}  // namespace syncd::relay

namespace syncd::relay {

namespace {
constexpr size_t kAudioDescriptionFixedBytes = 24;
constexpr uint8_t kAudioDescriptionVersion = 1;

bool audio_framing_ok(const AudioDescription& d) {
  return (d.frame_samples == 480 || d.frame_samples == 960) && d.payload_type >= 96 &&
         d.payload_type <= 127;
}

bool audio_channels_ok(const AudioDescription& d) {
  if (d.channels == 0 || d.groups == 0 || d.groups > d.channels || d.groups > 32 ||
      d.source_channels == 0 || d.source_channels > kMaxAudioChannels)
    return false;
  for (size_t i = 0; i < d.channels; ++i) {
    if (d.channel_map[i] >= d.source_channels) return false;
    if (i > 0 && d.channel_map[i] <= d.channel_map[i - 1]) return false;
  }
  return true;
}
}  // namespace

const char* audio_description_error_name(AudioDescriptionError error) {
  switch (error) {
    case AudioDescriptionError::kNone:
      return "none";
    case AudioDescriptionError::kTooShort:
      return "too_short";
    case AudioDescriptionError::kNotApp:
      return "not_app";
    case AudioDescriptionError::kNotSync:
      return "not_sync";
    case AudioDescriptionError::kBadLength:
      return "bad_length";
    case AudioDescriptionError::kBadVersion:
      return "bad_version";
    case AudioDescriptionError::kBadChannels:
      return "bad_channels";
    case AudioDescriptionError::kBadFraming:
      return "bad_framing";
  }
  return "?";
}

size_t write_audio_description(const AudioDescription& d, std::span<uint8_t> out) {
  if (!audio_channels_ok(d) || !audio_framing_ok(d)) return 0;
  const size_t bytes = kAudioDescriptionFixedBytes + ((d.channels + 3u) & ~size_t(3));
  if (out.size() < bytes) return 0;
  uint8_t* p = out.data();
  std::memset(p, 0, bytes);
  p[0] = 0x80 | kAudioDescriptionSubtype;
  p[1] = kAppPacketType;
  put_be(p + 2, bytes / 4 - 1, 2);
  put_be(p + 4, d.ssrc, 4);
  std::memcpy(p + 8, "SYNC", 4);
  p[12] = kAudioDescriptionVersion;
  p[13] = d.channels;
  p[14] = d.groups;
  p[15] = d.payload_type;
  put_be(p + 16, d.frame_samples, 2);
  put_be(p + 18, d.source_channels, 2);
  put_be(p + 20, d.bitrate_per_channel, 4);
  std::memcpy(p + 24, d.channel_map, d.channels);
  return bytes;
}

AudioDescriptionError parse_audio_description(std::span<const uint8_t> packet,
                                              AudioDescription& out) {
  if (packet.size() < 12) return AudioDescriptionError::kTooShort;
  const uint8_t* p = packet.data();
  if ((p[0] >> 6) != 2 || (p[0] & 0x1F) != kAudioDescriptionSubtype || p[1] != kAppPacketType)
    return AudioDescriptionError::kNotApp;
  if (std::memcmp(p + 8, "SYNC", 4) != 0) return AudioDescriptionError::kNotSync;
  const size_t declared = (get_be(p + 2, 2) + 1) * 4;
  if (declared != packet.size()) return AudioDescriptionError::kBadLength;
  if (packet.size() < kAudioDescriptionFixedBytes) return AudioDescriptionError::kTooShort;
  if (p[12] != kAudioDescriptionVersion) return AudioDescriptionError::kBadVersion;
  AudioDescription d;
  d.ssrc = uint32_t(get_be(p + 4, 4));
  d.channels = p[13];
  d.groups = p[14];
  d.payload_type = p[15];
  d.frame_samples = uint16_t(get_be(p + 16, 2));
  d.source_channels = uint16_t(get_be(p + 18, 2));
  d.bitrate_per_channel = uint32_t(get_be(p + 20, 4));
  if (d.channels == 0 || kAudioDescriptionFixedBytes + d.channels > packet.size())
    return AudioDescriptionError::kBadChannels;
  std::memcpy(d.channel_map, p + 24, d.channels);
  if (!audio_channels_ok(d)) return AudioDescriptionError::kBadChannels;
  if (!audio_framing_ok(d)) return AudioDescriptionError::kBadFraming;
  out = d;
  return AudioDescriptionError::kNone;
}

bool parse_channel_selection(std::string_view text, uint32_t source_channels,
                             uint8_t (&map)[kMaxAudioChannels], uint32_t& count,
                             std::string& error) {
  count = 0;
  if (source_channels == 0 || source_channels > kMaxAudioChannels) {
    error = "the audio source has no channels to select";
    return false;
  }
  if (text == "none") return true;
  bool chosen[kMaxAudioChannels] = {};
  if (text == "all" || text.empty()) {
    for (uint32_t c = 0; c < source_channels; ++c) chosen[c] = true;
  } else {
    while (!text.empty()) {
      const size_t comma = text.find(',');
      const std::string_view item = text.substr(0, comma);
      text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
      const size_t dash = item.find('-');
      uint32_t lo = 0, hi = 0;
      auto number = [](std::string_view s, uint32_t& v) {
        auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        return !s.empty() && ec == std::errc() && end == s.data() + s.size();
      };
      const bool ok = dash == std::string_view::npos
                          ? number(item, lo) && (hi = lo, true)
                          : number(item.substr(0, dash), lo) && number(item.substr(dash + 1), hi);
      if (!ok || lo > hi || hi >= source_channels) {
        error = "channel selection '" + std::string(item) + "': want N or N-M with channels 0-" +
                std::to_string(source_channels - 1);
        return false;
      }
      for (uint32_t c = lo; c <= hi; ++c) chosen[c] = true;
    }
  }
  for (uint32_t c = 0; c < source_channels; ++c)
    if (chosen[c]) map[count++] = uint8_t(c);
  return true;
}

}  // namespace syncd::relay
