#include "server/stream_receivers.h"

#include <cstring>

#include "core/clock.h"
#include "media/frame_pool.h"
#include "server/connection.h"
#include "server/control_router.h"
#include "telemetry/stage_json.h"

namespace syncd::server {

namespace {
constexpr size_t kDepartedKept = 32;
const char* const kDropStageNames[] = {"admission", "pre_send", "post_send", "consumer_slow"};

template <typename T>
void put(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof v);  // little-endian hosts only (see media/frame_header.cpp)
}

}  // namespace

StreamReceivers::StreamReceivers(uint32_t max_frames_in_flight)
    : max_frames_in_flight_(max_frames_in_flight ? max_frames_in_flight : 1) {}

StreamReceivers::~StreamReceivers() {
  for (auto& [id, r] : receivers_) drop_pending(*r);
}

uint64_t StreamReceivers::add(Connection& connection, const media::Stream& stream,
                              uint32_t initial_credit) {
  auto r = std::make_unique<Receiver>();
  r->id = next_id_++;
  r->connection = &connection;
  r->stream_id = stream.id();
  r->owner = this;
  r->record_bytes = kRecordHeaderBytes + stream.frame_bytes();
  r->credit = initial_credit;
  for (Write& w : r->writes) w.receiver = r.get();
  const uint64_t id = r->id;
  by_connection_[&connection] = id;
  receivers_.emplace(id, std::move(r));
  return id;
}

void StreamReceivers::remove(Connection& connection) {
  auto c = by_connection_.find(&connection);
  if (c == by_connection_.end()) return;
  auto it = receivers_.find(c->second);
  by_connection_.erase(c);
  if (it == receivers_.end()) return;
  Receiver& r = *it->second;
  drop_pending(r);
  departed_.emplace_back(r.stream_id, receiver_json(r));
  while (departed_.size() > kDepartedKept) departed_.pop_front();
  receivers_.erase(it);
}

bool StreamReceivers::grant(uint64_t receiver_id, uint32_t frames, uint64_t now_ns) {
  auto it = receivers_.find(receiver_id);
  if (it == receivers_.end()) return false;
  Receiver& r = *it->second;
  for (uint32_t i = 0; i < frames && r.unacked_count > 0; ++i) {
    r.stages.ack.record(now_ns - r.unacked_ns[r.unacked_head]);
    r.unacked_head = (r.unacked_head + 1) % r.unacked_ns.size();
    --r.unacked_count;
  }
  // Credit is capped so a receiver cannot bank an unbounded allowance.
  r.credit = std::min<uint32_t>(r.credit + frames, 64);
  send_pending(r, now_ns);
  return true;
}

void StreamReceivers::register_control(ControlRouter& router) {
  router.add<control::Credit>(
      "video.receive", [this](Connection& c, const control::ControlMessage& m) {
        const auto& credit = std::get<control::Credit>(m);
        if (!grant(credit.receiver, credit.frames, core::monotonic_ns()))
          c.send_error(control::error_code::kUnknownReceiver, "no such receiver");
      });
}

bool StreamReceivers::can_send(const Receiver& r) const {
  if (r.credit == 0 || r.finishing) return false;
  if (r.bytes_in_flight + r.record_bytes > r.record_bytes * max_frames_in_flight_) return false;
  for (const Write& w : r.writes)
    if (!w.busy) return true;
  return false;
}

void StreamReceivers::on_frame(const media::Stream& stream, media::FrameSlot& slot) {
  const uint64_t now = core::monotonic_ns();
  for (auto& [id, rp] : receivers_) {
    Receiver& r = *rp;
    if (r.stream_id != stream.id() || r.finishing) continue;
    ++r.offered;
    const media::FrameInfo& info = slot.info;
    if (r.last_receive_start_ns && info.receive_start_ns > r.last_receive_start_ns)
      r.stages.ingest_gap.record(info.receive_start_ns - r.last_receive_start_ns);
    r.last_receive_start_ns = info.receive_start_ns;
    r.stages.tap.record(info.accept_ns - info.receive_start_ns);
    r.stages.publish.record(now - info.accept_ns);
    if (r.pending) drop_pending(r);  // newest wins
    if (can_send(r)) {
      send(r, &slot, now, now);
    } else if (r.bytes_in_flight + r.record_bytes <= r.record_bytes * max_frames_in_flight_ &&
               r.connection->writer().pinned_slots() < r.connection->writer().pin_limit() &&
               media::FramePool::try_pin(&slot)) {
      // Held as the one pending frame, pinned like a write: what a receiver holds (in flight
      // plus pending) stays within its frame limit and the pool's pin cap.
      r.pending = &slot;
      r.pending_offered_ns = now;
      r.pending_stage = r.credit == 0 ? kAdmission : kPreSend;
    } else {
      ++r.dropped[r.credit == 0 ? kAdmission : kPreSend];
      ++r.dropped_since_sent;
    }
  }
}

void StreamReceivers::drop_pending(Receiver& r) {
  if (!r.pending) return;
  ++r.dropped[r.pending_stage];
  ++r.dropped_since_sent;
  media::FramePool::unpin(r.pending);
  r.pending = nullptr;
}

void StreamReceivers::send_pending(Receiver& r, uint64_t now_ns) {
  if (!r.pending || !can_send(r)) return;
  media::FrameSlot* slot = r.pending;
  r.pending = nullptr;
  send(r, slot, r.pending_offered_ns, now_ns);
  media::FramePool::unpin(slot);  // the writer pinned it again if it took it
}

void StreamReceivers::send(Receiver& r, media::FrameSlot* slot, uint64_t offered_ns,
                           uint64_t now_ns) {
  Write* w = nullptr;
  for (Write& candidate : r.writes)
    if (!candidate.busy) {
      w = &candidate;
      break;
    }
  const media::FrameInfo& info = slot->info;
  uint8_t h[kRecordHeaderBytes];
  put<uint32_t>(h + 0, kRecordMagic);
  put<uint16_t>(h + 4, 1);
  put<uint16_t>(h + 6, uint16_t(kRecordHeaderBytes));
  put<uint64_t>(h + 8, info.sequence);
  put<uint64_t>(h + 16, info.capture_time_us);
  put<uint64_t>(h + 24, info.accept_ns);
  put<uint32_t>(h + 32, info.width);
  put<uint32_t>(h + 36, info.height);
  put<uint32_t>(h + 40, uint32_t(info.format));
  put<uint32_t>(h + 44, info.flags);
  put<uint64_t>(h + 48, info.content_hash);
  put<uint32_t>(h + 56, uint32_t(info.bytes));
  put<uint32_t>(h + 60, r.dropped_since_sent);
  w->sequence = info.sequence;
  w->offered_ns = offered_ns;
  w->submit_ns = now_ns;
  const SendStatus status = r.connection->writer().send_frame(
      std::string_view(reinterpret_cast<const char*>(h), kRecordHeaderBytes), slot, info.bytes,
      &StreamReceivers::on_written, w);
  if (status != SendStatus::kQueued) {
    // The receiver's output limits (or the pool's pin cap) refused it: it reads too slowly.
    ++r.dropped[status == SendStatus::kClosed ? kPostSend : kConsumerSlow];
    ++r.dropped_since_sent;
    if (status == SendStatus::kClosed) ++r.sent;  // handed over and lost at once
    return;
  }
  w->busy = true;
  r.dropped_since_sent = 0;
  --r.credit;
  r.bytes_in_flight += r.record_bytes;
  ++r.sent;
  r.stages.write_submit.record(now_ns - offered_ns);
}

void StreamReceivers::on_written(void* write, int status) {
  Write* w = static_cast<Write*>(write);
  Receiver& r = *w->receiver;
  const uint64_t now = core::monotonic_ns();
  r.bytes_in_flight -= r.record_bytes;
  w->busy = false;
  if (status < 0) {
    ++r.dropped[kPostSend];  // the receiver went away with the frame on its way
    return;
  }
  ++r.completed;
  r.stages.write_complete.record(now - w->submit_ns);
  if (r.unacked_count < r.unacked_ns.size()) {
    r.unacked_ns[(r.unacked_head + r.unacked_count) % r.unacked_ns.size()] = now;
    ++r.unacked_count;
  } else {
    ++r.ack_untimed;
  }
  r.owner->keep_if_slow(r, SlowRecord{w->sequence, w->submit_ns - w->offered_ns, now - w->submit_ns,
                                      now - w->offered_ns});
  r.owner->send_pending(r, now);
  r.owner->finish_if_idle(r);
}

void StreamReceivers::keep_if_slow(Receiver& r, const SlowRecord& rec) {
  if (r.slowest_count < kSlowestKept) {
    r.slowest[r.slowest_count++] = rec;
    return;
  }
  size_t fastest = 0;
  for (size_t i = 1; i < kSlowestKept; ++i)
    if (r.slowest[i].total_ns < r.slowest[fastest].total_ns) fastest = i;
  ++r.slow_not_kept;
  if (rec.total_ns > r.slowest[fastest].total_ns) r.slowest[fastest] = rec;
}

void StreamReceivers::finish_if_idle(Receiver& r) {
  if (r.finishing && r.bytes_in_flight == 0) r.connection->destroy();
}

void StreamReceivers::on_stream_close(const media::Stream& stream) {
  for (auto& [id, rp] : receivers_) {
    Receiver& r = *rp;
    if (r.stream_id != stream.id()) continue;
    drop_pending(r);
    r.finishing = true;
    r.finishing_since_ns = core::monotonic_ns();
    finish_if_idle(r);
  }
}

void StreamReceivers::end_overdue(uint64_t now_ns) {
  for (auto& [id, rp] : receivers_) {
    Receiver& r = *rp;
    if (!r.finishing || r.cut_at_close || now_ns - r.finishing_since_ns < kFinishGraceNs) continue;
    r.cut_at_close = true;
    r.connection->destroy();  // its writes are cancelled; their pins (and the pool) go
  }
}

void StreamReceivers::on_stream_forget(uint32_t stream_id) {
  for (auto it = departed_.begin(); it != departed_.end();)
    it = it->first == stream_id ? departed_.erase(it) : std::next(it);
}

nlohmann::json StreamReceivers::receiver_json(const Receiver& r) const {
  nlohmann::json dropped = nlohmann::json::object();
  uint64_t dropped_total = 0;
  for (size_t i = 0; i < kDropStages; ++i) {
    dropped[kDropStageNames[i]] = r.dropped[i];
    dropped_total += r.dropped[i];
  }
  nlohmann::json slow = nlohmann::json::array();
  for (size_t i = 0; i < r.slowest_count; ++i)
    slow.push_back({{"sequence", r.slowest[i].sequence},
                    {"wait_us", double(r.slowest[i].wait_ns) / 1e3},
                    {"write_us", double(r.slowest[i].write_ns) / 1e3},
                    {"total_us", double(r.slowest[i].total_ns) / 1e3}});
  return {{"receiver", r.id},
          {"offered", r.offered},
          {"sent", r.sent},
          {"completed", r.completed},
          {"in_flight", r.sent - r.completed - r.dropped[kPostSend]},
          {"pinned_slots", r.connection ? r.connection->writer().pinned_slots() : 0},
          {"dropped", std::move(dropped)},
          {"dropped_total", dropped_total},
          {"pending", r.pending ? 1 : 0},
          {"ack_untimed", r.ack_untimed},
          {"credit", r.credit},
          {"stages",
           {{"ingest_gap", telemetry::stage_json(r.stages.ingest_gap)},
            {"tap", telemetry::stage_json(r.stages.tap)},
            {"publish", telemetry::stage_json(r.stages.publish)},
            {"write_submit", telemetry::stage_json(r.stages.write_submit)},
            {"write_complete", telemetry::stage_json(r.stages.write_complete)},
            {"ack", telemetry::stage_json(r.stages.ack)}}},
          {"slowest", std::move(slow)},
          {"slowest_not_kept", r.slow_not_kept},
          {"cut_at_close", r.cut_at_close}};
}

void StreamReceivers::write_stream_stats(uint32_t stream_id, nlohmann::json& out) const {
  nlohmann::json list = nlohmann::json::array();
  uint64_t delivered = 0, dropped = 0;
  auto add = [&](const nlohmann::json& j, bool live) {
    nlohmann::json copy = j;
    copy["live"] = live;
    delivered += j["completed"].get<uint64_t>();
    dropped += j["dropped_total"].get<uint64_t>();
    list.push_back(std::move(copy));
  };
  for (const auto& [sid, j] : departed_)
    if (sid == stream_id) add(j, false);
  for (const auto& [id, r] : receivers_)
    if (r->stream_id == stream_id) add(receiver_json(*r), true);
  if (list.empty()) return;
  out["delivered"] = delivered;
  out["dropped_total"] = dropped;
  out["receivers"] = std::move(list);
}

void StreamReceivers::write_metrics(telemetry::PrometheusText& out,
                                    const std::vector<const media::Stream*>& streams) const {
  out.family("syncd_receiver_frames_sent_total", "counter",
             "Frames written to HTTP stream receivers.");
  out.family("syncd_receiver_frames_dropped_total", "counter",
             "Frames dropped for HTTP stream receivers, by stage.");
  for (const media::Stream* s : streams) {
    uint64_t sent = 0;
    std::array<uint64_t, kDropStages> dropped{};
    for (const auto& [id, r] : receivers_) {
      if (r->stream_id != s->id()) continue;
      sent += r->completed;
      for (size_t i = 0; i < kDropStages; ++i) dropped[i] += r->dropped[i];
    }
    for (const auto& [sid, j] : departed_) {  // receivers that left still count
      if (sid != s->id()) continue;
      sent += j["completed"].get<uint64_t>();
      for (size_t i = 0; i < kDropStages; ++i)
        dropped[i] += j["dropped"][kDropStageNames[i]].get<uint64_t>();
    }
    const std::string label =
        "stream=\"" + telemetry::prometheus_label_value(s->config().name) + "\"";
    out.sample("syncd_receiver_frames_sent_total", label, sent);
    for (size_t i = 0; i < kDropStages; ++i)
      out.sample("syncd_receiver_frames_dropped_total",
                 label + ",stage=\"" + kDropStageNames[i] + "\"", dropped[i]);
  }
}

bool StreamReceivers::receiving(uint32_t stream_id) const {
  for (const auto& [id, r] : receivers_)
    if (r->stream_id == stream_id && !r->finishing) return true;
  return false;
}

}  // namespace syncd::server
