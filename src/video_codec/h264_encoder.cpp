#include "video_codec/h264_encoder.h"

#include <libyuv.h>

#include <cstring>
#include <vector>

extern "C" {
#include <x264.h>
}

namespace syncd::video_codec {

const char* encode_status_name(EncodeStatus status) {
  switch (status) {
    case EncodeStatus::kOk:
      return "ok";
    case EncodeStatus::kNotOpen:
      return "not_open";
    case EncodeStatus::kBadInput:
      return "bad_input";
    case EncodeStatus::kInputSize:
      return "input_size";
    case EncodeStatus::kOutputTooSmall:
      return "output_too_small";
    case EncodeStatus::kEncoderFailed:
      return "encoder_failed";
  }
  return "?";
}

// An I420 picture of our own, allocated at open.
struct I420Buffer {
  uint32_t width = 0;
  uint32_t height = 0;
  std::vector<uint8_t> bytes;
  uint8_t* y() { return bytes.data(); }
  uint8_t* u() { return y() + static_cast<size_t>(width) * height; }
  uint8_t* v() { return u() + static_cast<size_t>(width / 2) * (height / 2); }
  void allocate(uint32_t w, uint32_t h) {
    width = w;
    height = h;
    bytes.assign(static_cast<size_t>(w) * h * 3 / 2, 0);
  }
};

struct H264Encoder::State {
  EncoderConfig config;
  x264_t* encoder = nullptr;
  x264_param_t param{};
  // At the encoded size: what x264 reads when the input is converted or scaled.
  I420Buffer encoder_picture;
  // At the input size: RGBA or NV12 converted to I420 before scaling to the encoded size.
  I420Buffer input_picture;
  int64_t frame_index = 0;
  EncoderCounters counters;
};

namespace {

uint32_t vbv_kbit(uint32_t bitrate_kbps, uint32_t vbv_buffer_ms, uint32_t fps) {
  const uint64_t ms = vbv_buffer_ms != 0 ? vbv_buffer_ms : 0;
  const uint64_t kbit = ms != 0 ? uint64_t{bitrate_kbps} * ms / 1000 : bitrate_kbps / fps;
  return static_cast<uint32_t>(kbit < 1 ? 1 : kbit);
}

bool valid_size(uint32_t width, uint32_t height) {
  return width >= 16 && height >= 16 && width % 2 == 0 && height % 2 == 0 && width <= 8192 &&
         height <= 8192;
}

bool valid_input(const InputPicture& in) {
  if (!valid_size(in.width, in.height)) return false;
  switch (in.format) {
    case PixelFormat::kRgba8:
    case PixelFormat::kBgra8:
      return in.planes[0] != nullptr && in.strides[0] >= in.width * 4;
    case PixelFormat::kI420:
      return in.planes[0] != nullptr && in.planes[1] != nullptr && in.planes[2] != nullptr &&
             in.strides[0] >= in.width && in.strides[1] >= in.width / 2 &&
             in.strides[2] >= in.width / 2;
    case PixelFormat::kNv12:
      return in.planes[0] != nullptr && in.planes[1] != nullptr && in.strides[0] >= in.width &&
             in.strides[1] >= in.width;
  }
  return false;
}

// x264_param_default_preset() prints an unknown name to stderr: check it against x264's list first.
bool known_preset(const char* name) {
  for (const char* const* preset = x264_preset_names; *preset != nullptr; ++preset) {
    if (std::strcmp(*preset, name) == 0) return true;
  }
  return false;
}

int stride_of(uint32_t s) {
  return static_cast<int>(s);
}

}  // namespace

H264Encoder::H264Encoder() : state_(std::make_unique<State>()) {}

H264Encoder::~H264Encoder() {
  close();
}

void H264Encoder::close() {
  if (state_->encoder != nullptr) {
    x264_encoder_close(state_->encoder);
    state_->encoder = nullptr;
  }
}

bool H264Encoder::is_open() const {
  return state_->encoder != nullptr;
}

const EncoderConfig& H264Encoder::config() const {
  return state_->config;
}

const EncoderCounters& H264Encoder::counters() const {
  return state_->counters;
}

OpenStatus H264Encoder::open(const EncoderConfig& requested) {
  close();
  EncoderConfig config = requested;
  if (config.input_width == 0) config.input_width = config.width;
  if (config.input_height == 0) config.input_height = config.height;
  if (!valid_size(config.width, config.height) ||
      !valid_size(config.input_width, config.input_height) || config.fps == 0 || config.fps > 240 ||
      config.bitrate_kbps == 0 || config.preset == nullptr || config.threads == 0 ||
      config.keyframe_interval == 0) {
    return OpenStatus::kBadConfig;
  }
  x264_param_t& p = state_->param;
  if (!known_preset(config.preset) ||
      x264_param_default_preset(&p, config.preset, "zerolatency") < 0) {
    return OpenStatus::kBadConfig;
  }
  p.i_log_level = X264_LOG_NONE;  // no logs from inside the module: errors come back as status
  p.i_width = static_cast<int>(config.width);
  p.i_height = static_cast<int>(config.height);
  p.i_csp = X264_CSP_I420;  // x264 also takes NV12 pictures with this (both are 4:2:0)
  p.i_fps_num = config.fps;
  p.i_fps_den = 1;
  p.i_timebase_num = 1;
  p.i_timebase_den = config.fps;
  p.b_vfr_input = 0;
  p.i_threads = static_cast<int>(config.threads);
  p.b_sliced_threads = 1;  // frame threads would add a frame of delay per thread
  p.i_sync_lookahead = 0;
  p.rc.i_lookahead = 0;
  p.i_bframe = 0;
  p.i_keyint_max = static_cast<int>(config.keyframe_interval);
  p.i_keyint_min = static_cast<int>(config.keyframe_interval);
  p.i_scenecut_threshold = 0;  // IDRs only on the interval or on request: predictable sizes
  p.b_intra_refresh = config.keyframe_mode == KeyframeMode::kIntraRefresh ? 1 : 0;
  p.rc.i_rc_method = X264_RC_ABR;
  p.rc.i_bitrate = static_cast<int>(config.bitrate_kbps);
  p.rc.i_vbv_max_bitrate = static_cast<int>(config.bitrate_kbps);
  p.rc.i_vbv_buffer_size =
      static_cast<int>(vbv_kbit(config.bitrate_kbps, config.vbv_buffer_ms, config.fps));
  p.b_aud = 1;             // the relay and sync-producer split the stream at AUDs
  p.b_repeat_headers = 1;  // SPS/PPS before every IDR: a receiver can join at any IDR
  p.b_annexb = 1;
  state_->encoder = x264_encoder_open(&p);
  if (state_->encoder == nullptr) return OpenStatus::kEncoderFailed;
  // Read back what x264 settled on (it may adjust e.g. the VBV), for reconfigure().
  x264_encoder_parameters(state_->encoder, &p);
  state_->config = config;
  state_->encoder_picture.allocate(config.width, config.height);
  state_->input_picture.allocate(config.input_width, config.input_height);
  state_->frame_index = 0;
  return OpenStatus::kOk;
}

OpenStatus H264Encoder::resize(uint32_t width, uint32_t height) {
  EncoderConfig config = state_->config;
  config.width = width;
  config.height = height;
  const OpenStatus status = open(config);
  if (status == OpenStatus::kOk) ++state_->counters.reopens;
  return status;
}

bool H264Encoder::reconfigure(uint32_t bitrate_kbps, uint32_t vbv_buffer_ms) {
  State& s = *state_;
  if (s.encoder == nullptr || bitrate_kbps == 0) {
    ++s.counters.failed_reconfigure;
    return false;
  }
  x264_param_t p;
  x264_encoder_parameters(s.encoder, &p);
  p.rc.i_bitrate = static_cast<int>(bitrate_kbps);
  p.rc.i_vbv_max_bitrate = static_cast<int>(bitrate_kbps);
  p.rc.i_vbv_buffer_size = static_cast<int>(vbv_kbit(bitrate_kbps, vbv_buffer_ms, s.config.fps));
  if (x264_encoder_reconfig(s.encoder, &p) < 0) {
    ++s.counters.failed_reconfigure;
    return false;
  }
  s.config.bitrate_kbps = bitrate_kbps;
  s.config.vbv_buffer_ms = vbv_buffer_ms;
  ++s.counters.reconfigures;
  return true;
}

EncodeResult H264Encoder::encode(const InputPicture& in, uint64_t pts_ns, bool force_keyframe,
                                 std::span<uint8_t> out_buffer) {
  State& s = *state_;
  EncodeResult result;
  result.pts_ns = pts_ns;
  ++s.counters.frames_in;
  if (s.encoder == nullptr) {
    result.status = EncodeStatus::kNotOpen;
    ++s.counters.failed_not_open;
    return result;
  }
  if (!valid_input(in)) {
    result.status = EncodeStatus::kBadInput;
    ++s.counters.failed_bad_input;
    return result;
  }
  if (in.width != s.config.input_width || in.height != s.config.input_height) {
    result.status = EncodeStatus::kInputSize;
    ++s.counters.failed_input_size;
    return result;
  }

  x264_picture_t picture;
  x264_picture_init(&picture);
  const bool scaled = in.width != s.config.width || in.height != s.config.height;
  I420Buffer& target = s.encoder_picture;
  I420Buffer& staging = s.input_picture;
  // RGBA/BGRA (and NV12 when scaling) become I420 at the input size first: in staging when a
  // scale follows, straight in the encoder's picture otherwise.
  I420Buffer& converted = scaled ? staging : target;
  bool use_converted = true;
  switch (in.format) {
    case PixelFormat::kRgba8:
      libyuv::ABGRToI420(in.planes[0], stride_of(in.strides[0]), converted.y(),
                         stride_of(converted.width), converted.u(), stride_of(converted.width / 2),
                         converted.v(), stride_of(converted.width / 2), stride_of(in.width),
                         stride_of(in.height));
      break;
    case PixelFormat::kBgra8:
      libyuv::ARGBToI420(in.planes[0], stride_of(in.strides[0]), converted.y(),
                         stride_of(converted.width), converted.u(), stride_of(converted.width / 2),
                         converted.v(), stride_of(converted.width / 2), stride_of(in.width),
                         stride_of(in.height));
      break;
    case PixelFormat::kNv12:
      if (scaled) {
        libyuv::NV12ToI420(in.planes[0], stride_of(in.strides[0]), in.planes[1],
                           stride_of(in.strides[1]), converted.y(), stride_of(converted.width),
                           converted.u(), stride_of(converted.width / 2), converted.v(),
                           stride_of(converted.width / 2), stride_of(in.width),
                           stride_of(in.height));
      } else {
        // x264 takes NV12 as it is (its own frames are NV12): no conversion here.
        use_converted = false;
        picture.img.i_csp = X264_CSP_NV12;
        picture.img.i_plane = 2;
        for (int i = 0; i < 2; ++i) {
          picture.img.plane[i] = const_cast<uint8_t*>(in.planes[i]);
          picture.img.i_stride[i] = stride_of(in.strides[i]);
        }
      }
      break;
    case PixelFormat::kI420:
      if (scaled) {
        libyuv::I420Scale(in.planes[0], stride_of(in.strides[0]), in.planes[1],
                          stride_of(in.strides[1]), in.planes[2], stride_of(in.strides[2]),
                          stride_of(in.width), stride_of(in.height), target.y(),
                          stride_of(target.width), target.u(), stride_of(target.width / 2),
                          target.v(), stride_of(target.width / 2), stride_of(target.width),
                          stride_of(target.height), libyuv::kFilterBilinear);
        break;
      }
      use_converted = false;
      picture.img.i_csp = X264_CSP_I420;
      picture.img.i_plane = 3;
      for (int i = 0; i < 3; ++i) {
        picture.img.plane[i] = const_cast<uint8_t*>(in.planes[i]);
        picture.img.i_stride[i] = stride_of(in.strides[i]);
      }
      break;
  }
  if (use_converted) {
    if (scaled && in.format != PixelFormat::kI420) {
      libyuv::I420Scale(staging.y(), stride_of(staging.width), staging.u(),
                        stride_of(staging.width / 2), staging.v(), stride_of(staging.width / 2),
                        stride_of(staging.width), stride_of(staging.height), target.y(),
                        stride_of(target.width), target.u(), stride_of(target.width / 2),
                        target.v(), stride_of(target.width / 2), stride_of(target.width),
                        stride_of(target.height), libyuv::kFilterBilinear);
    }
    picture.img.i_csp = X264_CSP_I420;
    picture.img.i_plane = 3;
    picture.img.plane[0] = target.y();
    picture.img.plane[1] = target.u();
    picture.img.plane[2] = target.v();
    picture.img.i_stride[0] = stride_of(target.width);
    picture.img.i_stride[1] = stride_of(target.width / 2);
    picture.img.i_stride[2] = stride_of(target.width / 2);
  }
  picture.i_pts = s.frame_index++;
  picture.i_type = force_keyframe ? X264_TYPE_IDR : X264_TYPE_AUTO;

  x264_nal_t* nals = nullptr;
  int nal_count = 0;
  x264_picture_t encoded;
  const int size = x264_encoder_encode(s.encoder, &nals, &nal_count, &picture, &encoded);
  if (size <= 0 || nal_count <= 0) {
    // With zerolatency (no lookahead, no B-frames, sliced threads) every input yields its access
    // unit at once; nothing is a failure.
    result.status = EncodeStatus::kEncoderFailed;
    ++s.counters.failed_encoder;
    return result;
  }
  const size_t bytes = static_cast<size_t>(size);
  if (bytes > out_buffer.size()) {
    result.status = EncodeStatus::kOutputTooSmall;
    ++s.counters.failed_output_too_small;
    return result;
  }
  // x264 guarantees the payloads of one call's NAL units are consecutive in memory.
  std::memcpy(out_buffer.data(), nals[0].p_payload, bytes);
  result.status = EncodeStatus::kOk;
  result.bytes = bytes;
  result.bits = uint64_t{bytes} * 8;
  result.keyframe = encoded.i_type == X264_TYPE_IDR;
  ++s.counters.frames_encoded;
  s.counters.bytes += bytes;
  if (result.keyframe) ++s.counters.keyframes;
  if (force_keyframe && result.keyframe) ++s.counters.forced_keyframes;
  return result;
}

}  // namespace syncd::video_codec
