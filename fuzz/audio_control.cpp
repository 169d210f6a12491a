// libFuzzer target: the audio control messages (audio.read / readAudioSource / audio.info) and
// the NAUD packet parser. Input is tried both ways: as control JSON, which must give a typed
// message or a coded error (a parsed audio.read must respect its documented bounds), and as a
// NAUD packet, whose parse must accept only packets whose size matches their header and then
// re-encode to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "audio/naud.h"
#include "control/control_message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace syncd;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto result = control::parse_control_message(text);
  if (auto* e = std::get_if<control::ControlError>(&result)) {
    if (e->code == nullptr || e->code[0] == '\0') std::abort();
  } else if (auto* r =
                 std::get_if<control::AudioRead>(&std::get<control::ControlMessage>(result))) {
    if (r->max_frames > (1u << 20) || r->min_frames > (1u << 20) || r->timeout_ms > 10'000)
      std::abort();
    if (r->max_frames != 0 && r->min_frames > r->max_frames) std::abort();
  }

  audio::NaudHeader h;
  if (audio::parse_naud_packet({data, size}, h) == audio::NaudError::kNone) {
    if (size != audio::kNaudHeaderBytes + h.payload_bytes()) std::abort();
    audio::RingSpan span;
    span.part[0] =
        const_cast<float*>(reinterpret_cast<const float*>(data + audio::kNaudHeaderBytes));
    span.frames[0] = h.frames;
    std::vector<uint8_t> out(size);
    // The input may be unaligned for float; encode copies bytes with memcpy, so that is fine.
    if (audio::encode_naud_packet(h, span, out) != size) std::abort();
    // Byte 17 is reserved and re-encoded as 0; everything else must round-trip.
    std::vector<uint8_t> in(data, data + size);
    in[17] = 0;
    if (std::memcmp(in.data(), out.data(), size) != 0) std::abort();
  }
  return 0;
}
