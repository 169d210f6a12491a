// The control messages of the session and of streams: hello (the welcome), stream.open,
// stream.close, ticket.create, stats and ping (docs/protocol.md, "Control messages"); and the
// messages syncd sends a stream's source when its consumers ask (stream.keyframe,
// stream.bitrate: docs/protocol.md, "Messages from syncd to a stream's source"), as the
// SourceFeedback of every stream a connection opens with "feedback": true.
//
// Thread: the loop thread. Control plane (allocates).
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <string>

#include "media/stream.h"

namespace syncd::media {
class FramePool;
class StreamRegistry;
}  // namespace syncd::media

namespace syncd::server {

class Connection;
class ControlRouter;
class TicketStore;
struct ServerConfig;

class StreamControl final : private media::SourceFeedback {
 public:
  // find_connection: the open connection with that id, or nullptr.
  StreamControl(const ServerConfig& config, uv_loop_t* loop, media::StreamRegistry& registry,
                TicketStore& tickets, const ControlRouter& router,
                std::function<std::string()> stats_json,
                std::function<Connection*(uint64_t)> find_connection)
      : config_(config),
        loop_(loop),
        registry_(registry),
        tickets_(tickets),
        router_(router),
        stats_json_(std::move(stats_json)),
        find_connection_(std::move(find_connection)) {}

  void register_control(ControlRouter& router);

  // A stats reply over the WebSocket is at most this old: building the document costs the loop
  // ~0.1-0.5 ms, and a client that pipelines requests must not buy that per request.
  static constexpr uint64_t kStatsCacheNs = 100'000'000;

 private:
  // A new stream's pool being faulted in on a libuv pool thread (uv_queue_work).
  struct PrefaultJob {
    uv_work_t work;
    StreamControl* self;
    uint32_t stream_id;
    uint64_t owner;
    media::FramePool* pool;  // holds a pool reference until the job is done
  };
  static void prefault_on_worker(uv_work_t* work);
  static void prefault_done(uv_work_t* work, int status);
  static std::string opened_json(const media::Stream& s);
  // media::SourceFeedback: an event to the stream's owner, dropped (not closing the connection)
  // when its output is full; the next request or the decoder's retry asks again.
  void keyframe_wanted(const media::Stream& stream, media::KeyframeReason reason) override;
  void target_bitrate(const media::Stream& stream, uint64_t bits_per_second) override;
  // An `undecodable` error to the stream's owner, as a refused frame's (with its sequence).
  void undecodable(const media::Stream& stream, uint64_t sequence, const char* why) override;

  const ServerConfig& config_;
  uv_loop_t* loop_;
  media::StreamRegistry& registry_;
  TicketStore& tickets_;
  const ControlRouter& router_;  // for the capabilities in the welcome
  std::function<std::string()> stats_json_;
  std::function<Connection*(uint64_t)> find_connection_;
  std::string stats_reply_;  // {"type":"stats","stats":...}, built at stats_built_ns_
  uint64_t stats_built_ns_ = 0;
};

}  // namespace syncd::server
