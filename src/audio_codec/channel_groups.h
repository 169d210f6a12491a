// How the relay's audio channels are split into Opus multistream packets, and the 4-byte header
// that names a packet's group on the wire (docs/codec.md, "Payload format").
//
// One RTP packet must fit 1200 bytes. At the default 32 kbit/s per channel and 10 ms frames a
// channel costs ~40 bytes (plus a 1-2 byte self-delimiting length inside the multistream
// packet), so 32 channels (~1.3 kB) do not fit one packet: the channels are cut into contiguous
// groups, each encoded by its own multistream encoder into its own packet, all groups of one
// frame under the same RTP timestamp.
//
// Pure functions; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace syncd::audio_codec {

inline constexpr uint32_t kSampleRate = 48000;
inline constexpr uint32_t kMaxChannels = 255;  // libopus multistream limit
inline constexpr size_t kMaxGroups = 32;
// Opus multistream bytes a group may fill, so that header + RTP (12) + abs-send-time extension
// (8) + SRTP AES-GCM tag (16) stays within 1200 bytes with room to spare.
inline constexpr size_t kDefaultGroupPayloadBytes = 1100;
// Budget per channel = average bytes at the target rate times this headroom, since constrained
// VBR lets one frame run above the average (measured peaks ~1.3x on music).
inline constexpr double kVbrHeadroom = 1.5;

struct ChannelGroup {
  uint8_t first_channel = 0;  // index in the capture's interleaved frame
  uint8_t channels = 0;       // 1..255
  bool operator==(const ChannelGroup&) const = default;
};

struct GroupPlan {
  ChannelGroup groups[kMaxGroups];
  uint8_t count = 0;
  std::span<const ChannelGroup> span() const { return {groups, count}; }
};

// Channels one group may carry: how many channels at bitrate_per_channel over frame_ms fit
// payload_bytes with kVbrHeadroom, at least 1.
uint32_t channels_per_group(uint32_t bitrate_per_channel, uint32_t frame_ms,
                            size_t payload_bytes = kDefaultGroupPayloadBytes);

// Splits channels (1..255) into the fewest contiguous groups of at most max_per_group channels,
// balanced so sizes differ by at most one (32 channels, max 17 -> 16 + 16). Returns count 0 when
// channels or max_per_group is 0, or more than kMaxGroups groups would be needed.
GroupPlan plan_groups(uint32_t channels, uint32_t max_per_group);

// Payload format, ahead of the Opus multistream packet in each RTP payload:
//
//   0                   1                   2                   3
//   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//  +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//  |  group index  |  group count  | first channel | channel count |
//  +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//  |  Opus multistream packet (RFC 6716 Appendix B framing), one mono stream per channel ...
//
// The receiver checks the header against its own plan, so a packet is never decoded into the
// wrong channels.
inline constexpr size_t kGroupHeaderBytes = 4;

struct GroupHeader {
  uint8_t group_index = 0;
  uint8_t group_count = 0;
  ChannelGroup group;
  bool operator==(const GroupHeader&) const = default;
};

enum class HeaderStatus : uint8_t {
  kOk,
  kTooShort,     // fewer than kGroupHeaderBytes + 1 bytes
  kBadIndex,     // group count 0 or index >= count
  kBadChannels,  // channel count 0 or first + count > 255
};

// Writes the 4 header bytes; out must hold kGroupHeaderBytes.
void write_group_header(const GroupHeader& header, std::span<uint8_t> out);
// Parses the header of payload; on kOk, opus_packet is the rest (at least one byte).
HeaderStatus parse_group_header(std::span<const uint8_t> payload, GroupHeader& header,
                                std::span<const uint8_t>& opus_packet);
const char* to_string(HeaderStatus status);

// Whether a parsed header names exactly group header.group_index of the receiver's plan (same
// group count, first channel and channel count), so its packet may go to that group's decoder.
bool header_matches_plan(const GroupHeader& header, const GroupPlan& plan);

}  // namespace syncd::audio_codec
