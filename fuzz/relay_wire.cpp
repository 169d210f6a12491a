// libFuzzer target: the relay's own wire formats (src/relay/relay_wire.h) on arbitrary bytes.
// A description that parses must write back to the same bytes it was read from (up to the
// padding, which the writer zeroes), and the demultiplexer must classify anything.
#include "relay/relay_wire.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace syncd::relay;
  const std::span<const uint8_t> in(data, size);
  (void)datagram_kind_name(classify_datagram(in));
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
  return 0;
}
