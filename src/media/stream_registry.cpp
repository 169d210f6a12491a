#include "media/stream_registry.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "telemetry/stage_json.h"

namespace syncd::media {

const char* open_error_code(OpenError e) {
  switch (e) {
    case OpenError::kNone:
      return "none";
    case OpenError::kNameTaken:
      return "stream_name_taken";
    case OpenError::kBadGeometry:
      return "bad_geometry";
    case OpenError::kBadSlots:
      return "bad_slots";
    case OpenError::kTooMany:
      return "stream_limit";
    case OpenError::kTooManyForOwner:
      return "connection_stream_limit";
    case OpenError::kOwnerNoMemory:
      return "connection_memory_limit";
    case OpenError::kNoMemory:
      return "no_memory";
    case OpenError::kCount:
      break;
  }
  return "?";
}

StreamRegistry::~StreamRegistry() {
  // Streams drop their pool references; pools held by publishers go with the publishers.
  open_.clear();
  closed_.clear();
}

void StreamRegistry::add_publisher(std::unique_ptr<Publisher> publisher) {
  verifies_content_ = verifies_content_ || publisher->verifies_content();
  publishers_.push_back(std::move(publisher));
}

Stream* StreamRegistry::open(const StreamConfig& config, uint64_t owner, OpenError& error,
                             FramePool::Prefault prefault, SourceFeedback* feedback) {
  error = check_open(config, owner);
  if (error != OpenError::kNone) {
    ++open_refused_[size_t(error)];
    return nullptr;
  }
  const FrameLayout layout = [&] {
    FrameLayout l;
    frame_layout(config.format, config.width, config.height, l);
    return l;
  }();
  FramePool* pool = nullptr;
  for (auto& p : publishers_)
    if ((pool = p->create_pool(config, layout.bytes))) break;
  if (!pool) pool = FramePool::create(layout.bytes, config.slots, FramePool::Prefault::kDeferred);
  if (!pool) {
    error = OpenError::kNoMemory;
    ++open_refused_[size_t(error)];
    return nullptr;
  }
  pool->charge_to(pool_bytes_);
  if (prefault == FramePool::Prefault::kNow) pool->prefault();
  const uint32_t id = next_id_++;
  auto stream = std::make_unique<Stream>(id, config, layout, owner, pool);
  Stream* raw = stream.get();
  raw->set_source_feedback(feedback);
  open_.emplace(id, std::move(stream));
  for (auto& p : publishers_) p->on_stream_open(*raw);
  return raw;
}

OpenError StreamRegistry::check_open(const StreamConfig& config, uint64_t owner) const {
  // Precedence (docs/protocol.md, "Errors"): the request itself first, then the limits.
  for (const auto& [id, s] : open_)
    if (s->config().name == config.name) return OpenError::kNameTaken;
  FrameLayout layout;
  if (config.width > limits_.max_width || config.height > limits_.max_height ||
      !frame_layout(config.format, config.width, config.height, layout) ||
      layout.bytes > limits_.max_frame_bytes)
    return OpenError::kBadGeometry;
  if (config.slots == 0 || config.slots > limits_.max_slots) return OpenError::kBadSlots;
  if (open_.size() >= limits_.max_streams) return OpenError::kTooMany;
  uint32_t owned = 0;
  size_t owned_bytes = 0;  // the pools of this owner's open streams
  for (const auto& [id, s] : open_) {
    if (s->owner() != owner) continue;
    ++owned;
    owned_bytes += s->layout().bytes * s->config().slots;
  }
  if (owned >= limits_.max_streams_per_owner) return OpenError::kTooManyForOwner;
  // Checked in size_t: slots <= max_slots and bytes <= max_frame_bytes, so no overflow.
  const size_t bytes = layout.bytes * config.slots;
  if (pool_bytes() + bytes > limits_.max_pool_bytes_total) return OpenError::kNoMemory;
  if (owned_bytes + bytes > limits_.max_pool_bytes_per_owner) return OpenError::kOwnerNoMemory;
  return OpenError::kNone;
}

void StreamRegistry::close(Stream* stream) {
  auto it = open_.find(stream->id());
  if (it == open_.end()) return;
  for (auto& p : publishers_) p->on_stream_close(*stream);
  FramePool* pool = stream->take_pool();
  if (release_)
    release_(pool);
  else
    pool->drop_ref();
  closed_.push_back(std::move(it->second));
  open_.erase(it);
  while (closed_.size() > kRetainedClosedStreams) {
    const uint32_t forgotten = closed_.front()->id();
    closed_.pop_front();
    for (auto& p : publishers_) p->on_stream_forget(forgotten);
  }
}

void StreamRegistry::close_owned_by(uint64_t owner) {
  std::vector<Stream*> owned;
  for (auto& [id, s] : open_)
    if (s->owner() == owner) owned.push_back(s.get());
  for (Stream* s : owned) close(s);
}

Stream* StreamRegistry::find(uint32_t id) {
  auto it = open_.find(id);
  return it == open_.end() ? nullptr : it->second.get();
}

Stream* StreamRegistry::find(const std::string& name) {
  for (auto& [id, s] : open_)
    if (s->config().name == name) return s.get();
  return nullptr;
}

Stream* StreamRegistry::find_any(uint32_t id) {
  if (Stream* s = find(id)) return s;
  for (auto& s : closed_)
    if (s->id() == id) return s.get();
  return nullptr;
}

SlotLease StreamRegistry::begin(const IngestRequest& r, IngestRefusal& refusal) {
  Stream* stream = find(r.stream_id);
  if (!stream) {
    refusal = IngestRefusal::kUnknownStream;
    return {};
  }
  if (stream->owner() != r.owner) {
    refusal = IngestRefusal::kNotOwner;
    return {};
  }
  stream->count_offered();
  const StreamConfig& sc = stream->config();
  if ((r.width != 0 && r.width != sc.width) || (r.height != 0 && r.height != sc.height) ||
      (r.format != PixelFormat::kStreamDefault && r.format != sc.format)) {
    stream->count_dropped(DropReason::kGeometryMismatch);
    refusal = IngestRefusal::kGeometryMismatch;
    return {};
  }
  // A raw frame has exactly the layout's bytes; an access unit has 1 up to them.
  const bool encoded = is_encoded(sc.format);
  if (r.payload_bytes != 0 && (encoded ? r.payload_bytes > stream->frame_bytes()
                                       : r.payload_bytes != stream->frame_bytes())) {
    stream->count_dropped(DropReason::kSizeMismatch);
    refusal = IngestRefusal::kSizeMismatch;
    return {};
  }
  FrameSlot* slot = stream->pool()->acquire();
  if (!slot) {
    // The newest frame is refused at admission rather than queued.
    stream->count_dropped(DropReason::kPoolFull);
    refusal = IngestRefusal::kPoolFull;
    return {};
  }
  FrameInfo& info = slot->info;
  info.stream_id = r.stream_id;
  info.flags = r.flags;
  info.sequence = r.sequence;
  info.capture_time_us = r.capture_time_us;
  info.content_hash = r.content_hash;
  info.receive_start_ns = r.start_ns;
  info.width = sc.width;
  info.height = sc.height;
  info.format = sc.format;
  // An access unit of a known size is held to it; one of unknown size (a fragmented message)
  // may fill the slot, and commit() records what it did fill.
  info.bytes = encoded && r.payload_bytes != 0 ? size_t(r.payload_bytes) : stream->frame_bytes();
  refusal = IngestRefusal::kNone;
  return SlotLease(this, slot);
}

void StreamRegistry::abort(FrameSlot* slot, DropReason reason) {
  if (Stream* stream = find_any(slot->info.stream_id)) stream->count_dropped(reason);
  FramePool::release(slot);
}

bool StreamRegistry::commit(FrameSlot* slot, uint64_t now_ns) {
  Stream* stream = find(slot->info.stream_id);
  if (!stream) {  // closed under the frame: the frame had nowhere to go
    abort(slot, DropReason::kDisconnected);
    return false;
  }
  FrameInfo& info = slot->info;
  info.accept_ns = now_ns;
  // Bins count a frame at its first byte: arrival of the message's start tracks the producer's
  // pacing, while the last byte also carries the transfer time of 8 MB.
  stream->count_accepted(info.sequence, info.receive_start_ns);
  if (stream->last_accept_start_ns != 0 && info.receive_start_ns >= stream->last_accept_start_ns)
    stream->stages().ingest_gap.record(info.receive_start_ns - stream->last_accept_start_ns);
  stream->last_accept_start_ns = info.receive_start_ns;
  stream->stages().receive.record(now_ns - info.receive_start_ns);
  if (SourceRequests& r = stream->source_requests();
      r.keyframe_pending && now_ns - r.keyframe_passed_ns >= kKeyframeIntervalNs)
    pass_keyframe_request(*stream, r.pending_reason, now_ns);

  for (auto& p : publishers_) p->on_frame(*stream, *slot);
  const uint64_t published_ns = core::monotonic_ns();
  stream->stages().publish.record(published_ns - now_ns);
  stream->last_publish_ns = published_ns;
  events_.record({stream->id(), 0, info.sequence, info.receive_start_ns, now_ns, published_ns});
  FramePool::release(slot);
  return true;
}

SlotLease& SlotLease::operator=(SlotLease&& other) noexcept {
  if (this != &other) {
    if (slot_) abort(DropReason::kDisconnected);
    registry_ = other.registry_;
    slot_ = other.slot_;
    other.slot_ = nullptr;
  }
  return *this;
}

SlotLease::~SlotLease() {
  if (slot_) abort(DropReason::kDisconnected);
}

bool SlotLease::commit(size_t filled, uint64_t now_ns) {
  FrameSlot* slot = slot_;
  slot_ = nullptr;
  const bool encoded = is_encoded(slot->info.format);
  if (encoded ? filled == 0 || filled > slot->info.bytes : filled != slot->info.bytes) {
    registry_->abort(slot, DropReason::kSizeMismatch);
    return false;
  }
  slot->info.bytes = filled;
  return registry_->commit(slot, now_ns);
}

void SlotLease::abort(DropReason reason) {
  FrameSlot* slot = slot_;
  slot_ = nullptr;
  registry_->abort(slot, reason);
}

void StreamRegistry::request_keyframe(uint32_t stream_id, KeyframeReason reason, uint64_t now_ns) {
  Stream* stream = find(stream_id);
  if (!stream || reason >= KeyframeReason::kCount) return;
  SourceRequests& r = stream->source_requests();
  ++r.keyframes[size_t(reason)];
  if (r.keyframes_passed != 0 && now_ns - r.keyframe_passed_ns < kKeyframeIntervalNs) {
    r.keyframe_pending = true;
    r.pending_reason = reason;
    return;
  }
  pass_keyframe_request(*stream, reason, now_ns);
}

void StreamRegistry::pass_keyframe_request(Stream& stream, KeyframeReason reason, uint64_t now_ns) {
  SourceRequests& r = stream.source_requests();
  r.keyframe_pending = false;
  ++r.keyframes_passed;
  r.keyframe_passed_ns = now_ns;
  if (SourceFeedback* f = stream.source_feedback()) f->keyframe_wanted(stream, reason);
}

void StreamRegistry::set_target_bitrate(uint32_t stream_id, uintptr_t consumer,
                                        uint64_t bits_per_second) {
  Stream* stream = find(stream_id);
  if (!stream || consumer == 0) return;
  SourceRequests& r = stream->source_requests();
  SourceRequests::Target* entry = nullptr;
  SourceRequests::Target* free_entry = nullptr;
  for (SourceRequests::Target& t : r.targets) {
    if (t.consumer == consumer) entry = &t;
    if (t.consumer == 0 && !free_entry) free_entry = &t;
  }
  if (bits_per_second == 0) {
    if (entry) *entry = {};
  } else if (entry) {
    entry->bits_per_second = bits_per_second;
  } else if (free_entry) {
    *free_entry = {consumer, bits_per_second};
  } else {
    ++r.targets_refused;
    return;
  }
  uint64_t lowest = 0;
  for (const SourceRequests::Target& t : r.targets)
    if (t.consumer != 0 && (lowest == 0 || t.bits_per_second < lowest)) lowest = t.bits_per_second;
  // With every target withdrawn the source keeps its last rate: nobody constrains it, and its
  // own ceiling applies.
  if (lowest == 0) return;
  const double moved = r.bitrate_sent == 0 ? 1.0
                                           : std::abs(double(lowest) - double(r.bitrate_sent)) /
                                                 double(r.bitrate_sent);
  if (moved < kBitrateStep) return;
  r.bitrate_sent = lowest;
  ++r.bitrate_changes;
  if (SourceFeedback* f = stream->source_feedback()) f->target_bitrate(*stream, lowest);
}

void StreamRegistry::report_undecodable(uint32_t stream_id, uint64_t sequence, const char* why,
                                        uint64_t now_ns) {
  Stream* stream = find(stream_id);
  if (!stream) return;
  SourceRequests& r = stream->source_requests();
  ++r.undecodable;
  if (r.undecodable_told != 0 && now_ns - r.undecodable_told_ns < kUndecodableIntervalNs) return;
  ++r.undecodable_told;
  r.undecodable_told_ns = now_ns;
  if (SourceFeedback* f = stream->source_feedback()) f->undecodable(*stream, sequence, why);
}

void StreamRegistry::tick(uint64_t now_ns) {
  for (auto& [id, s] : open_) s->tick(now_ns);
}

std::vector<const Stream*> StreamRegistry::all_streams() const {
  std::vector<const Stream*> out;
  for (auto& s : closed_) out.push_back(s.get());
  for (auto& [id, s] : open_) out.push_back(s.get());
  return out;
}

uint64_t StreamRegistry::total_dropped() const {
  uint64_t t = 0;
  for (const Stream* s : all_streams()) t += s->counters().dropped_total();
  return t;
}

void StreamRegistry::write_stats(nlohmann::json& out) const {
  nlohmann::json bounds = nlohmann::json::array();
  for (uint64_t b : telemetry::StageStats::kBucketBoundsNs) bounds.push_back(double(b) / 1e3);
  out["stage_histogram_bounds_us"] = std::move(bounds);
  nlohmann::json list = nlohmann::json::array();
  for (const Stream* s : all_streams()) {
    const StreamCounters& c = s->counters();
    nlohmann::json dropped = nlohmann::json::object();
    for (size_t r = 0; r < size_t(DropReason::kCount); ++r)
      dropped[drop_reason_name(DropReason(r))] = c.dropped[r];
    nlohmann::json recent = nlohmann::json::array();
    s->rate().for_each_recent([&](uint32_t fps) { recent.push_back(fps); });
    nlohmann::json j = {
        {"id", s->id()},
        {"name", s->config().name},
        {"open", s->open()},
        {"width", s->config().width},
        {"height", s->config().height},
        {"format", pixel_format_name(s->config().format)},
        {"nominal_fps", s->config().fps},
        {"slots", s->config().slots},
        {"slots_in_use", s->pool() ? s->pool()->slots_in_use() : 0},
        {"frame_bytes", s->frame_bytes()},
        {"frames_offered", c.offered},
        {"frames_accepted", c.accepted},
        {"frames_unique", c.unique},
        {"frames_dropped", std::move(dropped)},
        {"frames_dropped_total", c.dropped_total()},
        {"complete_seconds", s->rate().complete_seconds()},
        {"low_rate_seconds", s->rate().low_rate_seconds()},
        {"low_rate_threshold", s->rate().low_rate_threshold()},
        {"last_second_unique_fps", s->rate().last_complete_fps()},
        {"min_second_unique_fps", s->rate().min_complete_fps()},
        {"recent_seconds_unique_fps", std::move(recent)},
        // CLOCK_MONOTONIC: a harness on this machine relates it to its own clock.
        {"last_publish_monotonic_ns", s->last_publish_ns},
        {"stages",
         {{"ingest_gap", telemetry::stage_json(s->stages().ingest_gap)},
          {"receive", telemetry::stage_json(s->stages().receive)},
          {"decode", telemetry::stage_json(s->stages().decode)},
          {"hash", telemetry::stage_json(s->stages().hash)},
          {"publish", telemetry::stage_json(s->stages().publish)}}},
    };
    nlohmann::json pubs = nlohmann::json::object();
    for (auto& p : publishers_) {
      nlohmann::json pj = nlohmann::json::object();
      p->write_stream_stats(s->id(), pj);
      pubs[std::string(p->name())] = std::move(pj);
      p->write_stream_summary(s->id(), j);
    }
    j["publishers"] = std::move(pubs);
    if (is_encoded(s->config().format)) {
      // What consumers asked of the source (docs/protocol.md, "Messages from syncd to a
      // stream's source").
      const SourceRequests& r = s->source_requests();
      nlohmann::json keyframes = nlohmann::json::object();
      for (size_t k = 0; k < size_t(KeyframeReason::kCount); ++k)
        keyframes[keyframe_reason_name(KeyframeReason(k))] = r.keyframes[k];
      nlohmann::json targets = nlohmann::json::array();
      for (const SourceRequests::Target& t : r.targets)
        if (t.consumer != 0) targets.push_back(t.bits_per_second);
      j["source_requests"] = {
          {"keyframes", std::move(keyframes)},    {"keyframes_passed", r.keyframes_passed},
          {"target_bps", r.bitrate_sent},         {"consumer_targets_bps", std::move(targets)},
          {"bitrate_changes", r.bitrate_changes}, {"targets_refused", r.targets_refused},
          {"undecodable", r.undecodable},         {"undecodable_told", r.undecodable_told}};
    }
    if (const SourceReport& r = s->source_report(); r.received_ns != 0) {
      nlohmann::json dropped_at_source = nlohmann::json::object();
      uint64_t total = 0;
      for (const auto& [reason, n] : r.dropped) {
        dropped_at_source[reason] = n;
        total += n;
      }
      j["source"] = {{"offered", r.offered},
                     {"sent", r.sent},
                     {"in_flight", r.in_flight},
                     {"dropped", std::move(dropped_at_source)},
                     {"dropped_total", total},
                     {"report_age_ms", (core::monotonic_ns() - r.received_ns) / 1'000'000}};
    }
    list.push_back(std::move(j));
  }
  out["streams"] = std::move(list);
  nlohmann::json refused = nlohmann::json::object();
  for (size_t e = 1; e < size_t(OpenError::kCount); ++e)
    refused[open_error_code(OpenError(e))] = open_refused_[e];
  out["open_refused"] = std::move(refused);
}

void StreamRegistry::write_metrics(telemetry::PrometheusText& out) const {
  const std::vector<const Stream*> streams = all_streams();
  auto label = [](const Stream* s) {
    return "stream=\"" + telemetry::prometheus_label_value(s->config().name) + "\"";
  };
  out.family("syncd_frames_offered_total", "counter", "Frames that named a stream.");
  for (const Stream* s : streams)
    out.sample("syncd_frames_offered_total", label(s), s->counters().offered);
  out.family("syncd_frames_accepted_total", "counter", "Frames admitted to the publishers.");
  for (const Stream* s : streams)
    out.sample("syncd_frames_accepted_total", label(s), s->counters().accepted);
  out.family("syncd_frames_unique_total", "counter", "Accepted frames with a new sequence.");
  for (const Stream* s : streams)
    out.sample("syncd_frames_unique_total", label(s), s->counters().unique);
  out.family("syncd_frames_dropped_total", "counter", "Frames refused at admission, by reason.");
  for (const Stream* s : streams)
    for (size_t r = 0; r < size_t(DropReason::kCount); ++r)
      out.sample("syncd_frames_dropped_total",
                 label(s) + ",reason=\"" + drop_reason_name(DropReason(r)) + "\"",
                 s->counters().dropped[r]);
  out.family("syncd_complete_seconds_total", "counter", "Complete one-second bins.");
  for (const Stream* s : streams)
    out.sample("syncd_complete_seconds_total", label(s), s->rate().complete_seconds());
  out.family("syncd_low_rate_seconds_total", "counter",
             "Complete seconds with fewer than 50 unique frames.");
  for (const Stream* s : streams)
    out.sample("syncd_low_rate_seconds_total", label(s), s->rate().low_rate_seconds());
  out.family("syncd_last_second_unique_fps", "gauge", "Unique frames in the last complete second.");
  for (const Stream* s : streams)
    out.sample("syncd_last_second_unique_fps", label(s), uint64_t(s->rate().last_complete_fps()));
  out.family("syncd_stream_open", "gauge", "1 while the stream is open.");
  for (const Stream* s : streams) out.sample("syncd_stream_open", label(s), uint64_t(s->open()));

  const char* stage_names[] = {"ingest_gap", "receive", "decode", "hash", "publish"};
  out.family("syncd_stage_seconds", "histogram", "Per-frame time in each pipeline stage.");
  for (const Stream* s : streams) {
    const telemetry::StageStats* stages[] = {&s->stages().ingest_gap, &s->stages().receive,
                                             &s->stages().decode, &s->stages().hash,
                                             &s->stages().publish};
    for (size_t i = 0; i < std::size(stages); ++i)
      out.histogram("syncd_stage_seconds", label(s) + ",stage=\"" + stage_names[i] + "\"",
                    *stages[i]);
  }
  for (auto& p : publishers_) p->write_metrics(out, streams);
  out.family("syncd_stream_open_refused_total", "counter", "stream.open refused, by error code.");
  for (size_t e = 1; e < size_t(OpenError::kCount); ++e)
    out.sample("syncd_stream_open_refused_total",
               std::string("code=\"") + open_error_code(OpenError(e)) + "\"", open_refused_[e]);
}

}  // namespace syncd::media
