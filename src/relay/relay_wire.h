// The WAN relay's own wire formats, beside the standard ones that src/rtp carries
// (docs/wan.md, "Relay wire formats"):
//  - the frame-info header extensions on the first RTP packet of every access unit, which carry
//    what the producer's frame header said (sequence, content hash, capture time, flags) and
//    the sender's accept time, so the receiver's publishers see the frame as it was sent;
//  - the stream description, an RTCP APP packet ("SYNC"), that tells the receiver which stream
//    to open (name, format, width, height, rate).
//
// Pure: bytes in, values out; no allocation. Any thread; no state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "transport/stream_description.h"

namespace syncd::relay {

// RFC 8285 one-byte header extension ids the relay uses (abs-send-time is src/rtp's, id 3).
inline constexpr uint8_t kFrameIdExtension = 4;     // sequence u64, content hash u64: 16 bytes
inline constexpr uint8_t kFrameTimeExtension = 5;   // capture time us u64, flags u32: 12 bytes
inline constexpr uint8_t kSenderTimeExtension = 6;  // sender accept time ns u64: 8 bytes
inline constexpr size_t kFrameIdBytes = 16;
inline constexpr size_t kFrameTimeBytes = 12;
inline constexpr size_t kSenderTimeBytes = 8;

// What the first packet of an access unit says about its frame.
struct FrameInfoWire {
  uint64_t sequence = 0;
  uint64_t content_hash = 0;
  uint64_t capture_time_us = 0;
  uint32_t flags = 0;
  uint64_t sender_accept_ns = 0;  // CLOCK_MONOTONIC of the sender: a latency figure only when
                                  // both ends share a clock (two syncd on one machine)
};
// Big-endian element payloads. The writers fill exactly their *_Bytes; the readers refuse any
// other length (false).
void write_frame_id(const FrameInfoWire& info, uint8_t out[kFrameIdBytes]);
void write_frame_time(const FrameInfoWire& info, uint8_t out[kFrameTimeBytes]);
void write_sender_time(const FrameInfoWire& info, uint8_t out[kSenderTimeBytes]);
bool read_frame_id(std::span<const uint8_t> element, FrameInfoWire& info);
bool read_frame_time(std::span<const uint8_t> element, FrameInfoWire& info);
bool read_sender_time(std::span<const uint8_t> element, FrameInfoWire& info);

// The stream description: RTCP APP (RFC 3550 section 6.7), name "SYNC", subtype 0.
//
//   0                   1                   2                   3
//   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//  |V=2|P|subtype=0|   PT=APP=204  |             length            |
//  |                        SSRC of the sender                     |
//  |                          "SYNC"                               |
//  |   version=1   |    format     |  name length  | source format |
//  |                             width                             |
//  |                             height                            |
//  |                    frame rate, millihertz                     |
//  |    sender's RTT, 100 us units |           reserved            |
//  |   name (UTF-8, name length bytes), zero-padded to 32 bits ... |
// The relay carries transport::StreamDescription (transport/stream_description.h).
using transport::kMaxStreamNameBytes;
using transport::StreamDescription;
inline constexpr size_t kMaxStreamDescriptionBytes = 32 + kMaxStreamNameBytes;
enum class DescriptionError : uint8_t {
  kNone,
  kTooShort,
  kNotApp,       // version, packet type or subtype
  kNotSync,      // another application's APP packet: not ours to read
  kBadLength,    // the length field disagrees with the bytes
  kBadVersion,   // a description version this syncd does not know
  kBadName,      // empty, over 64 bytes, or past the packet
  kBadGeometry,  // zero width, height or rate
};
const char* description_error_name(DescriptionError error);
// Writes the packet into out; returns its length (a multiple of 4), or 0 when out is too small
// or the description cannot be written (empty name, over 64 bytes).
size_t write_stream_description(const StreamDescription& d, std::span<uint8_t> out);
// Reads one APP packet (its RTCP header included, as a compound walk hands it out).
DescriptionError parse_stream_description(std::span<const uint8_t> packet, StreamDescription& out);

// The audio description: RTCP APP, name "SYNC", subtype 1 (the stream description's parser
// refuses any subtype but 0, so an older receiver ignores it). It tells the receiver which of the
// sender's capture channels the audio stream carries, in order, and how they are framed, so the
// receiver opens one decoder per group and writes channel i of the stream into column i of its
// capture ring (docs/wan.md, "Audio").
//
//   0                   1                   2                   3
//   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//  |V=2|P|subtype=1|   PT=APP=204  |             length            |
//  |                    SSRC of the audio stream                   |
//  |                          "SYNC"                               |
//  |   version=1   | channel count |  group count  | payload type  |
//  |  frame samples (48 kHz)       |  capture channels of the source |
//  |                   bit rate per channel, bit/s                 |
//  |  capture channel index of stream channel 0, 1, ... (channel count bytes), zero-padded
inline constexpr size_t kMaxAudioChannels = 255;
inline constexpr size_t kMaxAudioDescriptionBytes = 24 + ((kMaxAudioChannels + 3) & ~size_t(3));
inline constexpr uint8_t kAudioDescriptionSubtype = 1;
struct AudioDescription {
  uint32_t ssrc = 0;
  uint8_t channels = 0;          // 1..255: channels in the stream
  uint8_t groups = 0;            // 1..32: Opus multistream packets per frame
  uint8_t payload_type = 0;      // the audio RTP packets' payload type (96..127)
  uint16_t frame_samples = 0;    // 480 (10 ms) or 960 (20 ms)
  uint16_t source_channels = 0;  // the sender's capture width, 1..255
  uint32_t bitrate_per_channel = 0;
  uint8_t channel_map[kMaxAudioChannels] = {};  // strictly increasing, each < source_channels
};
enum class AudioDescriptionError : uint8_t {
  kNone,
  kTooShort,
  kNotApp,  // version, packet type or subtype
  kNotSync,
  kBadLength,
  kBadVersion,
  kBadChannels,  // count 0, a map entry out of range or not increasing, groups 0 or > channels
  kBadFraming,   // frame samples not 480 or 960, payload type outside 96..127
};
const char* audio_description_error_name(AudioDescriptionError error);
// Writes the packet; returns its length (a multiple of 4), or 0 when out is too small or the
// description would not parse back.
size_t write_audio_description(const AudioDescription& d, std::span<uint8_t> out);
AudioDescriptionError parse_audio_description(std::span<const uint8_t> packet,
                                              AudioDescription& out);
// Parses a channel selection "0-7,16" (or "all" / "none") against a capture of
// source_channels channels into an increasing map. Returns false with a sentence in error.
// "none" yields count 0.
bool parse_channel_selection(std::string_view text, uint32_t source_channels,
                             uint8_t (&map)[kMaxAudioChannels], uint32_t& count,
                             std::string& error);

}  // namespace syncd::relay
