// The built-in producer (`syncd --source pattern`): a moving test pattern at a chosen size and
// rate, fed to the registry like any producer's frames, so syncd runs its whole frame path with
// no browser attached. Each frame carries its sequence marker and its XXH3 content hash, so the
// test publisher verifies it exactly like a network frame.
//
// Pure apart from the frame pool: time is passed in. The caller (the server) owns the timer.
// Thread: the loop thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "media/pattern_config.h"
#include "media/stream_registry.h"

namespace syncd::media {

// Parses "pattern" or "pattern:WIDTHxHEIGHT@FPS" (e.g. "pattern:1280x720@30").
bool parse_pattern_spec(std::string_view spec, PatternConfig& out, std::string& error);

class PatternSource {
 public:
  static constexpr uint64_t kOwner = 0;  // connection ids start at 1
  static_assert(media::owned_by_syncd(kOwner));

  PatternSource(StreamRegistry& registry, PatternConfig config);
  // Opens the stream; false (with the error code) when the registry refuses it.
  bool start(std::string& error);
  void stop();

  // Renders and admits every frame due at now_ns (at most a few; a late loop does not cause a
  // burst). Returns the delay in ns until the next frame is due.
  uint64_t produce_due(uint64_t now_ns);

  uint64_t frames_produced() const { return sequence_; }
  uint64_t frames_skipped() const { return skipped_; }  // fell more than two periods behind

 private:
  void render(uint8_t* pixels, uint64_t sequence);
  uint64_t due_ns(uint64_t tick) const;

  StreamRegistry& registry_;
  PatternConfig config_;
  Stream* stream_ = nullptr;
  std::vector<uint8_t> row_source_;  // two rows of pattern; each output row is a window of it
  uint64_t period_ns_ = 0;
  uint64_t origin_ns_ = 0;  // due time of tick 0
  uint64_t tick_ = 0;       // next tick to produce
  uint64_t sequence_ = 0;
  uint64_t skipped_ = 0;
};

}  // namespace syncd::media
