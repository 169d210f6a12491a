// The relay's encoder stage (docs/wan.md, "Encoding at the sender"): a raw stream (RGBA8, BGRA8,
// NV12, I420) is encoded to H.264 with video_codec::H264Encoder on a worker thread before the
// relay packetizes it, so a page's canvas crosses the WAN at a few Mbit/s instead of 4 Gbit/s.
//
// The loop pins the raw frame's slot and hands it over (core::WorkerHandoff); the worker converts
// (libyuv) and encodes it straight into one of the stage's own access-unit slots; the result comes
// back to the loop, which unpins the raw slot and passes the access unit to the relay thread like
// a producer's H.264 frame. The access-unit slots are media::FrameSlot values outside any pool:
// the relay reads them as it reads a pooled slot, and gives them back with kFrameDone, when the
// stage takes them back (release()). The encoder itself opens on the worker, at the first frame
// (x264_encoder_open takes milliseconds and allocates: never on the loop).
//
// Keyframes on request (a PLI from the receiver, whose decoder lost sync) are forced at most once
// per kMinKeyframeGapNs; the bitrate follows set_bitrate() (the relay's bandwidth estimate) from
// the next frame. Nothing is allocated per frame: the access-unit slots are allocated at start()
// (kSlots of an I420 frame's size each, the most an access unit of the stream may be), and
// H264Encoder allocates only when it opens.
//
// Thread: construct, start(), stop(), submit(), release(), request_keyframe(), on_estimate() and
// the Done callback: the main loop thread. The encoder runs on the stage's worker.
#pragma once

#include <uv.h>

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/worker_handoff.h"
#include "egress/encode_ladder.h"
#include "egress/encode_settings.h"
#include "media/frame_pool.h"
#include "media/stream.h"
#include "telemetry/stage_stats.h"
#include "video_codec/h264_encoder.h"

namespace syncd::egress {

// What came back from the worker for one raw frame.
struct EncodedFrame {
  media::FrameSlot* raw = nullptr;          // the caller's pinned slot: unpin it
  media::FrameSlot* access_unit = nullptr;  // the stage's slot, filled on success (else null)
  video_codec::EncodeStatus status = video_codec::EncodeStatus::kNotOpen;
  bool keyframe = false;
};

struct EncodeStageCounters {
  uint64_t submitted = 0;
  uint64_t encoded = 0;
  uint64_t keyframes = 0;
  uint64_t keyframes_forced = 0;   // requests honoured
  uint64_t keyframe_requests = 0;  // requests received (some fall inside the minimum gap)
  uint64_t failed = 0;        // the encoder refused the frame, or could not open (last_failure)
  uint64_t bytes = 0;         // access units' bytes
  uint32_t bitrate_kbps = 0;  // what the encoder was last asked for
  uint32_t width = 0;         // the encoded size asked for (resolution steps)
  uint32_t height = 0;
  uint64_t resizes = 0;  // resolution steps the worker made
  uint64_t resize_failures = 0;
  uint64_t steps_down = 0;  // the ladder's decisions (encode_ladder.h) for the bandwidth
  uint64_t steps_up = 0;
  uint64_t load_steps_down = 0;  // and for the encoder's own load (it fell behind the source)
  uint64_t load_steps_up = 0;
  uint32_t load_permille = 0;  // the worker's busy share of the last window
  video_codec::EncodeStatus last_failure = video_codec::EncodeStatus::kOk;
  telemetry::StageStats encode;  // worker: conversion + encode, per frame
};

class EncodeStage {
 public:
  using DoneFn = void (*)(const EncodedFrame& frame, void* context);  // main loop thread
  // Frames with the stage or with the relay at most; the relay publisher's in-flight bound.
  static constexpr size_t kSlots = 4;
  // A PLI forces an IDR, but not more often than this: a burst of requests (one per dropped
  // frame, or a hostile peer) would otherwise turn the stream into IDRs, each several times a
  // P-frame's size, and the extra bytes cause more loss.
  static constexpr uint64_t kMinKeyframeGapNs = 250'000'000;

  // stream: the raw stream to encode (its size, rate and format). done: called on the loop for
  // every submitted frame, in order.
  EncodeStage(const media::StreamConfig& stream, uint32_t stream_id, EncodeSettings settings,
              DoneFn done, void* context);
  ~EncodeStage();
  EncodeStage(const EncodeStage&) = delete;
  EncodeStage& operator=(const EncodeStage&) = delete;

  // Allocates the access-unit slots and starts the worker. False when the stream's format
  // cannot be encoded or the worker cannot start.
  bool start(uv_loop_t* loop);
  // Finishes what was submitted (Done runs for each) and joins the worker. Idempotent.
  void stop();

  // Hands a pinned raw frame to the worker. False (nothing taken) when every access-unit slot is
  // busy: the caller unpins and counts the drop.
  bool submit(media::FrameSlot& raw, uint64_t now_ns);
  // Whether `slot` is one of this stage's access-unit slots; release() gives it back.
  bool owns(const media::FrameSlot* slot) const;
  void release(media::FrameSlot* slot);
  // Some access-unit slot is with the worker or the relay.
  bool in_use() const;

  void request_keyframe(uint64_t now_ns);
  // The relay's bandwidth estimate (bit/s) and what of it the encoder may spend (0: the ladder's
  // own share): the encoder's bitrate (live, x264_encoder_reconfig, no IDR) and picture size (a
  // re-open and an IDR) from the next frame (encode_ladder.h).
  void on_estimate(uint64_t now_ns, uint64_t estimate_bps, uint64_t media_bps = 0);
  const EncodeLadder& ladder() const { return ladder_; }

  const EncodeStageCounters& counters() const { return counters_; }
  const EncodeSettings& settings() const { return settings_; }
  static bool can_encode(media::PixelFormat format);

 private:
  struct Job {
    media::FrameSlot* raw;
    uint32_t out;  // index into slots_
    bool force_keyframe;
    uint32_t bitrate_kbps;   // nonzero: reconfigure first
    uint32_t width, height;  // the encoded size (a resolution step re-opens the encoder)
    // Filled by the worker.
    video_codec::EncodeStatus status;
    bool resized;
    bool resize_failed;
    size_t bytes;
    bool keyframe;
    uint64_t encode_ns;
  };
  static void encode_on_worker(Job& job, void* self);
  static void done_on_loop(Job& job, void* self);

  media::StreamConfig stream_;
  uint32_t stream_id_;
  EncodeSettings settings_;
  DoneFn done_;
  void* context_;
  size_t slot_bytes_ = 0;
  std::vector<uint8_t> memory_;  // kSlots access units, back to back
  std::array<media::FrameSlot, kSlots> slots_;
  std::array<bool, kSlots> busy_{};
  bool keyframe_wanted_ = false;
  uint64_t last_forced_ns_ = 0;
  bool any_forced_ = false;
  uint32_t pending_bitrate_kbps_ = 0;
  EncodeLadder ladder_;
  EncodeStageCounters counters_;
  video_codec::H264Encoder encoder_;  // the worker's
  bool open_failed_ = false;          // the worker's
  uint32_t worker_bitrate_kbps_ = 0;  // the worker's: what x264 was last configured with
  // The encoder's load (EncodeLadder::on_encoder_load): worker time over loop time, per window.
  static constexpr uint64_t kLoadWindowNs = 1'000'000'000;
  uint64_t load_window_start_ns_ = 0;
  uint64_t load_busy_ns_ = 0;
  void measure_load(uint64_t encode_ns, uint64_t now_ns);
  void follow(const EncodeTarget& target);
  // Room for the slots and the open at start() (a power of two, as the rings need).
  std::unique_ptr<core::WorkerHandoff<Job, 2 * kSlots>> worker_;
};

}  // namespace syncd::egress
