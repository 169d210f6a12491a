#include "control/control_message.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

namespace syncd::control {

namespace {

using nlohmann::json;

ControlError bad(const std::string& type, std::string message) {
  return ControlError{error_code::kBadMessage, std::move(message), type};
}

// Reads an unsigned integer member in [lo, hi]; false when missing (and required) or invalid.
bool read_uint(const json& j, const char* key, uint64_t lo, uint64_t hi, bool required,
               uint64_t& out, std::string& why) {
  auto it = j.find(key);
  if (it == j.end()) {
    if (required) why = std::string("missing '") + key + "'";
    return !required;
  }
  if (!it->is_number_integer() ||
      (it->is_number_integer() && it->get<int64_t>() < 0 && !it->is_number_unsigned())) {
    why = std::string("'") + key + "' must be a non-negative integer";
    return false;
  }
  const uint64_t v = it->get<uint64_t>();
  if (v < lo || v > hi) {
    why = std::string("'") + key + "' out of range [" + std::to_string(lo) + ", " +
          std::to_string(hi) + "]";
    return false;
  }
  out = v;
  return true;
}

ParseResult parse_object(const json& j) {
  if (!j.is_object()) return ControlError{error_code::kBadMessage, "message is not an object", ""};
  auto type_it = j.find("type");
  if (type_it == j.end() || !type_it->is_string())
    return ControlError{error_code::kBadMessage, "missing string 'type'", ""};
  const std::string type = type_it->get<std::string>();
  std::string why;

  if (type == "hello") {
    uint64_t protocol = 0;
    if (!read_uint(j, "protocol", 0, 1u << 30, true, protocol, why)) return bad(type, why);
    Hello h;
    h.protocol = int(protocol);
    if (auto c = j.find("client"); c != j.end() && c->is_string()) h.client = c->get<std::string>();
    return ControlMessage{h};
  }
  if (type == "stream.open") {
    StreamOpen o;
    auto name = j.find("name");
    if (name == j.end() || !name->is_string() || name->get<std::string>().empty() ||
        name->get<std::string>().size() > 64)
      return bad(type, "'name' must be a string of 1-64 characters");
    o.config.name = name->get<std::string>();
    for (char c : o.config.name) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
        return bad(type, "'name' may hold only letters, digits, '-', '_' and '.'");
    }
    uint64_t w = 0, h = 0, slots = 4;
    if (!read_uint(j, "width", 1, 16384, true, w, why)) return bad(type, why);
    if (!read_uint(j, "height", 1, 16384, true, h, why)) return bad(type, why);
    // Any count is passed on: the registry owns the slot range and refuses it with bad_slots.
    if (!read_uint(j, "slots", 0, UINT64_MAX, false, slots, why)) return bad(type, why);
    o.config.width = uint32_t(w);
    o.config.height = uint32_t(h);
    o.config.slots = uint32_t(std::min<uint64_t>(slots, UINT32_MAX));  // out of range either way
    o.config.format = media::PixelFormat::kRgba8;
    if (auto f = j.find("format"); f != j.end()) {
      if (!f->is_string() || !media::parse_pixel_format(f->get<std::string>(), o.config.format))
        return bad(type, "'format' must be rgba8, bgra8, nv12, i420 or h264");
    }
    if (auto f = j.find("fps"); f != j.end()) {
      if (!f->is_number() || f->get<double>() <= 0 || f->get<double>() > 1000)
        return bad(type, "'fps' must be a number in (0, 1000]");
      o.config.fps = f->get<double>();
    }
    if (auto f = j.find("feedback"); f != j.end()) {
      if (!f->is_boolean()) return bad(type, "'feedback' must be true or false");
      o.feedback = f->get<bool>();
    }
    return ControlMessage{o};
  }
  if (type == "stream.close") {
    uint64_t id = 0;
    if (!read_uint(j, "stream", 1, UINT32_MAX, true, id, why)) return bad(type, why);
    return ControlMessage{StreamClose{uint32_t(id)}};
  }
  if (type == "stats") return ControlMessage{StatsRequest{}};
  if (type == "ping") {
    Ping p;
    if (auto id = j.find("id"); id != j.end()) p.id_json = id->dump();
    return ControlMessage{p};
  }
  if (type == "audio.read" || type == "readAudioSource") {
    AudioRead r;
    uint64_t max_frames = 0, min_frames = 0, timeout_ms = r.timeout_ms;
    if (!read_uint(j, "max_frames", 0, 1u << 20, false, max_frames, why)) return bad(type, why);
    if (!read_uint(j, "min_frames", 0, 1u << 20, false, min_frames, why)) return bad(type, why);
    if (!read_uint(j, "timeout_ms", 0, 10'000, false, timeout_ms, why)) return bad(type, why);
    if (max_frames != 0 && min_frames > max_frames)
      return bad(type, "'min_frames' exceeds 'max_frames'");
    r.max_frames = uint32_t(max_frames);
    r.min_frames = uint32_t(min_frames);
    r.timeout_ms = uint32_t(timeout_ms);
    return ControlMessage{r};
  }
  if (type == "audio.info") return ControlMessage{AudioInfo{}};
  if (type == "ticket.create") {
    TicketCreate t;
    uint64_t stream = 0, uses = 1, ttl = 60;
    if (auto named = j.find("stream"); named != j.end() && named->is_string()) {
      t.stream_name = named->get<std::string>();
      if (t.stream_name.empty() || t.stream_name.size() > 64)
        return bad(type, "'stream' must be a stream id or a name of 1-64 characters");
    } else if (!read_uint(j, "stream", 1, UINT32_MAX, true, stream, why)) {
      return bad(type, why);
    }
    if (!read_uint(j, "uses", 1, 16, false, uses, why)) return bad(type, why);
    if (!read_uint(j, "ttl_s", 1, 3600, false, ttl, why)) return bad(type, why);
    t.stream = uint32_t(stream);
    t.uses = uint32_t(uses);
    t.ttl_s = uint32_t(ttl);
    return ControlMessage{t};
  }
  if (type == "credit") {
    Credit c;
    uint64_t receiver = 0, frames = 1;
    if (!read_uint(j, "receiver", 1, UINT64_MAX >> 1, true, receiver, why)) return bad(type, why);
    if (!read_uint(j, "frames", 1, 64, false, frames, why)) return bad(type, why);
    c.receiver = receiver;
    c.frames = uint32_t(frames);
    return ControlMessage{c};
  }
  if (type == "subscribe" || type == "unsubscribe") {
    auto topic = j.find("topic");
    if (topic == j.end() || !topic->is_string()) return bad(type, "missing string 'topic'");
    return ControlMessage{Subscribe{topic->get<std::string>(), type == "subscribe"}};
  }
  if (type == "pose.recenter") return ControlMessage{PoseRecenter{}};
  if (type == "stream.report") {
    StreamReport r;
    uint64_t stream = 0;
    constexpr uint64_t kMax = uint64_t(1) << 53;  // what a page's Number counts exactly
    if (!read_uint(j, "stream", 1, UINT32_MAX, true, stream, why)) return bad(type, why);
    if (!read_uint(j, "offered", 0, kMax, true, r.offered, why)) return bad(type, why);
    if (!read_uint(j, "sent", 0, kMax, true, r.sent, why)) return bad(type, why);
    if (!read_uint(j, "in_flight", 0, kMax, false, r.in_flight, why)) return bad(type, why);
    r.stream = uint32_t(stream);
    if (auto d = j.find("dropped"); d != j.end()) {
      if (!d->is_object() || d->size() > media::SourceReport::kMaxReasons)
        return bad(type, "'dropped' must be an object of at most 8 reasons");
      for (const auto& [reason, n] : d->items()) {
        const bool name_ok = !reason.empty() && reason.size() <= 32 &&
                             std::all_of(reason.begin(), reason.end(), [](char c) {
                               return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
                             });
        if (!name_ok) return bad(type, "a 'dropped' reason must be 1-32 of [a-z0-9_]");
        if (!n.is_number_unsigned() || n.get<uint64_t>() > kMax)
          return bad(type, "a 'dropped' count must be an integer in [0, 2^53]");
        r.dropped.emplace_back(reason, n.get<uint64_t>());
      }
    }
    return ControlMessage{std::move(r)};
  }
  return ControlError{error_code::kUnknownType, "unknown message type '" + type + "'", type};
}

}  // namespace

ParseResult parse_control_message(std::string_view text) {
  // The one place where control-plane JSON errors become coded replies.
  try {
    // Nesting is bounded while parsing: replies echo client values (a ping's id), and dumping
    // JSON recurses once per level, so ~75,000 nested arrays in 150 KB would overflow the stack.
    // The parser itself is iterative; a container past the bound is discarded, not built.
    bool too_deep = false;
    const json::parser_callback_t limit_depth = [&too_deep](int depth, json::parse_event_t event,
                                                            json&) {
      if ((event == json::parse_event_t::object_start ||
           event == json::parse_event_t::array_start) &&
          depth >= kMaxJsonDepth) {
        too_deep = true;
        return false;
      }
      return true;
    };
    const json j = json::parse(text.begin(), text.end(), limit_depth);
    if (too_deep)
      return ControlError{error_code::kBadJson,
                          "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels",
                          ""};
    return parse_object(j);
  } catch (const json::exception& e) {
    return ControlError{error_code::kBadJson, std::string("invalid JSON: ") + e.what(), ""};
  }
}

std::string error_json(std::string_view code, std::string_view message,
                       std::string_view extra_object) {
  json j = {{"type", "error"}, {"code", code}, {"message", message}};
  if (!extra_object.empty()) {
    json extra = json::parse(extra_object, nullptr, false);
    if (extra.is_object()) j.update(extra);
  }
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace syncd::control
