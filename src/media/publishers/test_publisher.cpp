#include "media/publishers/test_publisher.h"

#include <nlohmann/json.hpp>
#include <string>

#include "core/content_hash.h"

namespace syncd::media {

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
    const uint64_t hash =
        info.received_hash_valid ? info.received_hash : core::content_hash(slot.pixels, info.bytes);
    if (hash == info.content_hash) {
      ++v.verified;
    } else {
      ++v.hash_mismatches;
    }
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
  out["dropped"] = nlohmann::json::object();  // verification is synchronous: nothing is dropped
  out["verified"] = v->verified;
  out["marker_verified"] = v->marker_verified;
  out["verify_failed"] = {{"hash_mismatch", v->hash_mismatches},
                          {"marker_mismatch", v->marker_mismatches}};
  out["sequence_gaps"] = v->sequence_gaps;
  out["sequence_duplicates"] = v->sequence_duplicates;
  out["sequence_reordered"] = v->sequence_reordered;
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
