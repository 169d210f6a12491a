// H.264 encoder for the live relay (docs/codec.md), on libx264: low latency (tune zerolatency, no
// B-frames, no lookahead, one output access unit per input frame), Annex B with an access unit
// delimiter before every access unit and SPS/PPS repeated on every IDR, so the relay and
// sync-producer can split the stream at AUDs and a receiver can join at any IDR.
//
// Input is RGBA8/BGRA8 (converted with libyuv on the calling thread into the encoder's own I420
// picture), or I420/NV12 handed to x264 as they are. An input of another size than the encoded
// one (after a resolution step) is scaled with libyuv into the encoder's own picture.
//
// Pure: no sockets, clocks, logs or threads of its own (x264 runs sliced threads inside
// x264_encoder_encode when threads > 1, and returns before the call does). open() and resize()
// allocate (x264's frame pool, the conversion pictures); encode() does not, and neither does x264
// inside it in steady state (0 allocations a frame, measured in video_codec_bench).
//
// Thread: any one thread at a time; one instance per stream. Never throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "video_codec/picture.h"

namespace syncd::video_codec {

enum class KeyframeMode : uint8_t {
  // An IDR every keyframe_interval frames and on request. The default: every IDR is a place
  // where the receiver's decoder (which waits for an IDR after a loss) and a late joiner recover,
  // and the relay's PLI path needs exactly that.
  kPeriodicIdr,
  // Periodic intra refresh: a column of intra blocks sweeps the picture over keyframe_interval
  // frames, so no frame is much larger than another (smoother for the pacer), but there is no IDR
  // to recover at except the first and forced ones. force_keyframe still produces an IDR.
  kIntraRefresh,
};

struct EncoderConfig {
  uint32_t width = 1920;  // encoded size; both even
  uint32_t height = 1080;
  // Size of the pictures given to encode(); 0: the encoded size. The conversion and scaling
  // pictures are allocated for it at open, so a frame of another size is refused.
  uint32_t input_width = 0;
  uint32_t input_height = 0;
  uint32_t fps = 60;
  uint32_t bitrate_kbps = 8000;
  // VBV buffer in ms at bitrate_kbps (0: one frame interval, 1000 / fps). 100 ms (6 frames at
  // 60 fps): P-frames stay near the average size under ABR anyway; the buffer bounds how far an
  // IDR may exceed it. Measured at 1080p, 8 Mbit/s (docs/codec.md): a one-frame buffer gives a
  // 15 KB IDR with a mean luma error of 28 that takes seconds to heal, and at 2 Mbit/s the
  // column marker is unreadable on IDRs; 100 ms gives a 66 KB IDR with error 15 and the marker
  // reads on every frame. The cost: an IDR takes up to 100 ms of the target rate to send.
  uint32_t vbv_buffer_ms = 100;
  // x264 preset. "ultrafast" encodes 1080p on one core in 7-9 ms here (docs/benchmarks.md),
  // "superfast" in 12-14 ms: only ultrafast leaves room for 1080p60 on 2 cores.
  const char* preset = "ultrafast";
  // x264 threads, sliced (one slice per thread, no frame of delay). 1 by default: the sending
  // machine has 2 cores and syncd's own threads use the other one (docs/codec.md).
  uint32_t threads = 1;
  KeyframeMode keyframe_mode = KeyframeMode::kPeriodicIdr;
  uint32_t keyframe_interval = 120;  // frames between IDRs (or the refresh period)
};

enum class EncodeStatus : uint8_t {
  kOk,
  kNotOpen,         // open() was not called or failed
  kBadInput,        // a null plane, a stride smaller than a row, or an odd size
  kInputSize,       // input size differs from the configured input size
  kOutputTooSmall,  // out_buffer cannot hold the access unit; the frame is lost (ask for an IDR)
  kEncoderFailed,   // x264_encoder_encode returned an error or no access unit
};

// "ok", "not_open", "bad_input", "input_size", "output_too_small", "encoder_failed".
const char* encode_status_name(EncodeStatus status);

enum class OpenStatus : uint8_t {
  kOk,
  kBadConfig,      // zero or odd size, zero fps or bitrate, unknown preset
  kEncoderFailed,  // x264_encoder_open refused the parameters
};

struct EncodeResult {
  EncodeStatus status = EncodeStatus::kNotOpen;
  size_t bytes = 0;       // the access unit's size in out_buffer (Annex B, from its AUD)
  bool keyframe = false;  // an IDR
  uint64_t bits = 0;      // bytes * 8, the frame's encoded bits for the rate controller
  uint64_t pts_ns = 0;    // the input's pts: one in, one out
};

struct EncoderCounters {
  uint64_t frames_in = 0;
  uint64_t frames_encoded = 0;
  uint64_t keyframes = 0;
  uint64_t forced_keyframes = 0;  // force_keyframe requests honoured
  uint64_t bytes = 0;
  uint64_t reconfigures = 0;
  uint64_t reopens = 0;  // resize() calls that succeeded
  uint64_t failed_not_open = 0;
  uint64_t failed_bad_input = 0;
  uint64_t failed_input_size = 0;
  uint64_t failed_output_too_small = 0;
  uint64_t failed_encoder = 0;
  uint64_t failed_reconfigure = 0;
};

class H264Encoder {
 public:
  H264Encoder();
  ~H264Encoder();
  H264Encoder(const H264Encoder&) = delete;
  H264Encoder& operator=(const H264Encoder&) = delete;

  // Opens (or re-opens) the encoder. Allocates x264's frames and the conversion pictures.
  OpenStatus open(const EncoderConfig& config);
  void close();
  bool is_open() const;
  const EncoderConfig& config() const;

  // Encodes one frame into out_buffer. pts_ns is the caller's capture time, returned with the
  // access unit. force_keyframe (a PLI or FIR) makes this frame an IDR, whatever the mode.
  EncodeResult encode(const InputPicture& input, uint64_t pts_ns, bool force_keyframe,
                      std::span<uint8_t> out_buffer);

  // Changes bitrate and VBV live (x264_encoder_reconfig): applies from the next frame, no IDR.
  // vbv_buffer_ms as in EncoderConfig. Returns false (counted) when x264 refuses.
  bool reconfigure(uint32_t bitrate_kbps, uint32_t vbv_buffer_ms);

  // Re-opens at a new encoded size (a resolution step, e.g. 1080p -> 720p), keeping the input
  // size, rate and keyframe settings; the next frame is an IDR with new SPS/PPS. Allocates.
  OpenStatus resize(uint32_t width, uint32_t height);

  const EncoderCounters& counters() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace syncd::video_codec
