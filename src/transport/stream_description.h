// A media stream as one end of a transport describes it to the other: which stream to open
// (name, format, size, rate) and what the receiver needs to know of the sender. The WAN relay
// carries it in its RTCP APP packet (relay/relay_wire.h); the transport thread's messages carry
// it between the main loop and the transport (transport_thread.h).
//
// Plain data; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace syncd::transport {

inline constexpr size_t kMaxStreamNameBytes = 64;

struct StreamDescription {
  uint32_t ssrc = 0;
  uint8_t format = 0;  // media::PixelFormat's wire value
  // The raw format the sender's relay encoded the stream from (0: none, the producer sent
  // `format` itself): a receiver decodes such a stream back to raw frames for its consumers.
  uint8_t source_format = 0;
  uint32_t width = 0;
  uint32_t height = 0;
  uint32_t fps_millihertz = 0;
  // The round trip the sender measured from the receiver's reports, in 100 us units (0: not
  // yet): the receiver sends no media, so it learns its NACK and repair timing from this.
  uint16_t rtt_100us = 0;
  uint8_t name_bytes = 0;
  char name[kMaxStreamNameBytes] = {};
  std::string_view name_view() const { return {name, name_bytes}; }
};

}  // namespace syncd::transport
