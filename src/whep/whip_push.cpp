// WHIP push (docs/whep.md, "WHIP"): WhepService's side of syncd offering a stream to an SFU.
//
// The push is a WHEP session turned around: the same egress (a relay thread, its UDP socket, the
// stream encoded once) and the same WhepTransport session, but syncd writes the offer, POSTs it
// to the SFU's WHIP endpoint, reads the answer, and is the controlling ICE agent (it checks the
// SFU's candidates and nominates). When the session ends (consent lost, DTLS failed, the SFU
// said BYE) it DELETEs the old resource and offers again, backing off from 2 s to 30 s while
// the SFU refuses.
//
// Thread: the main loop thread (the HTTP exchange runs on libuv's thread pool and reports back
// here).
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "net/http_client/http_client.h"
#include "transport/socket_address.h"
#include "webrtc/sdp.h"
#include "whep/whep_ids.h"
#include "whep/whep_internal.h"
#include "whep/whep_service.h"

namespace syncd::whep {

namespace {

constexpr uint64_t kTickMs = 250;
constexpr uint64_t kMaxBackoffNs = 30'000'000'000ull;
// A session that lasted this long was a success: the next failure backs off from the start.
constexpr uint64_t kHealthySessionNs = 30'000'000'000ull;
constexpr uint32_t kPostTimeoutMs = 5000;
constexpr uint32_t kDeleteTimeoutMs = 2000;

// The addresses our offer names as host candidates: every IPv4 interface that is up (the egress
// socket binds all of them). As the controlling agent syncd's own checks find the path; these
// let a full-ICE SFU check towards us too.
std::vector<std::string> host_addresses() {
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return {"127.0.0.1"};
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    char text[INET_ADDRSTRLEN];
    const auto* in = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
    if (!inet_ntop(AF_INET, &in->sin_addr, text, sizeof text)) continue;
    if (std::find(out.begin(), out.end(), text) == out.end()) out.emplace_back(text);
  }
  freeifaddrs(list);
  if (out.empty()) out.emplace_back("127.0.0.1");
  return out;
}

// The SFU's candidates as addresses our IPv4 socket can send to, best priority first.
std::vector<sockaddr_storage> candidate_addresses(std::vector<webrtc::SdpCandidate> candidates) {
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const auto& a, const auto& b) { return a.priority > b.priority; });
  std::vector<sockaddr_storage> out;
  for (const webrtc::SdpCandidate& c : candidates) {
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_port = htons(c.port);
    if (inet_pton(AF_INET, c.address.c_str(), &in.sin_addr) != 1) continue;
    sockaddr_storage s{};
    std::memcpy(&s, &in, sizeof in);
    out.push_back(s);
  }
  return out;
}

// RFC 9725 4.2: the Location is a URL reference, usually absolute-path ("/whip/abc").
std::string resolve_location(const http::Url& base, std::string_view location) {
  if (location.starts_with("http://") || location.starts_with("https://"))
    return std::string(location);
  const bool default_port =
      (base.scheme == "http" && base.port == 80) || (base.scheme == "https" && base.port == 443);
  const bool v6 = base.host.find(':') != std::string::npos;
  std::string origin = base.scheme + "://" + (v6 ? "[" + base.host + "]" : base.host) +
                       (default_port ? "" : ":" + std::to_string(base.port));
  if (location.starts_with("/")) return origin + std::string(location);
  const size_t slash = base.path.rfind('/');
  return origin + base.path.substr(0, slash + 1) + std::string(location);
}

}  // namespace

bool WhepService::start(std::string& why) {
  if (!config_.whip) return true;
  auto push = std::make_unique<WhipPush>();
  push->target = *config_.whip;
  if (!http::parse_url(push->target.url, push->url, why)) {
    why = "--whip-to: " + why;
    return false;
  }
  push->stream = push->target.stream;
  uv_timer_init(loop_, &push->timer);
  push->timer.data = this;
  push->timer_open = true;
  uv_timer_start(&push->timer, &WhepService::on_whip_timer, 0, kTickMs);
  whip_ = std::move(push);
  return true;
}

void WhepService::on_whip_timer(uv_timer_t* timer) {
  static_cast<WhepService*>(timer->data)->whip_tick();
}

void WhepService::whip_tick() {
  WhipPush& w = *whip_;
  const uint64_t now = core::monotonic_ns();
  if (w.state == WhipState::kBackoff && now >= w.retry_ns) w.state = WhipState::kWaitingForStream;
  if (w.state != WhipState::kWaitingForStream) return;
  // The stream to push: the named one once it is open, or else the first stream opened.
  const media::Stream* stream = nullptr;
  if (!w.stream.empty()) {
    stream = registry_.find(w.stream);
  } else {
    for (const media::Stream* s : registry_.all_streams())
      if (!stream && s->open()) stream = s;
  }
  if (!stream) return;
  const media::PixelFormat format = stream->config().format;
  if (format != media::PixelFormat::kH264 && !egress::EncodeStage::can_encode(format)) {
    whip_failed(
        std::string("a ") + media::pixel_format_name(format) + " stream cannot be sent over WebRTC",
        now);
    return;
  }
  w.stream = stream->config().name;
  bool busy = false;
  std::string why;
  // Bound to every address: the SFU is usually on another machine, whatever --host serves.
  Egress* egress = egress_for(std::string(kWhipKeyPrefix) + w.stream, w.stream, "0.0.0.0",
                              w.target.encode, "whip", busy, why);
  if (!egress) {
    whip_failed(busy ? "too many egresses" : why, now);
    return;
  }
  w.egress = egress;
  whip_post(*egress);
}

void WhepService::whip_post(Egress& egress) {
  WhipPush& w = *whip_;
  std::unique_ptr<WhepSessionSetup> setup = new_session_setup();
  setup->ice_controlling = true;

  webrtc::SdpOfferParams params;
  params.session_id = random_u64() >> 2;
  params.ice_ufrag = setup->local_ufrag;
  params.ice_pwd = setup->local_password;
  params.fingerprint = identity_.fingerprint;
  params.candidate_ips = host_addresses();
  params.candidate_port = egress.thread->local_port();
  params.video_ssrc = setup->ssrc;
  params.cname = "syncd";
  params.stream_id = w.stream;
  params.track_id = "video";
  params.audio = egress.audio;
  params.audio_ssrc = setup->audio_ssrc;
  params.audio_track_id = "audio";
  params.audio_stereo = egress.audio_stereo;

  http::ClientRequest request;
  request.method = "POST";
  request.url = w.target.url;
  request.headers.emplace_back("Content-Type", "application/sdp");
  if (!w.target.token.empty())
    request.headers.emplace_back("Authorization", "Bearer " + w.target.token);
  request.body = webrtc::write_sdp_offer(params);
  request.timeout_ms = kPostTimeoutMs;
  request.verify_tls = w.target.verify_tls;
  ++w.posts;
  w.state = WhipState::kPosting;
  const bool audio_offered = params.audio;
  std::shared_ptr<WhepSessionSetup> pending(setup.release());
  http::fetch_async(
      loop_, std::move(request),
      [this, alive = w.alive, pending, audio_offered](http::ClientResponse response) {
        if (!*alive) return;  // syncd stopped while the POST was out
        WhipPush& w = *whip_;
        const uint64_t now = core::monotonic_ns();
        w.last_status = response.status;
        if (!response.ok()) {
          ++w.fetch_failed;
          whip_failed(response.error, now);
          return;
        }
        if (response.status != 201) {
          ++w.refused_status;
          std::string body = response.body.substr(0, 200);
          whip_failed("the WHIP endpoint answered " + std::to_string(response.status) +
                          (body.empty() ? "" : ": " + body),
                      now);
          return;
        }
        webrtc::WhipAnswer answer;
        const webrtc::SdpError e = webrtc::parse_whip_answer(response.body, audio_offered, answer);
        if (e != webrtc::SdpError::kNone) {
          ++w.bad_answer;
          whip_failed(std::string("bad answer: ") + webrtc::to_string(e), now);
          return;
        }
        std::unique_ptr<WhepSessionSetup> setup(new WhepSessionSetup(std::move(*pending)));
        setup->remote_ufrag = answer.ice_ufrag;
        setup->remote_password = answer.ice_pwd;
        setup->remote_fingerprint = answer.fingerprint;
        setup->remote_candidates = candidate_addresses(answer.candidates);
        setup->dtls_role =
            answer.dtls_client ? secure::DtlsRole::kClient : secure::DtlsRole::kServer;
        setup->payload_type = answer.video_payload_type;
        setup->audio = answer.audio;
        setup->audio_payload_type = answer.audio_payload_type;
        if (setup->remote_candidates.empty()) {
          ++w.bad_answer;
          whip_failed("bad answer: no IPv4 UDP candidate", now);
          return;
        }
        w.location = resolve_location(w.url, response.header("location"));
        const uint64_t id = setup->id;
        if (!add_session(*w.egress, std::move(setup), true)) {
          whip_failed("egress busy", now);
          return;
        }
        ++w.answered;
        w.session_id = id;
        w.session_started_ns = now;
        w.state = WhipState::kLive;
        w.last_error.clear();
      });
}

void WhepService::whip_failed(const std::string& why, uint64_t now_ns) {
  WhipPush& w = *whip_;
  if (w.last_error != why) std::fprintf(stderr, "syncd: WHIP push: %s\n", why.c_str());
  w.last_error = why;
  w.state = WhipState::kBackoff;
  w.retry_ns = now_ns + w.backoff_ns;
  w.backoff_ns = std::min(w.backoff_ns * 2, kMaxBackoffNs);
}

void WhepService::whip_session_ended(uint64_t now_ns) {
  if (!whip_ || whip_->state != WhipState::kLive) return;
  WhipPush& w = *whip_;
  ++w.sessions_ended;
  // The SFU may still hold the resource (its side did not see the end): release it.
  if (!w.location.empty()) {
    http::ClientRequest request;
    request.method = "DELETE";
    request.url = w.location;
    if (!w.target.token.empty())
      request.headers.emplace_back("Authorization", "Bearer " + w.target.token);
    request.timeout_ms = kDeleteTimeoutMs;
    request.verify_tls = w.target.verify_tls;
    ++w.deletes;
    http::fetch_async(loop_, std::move(request), [](http::ClientResponse) {});
  }
  w.location.clear();
  w.session_id = 0;
  if (now_ns - w.session_started_ns >= kHealthySessionNs) w.backoff_ns = kFirstBackoffNs;
  whip_failed("the session ended; offering again", now_ns);
}

void WhepService::stop_whip() {
  if (!whip_) return;
  WhipPush& w = *whip_;
  *w.alive = false;
  if (w.timer_open) {
    w.timer_open = false;
    uv_timer_stop(&w.timer);
    uv_close(reinterpret_cast<uv_handle_t*>(&w.timer), nullptr);
  }
  // syncd is stopping: one DELETE, so the SFU frees the resource now rather than when its
  // consent check fails. On libuv's pool like every other request: the loop goes on closing
  // connections meanwhile, and its run ends once the DELETE has (bounded by kDeleteTimeoutMs).
  if (w.state == WhipState::kLive && !w.location.empty()) {
    http::ClientRequest request;
    request.method = "DELETE";
    request.url = w.location;
    if (!w.target.token.empty())
      request.headers.emplace_back("Authorization", "Bearer " + w.target.token);
    request.timeout_ms = kDeleteTimeoutMs;
    request.verify_tls = w.target.verify_tls;
    ++w.deletes;
    http::fetch_async(loop_, std::move(request), [](http::ClientResponse r) {
      if (!r.ok()) std::fprintf(stderr, "syncd: WHIP DELETE: %s\n", r.error.c_str());
    });
  }
  w.state = WhipState::kStopped;
}

void WhepService::write_whip_stats(nlohmann::json& out) const {
  const WhipPush& w = *whip_;
  // The URL without its query (a token may sit there); the bearer token never appears.
  out = {{"url", w.url.scheme + "://" + w.url.host + ":" + std::to_string(w.url.port) +
                     w.url.path.substr(0, w.url.path.find('?'))},
         {"stream", w.stream},
         {"state", whip_state_name(w.state)},
         {"session", w.session_id ? hex_id(w.session_id) : ""},
         {"posts", w.posts},
         {"answered", w.answered},
         {"refused_status", w.refused_status},
         {"bad_answer", w.bad_answer},
         {"fetch_failed", w.fetch_failed},
         {"sessions_ended", w.sessions_ended},
         {"deletes", w.deletes},
         {"last_status", w.last_status},
         {"last_error", w.last_error}};
}

}  // namespace syncd::whep
