#include "media/publishers/test_publisher.h"

#include <nlohmann/json.hpp>
#include <string>

#include "core/content_hash.h"
#include "media/column_marker.h"
#include "media/frame_header.h"

namespace syncd::media {

TestPublisher::TestPublisher(uv_loop_t* loop) {
  if (!loop) return;
  worker_ =
      std::make_unique<core::WorkerHandoff<HashJob, 8>>(&hash_on_worker, &verdict_on_loop, this);
  if (worker_->start(loop) != 0) worker_.reset();
}

TestPublisher::~TestPublisher() {
  stop();
}

void TestPublisher::stop() {
  if (worker_) worker_->stop();  // runs the last verdicts, releasing their slots
}

void TestPublisher::hash_on_worker(HashJob& job, void*) {
  job.hash = core::content_hash(job.slot->pixels, job.slot->info.bytes);
}

void TestPublisher::verdict_on_loop(HashJob& job, void* context) {
  auto* self = static_cast<TestPublisher*>(context);
  if (auto it = self->streams_.find(job.stream_id); it != self->streams_.end()) {
    --it->second.verifying;
    self->count_hash(it->second, job.hash, job.slot->info.content_hash);
  }
  FramePool::unpin(job.slot);
}

void TestPublisher::count_hash(TestVerdicts& v, uint64_t hash, uint64_t expected) {
  if (hash == expected) {
    ++v.verified;
  } else {
    ++v.hash_mismatches;
  }
}

void TestPublisher::on_stream_open(const Stream& stream) {
  streams_[stream.id()] = TestVerdicts{};
}

void TestPublisher::on_stream_forget(uint32_t stream_id) {
  streams_.erase(stream_id);
}

void TestPublisher::on_frame(const Stream& stream, FrameSlot& slot) {
  auto it = streams_.find(stream.id());
  if (it == streams_.end()) return;  // cannot happen: registry opens before it publishes
  TestVerdicts& v = it->second;
  const FrameInfo& info = slot.info;
  ++v.delivered;

  if (info.flags & frame_flag::kHasContentHash) {
    if (info.received_hash_valid) {
      count_hash(v, info.received_hash, info.content_hash);
    } else if (!worker_) {
      count_hash(v, core::content_hash(slot.pixels, info.bytes), info.content_hash);
    } else if (FramePool::try_pin(&slot)) {
      if (worker_->submit(HashJob{&slot, stream.id(), 0})) {
        ++v.verifying;
      } else {
        FramePool::unpin(&slot);
        ++v.dropped_consumer_slow;
      }
    } else {
      ++v.dropped_consumer_slow;
    }
  } else if (is_encoded(stream.config().format)) {
    ++v.unchecked;
  } else if (info.flags & frame_flag::kColumnMarker) {
    // Survives lossy coding (a frame decoded by the relay's receiver): the low 16 bits.
    const StreamConfig& c = stream.config();
    const std::optional<uint16_t> marker =
        read_frame_column_marker(slot.pixels, info.bytes, c.format, c.width, c.height);
    if (marker && *marker == uint16_t(info.sequence)) {
      ++v.marker_verified;
    } else {
      ++v.marker_mismatches;
    }
  } else if (info.flags & frame_flag::kDecoded) {
    ++v.unchecked;  // lossy coding scrambles the 16-byte sequence marker
  } else {
    uint64_t marker = 0;
    if (info.bytes >= kSequenceMarkerBytes && read_sequence_marker(slot.pixels, marker) &&
        marker == info.sequence) {
      ++v.marker_verified;
    } else {
      ++v.marker_mismatches;
    }
  }

  if (v.any) {
    if (info.sequence == v.last_sequence) {
      ++v.sequence_duplicates;
    } else if (info.sequence < v.last_sequence) {
      ++v.sequence_reordered;
    } else {
      v.sequence_gaps += info.sequence - v.last_sequence - 1;
    }
  }
  if (!v.any || info.sequence > v.last_sequence) v.last_sequence = info.sequence;
  v.any = true;
}

const TestVerdicts* TestPublisher::verdicts(uint32_t stream_id) const {
  auto it = streams_.find(stream_id);
  return it == streams_.end() ? nullptr : &it->second;
}

void TestPublisher::write_stream_stats(uint32_t stream_id, nlohmann::json& out) const {
  const TestVerdicts* v = verdicts(stream_id);
  if (!v) return;
  out["delivered"] = v->delivered;
  // delivered == verified + marker_verified + verify_failed + dropped + verifying + unchecked
  out["dropped"] = {{"consumer_slow", v->dropped_consumer_slow}};
  out["unchecked"] = v->unchecked;
  out["verifying"] = v->verifying;
  out["verified"] = v->verified;
  out["marker_verified"] = v->marker_verified;
  out["verify_failed"] = {{"hash_mismatch", v->hash_mismatches},
                          {"marker_mismatch", v->marker_mismatches}};
  out["sequence_gaps"] = v->sequence_gaps;
  out["sequence_duplicates"] = v->sequence_duplicates;
  out["sequence_reordered"] = v->sequence_reordered;
}

void TestPublisher::write_stream_summary(uint32_t stream_id, nlohmann::json& stream) const {
  // The verification contract, lifted to the stream for the tools that judge a run.
  const TestVerdicts* v = verdicts(stream_id);
  if (!v) return;
  stream["frames_verified"] = v->verified;
  stream["frames_verify_failed"] = v->verify_failures();
}

void TestPublisher::write_metrics(telemetry::PrometheusText& out,
                                  const std::vector<const Stream*>& streams) const {
  auto label = [](const Stream* s) {
    return "stream=\"" + telemetry::prometheus_label_value(s->config().name) + "\"";
  };
  out.family("syncd_frames_verified_total", "counter",
             "Frames whose every byte matched the producer's content hash (test publisher).");
  for (const Stream* s : streams)
    if (auto* v = verdicts(s->id()))
      out.sample("syncd_frames_verified_total", label(s), v->verified);
  out.family("syncd_frames_marker_verified_total", "counter",
             "Frames without a content hash whose sequence marker matched (test publisher).");
  for (const Stream* s : streams)
    if (auto* v = verdicts(s->id()))
      out.sample("syncd_frames_marker_verified_total", label(s), v->marker_verified);
  out.family("syncd_frames_verify_failed_total", "counter",
             "Frames that failed verification, by reason (test publisher).");
  for (const Stream* s : streams) {
    if (auto* v = verdicts(s->id())) {
      out.sample("syncd_frames_verify_failed_total", label(s) + ",reason=\"hash_mismatch\"",
                 v->hash_mismatches);
      out.sample("syncd_frames_verify_failed_total", label(s) + ",reason=\"marker_mismatch\"",
                 v->marker_mismatches);
    }
  }
  out.family("syncd_frame_sequence_anomalies_total", "counter",
             "Sequence anomalies seen by the test publisher, by kind.");
  for (const Stream* s : streams) {
    if (auto* v = verdicts(s->id())) {
      out.sample("syncd_frame_sequence_anomalies_total", label(s) + ",kind=\"gap\"",
                 v->sequence_gaps);
      out.sample("syncd_frame_sequence_anomalies_total", label(s) + ",kind=\"duplicate\"",
                 v->sequence_duplicates);
      out.sample("syncd_frame_sequence_anomalies_total", label(s) + ",kind=\"reordered\"",
                 v->sequence_reordered);
    }
  }
}

}  // namespace syncd::media
