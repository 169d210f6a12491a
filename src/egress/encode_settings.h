// What an encoder for the network starts from, plain data (encode_stage.h).
//
// Any thread.
#pragma once

#include <cstdint>

namespace syncd::egress {

struct EncodeSettings {
  uint32_t bitrate_kbps = 8000;       // --relay-bitrate: the start, before an estimate
  uint32_t max_bitrate_kbps = 20000;  // --relay-max-bitrate: however high the estimate
  uint32_t keyframe_interval = 120;   // frames between IDRs (2 s at 60 fps)
};

}  // namespace syncd::egress
