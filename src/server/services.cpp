// The services the server runs (service.h), in start order, and the two whose modules cannot
// depend on the server's: the WAN relay and WHEP/WHIP, wrapped here.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "relay/relay.h"
#include "server/audio_service.h"
#include "server/http_routes.h"
#include "server/pose_service.h"
#include "server/service.h"
#include "whep/whep_service.h"

namespace syncd::server {
namespace {

std::unique_ptr<Service> start_pose(const ServiceContext& ctx, std::string& fatal) {
  if (ctx.config->headtracker.empty()) return nullptr;
  auto pose = std::make_unique<PoseService>(ctx.loop, ctx.config->headtracker);
  std::string error;
  // A bad --headtracker (an unreadable replay file) stops syncd; a missing device does not: the
  // reader keeps looking.
  if (!pose->start(error)) {
    fatal = "head tracker: " + error;
    return nullptr;
  }
  return pose;
}

std::unique_ptr<Service> start_audio(const ServiceContext& ctx, std::string&) {
  if (!ctx.config->audio) return nullptr;
  auto audio = std::make_unique<AudioService>(ctx.loop, *ctx.config->audio);
  std::string error;
  if (!audio->start(error)) {
    // syncd serves on without it; audio.read and audio.info say so.
    std::fprintf(stderr, "syncd: audio source refused: %s\n", error.c_str());
    return nullptr;
  }
  return audio;
}

class RelayService final : public Service {
 public:
  RelayService(std::unique_ptr<relay::Relay> relay, bool sender)
      : relay_(std::move(relay)), sender_(sender) {}
  std::string_view name() const override { return "relay"; }
  void announce() override {
    if (!sender_)
      std::printf("syncd relay listening on udp port %u\n", unsigned(relay_->local_port()));
  }
  void write_stats(nlohmann::json& stats) const override { relay_->write_stats(stats); }
  void write_metrics(telemetry::PrometheusText& out) const override { relay_->write_metrics(out); }
  // Before the registry stops its publishers: the relay's thread hands back the frames it held
  // to the relay publisher, which the registry still owns.
  void stop() override { relay_->stop(); }

 private:
  std::unique_ptr<relay::Relay> relay_;
  bool sender_;
};

std::unique_ptr<Service> start_relay(const ServiceContext& ctx, std::string& fatal) {
  if (!ctx.config->relay) return nullptr;
  // Audio first: the relay sends the capture (its thread becomes the ring's reader) or writes
  // what it receives into a relay-written ring (docs/wan.md, "Audio").
  relay::RelayConfig rc = *ctx.config->relay;
  if (AudioService* audio = ctx.find<AudioService>()) {
    if (rc.sender && rc.audio_channels != "none") rc.audio_ring = audio->lend_ring_to_relay();
    if (!rc.sender) rc.audio_ring = audio->ring_for_relay_writer();
  }
  // A relay that cannot start (its port taken, its identity file refused) is a failure to
  // start: the operator asked for it by name.
  std::string error;
  std::unique_ptr<relay::Relay> relay = relay::Relay::start(rc, *ctx.registry, ctx.loop, error);
  if (!relay) {
    fatal = "relay: " + error;
    return nullptr;
  }
  return std::make_unique<RelayService>(std::move(relay), rc.sender);
}

class WhepPlayback final : public Service {
 public:
  explicit WhepPlayback(std::unique_ptr<whep::WhepService> whep) : whep_(std::move(whep)) {}
  std::string_view name() const override { return "whep"; }
  void register_routes(HttpRoutes& routes) override { routes.set_whep(whep_.get()); }
  void write_stats(nlohmann::json& stats) const override { whep_->write_stats(stats["whep"]); }
  void write_metrics(telemetry::PrometheusText& out) const override { whep_->write_metrics(out); }
  void stop() override { whep_->stop(); }

 private:
  std::unique_ptr<whep::WhepService> whep_;
};

std::unique_ptr<Service> start_whep(const ServiceContext& ctx, std::string& fatal) {
  if (!ctx.config->whep) return nullptr;
  whep::WhepConfig wc = *ctx.config->whep;
  wc.host = ctx.config->host;
  // Audio for browsers (docs/whep.md, "Audio"): two channels of the audio source, checked now
  // so a wrong index stops syncd at start rather than silencing every viewer later.
  if (AudioService* audio = ctx.find<AudioService>()) {
    whep::WhepAudioChannels channels;
    std::string why;
    if (!whep::parse_whep_audio_channels(wc.audio_channels, audio->channels(), channels, why)) {
      fatal = "--whep-audio-channels: " + why;
      return nullptr;
    }
    if (channels.enabled) {
      wc.open_audio_tap = [audio, channels]() {
        std::string why;
        std::shared_ptr<audio::AudioTap> tap = audio->open_tap(channels.left, channels.right, why);
        if (!tap) std::fprintf(stderr, "syncd: WHEP without audio: %s\n", why.c_str());
        return tap;
      };
    }
  } else if (!ctx.config->audio && !wc.audio_channels.empty() && wc.audio_channels != "none") {
    fatal = "--whep-audio-channels needs an --audio-source";
    return nullptr;
  }
  auto whep = std::make_unique<whep::WhepService>(wc, *ctx.registry, ctx.loop);
  std::string why;
  if (!whep->start(why)) {
    fatal = why;
    return nullptr;
  }
  return std::make_unique<WhepPlayback>(std::move(whep));
}

}  // namespace

const std::vector<ServiceEntry>& service_table() {
  static const std::vector<ServiceEntry> table = {
      {"pose", &start_pose, &PoseService::register_absent},
      {"audio", &start_audio, &AudioService::register_absent},
      {"relay", &start_relay, nullptr},
      {"whep", &start_whep, nullptr},
  };
  return table;
}

}  // namespace syncd::server
