#include "video_codec/h264_decoder.h"

#include <libyuv.h>

#include <array>
#include <cmath>
#include <cstring>
#include <vector>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavutil/frame.h>
#include <libavutil/log.h>
}

namespace syncd::video_codec {

struct H264Decoder::State {
  DecoderConfig config;
  AVCodecContext* context = nullptr;
  AVPacket* packet = nullptr;
  AVFrame* frame = nullptr;     // the last good picture
  AVFrame* received = nullptr;  // what avcodec_receive_frame() writes, moved into frame
  bool frame_held = false;      // frame holds the last decoded picture
  // The access unit with AV_INPUT_BUFFER_PADDING_SIZE zero bytes after it, as libavcodec's
  // bitstream reader needs; allocated at open.
  std::vector<uint8_t> input;
  bool needs_keyframe = true;
  uint32_t last_width = 0;
  uint32_t last_height = 0;
  DecoderCounters counters;
};

namespace {

struct NalSummary {
  bool annexb = false;  // starts with a start code and holds at least one NAL unit
  bool idr = false;
};

// Walks the Annex B start codes; only the NAL unit types matter here.
NalSummary summarize(std::span<const uint8_t> au) {
  NalSummary summary;
  const size_t n = au.size();
  if (n < 4) return summary;
  const bool starts = (au[0] == 0 && au[1] == 0 && au[2] == 1) ||
                      (au[0] == 0 && au[1] == 0 && au[2] == 0 && au[3] == 1);
  if (!starts) return summary;
  for (size_t i = 0; i + 3 < n; ++i) {
    if (au[i] == 0 && au[i + 1] == 0 && au[i + 2] == 1) {
      const uint8_t header = au[i + 3];
      if ((header & 0x80) == 0) summary.annexb = true;  // forbidden_zero_bit clear
      if ((header & 0x1f) == 5) summary.idr = true;
      i += 2;
    }
  }
  return summary;
}

bool valid_output(const OutputPicture& out) {
  if (out.width == 0 || out.height == 0 || out.planes[0] == nullptr || out.planes[1] == nullptr ||
      out.strides[0] < out.width) {
    return false;
  }
  if (out.format == PixelFormat::kI420) {
    return out.planes[2] != nullptr && out.strides[1] >= (out.width + 1) / 2 &&
           out.strides[2] >= (out.width + 1) / 2;
  }
  if (out.format == PixelFormat::kNv12) return out.strides[1] >= (out.width + 1) / 2 * 2;
  return false;
}

}  // namespace

H264Decoder::H264Decoder() : state_(std::make_unique<State>()) {}

H264Decoder::~H264Decoder() {
  close();
}

void H264Decoder::close() {
  State& s = *state_;
  avcodec_free_context(&s.context);
  av_packet_free(&s.packet);
  av_frame_free(&s.frame);
  av_frame_free(&s.received);
  s.frame_held = false;
}

bool H264Decoder::is_open() const {
  return state_->context != nullptr;
}

bool H264Decoder::needs_keyframe() const {
  return state_->needs_keyframe;
}

const DecoderCounters& H264Decoder::counters() const {
  return state_->counters;
}

void H264Decoder::note_loss() {
  state_->needs_keyframe = true;
  ++state_->counters.losses_noted;
}

bool H264Decoder::open(const DecoderConfig& config) {
  close();
  State& s = *state_;
  if (config.threads == 0 || config.max_access_unit_bytes == 0) return false;
  av_log_set_level(AV_LOG_QUIET);
  const AVCodec* codec = avcodec_find_decoder(AV_CODEC_ID_H264);
  if (codec == nullptr) return false;
  s.context = avcodec_alloc_context3(codec);
  s.packet = av_packet_alloc();
  s.frame = av_frame_alloc();
  s.received = av_frame_alloc();
  if (s.context == nullptr || s.packet == nullptr || s.frame == nullptr || s.received == nullptr) {
    close();
    return false;
  }
  s.context->flags |= AV_CODEC_FLAG_LOW_DELAY;
  s.context->err_recognition = AV_EF_EXPLODE;
  s.context->thread_count = static_cast<int>(config.threads);
  s.context->thread_type = FF_THREAD_SLICE;
  if (avcodec_open2(s.context, codec, nullptr) < 0) {
    close();
    return false;
  }
  s.config = config;
  s.input.assign(config.max_access_unit_bytes + AV_INPUT_BUFFER_PADDING_SIZE, 0);
  s.needs_keyframe = true;
  s.last_width = 0;
  s.last_height = 0;
  return true;
}

namespace {

// Full range (0-255) to limited (luma 16-235, chroma 16-240 around 128), one table per kind of
// plane. libyuv has no plane-range conversion in Debian's version; a table is one load a byte.
struct RangeTables {
  std::array<uint8_t, 256> luma{}, chroma{};
  RangeTables() {
    for (int v = 0; v < 256; ++v) {
      luma[size_t(v)] = uint8_t(16 + (v * 219 + 127) / 255);
      chroma[size_t(v)] = uint8_t(std::lround(128 + (v - 128) * 224.0 / 255.0));
    }
  }
};

void limit_plane(uint8_t* plane, uint32_t stride, uint32_t width, uint32_t height,
                 const std::array<uint8_t, 256>& table) {
  for (uint32_t y = 0; y < height; ++y) {
    uint8_t* row = plane + size_t{y} * stride;
    for (uint32_t x = 0; x < width; ++x) row[x] = table[row[x]];
  }
}

}  // namespace

DecodeStatus H264Decoder::copy_picture(const OutputPicture& out) {
  State& s = *state_;
  if (!s.frame_held) return DecodeStatus::kNoPicture;
  if (!valid_output(out)) {
    ++s.counters.bad_output;
    return DecodeStatus::kBadOutput;
  }
  const AVFrame& f = *s.frame;
  if (static_cast<uint32_t>(f.width) != out.width ||
      static_cast<uint32_t>(f.height) != out.height) {
    ++s.counters.size_changed_held;
    return DecodeStatus::kSizeChanged;
  }
  const int w = f.width;
  const int h = f.height;
  if (out.format == PixelFormat::kI420) {
    libyuv::I420Copy(f.data[0], f.linesize[0], f.data[1], f.linesize[1], f.data[2], f.linesize[2],
                     out.planes[0], static_cast<int>(out.strides[0]), out.planes[1],
                     static_cast<int>(out.strides[1]), out.planes[2],
                     static_cast<int>(out.strides[2]), w, h);
  } else {
    libyuv::I420ToNV12(f.data[0], f.linesize[0], f.data[1], f.linesize[1], f.data[2], f.linesize[2],
                       out.planes[0], static_cast<int>(out.strides[0]), out.planes[1],
                       static_cast<int>(out.strides[1]), w, h);
  }
  if (f.color_range == AVCOL_RANGE_JPEG || f.format == AV_PIX_FMT_YUVJ420P) {
    // Consumers read syncd's I420 as limited range (the camera says so to PipeWire): black at
    // 0 would be below black, and a column marker's 0/255 outside its reader's window.
    static const RangeTables tables;
    const uint32_t cw = (out.width + 1) / 2, ch = (out.height + 1) / 2;
    limit_plane(out.planes[0], out.strides[0], out.width, out.height, tables.luma);
    if (out.format == PixelFormat::kI420) {
      limit_plane(out.planes[1], out.strides[1], cw, ch, tables.chroma);
      limit_plane(out.planes[2], out.strides[2], cw, ch, tables.chroma);
    } else {
      limit_plane(out.planes[1], out.strides[1], 2 * cw, ch, tables.chroma);
    }
    ++s.counters.full_range_pictures;
  }
  return DecodeStatus::kPicture;
}

DecodeResult H264Decoder::decode(std::span<const uint8_t> au, const OutputPicture& out) {
  State& s = *state_;
  DecodeResult result;
  ++s.counters.access_units_in;
  if (s.context == nullptr) {
    result.status = DecodeStatus::kNotOpen;
    return result;
  }
  if (au.empty()) {
    result.status = DecodeStatus::kRefusedEmpty;
    ++s.counters.refused_empty;
    return result;
  }
  if (au.size() > s.config.max_access_unit_bytes) {
    result.status = DecodeStatus::kRefusedTooLarge;
    ++s.counters.refused_too_large;
    return result;
  }
  const NalSummary summary = summarize(au);
  if (!summary.annexb) {
    result.status = DecodeStatus::kRefusedNotAnnexB;
    ++s.counters.refused_not_annexb;
    return result;
  }
  result.keyframe = summary.idr;
  if (summary.idr) ++s.counters.keyframes_in;
  if (s.needs_keyframe && !summary.idr) {
    result.status = DecodeStatus::kAwaitingKeyframe;
    ++s.counters.awaiting_keyframe;
    return result;
  }

  std::memcpy(s.input.data(), au.data(), au.size());
  std::memset(s.input.data() + au.size(), 0, AV_INPUT_BUFFER_PADDING_SIZE);
  s.packet->data = s.input.data();
  s.packet->size = static_cast<int>(au.size());
  const int sent = avcodec_send_packet(s.context, s.packet);
  av_packet_unref(s.packet);
  bool error = sent < 0 && sent != AVERROR(EAGAIN);
  bool got_picture = false;
  bool corrupt = false;
  // One picture per access unit with LOW_DELAY and no B-frames; drain anyway so the decoder
  // never holds a packet of ours into the next call.
  while (!error) {
    const int received = avcodec_receive_frame(s.context, s.received);
    if (received == AVERROR(EAGAIN) || received == AVERROR_EOF) break;
    if (received < 0) {
      error = true;
      break;
    }
    if ((s.received->flags & AV_FRAME_FLAG_CORRUPT) != 0 || s.received->decode_error_flags != 0) {
      corrupt = true;
      av_frame_unref(s.received);
      continue;
    }
    av_frame_unref(s.frame);
    av_frame_move_ref(s.frame, s.received);
    s.frame_held = true;
    got_picture = true;
  }
  if (error) {
    // Drop whatever the decoder half-built; the next IDR starts clean.
    avcodec_flush_buffers(s.context);
    s.needs_keyframe = true;
    result.status = DecodeStatus::kDecodeError;
    ++s.counters.decode_errors;
    return result;
  }
  if (corrupt && !got_picture) {
    s.needs_keyframe = true;
    result.status = DecodeStatus::kCorruptPicture;
    ++s.counters.corrupt_pictures;
    return result;
  }
  if (summary.idr) s.needs_keyframe = false;
  if (!got_picture) {
    result.status = DecodeStatus::kNoPicture;
    return result;
  }
  const AVFrame& f = *s.frame;
  if (f.format != AV_PIX_FMT_YUV420P && f.format != AV_PIX_FMT_YUVJ420P) {
    s.frame_held = false;
    av_frame_unref(s.frame);
    result.status = DecodeStatus::kUnsupportedFormat;
    ++s.counters.unsupported_format;
    return result;
  }
  result.width = static_cast<uint32_t>(f.width);
  result.height = static_cast<uint32_t>(f.height);
  if (result.width != s.last_width || result.height != s.last_height) {
    result.resolution_changed = true;
    ++s.counters.resolution_changes;
    s.last_width = result.width;
    s.last_height = result.height;
  }
  ++s.counters.pictures_out;
  result.status = copy_picture(out);
  return result;
}

}  // namespace syncd::video_codec
