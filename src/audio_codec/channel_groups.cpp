#include "audio_codec/channel_groups.h"

#include <algorithm>

namespace syncd::audio_codec {

uint32_t channels_per_group(uint32_t bitrate_per_channel, uint32_t frame_ms, size_t payload_bytes) {
  const double average = double(bitrate_per_channel) * frame_ms / 8000.0;
  // +2: the self-delimiting length each stream but the last carries inside the packet.
  const double per_channel = average * kVbrHeadroom + 2.0;
  const auto fit = static_cast<uint32_t>(double(payload_bytes) / per_channel);
  return std::clamp<uint32_t>(fit, 1, kMaxChannels);
}

GroupPlan plan_groups(uint32_t channels, uint32_t max_per_group) {
  GroupPlan plan;
  if (channels == 0 || channels > kMaxChannels || max_per_group == 0) return plan;
  const uint32_t count = (channels + max_per_group - 1) / max_per_group;
  if (count > kMaxGroups) return plan;
  const uint32_t base = channels / count;
  const uint32_t larger = channels % count;  // the first `larger` groups get one more
  uint32_t first = 0;
  for (uint32_t g = 0; g < count; ++g) {
    const uint32_t size = base + (g < larger ? 1 : 0);
    plan.groups[g] = {static_cast<uint8_t>(first), static_cast<uint8_t>(size)};
    first += size;
  }
  plan.count = static_cast<uint8_t>(count);
  return plan;
}

void write_group_header(const GroupHeader& header, std::span<uint8_t> out) {
  out[0] = header.group_index;
  out[1] = header.group_count;
  out[2] = header.group.first_channel;
  out[3] = header.group.channels;
}

HeaderStatus parse_group_header(std::span<const uint8_t> payload, GroupHeader& header,
                                std::span<const uint8_t>& opus_packet) {
  if (payload.size() < kGroupHeaderBytes + 1) return HeaderStatus::kTooShort;
  header.group_index = payload[0];
  header.group_count = payload[1];
  header.group.first_channel = payload[2];
  header.group.channels = payload[3];
  if (header.group_count == 0 || header.group_index >= header.group_count)
    return HeaderStatus::kBadIndex;
  if (header.group.channels == 0 ||
      uint32_t(header.group.first_channel) + header.group.channels > kMaxChannels)
    return HeaderStatus::kBadChannels;
  opus_packet = payload.subspan(kGroupHeaderBytes);
  return HeaderStatus::kOk;
}

bool header_matches_plan(const GroupHeader& header, const GroupPlan& plan) {
  return header.group_count == plan.count && header.group_index < plan.count &&
         plan.groups[header.group_index] == header.group;
}

const char* to_string(HeaderStatus status) {
  switch (status) {
    case HeaderStatus::kOk:
      return "ok";
    case HeaderStatus::kTooShort:
      return "too short";
    case HeaderStatus::kBadIndex:
      return "group index not below group count";
    case HeaderStatus::kBadChannels:
      return "channel count 0 or past channel 255";
  }
  return "?";
}

}  // namespace syncd::audio_codec
