#include "server/audio_service.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "server/connection.h"
#include "server/control_router.h"
#include "telemetry/stage_json.h"

namespace syncd::server {

namespace {
// The timer serves held reads (min_frames) and discards audio while nobody reads. 5 ms keeps a
// held read at most one synthetic period late and costs the loop 200 short wake-ups a second.
constexpr uint64_t kTimerMs = 5;

// The receiving end of the WAN relay's audio: no thread of its own, the relay thread writes the
// ring (relay/relay_audio.h), so this only names the source in audio.info and /stats.
class RelayWrittenBackend final : public audio::CaptureBackend {
 public:
  explicit RelayWrittenBackend(uint32_t rate) : rate_(rate) {}
  bool start(std::string&) override { return true; }
  void stop() override {}
  audio::BackendStatus status() const override {
    audio::BackendStatus s;
    s.state = "running";
    s.rate = rate_;
    return s;
  }
  const char* name() const override { return "relay"; }

 private:
  uint32_t rate_;
};

}  // namespace

AudioService::AudioService(uv_loop_t* loop, audio::AudioSourceConfig config)
    : loop_(loop), config_(std::move(config)), reader_(std::make_unique<Reader>()) {}

AudioService::~AudioService() {
  stop();
}

bool AudioService::start(std::string& error) {
  if (config_.backend == "jack") {
    // The ring's timestamps need the device rate; JACK decides it. Without a server yet we
    // assume the configured rate and say so in the stats once it differs.
    if (const uint32_t rate = audio::probe_jack_rate(); rate != 0) config_.rate = rate;
  }
  const uint64_t frames = std::max<uint64_t>(uint64_t(config_.rate) * config_.ring_ms / 1000, 1024);
  // Allocated and zero-filled here, so every page is resident before the real-time thread
  // writes it; mlock (best effort) keeps it so.
  samples_.assign(frames * config_.channels, 0.0f);
  blocks_.assign(audio::CaptureRing::blocks_for(frames), audio::CaptureBlock{});
  ::mlock(samples_.data(), samples_.size() * sizeof(float));
  ::mlock(blocks_.data(), blocks_.size() * sizeof(audio::CaptureBlock));
  ring_ = std::make_unique<audio::CaptureRing>(samples_, blocks_, config_.channels, config_.rate);
  if (config_.backend == "synthetic") {
    backend_ = audio::make_synthetic_backend(config_, *ring_);
  } else if (config_.backend == "relay") {
    backend_ = std::make_unique<RelayWrittenBackend>(config_.rate);
  } else if (config_.backend == "jack") {
    backend_ = audio::make_jack_backend(config_, *ring_);
    if (!backend_) {
      error = "this syncd was built without JACK";
      return false;
    }
  } else {
    error = "unknown audio backend '" + config_.backend + "'";
    return false;
  }
  if (!backend_->start(error)) return false;
  uv_timer_init(loop_, &timer_);
  timer_.data = this;
  timer_open_ = true;
  uv_timer_start(&timer_, &AudioService::on_timer, kTimerMs, kTimerMs);
  return true;
}

audio::CaptureRing* AudioService::lend_ring_to_relay() {
  if (!ring_ || config_.backend == "relay") return nullptr;
  lent_to_relay_ = true;
  return ring_.get();
}

std::shared_ptr<audio::AudioTap> AudioService::open_tap(uint32_t left, uint32_t right,
                                                        std::string& why) {
  if (!ring_) {
    why = "no audio source is running";
    return nullptr;
  }
  if (lent_to_relay_) {
    why = "the WAN relay reads this audio source (--relay-audio-channels none frees it)";
    return nullptr;
  }
  if (left >= config_.channels || right >= config_.channels) {
    why = "the audio source has " + std::to_string(config_.channels) + " channels";
    return nullptr;
  }
  // One second: a consumer thread that stalls that long loses audio, never the capture.
  auto tap = std::make_shared<audio::AudioTap>(left, right, ring_->rate(), ring_->rate());
  taps_.push_back(tap);
  return tap;
}

void AudioService::feed_taps() {
  if (taps_.empty()) return;
  for (;;) {
    const audio::ReadRun run = ring_->peek_from(tapped_next_frame_, 1u << 20);
    if (run.samples.total() == 0) return;
    for (const auto& tap : taps_)
      if (tap->wanted()) tap->write(run, config_.channels);
    tapped_next_frame_ = run.first_frame + run.samples.total();
  }
}

audio::CaptureRing* AudioService::ring_for_relay_writer() {
  return ring_ && config_.backend == "relay" ? ring_.get() : nullptr;
}

void AudioService::stop() {
  if (backend_) backend_->stop();
  if (timer_open_) {
    timer_open_ = false;
    uv_timer_stop(&timer_);
    uv_close(reinterpret_cast<uv_handle_t*>(&timer_), nullptr);
  }
}

uint32_t AudioService::max_packet_frames() const {
  return uint32_t(kMaxPacketBytes / (sizeof(float) * config_.channels));
}

const char* AudioService::read(Connection& connection, const control::AudioRead& request,
                               std::string& message) {
  Reader& r = *reader_;
  if (!ring_) {
    message = "audio source not running";
    return control::error_code::kAudioUnavailable;
  }
  if (lent_to_relay_) {
    ++reads_in_use_;
    message = "the WAN relay reads this audio source (--relay-audio-channels none frees it)";
    return control::error_code::kAudioInUse;
  }
  if (attached_ && r.id != connection.id()) {
    ++reads_in_use_;
    message = "another connection is reading the audio source";
    return control::error_code::kAudioInUse;
  }
  if (attached_ && (r.waiting || r.writing)) {
    ++reads_busy_;
    message = "one audio.read at a time per connection";
    return control::error_code::kAudioBusy;
  }
  const uint64_t now = core::monotonic_ns();
  if (!attached_) {
    // A new reader's stream begins after the newest captured frame: what was captured before it
    // is not its to miss, and nothing of a previous reader's position carries over.
    const uint64_t before = ring_->readable_frames();
    r.position = ring_->skip_to_newest();
    frames_discarded_ += before;
    attached_ = true;
    ++attaches_;
    r.connection = &connection;
    r.id = connection.id();
    r.sequence = 0;
    r.dropped_base = r.position.dropped_total;
    r.gap_base = r.position.gap_total;
  }
  ++reads_;
  r.request = request;
  r.received_ns = now;
  const uint32_t wait_ms = std::min(request.timeout_ms, kMaxWaitMs);
  r.deadline_ns = now + uint64_t(wait_ms) * 1'000'000;
  if (request.min_frames > 0 && ring_->readable_frames() < request.min_frames) {
    r.waiting = true;  // served by the timer
    return nullptr;
  }
  send_packet(now);
  return nullptr;
}

void AudioService::send_packet(uint64_t /*now_ns*/) {
  Reader& r = *reader_;
  feed_taps();  // before these frames can be released
  r.waiting = false;
  if (!r.connection->is_websocket()) return;  // closing: the close callback detaches us
  uint32_t limit = max_packet_frames();
  if (r.request.max_frames > 0) limit = std::min(limit, r.request.max_frames);
  const audio::ReadRun run = ring_->peek(limit);
  const uint32_t frames = run.samples.total();

  audio::NaudHeader h;
  h.channels = uint16_t(config_.channels);
  const audio::BackendStatus status = backend_->status();
  h.rate = status.rate ? status.rate : config_.rate;
  h.frames = frames;
  h.sequence = r.sequence;
  h.xruns = uint32_t(status.xruns);
  // Where the reader will stand once this packet is sent; a refused packet moves nothing.
  audio::CapturePosition after = r.position;
  if (frames > 0) {
    h.first_frame = run.first_frame;
    h.timestamp_ns = run.timestamp_ns;
    // Frames between this reader's position and the run were lost after it attached: the
    // run's block counts them (dropped or gap), and the flag marks the jump.
    if (run.first_frame != r.position.next_frame) h.flags |= audio::kNaudFlagDiscontinuity;
    after.next_frame = run.first_frame + frames;
    after.timestamp_ns = run.timestamp_ns + uint64_t(frames) * 1'000'000'000ull / ring_->rate();
    after.dropped_total = run.dropped_total;
    after.gap_total = run.gap_total;
  } else {
    // Nothing new: the packet says where the reader stands, with the capture time its next
    // frame will have (0 only before anything was ever captured).
    h.first_frame = r.position.next_frame;
    h.timestamp_ns = r.position.timestamp_ns;
  }
  // Losses before this reader attached are not its losses.
  h.dropped_frames = after.dropped_total - r.dropped_base;
  h.gap_frames = after.gap_total - r.gap_base;
  const size_t payload = audio::kNaudHeaderBytes + h.payload_bytes();
  // The WebSocket header is placed right before the NAUD header so both go out as one buffer.
  uint8_t ws_header[ws::kMaxServerHeaderBytes];
  const size_t ws_bytes = ws::encode_server_header(ws_header, ws::Opcode::kBinary, payload);
  uint8_t* start = r.header + ws::kMaxServerHeaderBytes - ws_bytes;
  std::memcpy(start, ws_header, ws_bytes);
  audio::encode_naud_header(h, r.header + ws::kMaxServerHeaderBytes);
  uv_buf_t pieces[2];
  size_t npieces = 0;
  const size_t frame_bytes = sizeof(float) * config_.channels;
  for (int i = 0; i < 2; ++i) {
    if (run.samples.frames[i] == 0) continue;
    // Zero copy: the kernel reads ring memory, which stays ours until on_write consumes it.
    pieces[npieces++] = uv_buf_init(reinterpret_cast<char*>(run.samples.part[i]),
                                    unsigned(run.samples.frames[i] * frame_bytes));
  }
  r.frames_in_flight = frames;
  const SendStatus sent = r.connection->writer().send_borrowed(
      std::string_view(reinterpret_cast<const char*>(start), ws_bytes + audio::kNaudHeaderBytes),
      std::span<const uv_buf_t>(pieces, npieces), &AudioService::on_write, this);
  if (sent != SendStatus::kQueued) {
    r.frames_in_flight = 0;  // the frames stay in the ring for the next read
    ++packets_refused_;
    return;
  }
  r.writing = true;
  r.position = after;
  ++r.sequence;
  bytes_sent_ += ws_bytes + payload;
}

void AudioService::on_write(void* context, int status) {
  auto* self = static_cast<AudioService*>(context);
  Reader& r = *self->reader_;
  r.writing = false;
  // Delivered or not (a cancelled write on a closing connection), the frames are released:
  // the next reader starts fresh anyway.
  self->ring_->consume(r.frames_in_flight);
  if (status == 0) {
    self->frames_delivered_ += r.frames_in_flight;
    self->read_rtt_.record(core::monotonic_ns() - r.received_ns);
  }
  r.frames_in_flight = 0;
}

void AudioService::on_timer(uv_timer_t* timer) {
  auto* self = static_cast<AudioService*>(timer->data);
  Reader& r = *self->reader_;
  if (self->lent_to_relay_) return;  // the relay thread is the ring's reader now
  self->feed_taps();
  if (!self->attached_) {
    self->frames_discarded_ += self->ring_->consume_all();
    return;
  }
  if (r.waiting) {
    const uint64_t now = core::monotonic_ns();
    if (now >= r.deadline_ns || self->ring_->readable_frames() >= r.request.min_frames)
      self->send_packet(now);
  }
}

void AudioService::register_absent(ControlRouter& router) {
  const char* why = "syncd runs without --audio-source";
  router.refuse<control::AudioRead>(control::error_code::kAudioUnavailable, why);
  router.refuse<control::AudioInfo>(control::error_code::kAudioUnavailable, why);
}

void AudioService::connection_closed(Connection& c) {
  if (!attached_ || reader_->id != c.id()) return;
  // libuv ran every write callback of the handle before its close callback.
  attached_ = false;
  reader_->waiting = false;
  reader_->connection = nullptr;
}

void AudioService::register_control(ControlRouter& router) {
  router.add<control::AudioRead>("audio", [this](Connection& c, const control::ControlMessage& m) {
    std::string why;
    if (const char* code = read(c, std::get<control::AudioRead>(m), why)) c.send_error(code, why);
  });
  router.add<control::AudioInfo>(
      "audio", [this](Connection& c, const control::ControlMessage&) { c.send_text(info_json()); });
}

std::string AudioService::info_json() const {
  const audio::BackendStatus s = backend_ ? backend_->status() : audio::BackendStatus{};
  nlohmann::json j = {{"type", "audio.info"},
                      {"backend", config_.backend},
                      {"state", s.state},
                      {"channels", config_.channels},
                      {"rate", s.rate ? s.rate : config_.rate},
                      {"period_frames", s.period_frames},
                      {"sample_format", "f32le"},
                      {"layout", "interleaved"},
                      {"header_bytes", audio::kNaudHeaderBytes},
                      {"ring_frames", ring_ ? ring_->capacity_frames() : 0},
                      {"max_packet_frames", max_packet_frames()},
                      {"reader_attached", attached_}};
  return j.dump();
}

void AudioService::write_stats(nlohmann::json& out) const {
  if (!ring_) return;
  const audio::BackendStatus s = backend_->status();
  const uint64_t captured = ring_->captured_frames();
  out["audio"] = {
      {"backend", config_.backend},
      {"state", s.state},
      {"channels", config_.channels},
      {"rate", s.rate ? s.rate : config_.rate},
      {"ring_rate", ring_->rate()},
      {"period_frames", s.period_frames},
      {"realtime", s.realtime},
      {"ring_frames", ring_->capacity_frames()},
      {"ring_ms", config_.ring_ms},
      {"ring_fill_frames", ring_->readable_frames()},
      {"ring_fill_high_water_frames", ring_->fill_high_water()},
      {"frames_captured", captured},
      {"frames_delivered", frames_delivered_},
      {"frames_dropped", ring_->dropped_frames()},
      {"overrun_events", ring_->overrun_events()},
      {"gap_frames", ring_->gap_frames()},
      {"frames_discarded_no_reader", frames_discarded_},
      {"xruns", s.xruns},
      {"disconnects", s.disconnects},
      {"reconnects", s.reconnects},
      {"reads", reads_},
      {"reads_busy", reads_busy_},
      {"reads_in_use", reads_in_use_},
      {"packets_refused", packets_refused_},
      {"reader_attaches", attaches_},
      {"reader_attached", attached_},
      {"bytes_sent", bytes_sent_},
      {"read_rtt", telemetry::stage_json(read_rtt_)},
  };
  // Copies for other threads (WHEP egresses): what each took, and what its consumer was too
  // slow for.
  nlohmann::json taps = nlohmann::json::array();
  for (const auto& tap : taps_)
    taps.push_back({{"left", tap->left()},
                    {"right", tap->right()},
                    {"wanted", tap->wanted()},
                    {"frames", tap->ring().captured_frames()},
                    {"frames_dropped", tap->ring().dropped_frames()}});
  out["audio"]["taps"] = std::move(taps);
}

void AudioService::write_metrics(telemetry::PrometheusText& out) const {
  if (!ring_) return;
  const audio::BackendStatus s = backend_->status();
  const std::string labels = "backend=\"" + config_.backend + "\"";
  auto counter = [&](const char* name, const char* help, uint64_t v) {
    out.family(name, "counter", help);
    out.sample(name, labels, v);
  };
  auto gauge = [&](const char* name, const char* help, uint64_t v) {
    out.family(name, "gauge", help);
    out.sample(name, labels, v);
  };
  counter("syncd_audio_frames_captured_total", "Audio frames the backend captured.",
          ring_->captured_frames());
  counter("syncd_audio_frames_delivered_total", "Audio frames written to readers.",
          frames_delivered_);
  counter("syncd_audio_frames_dropped_total", "Audio frames lost to capture-ring overruns.",
          ring_->dropped_frames());
  counter("syncd_audio_gap_frames_total", "Audio frames the source did not deliver (outages).",
          ring_->gap_frames());
  counter("syncd_audio_frames_discarded_total", "Audio frames captured while nobody read.",
          frames_discarded_);
  counter("syncd_audio_xruns_total", "Backend xruns as reported by the device.", s.xruns);
  counter("syncd_audio_disconnects_total", "Times the audio server went away.", s.disconnects);
  counter("syncd_audio_reconnects_total", "Times the backend reconnected.", s.reconnects);
  counter("syncd_audio_reads_total", "audio.read requests served.", reads_);
  gauge("syncd_audio_ring_fill_frames", "Frames in the capture ring now.",
        ring_->readable_frames());
  gauge("syncd_audio_ring_fill_high_water_frames", "Most frames ever in the capture ring.",
        ring_->fill_high_water());
  gauge("syncd_audio_ring_capacity_frames", "Capture ring capacity.", ring_->capacity_frames());
  out.family("syncd_audio_read_rtt_seconds", "histogram",
             "audio.read request received to reply written.");
  out.histogram("syncd_audio_read_rtt_seconds", labels, read_rtt_);
}

}  // namespace syncd::server
