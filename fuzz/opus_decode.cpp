// libFuzzer target for the Opus multistream decoder (src/audio_codec): arbitrary bytes as relay
// audio payloads. The first byte picks the channel configuration (1, 2, 8 or 32 output channels
// with a group inside them); the rest is cut into payloads by one length byte each. Every
// payload goes through the group header parser and then the decoder; a length byte of 0 stands
// for a lost packet (concealment, or recovery from the next payload's FEC). Checks: a result
// never claims more frames than the output holds, and columns outside the group stay untouched.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "audio_codec/channel_groups.h"
#include "audio_codec/opus_decoder.h"

using namespace syncd::audio_codec;

namespace {

struct Shape {
  uint32_t output_channels;
  ChannelGroup group;
  uint32_t max_frame_samples;
};

constexpr Shape kShapes[] = {
    {1, {0, 1}, 960},   {2, {0, 2}, 960},    {8, {2, 4}, 480},
    {32, {0, 16}, 960}, {32, {16, 16}, 960}, {32, {0, 32}, 5760},
};
constexpr float kSentinel = 12345.0f;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const Shape& shape = kShapes[data[0] % std::size(kShapes)];
  OpusMultistreamDecoder decoder;
  if (!decoder.open({shape.output_channels, shape.group, shape.max_frame_samples})) abort();
  const size_t out_frames = shape.max_frame_samples;
  std::vector<float> out(out_frames * shape.output_channels, kSentinel);

  std::span<const uint8_t> rest(data + 1, size - 1);
  bool pending_loss = false;
  while (!rest.empty()) {
    const size_t length = std::min<size_t>(rest[0], rest.size() - 1);
    std::span<const uint8_t> payload = rest.subspan(1, length);
    rest = rest.subspan(1 + length);
    DecodeResult r;
    if (length == 0) {
      if (pending_loss) r = decoder.conceal(480, out.data(), out_frames);
      pending_loss = true;
    } else {
      GroupHeader header;
      std::span<const uint8_t> packet;
      // Half of the payloads carry the relay's group header, half are bare Opus packets.
      if ((payload[0] & 1) && parse_group_header(payload, header, packet) == HeaderStatus::kOk)
        payload = packet;
      if (pending_loss) {
        r = decoder.recover_from_next(payload, 480, out.data(), out_frames);
        if (r.ok() && r.frames != 480) abort();
        pending_loss = false;
      }
      r = decoder.decode(payload, out.data(), out_frames);
    }
    if (r.frames > out_frames) abort();
  }
  // Columns outside the group are never written.
  for (size_t n = 0; n < out_frames; ++n)
    for (uint32_t c = 0; c < shape.output_channels; ++c) {
      const bool inside = c >= shape.group.first_channel &&
                          c < uint32_t(shape.group.first_channel) + shape.group.channels;
      if (!inside && out[n * shape.output_channels + c] != kSentinel) abort();
    }
  const auto& counters = decoder.counters();
  uint64_t by_reason = 0;
  for (uint64_t v : counters.refused_by_reason) by_reason += v;
  if (by_reason != counters.refused) abort();
  return 0;
}
