// Capture backends: each owns a real-time thread that writes float32 frames into a CaptureRing
// (docs/audio.md). The loop thread creates, starts, maintains and stops a backend; the backend's
// own threads only touch the ring's writer side and atomics.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "audio/audio_source_config.h"
#include "audio/capture_ring.h"

namespace syncd::audio {

// Parses "synthetic[:CHANNELS[@RATE]][,tone]", "jack[:CHANNELS]" or "relay[:CHANNELS]" (the
// relay's receiver writes the ring; docs/wan.md "Audio"). Control plane (startup).
bool parse_audio_source_spec(const std::string& spec, AudioSourceConfig& out, std::string& error);

// A snapshot of a backend's state, read on the loop thread.
struct BackendStatus {
  const char* state = "stopped";  // "running", "disconnected", "stopped"
  uint32_t rate = 0;              // current device rate
  uint32_t period_frames = 0;     // current device period (JACK buffer size)
  uint64_t xruns = 0;             // as reported by the device (JACK xrun callback)
  uint64_t disconnects = 0;       // times the audio server went away
  uint64_t reconnects = 0;        // times we came back
  bool realtime = false;          // the capture thread runs SCHED_FIFO (or JACK's RT thread)
};

class CaptureBackend {
 public:
  virtual ~CaptureBackend() = default;
  // Loop thread. Starts capturing into the ring. False with a reason when it cannot.
  virtual bool start(std::string& error) = 0;
  // Loop thread. Stops and joins every backend thread; idempotent.
  virtual void stop() = 0;
  // Loop thread, snapshot.
  virtual BackendStatus status() const = 0;
  virtual const char* name() const = 0;
};

// The ring is written by the backend's real-time thread; it must outlive the backend.
std::unique_ptr<CaptureBackend> make_synthetic_backend(const AudioSourceConfig& config,
                                                       CaptureRing& ring);
// nullptr when syncd was built without JACK.
std::unique_ptr<CaptureBackend> make_jack_backend(const AudioSourceConfig& config,
                                                  CaptureRing& ring);

}  // namespace syncd::audio

namespace syncd::audio {
// Loop thread, startup only (talks to the JACK server): the server's sample rate, or 0 when no
// server answers (or JACK is not built in).
uint32_t probe_jack_rate();
}  // namespace syncd::audio
