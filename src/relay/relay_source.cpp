#include "relay/relay_source.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "telemetry/stage_json.h"

namespace syncd::relay {

namespace {
bool same_stream(const StreamDescription& a, const StreamDescription& b) {
  return a.name_view() == b.name_view() && a.format == b.format && a.width == b.width &&
         a.height == b.height && a.source_format == b.source_format;
}
}  // namespace

RelaySource::RelaySource(media::StreamRegistry& registry, transport::TransportThread& thread,
                         uv_loop_t* loop)
    : registry_(registry), thread_(thread), loop_(loop) {}

RelaySource::~RelaySource() {
  stop();
}

void RelaySource::free_buffer(uint32_t buffer, void* self) {
  transport::ToTransport free;
  free.kind = transport::ToTransport::Kind::kBufferFree;
  free.buffer = buffer;
  // The channel is as deep as the relay's buffers are many, so this cannot be refused while
  // the relay runs; a refusal at stop loses nothing (the relay frees its buffers as it ends).
  static_cast<RelaySource*>(self)->thread_.send_to_relay(free);
}

void RelaySource::request_keyframe(void* self) {
  transport::ToTransport request;
  request.kind = transport::ToTransport::Kind::kKeyframeRequest;
  // Refused only when the channel is full or the relay stopped; the stage asks again while it
  // still waits (every keyframe_request_interval_ns).
  static_cast<RelaySource*>(self)->thread_.send_to_relay(request);
}

bool RelaySource::open_decoder(std::string& error) {
  if (!decoder_) {
    if (!loop_) {
      error = "no_decoder";
      return false;
    }
    decoder_ = std::make_unique<decode::DecodeStage>(
        registry_,
        decode::DecodeStageHooks{&RelaySource::free_buffer, &RelaySource::request_keyframe, this},
        decode::DecodeStageConfig{.depth = kDecodeDepth, .queue = kDecodeQueue});
    std::string why;
    if (!decoder_->start(loop_, why)) {
      decoder_.reset();
      error = "no_decoder";
      return false;
    }
  }
  std::string why;
  if (!decoder_->open(*stream_, kOwner, why)) {
    error = "no_decoder";
    return false;
  }
  return true;
}

void RelaySource::on_description(const StreamDescription& d) {
  ++counters_.descriptions;
  if (stream_ && same_stream(d, described_)) return;
  close();
  described_ = d;
  media::StreamConfig config;
  config.name = std::string(d.name_view());
  config.width = d.width;
  config.height = d.height;
  // A stream encoded by the sender's relay is decoded back to raw frames here, at the described
  // (source) size whatever size the sender encodes at after a resolution step.
  config.format = d.source_format != 0 ? media::PixelFormat::kI420 : media::PixelFormat(d.format);
  config.fps = d.fps_millihertz / 1000.0;
  config.slots = kSlots;
  media::OpenError error;
  // A stream relayed as it came (a page's H.264): a consumer here that needs an IDR (its decoded
  // twin's decoder) asks the sender through the relay, as this receiver's decoder does.
  stream_ = registry_.open(config, kOwner, error, media::FramePool::Prefault::kNow,
                           d.source_format != 0 ? nullptr : this);
  if (!stream_) {
    ++counters_.open_refused;
    counters_.open_error = media::open_error_code(error);
    return;
  }
  if (d.source_format != 0) {
    std::string error;
    if (!open_decoder(error)) {
      registry_.close(stream_);
      stream_ = nullptr;
      ++counters_.open_refused;
      counters_.open_error = error;
      return;
    }
    decoding_ = true;
  }
  ++counters_.streams_opened;
  counters_.open_error.clear();
}

uint64_t RelaySource::local_sequence(uint64_t remote, bool& restarted) {
  // The relay hands frames over in order within a sender's numbering, so one that does not go
  // forward starts a new numbering (a restarted sender syncd, or its producer reconnected into
  // the same described stream): the local numbers go on from the last one instead of starting
  // again, which the registry would count as reordered, not unique.
  restarted = sequenced_ && remote <= last_remote_;
  if (restarted) {
    sequence_offset_ = last_local_ + 1 - remote;  // modulo 2^64, as the sum below
    ++counters_.sequence_restarts;
  }
  sequenced_ = true;
  last_remote_ = remote;
  last_local_ = remote + sequence_offset_;
  return last_local_;
}

void RelaySource::on_frame_in(const transport::FromTransport& m, uint64_t now_ns) {
  ++counters_.frames_in;
  bool restarted = false;
  const uint64_t sequence = stream_ ? local_sequence(m.sequence, restarted) : m.sequence;
  // A new numbering is a new sender's chain of references: a decoder waits for its IDR.
  const bool loss_before = m.loss_before || restarted;
  // Transport time of a frame for a stream, decoded or raw. Only a plausible figure: both ends
  // on one clock put the sender's accept shortly before.
  if (stream_ && m.sender_accept_ns != 0 && m.sender_accept_ns <= m.complete_ns &&
      m.complete_ns - m.sender_accept_ns < 10'000'000'000ull)
    counters_.transport.record(m.complete_ns - m.sender_accept_ns);
  if (stream_ && decoding_) {
    decode::AccessUnitIn au;
    au.data = m.data;
    au.bytes = m.bytes;
    au.buffer = m.buffer;
    au.sequence = sequence;
    au.capture_time_us = m.capture_time_us;
    au.flags = m.flags;
    au.start_ns = m.complete_ns;
    au.loss_before = loss_before;
    decoder_->submit(au, now_ns);  // the buffer comes back through free_buffer
    return;
  }
  if (!stream_) {
    ++counters_.frames_without_stream;
  } else {
    media::IngestRequest r;
    r.stream_id = stream_->id();
    r.owner = kOwner;
    // An access unit the relay lost before this one: the consumers' decoders must wait for an
    // IDR (the frame says so, as it has no other way to tell).
    r.flags = (m.flags & ~media::frame_flag::kDecoded) |
              (loss_before ? media::frame_flag::kDiscontinuity : 0);
    r.sequence = sequence;
    r.capture_time_us = m.capture_time_us;
    r.content_hash = m.content_hash;
    r.payload_bytes = m.bytes;
    r.start_ns = m.complete_ns;
    media::IngestRefusal refusal;
    media::SlotLease lease = registry_.begin(r, refusal);
    if (!lease) {
      ++counters_.frames_refused;
    } else {
      std::memcpy(lease.pixels(), m.data, m.bytes);
      if (lease.commit(m.bytes, now_ns))
        ++counters_.frames_committed;
      else
        ++counters_.frames_refused;
    }
  }
  free_buffer(m.buffer, this);
}

void RelaySource::keyframe_wanted(const media::Stream&, media::KeyframeReason) {
  request_keyframe(this);
}

void RelaySource::on_peer_ended() {
  close();
}

void RelaySource::close() {
  // The decoder's frames in flight finish (committed or aborted) before their stream closes.
  if (decoder_) decoder_->close_stream();
  decoding_ = false;
  sequenced_ = false;
  sequence_offset_ = 0;
  if (stream_) registry_.close(stream_);
  stream_ = nullptr;
}

void RelaySource::stop() {
  close();
  if (decoder_) decoder_->stop();
}

void RelaySource::write_stats(nlohmann::json& out) const {
  const RelaySourceCounters& c = counters_;
  out = {{"stream", stream_ ? nlohmann::json(stream_->config().name) : nlohmann::json(nullptr)},
         {"descriptions", c.descriptions},
         {"streams_opened", c.streams_opened},
         {"open_refused", c.open_refused},
         {"open_error", c.open_error},
         {"frames_in", c.frames_in},
         {"frames_committed", c.frames_committed},
         {"frames_without_stream", c.frames_without_stream},
         {"frames_refused", c.frames_refused},
         {"sequence_restarts", c.sequence_restarts},
         {"transport", telemetry::stage_json(c.transport)}};
  if (decoder_) decoder_->write_stats(out["decoder"]);
}

}  // namespace syncd::relay
