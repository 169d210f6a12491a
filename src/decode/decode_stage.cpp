#include "decode/decode_stage.h"

#include <libyuv.h>
#include <sched.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "media/frame_header.h"
#include "media/pixel_format.h"
#include "telemetry/stage_json.h"

namespace syncd::decode {

const char* decode_drop_name(DecodeDrop drop) {
  switch (drop) {
    case DecodeDrop::kAwaitingKeyframe:
      return "awaiting_keyframe";
    case DecodeDrop::kDecodeError:
      return "decode_error";
    case DecodeDrop::kRefused:
      return "refused";
    case DecodeDrop::kPoolFull:
      return "pool_full";
    case DecodeDrop::kWorkerBusy:
      return "worker_busy";
    case DecodeDrop::kCommitRefused:
      return "commit_refused";
    case DecodeDrop::kStopped:
      return "stopped";
    case DecodeDrop::kCount:
      break;
  }
  return "?";
}

DecodeStage::DecodeStage(media::StreamRegistry& registry, DecodeStageHooks hooks,
                         DecodeStageConfig config)
    : registry_(registry), hooks_(hooks), config_(config) {}

DecodeStage::~DecodeStage() {
  stop();
}

bool DecodeStage::start(uv_loop_t* loop, std::string& error) {
  if (started_ || stopped_) {
    error = "the decode stage starts once";
    return false;
  }
  worker_ = std::make_unique<core::WorkerHandoff<Job, kMaxDepth>>(&decode_on_worker,
                                                                  &result_on_loop, this);
  if (const int rc = worker_->start(loop); rc != 0) {
    worker_.reset();
    error = std::string("cannot start the decoder's worker: ") + uv_strerror(rc);
    return false;
  }
  started_ = true;
  return true;
}

bool DecodeStage::open(const media::Stream& stream, uint64_t owner, std::string& error) {
  close_stream();
  const media::StreamConfig& c = stream.config();
  if (c.format != media::PixelFormat::kI420) {
    error = "the decoder writes I420 only";
    return false;
  }
  // The worker is idle (close_stream() took every result back through the hand-off's rings,
  // which order the worker's writes before this), so the loop may reopen the decoder here.
  if (!decoder_.open(config_.decoder)) {
    error = "libavcodec would not open its H.264 decoder";
    return false;
  }
  stream_id_ = stream.id();
  owner_ = owner;
  width_ = c.width;
  height_ = c.height;
  decode_width_ = c.width;
  decode_height_ = c.height;
  pending_loss_ = false;
  awaiting_keyframe_ = false;
  requested_ = false;
  return true;
}

void DecodeStage::close_stream() {
  for (; queue_size_ > 0; --queue_size_, queue_head_ = (queue_head_ + 1) % kMaxQueue)
    drop(DecodeDrop::kStopped, queue_[queue_head_].au.buffer);
  counters_.queued = 0;
  closing_ = true;
  if (worker_) worker_->flush();  // every lease committed or aborted, every buffer given back
  closing_ = false;
  stream_id_ = 0;
}

void DecodeStage::stop() {
  if (stopped_) return;
  close_stream();
  if (worker_) worker_->stop();
  decoder_.close();
  stopped_ = true;
}

void DecodeStage::drop(DecodeDrop reason, uint32_t buffer) {
  ++counters_.dropped[size_t(reason)];
  if (hooks_.buffer_done) hooks_.buffer_done(buffer, hooks_.context);
}

void DecodeStage::tell_undecodable(uint64_t sequence, video_codec::DecodeStatus status) {
  if (!hooks_.undecodable) return;
  using video_codec::DecodeStatus;
  const char* why = "the decoder made no picture of it";
  switch (status) {
    case DecodeStatus::kDecodeError:
      why = "libavcodec found an error in the bitstream";
      break;
    case DecodeStatus::kCorruptPicture:
      why = "the picture came out corrupt";
      break;
    case DecodeStatus::kRefusedEmpty:
      why = "the access unit is empty";
      break;
    case DecodeStatus::kRefusedTooLarge:
      why = "the access unit is larger than the decoder takes";
      break;
    case DecodeStatus::kRefusedNotAnnexB:
      why = "not H.264 Annex B: no start code, or no NAL unit";
      break;
    case DecodeStatus::kUnsupportedFormat:
      why = "not 8-bit 4:2:0";
      break;
    default:
      break;
  }
  hooks_.undecodable(sequence, why, hooks_.context);
}

void DecodeStage::want_keyframe(uint64_t now_ns) {
  if (requested_ && now_ns - last_request_ns_ < config_.keyframe_request_interval_ns) {
    ++counters_.keyframe_requests_throttled;
    return;
  }
  requested_ = true;
  last_request_ns_ = now_ns;
  ++counters_.keyframe_requests;
  if (hooks_.keyframe_wanted) hooks_.keyframe_wanted(hooks_.context);
}

void DecodeStage::submit(const AccessUnitIn& au, uint64_t now_ns) {
  ++counters_.frames_in;
  last_now_ns_ = now_ns;
  if (!worker_ || stopped_ || stream_id_ == 0) {
    drop(DecodeDrop::kStopped, au.buffer);
    return;
  }
  // An access unit the source lost (the relay's jitter buffer gave it up, a restarted sender) broke
  // the chain of references: nothing decodes cleanly until an IDR. The source says so; a gap in the
  // producer's sequence alone is not a loss (the sender drops raw frames before its encoder).
  if (au.loss_before) {
    ++counters_.gaps;
    pending_loss_ = true;
  }
  if (pending_loss_) awaiting_keyframe_ = true;
  if (awaiting_keyframe_) want_keyframe(now_ns);

  // In order behind what waits already; straight to the worker when nothing waits and it has
  // room.
  const size_t index = queue_size_ == 0 ? free_index() : depth();
  if (index < depth()) {
    // A frame dropped on its way to the worker is a loss before the next one submitted.
    pending_loss_ = !hand_over(au, pending_loss_, core::monotonic_ns(), index);
    return;
  }
  if (queue_size_ >= std::min(config_.queue, kMaxQueue)) {
    // The decoder never sees this frame: the next one must wait for an IDR.
    pending_loss_ = true;
    awaiting_keyframe_ = true;
    drop(DecodeDrop::kWorkerBusy, au.buffer);
    return;
  }
  queue_[(queue_head_ + queue_size_) % kMaxQueue] = Queued{au, pending_loss_, core::monotonic_ns()};
  ++queue_size_;
  pending_loss_ = false;
  counters_.queued = queue_size_;
  counters_.queued_max = std::max<uint64_t>(counters_.queued_max, queue_size_);
}

size_t DecodeStage::depth() const {
  return std::clamp<size_t>(config_.depth, 1, kMaxDepth);
}

size_t DecodeStage::free_index() const {
  for (size_t i = 0; i < depth(); ++i)
    if (!busy_[i]) return i;
  return depth();
}

void DecodeStage::dispatch() {
  while (queue_size_ > 0 && !closing_ && stream_id_ != 0) {
    const size_t index = free_index();
    if (index == depth()) return;
    const Queued q = queue_[queue_head_];
    queue_head_ = (queue_head_ + 1) % kMaxQueue;
    --queue_size_;
    counters_.queued = queue_size_;
    // A frame dropped between the queue and the worker is a loss before the next in order: the
    // new head, else the next submitted.
    if (!hand_over(q.au, q.loss_before, q.submitted_ns, index)) {
      if (queue_size_ > 0)
        queue_[queue_head_].loss_before = true;
      else
        pending_loss_ = true;
    }
  }
}

bool DecodeStage::hand_over(const AccessUnitIn& au, bool loss_before, uint64_t submitted_ns,
                            size_t index) {
  media::IngestRequest r;
  r.stream_id = stream_id_;
  r.owner = owner_;
  // Decoded pixels are not the sender's bytes: no content hash; the column marker survives.
  r.flags = (au.flags & ~media::frame_flag::kHasContentHash) | media::frame_flag::kDecoded;
  r.sequence = au.sequence;
  r.capture_time_us = au.capture_time_us;
  r.start_ns = au.start_ns;
  media::IngestRefusal refusal;
  media::SlotLease lease = registry_.begin(r, refusal);
  if (!lease) {
    awaiting_keyframe_ = true;
    drop(DecodeDrop::kPoolFull, au.buffer);
    return false;
  }
  media::FrameLayout layout;
  media::frame_layout(media::PixelFormat::kI420, width_, height_, layout);
  Job job{};
  job.index = uint32_t(index);
  job.width = width_;
  job.height = height_;
  job.data = au.data;
  job.bytes = au.bytes;
  job.out.format = video_codec::PixelFormat::kI420;
  job.out.width = width_;
  job.out.height = height_;
  for (size_t p = 0; p < 3; ++p) {
    job.out.planes[p] = lease.pixels() + layout.planes[p].offset;
    job.out.strides[p] = layout.planes[p].stride;
  }
  job.loss_before = loss_before;
  job.submitted_ns = submitted_ns;  // `held` is measured on the real clock, queueing included
  leases_[index] = std::move(lease);
  buffers_[index] = au.buffer;
  busy_[index] = true;
  if (!worker_->submit(job)) {
    // Cannot happen (a free index means fewer than kMaxDepth jobs in flight); accounted anyway.
    busy_[index] = false;
    leases_[index].abort(media::DropReason::kUndecodable);
    awaiting_keyframe_ = true;
    drop(DecodeDrop::kWorkerBusy, au.buffer);
    return false;
  }
  ++counters_.in_flight;
  return true;
}

void DecodeStage::decode_on_worker(Job& job, void* self) {
  // A batch thread, like the camera's worker: woken by the loop's hand-off, it does not preempt
  // the loop on a busy 2-core machine. Lowering one's own policy needs no privilege; should it
  // fail, the stage works as before.
  static thread_local const bool batch = [] {
    sched_param param{};
    return sched_setscheduler(0, SCHED_BATCH, &param) == 0;
  }();
  (void)batch;
  static_cast<DecodeStage*>(self)->decode(job);
}

void DecodeStage::decode(Job& job) {
  const uint64_t start_ns = core::monotonic_ns();
  if (job.loss_before) decoder_.note_loss();
  const std::span<const uint8_t> au(job.data, job.bytes);
  const bool scaling = decode_width_ != job.width || decode_height_ != job.height;
  video_codec::OutputPicture scratch;
  auto scratch_picture = [&] {
    scratch.format = video_codec::PixelFormat::kI420;
    scratch.width = decode_width_;
    scratch.height = decode_height_;
    const uint32_t cw = (decode_width_ + 1) / 2;
    const uint32_t ch = (decode_height_ + 1) / 2;
    scratch.planes[0] = scratch_.data();
    scratch.planes[1] = scratch.planes[0] + size_t(decode_width_) * decode_height_;
    scratch.planes[2] = scratch.planes[1] + size_t(cw) * ch;
    scratch.strides[0] = decode_width_;
    scratch.strides[1] = cw;
    scratch.strides[2] = cw;
  };
  if (scaling) scratch_picture();
  video_codec::DecodeResult result = decoder_.decode(au, scaling ? scratch : job.out);
  bool into_scratch = scaling;
  if (result.status == video_codec::DecodeStatus::kSizeChanged) {
    // The sender stepped its resolution: from now on pictures of this size.
    decode_width_ = result.width;
    decode_height_ = result.height;
    if (decode_width_ == job.width && decode_height_ == job.height) {
      into_scratch = false;
      result.status = decoder_.copy_picture(job.out);
    } else {
      const uint32_t cw = (decode_width_ + 1) / 2;
      const uint32_t ch = (decode_height_ + 1) / 2;
      // Once per size change, never per frame.
      scratch_.assign(size_t(decode_width_) * decode_height_ + 2 * size_t(cw) * ch, 0);
      job.scratch_allocated = true;
      scratch_picture();
      into_scratch = true;
      result.status = decoder_.copy_picture(scratch);
    }
  }
  if (result.status == video_codec::DecodeStatus::kPicture && into_scratch) {
    libyuv::I420Scale(scratch.planes[0], int(scratch.strides[0]), scratch.planes[1],
                      int(scratch.strides[1]), scratch.planes[2], int(scratch.strides[2]),
                      int(scratch.width), int(scratch.height), job.out.planes[0],
                      int(job.out.strides[0]), job.out.planes[1], int(job.out.strides[1]),
                      job.out.planes[2], int(job.out.strides[2]), int(job.width), int(job.height),
                      libyuv::kFilterBilinear);
    job.scaled = true;
  }
  job.result = result;
  job.decode_ns = core::monotonic_ns() - start_ns;
}

void DecodeStage::result_on_loop(Job& job, void* self) {
  static_cast<DecodeStage*>(self)->finish(job);
}

void DecodeStage::finish(Job& job) {
  complete(job);
  dispatch();  // the worker has room for the next waiting
}

void DecodeStage::complete(Job& job) {
  const uint64_t now_ns = core::monotonic_ns();
  --counters_.in_flight;
  counters_.held.record(now_ns - job.submitted_ns);
  counters_.decode.record(job.decode_ns);
  if (job.scaled) ++counters_.scaled;
  if (job.scratch_allocated) ++counters_.scratch_allocations;
  media::SlotLease lease = std::move(leases_[job.index]);
  busy_[job.index] = false;
  const uint32_t buffer = buffers_[job.index];
  using video_codec::DecodeStatus;
  const video_codec::DecodeResult& r = job.result;
  if (r.width != 0) {
    counters_.picture_width = r.width;
    counters_.picture_height = r.height;
  }
  if (r.status == DecodeStatus::kPicture) {
    awaiting_keyframe_ = false;
    if (r.keyframe) ++counters_.keyframes;
    if (lease.commit(lease.frame_bytes(), now_ns)) {
      ++counters_.decoded;
      if (hooks_.buffer_done) hooks_.buffer_done(buffer, hooks_.context);
    } else {
      drop(DecodeDrop::kCommitRefused, buffer);
    }
    return;
  }
  // No picture: the lease goes back unfilled. A refused unit is told to the source; one that
  // broke the chain of references (or came while it was broken) makes the decoder wait for an
  // IDR and ask for one.
  const bool waiting = r.status == DecodeStatus::kAwaitingKeyframe;
  const bool error =
      r.status == DecodeStatus::kDecodeError || r.status == DecodeStatus::kCorruptPicture;
  if (waiting || error) awaiting_keyframe_ = true;
  if (!waiting) tell_undecodable(lease.info().sequence, r.status);
  lease.abort(media::DropReason::kUndecodable);
  drop(waiting ? DecodeDrop::kAwaitingKeyframe
       : error ? DecodeDrop::kDecodeError
               : DecodeDrop::kRefused,
       buffer);
  if (waiting || error) want_keyframe(last_now_ns_);
}

void DecodeStage::write_stats(nlohmann::json& out) const {
  const DecodeStageCounters& c = counters_;
  nlohmann::json dropped = nlohmann::json::object();
  for (size_t i = 0; i < size_t(DecodeDrop::kCount); ++i)
    dropped[decode_drop_name(DecodeDrop(i))] = c.dropped[i];
  out = {{"frames_in", c.frames_in},
         {"decoded", c.decoded},
         {"dropped", std::move(dropped)},
         {"dropped_total", c.dropped_total()},
         {"in_flight", c.in_flight},
         {"queued", c.queued},
         {"queued_max", c.queued_max},
         {"gaps", c.gaps},
         {"keyframes", c.keyframes},
         {"keyframe_requests", c.keyframe_requests},
         {"keyframe_requests_throttled", c.keyframe_requests_throttled},
         {"scaled", c.scaled},
         {"scratch_allocations", c.scratch_allocations},
         {"picture_width", c.picture_width},
         {"picture_height", c.picture_height},
         {"output_width", width_},
         {"output_height", height_},
         {"decode", telemetry::stage_json(c.decode)},
         {"held", telemetry::stage_json(c.held)}};
}

void DecodeStage::write_metrics(telemetry::PrometheusText& out, const std::string& family,
                                const std::vector<Labelled>& stages) {
  const auto sep = [](const std::string& labels) { return labels.empty() ? labels : labels + ","; };
  const std::string frames = family + "_frames_total";
  out.family(frames, "counter",
             "Access units the decode stage took, by outcome: decoded into the local stream, or "
             "dropped by reason.");
  for (const auto& [labels, stage] : stages) {
    const DecodeStageCounters& c = stage->counters_;
    out.sample(frames, sep(labels) + "outcome=\"decoded\"", c.decoded);
    for (size_t i = 0; i < size_t(DecodeDrop::kCount); ++i)
      out.sample(frames, sep(labels) + "outcome=\"" + decode_drop_name(DecodeDrop(i)) + "\"",
                 c.dropped[i]);
  }
  const std::string requests = family + "_keyframe_requests_total";
  out.family(requests, "counter",
             "Keyframe requests the decode stage made while it waited for an IDR.");
  for (const auto& [labels, stage] : stages)
    out.sample(requests, labels, stage->counters_.keyframe_requests);
  const std::string scaled = family + "_scaled_total";
  out.family(scaled, "counter", "Pictures of another size than the local stream, scaled into it.");
  for (const auto& [labels, stage] : stages) out.sample(scaled, labels, stage->counters_.scaled);
  const std::string seconds = family + "_seconds";
  out.family(seconds, "histogram",
             "Per-frame time of the decode stage: the worker's decode (and scale), and held, from "
             "the hand-off on the loop to the result back on it.");
  for (const auto& [labels, stage] : stages) {
    out.histogram(seconds, sep(labels) + "stage=\"decode\"", stage->counters_.decode);
    out.histogram(seconds, sep(labels) + "stage=\"held\"", stage->counters_.held);
  }
}

}  // namespace syncd::decode
