// libFuzzer target: the relay's own wire formats (src/relay/relay_wire.h) on arbitrary bytes.
// A description that parses must write back to the same bytes it was read from (up to the
// padding, which the writer zeroes), and the demultiplexer must classify anything.
#include "relay/relay_wire.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "transport/datagram_kind.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace syncd::relay;
  const std::span<const uint8_t> in(data, size);
  (void)syncd::transport::datagram_kind_name(syncd::transport::classify_datagram(in));
  FrameInfoWire info;
  (void)read_frame_id(in, info);
  (void)read_frame_time(in, info);
  (void)read_sender_time(in, info);
  StreamDescription d;
  if (parse_stream_description(in, d) == DescriptionError::kNone) {
    uint8_t out[kMaxStreamDescriptionBytes];
    const size_t n = write_stream_description(d, out);
    StreamDescription again;
    if (n == 0 || parse_stream_description({out, n}, again) != DescriptionError::kNone ||
        again.name_view() != d.name_view() || again.width != d.width || again.height != d.height ||
        again.format != d.format)
      std::abort();
  }
  AudioDescription a;
  if (parse_audio_description(in, a) == AudioDescriptionError::kNone) {
    uint8_t out[kMaxAudioDescriptionBytes];
    const size_t n = write_audio_description(a, out);
    AudioDescription again;
    if (n == 0 || parse_audio_description({out, n}, again) != AudioDescriptionError::kNone ||
        again.channels != a.channels || again.groups != a.groups ||
        std::memcmp(again.channel_map, a.channel_map, a.channels) != 0)
      std::abort();
  }
  // Channel selections, against a capture width taken from the first byte.
  if (size > 0) {
    uint8_t map[kMaxAudioChannels];
    uint32_t count = 0;
    std::string error;
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    if (parse_channel_selection(text, data[0], map, count, error))
      for (uint32_t i = 1; i < count; ++i)
        if (map[i] <= map[i - 1] || map[i] >= data[0]) std::abort();
  }
  return 0;
}
