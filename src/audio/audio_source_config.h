// The audio source's settings (--audio-source, --audio-*), plain data (backend.h).
//
// Any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace syncd::audio {

// What --audio-source / --audio-ring-ms / --audio-connect ask for.
struct AudioSourceConfig {
  std::string backend;    // "synthetic", "jack", or "relay" (written by the WAN relay's receiver)
  bool tone = false;      // synthetic: the tone signal instead of the counter (test_signal.h)
  uint32_t channels = 2;  // 1..64
  uint32_t rate = 48000;  // synthetic: chosen; jack: the server's rate wins
  uint32_t ring_ms = 1000;
  uint32_t period_frames = 0;  // synthetic: frames per wake-up; 0 = rate / 200 (5 ms)
  // jack: "system" (physical capture ports, the default), "none", or port names, in order.
  std::vector<std::string> connect = {"system"};
  std::string client_name = "syncd";
};

}  // namespace syncd::audio
