#include "egress/encode_stage.h"

#include <algorithm>
#include <cmath>

#include "core/clock.h"
#include "media/frame_header.h"

namespace syncd::egress {

namespace {

video_codec::PixelFormat codec_format(media::PixelFormat format) {
  switch (format) {
    case media::PixelFormat::kRgba8:
      return video_codec::PixelFormat::kRgba8;
    case media::PixelFormat::kBgra8:
      return video_codec::PixelFormat::kBgra8;
    case media::PixelFormat::kNv12:
      return video_codec::PixelFormat::kNv12;
    default:
      return video_codec::PixelFormat::kI420;
  }
}

}  // namespace

bool EncodeStage::can_encode(media::PixelFormat format) {
  return format == media::PixelFormat::kRgba8 || format == media::PixelFormat::kBgra8 ||
         format == media::PixelFormat::kNv12 || format == media::PixelFormat::kI420;
}

EncodeStage::EncodeStage(const media::StreamConfig& stream, uint32_t stream_id,
                         EncodeSettings settings, DoneFn done, void* context)
    : stream_(stream),
      stream_id_(stream_id),
      settings_(settings),
      done_(done),
      context_(context),
      ladder_(stream.width, stream.height, stream.fps,
              EncodeLadderConfig{.max_kbps = settings.max_bitrate_kbps}) {
  counters_.bitrate_kbps = settings_.bitrate_kbps;
  counters_.width = stream.width;
  counters_.height = stream.height;
}

EncodeStage::~EncodeStage() {
  stop();
}

bool EncodeStage::start(uv_loop_t* loop) {
  media::FrameLayout i420;
  if (!can_encode(stream_.format) ||
      !media::frame_layout(media::PixelFormat::kI420, stream_.width, stream_.height, i420))
    return false;
  // An access unit larger than the raw picture it codes is no use to anyone (pixel_format.h):
  // the receiver allots the same room.
  slot_bytes_ = i420.bytes;
  memory_.assign(slot_bytes_ * kSlots, 0);
  for (size_t i = 0; i < kSlots; ++i) {
    slots_[i].pixels = memory_.data() + i * slot_bytes_;
    slots_[i].index = uint32_t(i);
  }
  worker_ = std::make_unique<core::WorkerHandoff<Job, 2 * kSlots>>(&encode_on_worker, &done_on_loop,
                                                                   this);
  if (worker_->start(loop) != 0) {
    worker_.reset();
    return false;
  }
  // x264 opens now, on the worker, while the stream's description crosses to the peer: the
  // first frames then do not wait behind it (and are not dropped for it).
  Job open_only{};
  open_only.width = counters_.width;
  open_only.height = counters_.height;
  worker_->submit(open_only);
  return true;
}

void EncodeStage::stop() {
  if (worker_) worker_->stop();  // Done runs for every frame still with it
}

bool EncodeStage::submit(media::FrameSlot& raw, uint64_t now_ns) {
  if (!worker_) return false;
  const auto free = std::find(busy_.begin(), busy_.end(), false);
  if (free == busy_.end()) return false;
  Job job{};
  job.raw = &raw;
  job.out = uint32_t(free - busy_.begin());
  if (keyframe_wanted_ && (!any_forced_ || now_ns - last_forced_ns_ >= kMinKeyframeGapNs)) {
    job.force_keyframe = true;
  }
  job.bitrate_kbps = pending_bitrate_kbps_;
  job.width = counters_.width;
  job.height = counters_.height;
  if (!worker_->submit(job)) return false;
  if (job.force_keyframe) {
    keyframe_wanted_ = false;
    any_forced_ = true;
    last_forced_ns_ = now_ns;
    ++counters_.keyframes_forced;
  }
  pending_bitrate_kbps_ = 0;
  *free = true;
  ++counters_.submitted;
  return true;
}

bool EncodeStage::owns(const media::FrameSlot* slot) const {
  return slot >= slots_.data() && slot < slots_.data() + kSlots;
}

void EncodeStage::release(media::FrameSlot* slot) {
  if (owns(slot)) busy_[size_t(slot - slots_.data())] = false;
}

bool EncodeStage::in_use() const {
  return std::find(busy_.begin(), busy_.end(), true) != busy_.end();
}

void EncodeStage::request_keyframe(uint64_t) {
  ++counters_.keyframe_requests;
  keyframe_wanted_ = true;  // the next frame submitted, if outside the minimum gap
}

void EncodeStage::on_estimate(uint64_t now_ns, uint64_t estimate_bps, uint64_t media_bps) {
  follow(ladder_.on_estimate(now_ns, estimate_bps, media_bps));
}

void EncodeStage::follow(const EncodeTarget& t) {
  counters_.width = t.width;  // the next job carries it; the worker re-opens on a change
  counters_.height = t.height;
  counters_.steps_down = ladder_.steps_down();
  counters_.steps_up = ladder_.steps_up();
  counters_.load_steps_down = ladder_.load_steps_down();
  counters_.load_steps_up = ladder_.load_steps_up();
  if (t.bitrate_kbps == counters_.bitrate_kbps) return;
  pending_bitrate_kbps_ = t.bitrate_kbps;
  counters_.bitrate_kbps = t.bitrate_kbps;
}

void EncodeStage::measure_load(uint64_t encode_ns, uint64_t now_ns) {
  load_busy_ns_ += encode_ns;
  if (load_window_start_ns_ == 0) {
    load_window_start_ns_ = now_ns;
    load_busy_ns_ = 0;
    return;
  }
  const uint64_t elapsed = now_ns - load_window_start_ns_;
  if (elapsed < kLoadWindowNs) return;
  const double load = double(load_busy_ns_) / double(elapsed);
  counters_.load_permille = uint32_t(std::min(load, 9.999) * 1000);
  load_window_start_ns_ = now_ns;
  load_busy_ns_ = 0;
  const EncodeTarget& t = ladder_.on_encoder_load(now_ns, load);
  counters_.width = t.width;
  counters_.height = t.height;
  counters_.load_steps_down = ladder_.load_steps_down();
  counters_.load_steps_up = ladder_.load_steps_up();
}

void EncodeStage::encode_on_worker(Job& job, void* context) {
  auto* self = static_cast<EncodeStage*>(context);
  const uint64_t start = core::monotonic_ns();
  video_codec::H264Encoder& encoder = self->encoder_;
  if (!encoder.is_open() && !self->open_failed_) {
    video_codec::EncoderConfig c;
    c.width = job.width;
    c.height = job.height;
    c.fps = uint32_t(std::lround(std::clamp(self->stream_.fps, 1.0, 240.0)));
    c.bitrate_kbps = self->settings_.bitrate_kbps;  // later changes come with the jobs
    c.keyframe_interval = self->settings_.keyframe_interval;
    c.input_width = self->stream_.width;
    c.input_height = self->stream_.height;
    self->open_failed_ = encoder.open(c) != video_codec::OpenStatus::kOk;
    self->worker_bitrate_kbps_ = c.bitrate_kbps;
  }
  job.resized = false;
  job.resize_failed = false;
  if (encoder.is_open() && job.width != 0 &&
      (job.width != encoder.config().width || job.height != encoder.config().height)) {
    // A resolution step: x264 re-opens at the new size (allocates; the next frame is an IDR);
    // the input stays the stream's size and is scaled into the encoder's picture.
    const uint32_t kbps = job.bitrate_kbps;
    job.resize_failed = encoder.resize(job.width, job.height) != video_codec::OpenStatus::kOk;
    job.resized = !job.resize_failed;
    if (job.resized && kbps == 0) job.bitrate_kbps = self->worker_bitrate_kbps_;
  }
  if (job.bitrate_kbps != 0 && encoder.is_open()) {
    encoder.reconfigure(job.bitrate_kbps, encoder.config().vbv_buffer_ms);
    self->worker_bitrate_kbps_ = job.bitrate_kbps;
  }
  if (!job.raw) return;  // the open at start()
  const media::FrameSlot& raw = *job.raw;
  media::FrameLayout layout;
  media::frame_layout(self->stream_.format, self->stream_.width, self->stream_.height, layout);
  video_codec::InputPicture in;
  in.format = codec_format(self->stream_.format);
  in.width = self->stream_.width;
  in.height = self->stream_.height;
  for (uint32_t p = 0; p < layout.plane_count; ++p) {
    in.planes[p] = raw.pixels + layout.planes[p].offset;
    in.strides[p] = layout.planes[p].stride;
  }
  media::FrameSlot& out = self->slots_[job.out];
  const video_codec::EncodeResult r =
      encoder.encode(in, raw.info.accept_ns, job.force_keyframe,
                     std::span<uint8_t>(out.pixels, self->slot_bytes_));
  job.status = r.status;
  job.bytes = r.bytes;
  job.keyframe = r.keyframe;
  job.encode_ns = core::monotonic_ns() - start;
}

void EncodeStage::done_on_loop(Job& job, void* context) {
  auto* self = static_cast<EncodeStage*>(context);
  if (!job.raw) return;  // the open at start()
  EncodedFrame frame;
  frame.raw = job.raw;
  frame.status = job.status;
  frame.keyframe = job.keyframe;
  self->counters_.encode.record(job.encode_ns);
  self->measure_load(job.encode_ns, core::monotonic_ns());
  if (job.resized) ++self->counters_.resizes;
  if (job.resize_failed) ++self->counters_.resize_failures;
  if (job.status == video_codec::EncodeStatus::kOk) {
    media::FrameSlot& out = self->slots_[job.out];
    // The access unit is the raw frame's, in H.264: its sequence, times and markers. The relay
    // hashes the access unit as it sends it (kHasContentHash), so the receiver can check every
    // byte that crossed before it decodes.
    out.info = job.raw->info;
    out.info.stream_id = self->stream_id_;
    out.info.format = media::PixelFormat::kH264;
    out.info.bytes = job.bytes;
    out.info.flags |= media::frame_flag::kHasContentHash;
    out.info.received_hash_valid = false;
    frame.access_unit = &out;
    ++self->counters_.encoded;
    self->counters_.bytes += job.bytes;
    if (job.keyframe) ++self->counters_.keyframes;
  } else {
    self->busy_[job.out] = false;
    ++self->counters_.failed;
    self->counters_.last_failure = job.status;
  }
  self->done_(frame, self->context_);
}

}  // namespace syncd::egress
