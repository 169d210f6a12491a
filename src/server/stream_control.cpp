#include "server/stream_control.h"

#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "media/stream_registry.h"
#include "server/connection.h"
#include "server/control_router.h"
#include "server/server_config.h"
#include "server/ticket_store.h"

namespace syncd::server {

using control::ControlMessage;
namespace error_code = control::error_code;

namespace {
// The open stream `id` when connection c may act on it (`may_act(stream)`); otherwise answers
// unknown_stream, or not_stream_owner with `not_owner`, and returns nullptr.
template <typename MayAct>
media::Stream* stream_for(media::StreamRegistry& registry, Connection& c, uint32_t id,
                          MayAct may_act, const char* not_owner) {
  media::Stream* s = registry.find(id);
  if (!s) {
    c.send_error(error_code::kUnknownStream, "no open stream with that id");
    return nullptr;
  }
  if (!may_act(*s)) {
    c.send_error(error_code::kNotStreamOwner, not_owner);
    return nullptr;
  }
  return s;
}
}  // namespace

void StreamControl::register_control(ControlRouter& router) {
  const auto owned_by = [](const Connection& c) {
    return [&c](const media::Stream& s) { return s.owner() == c.id(); };
  };
  router.add<control::Hello>(
      "",
      [this](Connection& c, const ControlMessage& m) {
        const auto& hello = std::get<control::Hello>(m);
        if (hello.protocol != control::kProtocolVersion) {
          c.send_error(error_code::kProtocolUnsupported, "this server speaks protocol 1",
                       "{\"supported\":[1]}");
          return;
        }
        c.set_hello_done();
        const nlohmann::json welcome = {
            {"type", "welcome"},
            {"protocol", control::kProtocolVersion},
            {"server", "syncd/" SYNC_VERSION},
            {"capabilities", router_.capabilities()},
            {"publishers", config_.publishers},
            {"limits",
             {{"max_message_bytes", config_.max_message_bytes},
              {"max_text_bytes", config_.max_text_bytes}}},
            {"frame_header_bytes", media::kFrameHeaderBytes},
        };
        c.send_text(welcome.dump());
      },
      /*hello_first=*/false);

  router.add<control::StreamOpen>("video.ingest", [this](Connection& c, const ControlMessage& m) {
    const auto& open = std::get<control::StreamOpen>(m);
    media::OpenError err;
    // A source that asked for feedback hears its consumers from their first request on (a
    // relay or WHEP publisher's start rate comes as the stream opens).
    media::Stream* s =
        registry_.open(open.config, c.id(), err, media::FramePool::Prefault::kDeferred,
                       open.feedback ? this : nullptr);
    if (!s) {
      // The slot range is the registry's own limit, so the message cannot drift from it.
      const std::string why =
          err == media::OpenError::kBadSlots
              ? "'slots' out of range [1, " + std::to_string(config_.stream_limits.max_slots) + "]"
              : "stream not opened";
      c.send_error(media::open_error_code(err), why,
                   nlohmann::json({{"name", open.config.name}}).dump());
      return;
    }
    // Faulting a pool in takes ~1-2 ms a MiB (a 1 GiB pool: seconds), so a pool thread does it
    // and the source hears stream.opened when it is done: the loop never waits for it, and the
    // source's first frames land on pages already there.
    auto* job = new PrefaultJob{{}, this, s->id(), c.id(), s->pool()};
    job->pool->add_ref();
    job->work.data = job;
    uv_queue_work(loop_, &job->work, &StreamControl::prefault_on_worker,
                  &StreamControl::prefault_done);
  });

  router.add<control::StreamClose>(
      "video.ingest", [this, owned_by](Connection& c, const ControlMessage& m) {
        const uint32_t id = std::get<control::StreamClose>(m).stream;
        media::Stream* s =
            stream_for(registry_, c, id, owned_by(c), "stream belongs to another connection");
        if (!s) return;
        registry_.close(s);
        tickets_.drop_stream(id);
        c.send_text(nlohmann::json({{"type", "stream.closed"}, {"stream", id}}).dump());
      });

  router.add<control::TicketCreate>("tickets", [this](Connection& c, const ControlMessage& m) {
    const auto& t = std::get<control::TicketCreate>(m);
    // A page's stream is ticketed by that page only. Streams syncd itself sources (the pattern,
    // a relay's received stream, a decoded twin) have no page to ask: they are ticketed by
    // syncd's own pages (the dashboard), native clients, and pages whose origin the operator
    // listed with --allow-origin (a WHEP viewer page elsewhere; docs/security.md), never by
    // another origin's page.
    const auto may_ticket = [&c](const media::Stream& stream) {
      return stream.owner() == c.id() || (media::owned_by_syncd(stream.owner()) &&
                                          (c.own_page_or_native() || c.listed_origin()));
    };
    uint32_t id = t.stream;
    if (!t.stream_name.empty()) {
      const media::Stream* named = registry_.find(t.stream_name);
      id = named ? named->id() : 0;
    }
    media::Stream* s =
        stream_for(registry_, c, id, may_ticket, "only the stream's source hands out tickets");
    if (!s) return;
    TicketRefusal refusal;
    const std::string token =
        tickets_.create(s->id(), c.id(), t.uses, t.ttl_s, core::monotonic_ns(), refusal);
    if (refusal == TicketRefusal::kOwnerFull) {
      c.send_error(error_code::kTooManyTickets,
                   "this connection holds " + std::to_string(TicketStore::kMaxTicketsPerOwner) +
                       " live tickets; they free up as they are used, expire, or their stream "
                       "closes");
      return;
    }
    if (token.empty()) {
      c.send_error(error_code::kTicketUnavailable, "no ticket could be made now");
      return;
    }
    c.send_text(nlohmann::json({{"type", "ticket"},
                                {"stream", s->id()},
                                {"name", s->config().name},
                                {"ticket", token},
                                {"uses", t.uses},
                                {"expires_in_s", t.ttl_s}})
                    .dump());
  });

  // No reply: a source reports once a second and needs no answer; errors say what was wrong.
  router.add<control::StreamReport>(
      "video.ingest", [this, owned_by](Connection& c, const ControlMessage& m) {
        const auto& r = std::get<control::StreamReport>(m);
        media::Stream* s = stream_for(registry_, c, r.stream, owned_by(c),
                                      "only the stream's source reports on it");
        if (!s) return;
        s->set_source_report({r.offered, r.sent, r.in_flight, r.dropped, core::monotonic_ns()});
      });

  router.add<control::StatsRequest>("stats", [this](Connection& c, const ControlMessage&) {
    const uint64_t now = core::monotonic_ns();
    if (stats_reply_.empty() || now - stats_built_ns_ > kStatsCacheNs) {
      stats_reply_ = "{\"type\":\"stats\",\"stats\":" + stats_json_() + "}";
      stats_built_ns_ = now;
    }
    c.send_text(stats_reply_);
  });

  router.add<control::Ping>("ping", [](Connection& c, const ControlMessage& m) {
    const auto& ping = std::get<control::Ping>(m);
    c.send_text("{\"type\":\"pong\",\"id\":" +
                (ping.id_json.empty() ? std::string("null") : ping.id_json) + "}");
  });
}

void StreamControl::prefault_on_worker(uv_work_t* work) {
  static_cast<PrefaultJob*>(work->data)->pool->prefault();
}

void StreamControl::prefault_done(uv_work_t* work, int /*status*/) {
  auto* job = static_cast<PrefaultJob*>(work->data);
  job->pool->drop_ref();
  StreamControl& self = *job->self;
  // The stream may have closed, and its source gone, while its pool was faulted in.
  media::Stream* s = self.registry_.find(job->stream_id);
  if (s && s->owner() == job->owner)
    if (Connection* c = self.find_connection_(job->owner)) c->send_text(opened_json(*s));
  delete job;
}

std::string StreamControl::opened_json(const media::Stream& s) {
  const media::FrameLayout& layout = s.layout();
  nlohmann::json planes = nlohmann::json::array();
  for (uint32_t i = 0; i < layout.plane_count; ++i)
    planes.push_back({{"offset", layout.planes[i].offset},
                      {"stride", layout.planes[i].stride},
                      {"rows", layout.planes[i].rows}});
  return nlohmann::json({{"type", "stream.opened"},
                         {"stream", s.id()},
                         {"name", s.config().name},
                         {"width", s.config().width},
                         {"height", s.config().height},
                         {"format", media::pixel_format_name(s.config().format)},
                         {"planes", std::move(planes)},
                         {"fps", s.config().fps},
                         {"slots", s.config().slots},
                         {"frame_bytes", s.frame_bytes()},
                         {"header_bytes", media::kFrameHeaderBytes}})
      .dump();
}

void StreamControl::keyframe_wanted(const media::Stream& stream, media::KeyframeReason reason) {
  if (Connection* c = find_connection_(stream.owner()))
    c->send_event(nlohmann::json({{"type", "stream.keyframe"},
                                  {"stream", stream.id()},
                                  {"reason", media::keyframe_reason_name(reason)}})
                      .dump());
}

void StreamControl::undecodable(const media::Stream& stream, uint64_t sequence, const char* why) {
  if (Connection* c = find_connection_(stream.owner()))
    c->send_error(
        error_code::kUndecodable,
        "stream " + std::to_string(stream.id()) + " frame " + std::to_string(sequence) + ": " + why,
        nlohmann::json({{"stream", stream.id()}, {"sequence", sequence}}).dump());
}

void StreamControl::target_bitrate(const media::Stream& stream, uint64_t bits_per_second) {
  if (Connection* c = find_connection_(stream.owner()))
    c->send_event(
        nlohmann::json(
            {{"type", "stream.bitrate"}, {"stream", stream.id()}, {"bps", bits_per_second}})
            .dump());
}

}  // namespace syncd::server
