#include <charconv>

#include "audio/backend.h"

namespace syncd::audio {

namespace {
bool parse_u32(std::string_view s, uint32_t& out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}
}  // namespace

bool parse_audio_source_spec(const std::string& spec, AudioSourceConfig& out, std::string& error) {
  std::string_view s(spec);
  out.tone = false;
  if (s.size() > 5 && s.substr(s.size() - 5) == ",tone") {
    out.tone = true;
    s.remove_suffix(5);
  }
  const size_t colon = s.find(':');
  const std::string_view kind = s.substr(0, colon);
  if (kind != "synthetic" && kind != "jack" && kind != "relay") {
    error = "--audio-source: backend must be 'synthetic', 'jack' or 'relay', got '" +
            std::string(kind) + "'";
    return false;
  }
  if (out.tone && kind != "synthetic") {
    error = "--audio-source: ',tone' is the synthetic backend's";
    return false;
  }
  out.backend = std::string(kind);
  if (colon == std::string_view::npos) return true;
  std::string_view rest = s.substr(colon + 1);
  const size_t at = rest.find('@');
  if (!parse_u32(rest.substr(0, at), out.channels) || out.channels < 1 || out.channels > 64) {
    error = "--audio-source: channels must be 1-64 in '" + spec + "'";
    return false;
  }
  if (at != std::string_view::npos) {
    if (kind != "synthetic") {
      error = "--audio-source: jack and relay run at their source's rate; drop '@RATE'";
      return false;
    }
    if (!parse_u32(rest.substr(at + 1), out.rate) || out.rate < 8000 || out.rate > 384000) {
      error = "--audio-source: rate must be 8000-384000 in '" + spec + "'";
      return false;
    }
  }
  return true;
}

}  // namespace syncd::audio
