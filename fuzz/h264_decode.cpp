// libFuzzer target for syncd::video_codec::H264Decoder.
//
// The input is a run of access units, each a 2-byte big-endian length and that many bytes (the
// last one takes what is left). Each access unit is copied into its own exact-size allocation so
// any read past it trips ASan, and decoded into a 640x360 I420 output; a stream of another size
// comes back as kSizeChanged and is copied into an output of its own size when that is small.
// The decoder must never crash, and never hand out a picture while it says it waits for an IDR.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "video_codec/h264_decoder.h"

namespace {

using namespace syncd::video_codec;

struct I420Buffer {
  uint32_t width, height;
  std::vector<uint8_t> bytes;
  I420Buffer(uint32_t w, uint32_t h) : width(w), height(h), bytes(size_t{w} * h * 3 / 2) {}
  OutputPicture output() {
    OutputPicture out;
    out.format = PixelFormat::kI420;
    out.width = width;
    out.height = height;
    out.planes[0] = bytes.data();
    out.planes[1] = bytes.data() + size_t{width} * height;
    out.planes[2] = out.planes[1] + size_t{(width + 1) / 2} * ((height + 1) / 2);
    out.strides[0] = width;
    out.strides[1] = (width + 1) / 2;
    out.strides[2] = (width + 1) / 2;
    return out;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  H264Decoder decoder;
  DecoderConfig config;
  config.max_access_unit_bytes = 1 << 16;
  if (!decoder.open(config)) std::abort();
  I420Buffer out(640, 360);
  size_t offset = 0;
  while (offset < size) {
    size_t length = size - offset;
    if (length >= 2) {
      const size_t prefixed = (size_t{data[offset]} << 8) | data[offset + 1];
      offset += 2;
      length = prefixed < size - offset ? prefixed : size - offset;
    }
    std::vector<uint8_t> au(data + offset, data + offset + length);
    offset += length;
    const bool waiting = decoder.needs_keyframe();
    const DecodeResult result = decoder.decode(au, out.output());
    if (waiting && !result.keyframe && result.status == DecodeStatus::kPicture) std::abort();
    if (result.status == DecodeStatus::kSizeChanged && result.width <= 1920 &&
        result.height <= 1088) {
      I420Buffer resized(result.width, result.height);
      if (decoder.copy_picture(resized.output()) != DecodeStatus::kPicture) std::abort();
    }
  }
  return 0;
}
