// Control protocol v1: parsing of client JSON text messages (docs/protocol.md, "Control
// messages") and building of the server's replies. Pure: text in, a typed message or a coded
// error out. Control plane: allocates; JSON exceptions are caught here, at this one boundary.
// Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "media/stream.h"

namespace syncd::control {

inline constexpr int kProtocolVersion = 1;
// Deepest nesting of objects and arrays a control message may have (the message itself is
// level 1); deeper gets bad_json.
inline constexpr int kMaxJsonDepth = 32;

// Stable error codes (docs/protocol.md, "Errors"). Clients match on these strings.
namespace error_code {
inline constexpr const char* kBadJson = "bad_json";
inline constexpr const char* kBadMessage = "bad_message";
inline constexpr const char* kUnknownType = "unknown_type";
inline constexpr const char* kProtocolUnsupported = "protocol_unsupported";
inline constexpr const char* kHelloRequired = "hello_required";
inline constexpr const char* kUnknownStream = "unknown_stream";
inline constexpr const char* kNotStreamOwner = "not_stream_owner";
inline constexpr const char* kBadFrameHeader = "bad_frame_header";
inline constexpr const char* kFrameSizeMismatch = "frame_size_mismatch";
inline constexpr const char* kGeometryMismatch = "geometry_mismatch";
// An h264 stream's access unit syncd's decoder refused; to a source with feedback only.
inline constexpr const char* kUndecodable = "undecodable";
inline constexpr const char* kUnknownReceiver = "unknown_receiver";
inline constexpr const char* kUnknownTopic = "unknown_topic";
inline constexpr const char* kTopicUnavailable = "topic_unavailable";  // no --headtracker
inline constexpr const char* kTicketUnavailable = "ticket_unavailable";
inline constexpr const char* kTooManyTickets = "too_many_tickets";     // per connection
inline constexpr const char* kAudioBusy = "audio_busy";                // a read is in flight
inline constexpr const char* kAudioUnavailable = "audio_unavailable";  // no --audio-source
inline constexpr const char* kAudioInUse = "audio_in_use";             // another connection reads
}  // namespace error_code

struct Hello {
  int protocol = 0;
  std::string client;
};
struct StreamOpen {
  media::StreamConfig config;
  // The source acts on its consumers' requests: syncd sends it stream.keyframe and
  // stream.bitrate (docs/protocol.md, "Messages from syncd to a stream's source"). Off by
  // default, so a client that reads replies in order never meets a message it did not ask for.
  bool feedback = false;
};
struct StreamClose {
  uint32_t stream = 0;
};
struct StatsRequest {};
// Application-level echo for round-trip measurement; `id` is echoed back verbatim (as JSON).
struct Ping {
  std::string id_json;
};

// audio.read (alias readAudioSource): the frames since this connection's cursor, at most
// max_frames (0: all available), held until min_frames are available or timeout_ms passes.
struct AudioRead {
  uint32_t max_frames = 0;
  uint32_t min_frames = 0;
  uint32_t timeout_ms = 1000;
};
struct AudioInfo {};

// A ticket for receivers of one of this connection's streams (docs/protocol.md, "Tickets").
struct TicketCreate {
  uint32_t stream = 0;      // by id, or
  std::string stream_name;  // by name (the newest open stream called so): what WHEP URLs use
  uint32_t uses = 1;
  uint32_t ttl_s = 60;
};
// Credit from an HTTP stream receiver (docs/protocol.md, "Credit").
struct Credit {
  uint64_t receiver = 0;
  uint32_t frames = 1;
};
// Topic subscription; the one topic so far is "pose".
struct Subscribe {
  std::string topic;
  bool subscribe = true;
};
struct PoseRecenter {};
// A source's own counters for a stream it owns (docs/protocol.md, "stream.report").
struct StreamReport {
  uint32_t stream = 0;
  uint64_t offered = 0;
  uint64_t sent = 0;
  uint64_t in_flight = 0;
  std::vector<std::pair<std::string, uint64_t>> dropped;  // at most 8 reasons
};

using ControlMessage =
    std::variant<Hello, StreamOpen, StreamClose, StatsRequest, Ping, AudioRead, AudioInfo,
                 TicketCreate, Credit, Subscribe, PoseRecenter, StreamReport>;

struct ControlError {
  const char* code = "";
  std::string message;
  std::string type;  // the offending message's type, when known
};

using ParseResult = std::variant<ControlMessage, ControlError>;

ParseResult parse_control_message(std::string_view text);

// {"type":"error","code":...,"message":...} plus optional extra fields (a JSON object text
// whose members are merged in, e.g. R"({"stream":1,"sequence":7})").
std::string error_json(std::string_view code, std::string_view message,
                       std::string_view extra_object = {});

}  // namespace syncd::control
