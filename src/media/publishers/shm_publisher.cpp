#include "media/publishers/shm_publisher.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/clock.h"

namespace syncd::media {

ShmPublisher::ShmPublisher(ShmPublisherConfig config, uv_loop_t* loop)
    : config_(std::move(config)) {
  if (config_.path.empty()) config_.path = default_region_path();
  if (!loop) return;
  heartbeat_ = new uv_timer_t;
  uv_timer_init(loop, heartbeat_);
  heartbeat_->data = this;
  uv_unref(reinterpret_cast<uv_handle_t*>(heartbeat_));
}

ShmPublisher::~ShmPublisher() {
  close_timer();
}

void ShmPublisher::stop() {
  close_timer();
}

void ShmPublisher::close_timer() {
  if (!heartbeat_) return;
  uv_timer_stop(heartbeat_);
  uv_close(reinterpret_cast<uv_handle_t*>(heartbeat_),
           [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
  heartbeat_ = nullptr;
}

void ShmPublisher::on_heartbeat(uv_timer_t* timer) {
  auto* self = static_cast<ShmPublisher*>(timer->data);
  if (self->region_) self->region_->heartbeat(core::monotonic_ns());
}

FramePool* ShmPublisher::create_pool(const StreamConfig& config, size_t frame_bytes) {
  if (region_ || pending_pool_) return nullptr;  // one ring, one stream
  if (!config_.stream_name.empty() && config.name != config_.stream_name) return nullptr;
  // Readers want pictures: an encoded stream's go to the ring through its decoded twin
  // (decode/decode_publisher.h), unless the ring was given the encoded stream by name.
  if (config_.stream_name.empty() && is_encoded(config.format)) return nullptr;
  // The registry has already checked the geometry against the format and sized the pool from
  // this layout. Should the two ever disagree, the stream runs on an ordinary pool rather than
  // in a ring whose header misdescribes its frames.
  FrameLayout layout;
  if (!frame_layout(config.format, config.width, config.height, layout) ||
      layout.bytes != frame_bytes)
    return nullptr;
  const uint32_t slots = std::max(config.slots, config_.min_slots);
  auto region = ShmRegion::create(config_.path, config.name, layout, slots, last_error_);
  if (!region) {
    // The stream still runs on an ordinary pool; the failure is counted and shown in /stats.
    ++create_failures_;
    const std::string_view code = last_error_.code;
    if (code == "shm_foreign_file" || code == "shm_exists") ++foreign_file_refusals_;
    failed_pending_ = true;
    std::fprintf(stderr, "syncd: shm publisher: %s: %s\n", last_error_.code,
                 last_error_.message.c_str());
    return nullptr;
  }
  ShmRegion* raw = region.get();
  pending_pool_ = FramePool::create_in(raw->first_slot(), raw->slot_stride(), slots, frame_bytes,
                                       std::move(region), SlotReuse::kLeastRecent);
  region_ = raw;
  if (heartbeat_)
    uv_timer_start(heartbeat_, &on_heartbeat, SYNC_SHM_HEARTBEAT_PERIOD_MS,
                   SYNC_SHM_HEARTBEAT_PERIOD_MS);
  return pending_pool_;
}

void ShmPublisher::on_stream_open(const Stream& stream) {
  // The registry opens the stream right after offering its pool (StreamRegistry::open).
  if (failed_pending_) {
    failed_pending_ = false;
    failed_stream_id_ = stream.id();
  }
  if (pending_pool_ && stream.pool() == pending_pool_) {
    ring_stream_id_ = stream.id();
    delivered_stream_id_ = stream.id();
    delivered_ = 0;
    pending_pool_ = nullptr;
  }
}

void ShmPublisher::on_stream_close(const Stream& stream) {
  if (stream.id() != ring_stream_id_) return;
  // The mapping lives until the pool's last slot is released; readers learn now that it ended,
  // and the path goes now (a new ring may take it at once).
  region_->mark_ended();
  region_->unlink_path();
  region_ = nullptr;
  ring_stream_id_ = 0;
  if (heartbeat_) uv_timer_stop(heartbeat_);  // an ended ring needs no heartbeat
}

void ShmPublisher::on_stream_forget(uint32_t stream_id) {
  if (stream_id == delivered_stream_id_) delivered_stream_id_ = 0;
  if (stream_id == failed_stream_id_) failed_stream_id_ = 0;
}

void ShmPublisher::on_frame(const Stream& stream, FrameSlot& slot) {
  if (stream.id() != ring_stream_id_) return;
  region_->publish(slot, core::monotonic_ns());
  ++delivered_;
}

void ShmPublisher::write_stream_stats(uint32_t stream_id, nlohmann::json& out) const {
  if (stream_id == failed_stream_id_ && stream_id != 0) {
    out["path"] = config_.path;
    out["live"] = false;
    out["error"] = {{"code", last_error_.code}, {"message", last_error_.message}};
    return;
  }
  if (stream_id != delivered_stream_id_ || stream_id == 0) return;
  out["delivered"] = delivered_;
  out["dropped"] = nlohmann::json::object();  // the ring never refuses: readers skip instead
  out["path"] = config_.path;
  out["live"] = stream_id == ring_stream_id_;
  if (region_ && stream_id == ring_stream_id_) out["slots"] = region_->slot_count();
}

void ShmPublisher::write_metrics(telemetry::PrometheusText& out,
                                 const std::vector<const Stream*>& streams) const {
  out.family("syncd_shm_frames_published_total", "counter",
             "Frames published to the shared-memory ring.");
  for (const Stream* s : streams)
    if (s->id() == delivered_stream_id_ && s->id() != 0)
      out.sample("syncd_shm_frames_published_total",
                 "stream=\"" + telemetry::prometheus_label_value(s->config().name) + "\"",
                 delivered_);
  out.family("syncd_shm_region_failures_total", "counter",
             "Shared-memory regions that could not be created.");
  out.sample("syncd_shm_region_failures_total", "", create_failures_);
  out.family("syncd_shm_foreign_file_refusals_total", "counter",
             "Rings not created because a file syncd does not own was at the path.");
  out.sample("syncd_shm_foreign_file_refusals_total", "", foreign_file_refusals_);
}

}  // namespace syncd::media
