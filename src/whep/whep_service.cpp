#include "whep/whep_service.h"

#include <openssl/rand.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "webrtc/sdp.h"
#include "whep/whep_ids.h"
#include "whep/whep_internal.h"

namespace syncd::whep {

namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;

bool is_wildcard(const std::string& host) {
  return host.empty() || host == "0.0.0.0" || host == "::";
}

}  // namespace

bool parse_whep_audio_channels(std::string_view text, uint32_t source_channels,
                               WhepAudioChannels& out, std::string& why) {
  out = {};
  if (text == "none") return true;
  if (text.empty()) text = source_channels >= 2 ? "0,1" : "0";
  auto index = [&](std::string_view part, uint32_t& value) {
    value = 0;
    if (part.empty() || part.size() > 3) return false;
    for (char c : part) {
      if (c < '0' || c > '9') return false;
      value = value * 10 + uint32_t(c - '0');
    }
    return true;
  };
  const size_t comma = text.find(',');
  const std::string_view first = text.substr(0, comma);
  const std::string_view second = comma == std::string_view::npos ? first : text.substr(comma + 1);
  if (!index(first, out.left) || !index(second, out.right)) {
    why = "expected none, N or L,R (capture channel indices), got '" + std::string(text) + "'";
    return false;
  }
  if (out.left >= source_channels || out.right >= source_channels) {
    why = "channel " + std::to_string(std::max(out.left, out.right)) +
          " is past the audio source's " + std::to_string(source_channels) + " channels";
    return false;
  }
  out.enabled = true;
  return true;
}

WhepService::WhepService(WhepConfig config, media::StreamRegistry& registry, uv_loop_t* loop)
    : config_(std::move(config)), registry_(registry), loop_(loop) {}

WhepService::~WhepService() {
  stop();
}

void WhepService::stop() {
  if (stopped_) return;
  stopped_ = true;
  stop_whip();
  for (auto& [name, egress] : egresses_) {
    if (egress->publisher) egress->publisher->set_active(false);
    egress->thread->stop();  // frames it held come back (kFrameDone) and sessions end
  }
}

WhepService::Egress* WhepService::egress_for(const std::string& key, const std::string& stream_name,
                                             const std::string& bind_host,
                                             const egress::EncodeSettings& encode,
                                             const char* label, bool& busy, std::string& error) {
  busy = false;
  if (auto it = egresses_.find(key); it != egresses_.end()) return it->second.get();
  if (egresses_.size() >= kMaxStreams) {
    if (Egress* reused = reuse_idle_egress(key, stream_name)) return reused;
    busy = true;
    return nullptr;
  }
  if (!identity_ready_) {
    const secure::IdentityResult r = secure::generate_identity(identity_);
    if (!r.ok()) {
      error = "could not make a certificate: " + r.message;
      return nullptr;
    }
    identity_ready_ = true;
  }
  auto egress = std::make_unique<Egress>();
  egress->service = this;
  egress->stream = stream_name;
  std::shared_ptr<audio::AudioTap> tap =
      config_.open_audio_tap ? config_.open_audio_tap() : nullptr;
  WhepTransportConfig transport_config = config_.transport;
  transport_config.max_bps = uint64_t(encode.max_bitrate_kbps) * 1000;
  auto transport = std::make_unique<WhepTransport>(transport_config, identity_, tap);
  egress->audio = transport->audio() && transport->audio()->ok();
  egress->audio_stereo = egress->audio && transport->audio()->stereo();
  egress->transport = transport.get();
  transport::TransportThreadConfig tc;
  tc.bind_host = bind_host;
  tc.bind_port = 0;
  egress->thread = std::make_unique<transport::TransportThread>(
      tc, std::move(transport), &WhepService::on_message, egress.get());
  if (!egress->thread->start(loop_, error)) return nullptr;
  auto publisher =
      std::make_unique<egress::EgressPublisher>(*egress->thread, stream_name, loop_, encode, label);
  publisher->set_active(false);
  publisher->forward_to_source(&registry_, media::KeyframeReason::kWhep);
  egress->publisher = publisher.get();
  registry_.add_publisher(std::move(publisher));
  // The stream is open already (the caller checked): the publisher takes it as if just opened.
  if (media::Stream* s = registry_.find(stream_name)) egress->publisher->on_stream_open(*s);
  Egress* raw = egress.get();
  egresses_.emplace(key, std::move(egress));
  return raw;
}

WhepService::Egress* WhepService::reuse_idle_egress(const std::string& key,
                                                    const std::string& stream_name) {
  // A viewers' egress with no session left: its socket, thread and transport serve the new
  // stream, its publisher moves there. The WHIP push's egress is not a viewer's: it is idle
  // only between its retries.
  auto it = std::find_if(egresses_.begin(), egresses_.end(), [](const auto& entry) {
    return entry.second->sessions == 0 && !entry.first.starts_with(kWhipKeyPrefix);
  });
  if (it == egresses_.end()) return nullptr;
  std::unique_ptr<Egress> egress = std::move(it->second);
  egresses_.erase(it);
  egress->stream = stream_name;
  egress->publisher->retarget(stream_name, registry_.find(stream_name));
  ++counters_.egresses_reused;
  Egress* raw = egress.get();
  egresses_.emplace(key, std::move(egress));
  return raw;
}

bool WhepService::add_session(Egress& egress, std::unique_ptr<WhepSessionSetup> setup, bool whip) {
  const uint64_t id = setup->id;
  sessions_[id] = SessionRecord{egress.stream, &egress, setup->stats, setup->audio, whip};
  transport::ToTransport m;
  m.kind = transport::ToTransport::Kind::kCommand;
  m.command = setup.release();
  if (!egress.thread->send_to_relay(m)) {
    delete m.command;
    sessions_.erase(id);
    return false;
  }
  ++egress.sessions;
  update_activity(egress);
  return true;
}

void WhepService::update_activity(Egress& egress) {
  egress.publisher->set_active(egress.sessions > 0);
}

WhepService::Response WhepService::offer(std::string_view stream_name,
                                         std::string_view content_type, std::string_view sdp) {
  ++counters_.offers;
  Response r;
  // RFC 9725 4.2: the offer is application/sdp (parameters, such as a charset, allowed).
  if (content_type.substr(0, content_type.find(';')) != "application/sdp") {
    ++counters_.refused_content_type;
    r.status = 415;
    r.body = "expected Content-Type: application/sdp\n";
    return r;
  }
  const std::string name(stream_name);
  const media::Stream* stream = name.empty() ? nullptr : registry_.find(name);
  if (!stream) {
    ++counters_.refused_unknown_stream;
    r.status = 404;
    r.body = "no such stream\n";
    return r;
  }
  // H.264 as sent, or a raw format the encoder stage takes.
  const media::PixelFormat format = stream->config().format;
  if (format != media::PixelFormat::kH264 && !egress::EncodeStage::can_encode(format)) {
    ++counters_.refused_format;
    r.status = 409;
    r.body = std::string("a ") + media::pixel_format_name(format) +
             " stream cannot be sent to a browser\n";
    return r;
  }
  webrtc::SdpOffer offer;
  webrtc::SdpError error = webrtc::parse_sdp_offer(sdp, offer);
  std::optional<webrtc::H264Choice> choice;
  if (error == webrtc::SdpError::kNone) {
    choice = webrtc::choose_h264(offer);
    if (!choice) error = webrtc::SdpError::kNoH264;
  }
  if (error != webrtc::SdpError::kNone) {
    ++(error == webrtc::SdpError::kNoH264 ? counters_.refused_no_h264 : counters_.refused_bad_sdp);
    r.status = 400;
    r.body = std::string("bad offer: ") + webrtc::to_string(error) + "\n";
    return r;
  }
  if (sessions_.size() >= kMaxSessions) {
    ++counters_.refused_busy;
    r.status = 503;
    r.body = "too many WHEP sessions\n";
    r.headers = "Retry-After: 5\r\n";
    return r;
  }
  bool busy = false;
  std::string why;
  Egress* egress = egress_for(name, name, is_wildcard(config_.host) ? "0.0.0.0" : config_.host,
                              config_.encode, "whep", busy, why);
  if (!egress) {
    ++(busy ? counters_.refused_busy : counters_.refused_failed);
    r.status = busy ? 503 : 500;
    r.body = busy ? "too many streams watched over WHEP\n" : why + "\n";
    // A stream's egress frees as its last viewer leaves (docs/whep.md).
    if (busy) r.headers = "Retry-After: 5\r\n";
    return r;
  }
  std::unique_ptr<WhepSessionSetup> setup = new_session_setup();
  const webrtc::SdpMedia& video = offer.media[choice->media_index];
  setup->remote_ufrag = video.ice_ufrag.empty() ? offer.ice_ufrag : video.ice_ufrag;
  setup->remote_fingerprint = offer.fingerprint;
  setup->payload_type = choice->payload_type;
  const std::optional<webrtc::OpusChoice> audio =
      egress->audio ? webrtc::choose_opus(offer, *choice) : std::nullopt;
  if (audio) {
    setup->audio = true;
    setup->audio_payload_type = audio->payload_type;
  }

  webrtc::SdpAnswerParams params;
  params.session_id = random_u64() >> 2;  // RFC 8866 5.2: fits a 63-bit signed integer
  params.ice_ufrag = setup->local_ufrag;
  params.ice_pwd = setup->local_password;
  params.fingerprint = identity_.fingerprint;
  params.candidate_ip = is_wildcard(config_.host) ? "127.0.0.1" : config_.host;
  params.candidate_port = egress->thread->local_port();
  params.video_ssrc = setup->ssrc;
  params.cname = "syncd";
  params.stream_id = name;
  params.track_id = "video";
  params.audio_ssrc = setup->audio_ssrc;
  params.audio_track_id = "audio";
  params.audio_stereo = egress->audio_stereo;
  // REMB is not followed (docs/whep.md "Not here"): not asked for either.
  webrtc::H264Choice answered = *choice;
  answered.remb = false;
  r.body = webrtc::write_sdp_answer(offer, answered, audio ? &*audio : nullptr, params);

  const uint64_t id = setup->id;
  const bool with_audio = setup->audio;
  if (!add_session(*egress, std::move(setup), false)) {
    ++counters_.refused_busy;
    r = Response{};
    r.status = 503;
    r.body = "WHEP egress busy\n";
    return r;
  }
  ++counters_.answered;
  if (with_audio) ++counters_.answered_with_audio;
  r.status = 201;
  r.content_type = "application/sdp";
  // RFC 9725 4.2: the session's resource; ETag-less, DELETE ends it.
  r.headers = "Location: /whep/" + name + "/" + hex_id(id) + "\r\n";
  return r;
}

WhepService::Response WhepService::remove(std::string_view stream_name, std::string_view session) {
  Response r;
  uint64_t id = 0;
  if (session.size() == 16)
    std::sscanf(std::string(session).c_str(), "%16llx", reinterpret_cast<unsigned long long*>(&id));
  auto it = sessions_.find(id);
  if (id == 0 || it == sessions_.end() || it->second.whip || it->second.stream != stream_name) {
    ++counters_.delete_unknown;
    r.status = 404;
    r.body = "no such WHEP session\n";
    return r;
  }
  auto end = std::make_unique<WhepSessionEnd>();
  end->id = id;
  transport::ToTransport m;
  m.kind = transport::ToTransport::Kind::kCommand;
  m.command = end.release();
  if (!it->second.egress->thread->send_to_relay(m)) {
    delete m.command;
    r.status = 503;
    r.body = "WHEP egress busy\n";
    return r;
  }
  ++counters_.deleted;
  r.status = 200;
  r.body = "";
  return r;
}

void WhepService::on_message(transport::FromTransport& m, void* context) {
  auto* egress = static_cast<Egress*>(context);
  switch (m.kind) {
    case transport::FromTransport::Kind::kFrameDone:
      egress->publisher->on_frame_done(m);
      break;
    case transport::FromTransport::Kind::kKeyframeRequest:
      egress->publisher->on_keyframe_request();
      break;
    case transport::FromTransport::Kind::kPeerEnded:
      egress->service->on_session_ended(*egress, m.sequence);
      break;
    case transport::FromTransport::Kind::kTargetRate:
      // The lossiest viewer's rate, for a raw stream's encoder.
      egress->publisher->on_target_rate(m.target_bps, m.media_bps);
      break;
    default:
      break;
  }
}

void WhepService::on_session_ended(Egress& egress, uint64_t id) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  const WhepSessionStats& s = *it->second.stats;
  ended_frames_sent_ += s.frames_sent.load(kRelaxed);
  for (const auto& d : s.frames_dropped) ended_frames_dropped_ += d.load(kRelaxed);
  ended_audio_frames_sent_ += s.audio_frames_sent.load(kRelaxed);
  for (const auto& d : s.audio_frames_dropped) ended_audio_frames_dropped_ += d.load(kRelaxed);
  const bool whip = it->second.whip;
  sessions_.erase(it);
  if (egress.sessions > 0) --egress.sessions;
  update_activity(egress);
  if (whip) whip_session_ended(core::monotonic_ns());
}

void WhepService::write_stats(nlohmann::json& out) const {
  const WhepServiceCounters& c = counters_;
  nlohmann::json sessions = nlohmann::json::array();
  const uint64_t now = core::monotonic_ns();
  for (const auto& [id, record] : sessions_) {
    const WhepSessionStats& s = *record.stats;
    auto v = [](const auto& a) { return a.load(kRelaxed); };
    nlohmann::json dropped = nlohmann::json::object();
    for (size_t i = 0; i < size_t(WhepDrop::kCount); ++i)
      dropped[whep_drop_name(WhepDrop(i))] = v(s.frames_dropped[i]);
    const uint64_t created = v(s.created_ns), connected = v(s.connected_ns),
                   first = v(s.first_frame_ns);
    sessions.push_back({
        {"id", hex_id(id)},
        {"stream", record.stream},
        {"whip", record.whip},
        {"state", whep_state_name(WhepState(v(s.state)))},
        {"age_ms", created ? (now - created) / 1'000'000 : 0},
        {"connect_ms", connected ? (connected - created) / 1'000'000 : 0},
        {"srtp", connected ? nlohmann::json(
                                 secure::srtp_profile_name(secure::SrtpProfile(v(s.srtp_profile))))
                           : nlohmann::json(nullptr)},
        {"first_frame_ms", first ? (first - created) / 1'000'000 : 0},
        {"stun_requests", v(s.stun_requests)},
        {"stun_refused", v(s.stun_refused)},
        {"checks_sent", v(s.checks_sent)},
        {"checks_answered", v(s.checks_answered)},
        {"frames_offered", v(s.frames_offered)},
        {"frames_sent", v(s.frames_sent)},
        {"frames_dropped", dropped},
        {"packets_sent", v(s.packets_sent)},
        {"bytes_sent", v(s.bytes_sent)},
        {"packets_send_failed", v(s.packets_send_failed)},
        {"nacked_packets", v(s.nacked_packets)},
        {"packets_retransmitted", v(s.packets_retransmitted)},
        {"retransmit_unavailable", v(s.retransmit_unavailable)},
        {"plis_received", v(s.plis_received)},
        {"rtcp_received", v(s.rtcp_received)},
        {"rtcp_refused", v(s.rtcp_refused)},
        {"rtt_us", v(s.rtt_us)},
        {"fraction_lost", v(s.fraction_lost)},
        {"loss_based_kbps", v(s.loss_based_bps) / 1000},
    });
    if (v(s.audio_frames_offered) > 0 || record.audio) {
      nlohmann::json audio_dropped = nlohmann::json::object();
      for (WhepDrop d : {WhepDrop::kNotConnected, WhepDrop::kSendFailed})
        audio_dropped[whep_drop_name(d)] = v(s.audio_frames_dropped[size_t(d)]);
      sessions.back()["audio"] = {{"frames_offered", v(s.audio_frames_offered)},
                                  {"frames_sent", v(s.audio_frames_sent)},
                                  {"frames_dropped", audio_dropped},
                                  {"bytes_sent", v(s.audio_bytes_sent)},
                                  {"fraction_lost", v(s.audio_fraction_lost)}};
    }
  }
  nlohmann::json egresses = nlohmann::json::array();
  for (const auto& [name, e] : egresses_) {
    const WhepTransportCounters& t = e->transport->counters();
    auto v = [](const auto& a) { return a.load(kRelaxed); };
    nlohmann::json j = {{"stream", e->stream},
                        {"whip", name.starts_with(kWhipKeyPrefix)},
                        {"udp_port", e->thread->local_port()},
                        {"sessions", e->sessions},
                        {"sessions_started", v(t.sessions_started)},
                        {"sessions_ended", v(t.sessions_ended)},
                        {"frames_in", v(t.frames_in)},
                        {"keyframe_requests", v(t.keyframe_requests)},
                        {"foreign_datagrams", v(t.foreign_datagrams)},
                        {"stun_malformed", v(t.stun_malformed)},
                        {"stun_indications", v(t.stun_indications)},
                        {"stun_unknown_user", v(t.stun_unknown_user)},
                        {"stun_unmatched", v(t.stun_unmatched)},
                        {"target_kbps", v(t.target_bps) / 1000},
                        {"target_changes", v(t.target_changes)}};
    if (const auto* pc = e->publisher->counters(e->publisher->relayed_stream())) {
      nlohmann::json dropped = nlohmann::json::object();
      for (size_t i = 0; i < size_t(egress::EgressDrop::kCount); ++i)
        dropped[egress::egress_drop_name(egress::EgressDrop(i))] = pc->dropped[i];
      j["publisher"] = {{"offered", pc->offered},
                        {"sent", pc->sent},
                        {"in_flight", pc->in_flight},
                        {"dropped", dropped}};
    }
    if (const WhepAudioEncoder* a = e->transport->audio()) {
      const WhepAudioCounters& ac = a->counters();
      const uint64_t encoded = v(ac.frames_encoded);
      j["audio"] = {{"stereo", a->stereo()},
                    {"frames_read", v(ac.frames_read)},
                    {"frames_encoded", encoded},
                    {"encode_errors", v(ac.encode_errors)},
                    {"capture_gaps", v(ac.capture_gaps)},
                    {"bytes", v(ac.bytes)},
                    {"expected_loss_percent", v(ac.expected_loss_percent)},
                    {"encode_us_per_frame", encoded ? v(ac.encode_ns) / encoded / 1000.0 : 0.0}};
    }
    if (const egress::EncodeStage* enc = e->publisher->encoder()) {
      const egress::EncodeStageCounters& ec = enc->counters();
      j["encoder"] = {{"submitted", ec.submitted},
                      {"encoded", ec.encoded},
                      {"keyframes", ec.keyframes},
                      {"keyframes_forced", ec.keyframes_forced},
                      {"failed", ec.failed},
                      {"bitrate_kbps", ec.bitrate_kbps},
                      {"width", ec.width},
                      {"height", ec.height},
                      {"load", ec.load_permille / 1000.0},
                      {"load_steps_down", ec.load_steps_down},
                      {"load_steps_up", ec.load_steps_up}};
    }
    egresses.push_back(std::move(j));
  }
  out = {{"offers", c.offers},
         {"answered", c.answered},
         {"answered_with_audio", c.answered_with_audio},
         {"refused",
          {{"bad_sdp", c.refused_bad_sdp},
           {"no_h264", c.refused_no_h264},
           {"content_type", c.refused_content_type},
           {"unknown_stream", c.refused_unknown_stream},
           {"format", c.refused_format},
           {"busy", c.refused_busy},
           {"failed", c.refused_failed}}},
         {"egresses_reused", c.egresses_reused},
         {"deleted", c.deleted},
         {"delete_unknown", c.delete_unknown},
         {"ended_sessions_frames_sent", ended_frames_sent_},
         {"ended_sessions_frames_dropped", ended_frames_dropped_},
         {"ended_sessions_audio_frames_sent", ended_audio_frames_sent_},
         {"ended_sessions_audio_frames_dropped", ended_audio_frames_dropped_},
         {"sessions", std::move(sessions)},
         {"egresses", std::move(egresses)}};
  if (whip_) write_whip_stats(out["whip"]);
}

void WhepService::write_metrics(telemetry::PrometheusText& out) const {
  const WhepServiceCounters& c = counters_;
  out.family("syncd_whep_offers_total", "counter", "WHEP offers POSTed");
  out.sample("syncd_whep_offers_total", "", c.offers);
  out.family("syncd_whep_answered_total", "counter", "WHEP offers answered (201)");
  out.sample("syncd_whep_answered_total", "", c.answered);
  out.family("syncd_whep_refused_total", "counter", "WHEP offers refused, by reason");
  out.sample("syncd_whep_refused_total", "reason=\"bad_sdp\"", c.refused_bad_sdp);
  out.sample("syncd_whep_refused_total", "reason=\"no_h264\"", c.refused_no_h264);
  out.sample("syncd_whep_refused_total", "reason=\"content_type\"", c.refused_content_type);
  out.sample("syncd_whep_refused_total", "reason=\"unknown_stream\"", c.refused_unknown_stream);
  out.sample("syncd_whep_refused_total", "reason=\"format\"", c.refused_format);
  out.sample("syncd_whep_refused_total", "reason=\"busy\"", c.refused_busy);
  out.sample("syncd_whep_refused_total", "reason=\"failed\"", c.refused_failed);
  out.family("syncd_whep_answered_with_audio_total", "counter",
             "WHEP offers answered with syncd's audio (Opus) as well as video");
  out.sample("syncd_whep_answered_with_audio_total", "", c.answered_with_audio);
  uint64_t audio_frames = 0;
  for (const auto& [name, e] : egresses_)
    if (const WhepAudioEncoder* a = e->transport->audio())
      audio_frames += a->counters().frames_encoded.load(kRelaxed);
  out.family("syncd_whep_audio_frames_encoded_total", "counter",
             "20 ms Opus frames the WHEP egresses encoded (once for all their sessions)");
  out.sample("syncd_whep_audio_frames_encoded_total", "", audio_frames);
  out.family("syncd_whep_sessions", "gauge", "WHEP sessions live");
  out.sample("syncd_whep_sessions", "", uint64_t(sessions_.size()));
}

}  // namespace syncd::whep
