// Built when libjack is not available: the jack backend reports itself missing.
#include "audio/backend.h"

namespace syncd::audio {
std::unique_ptr<CaptureBackend> make_jack_backend(const AudioSourceConfig&, CaptureRing&) {
  return nullptr;
}
uint32_t probe_jack_rate() {
  return 0;
}
}  // namespace syncd::audio
