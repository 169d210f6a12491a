#include "webrtc/sdp.h"

#include <algorithm>
#include <charconv>
#include <system_error>
#include <utility>

#include "core/text.h"

namespace syncd::webrtc {
namespace {

// RFC 8839 section 5.4: ice-ufrag 4..256 and ice-pwd 22..256 ice-chars.
constexpr size_t kMinUfrag = 4, kMinPwd = 22, kMaxIceCredential = 256;
// RFC 8843 section 15 leaves a mid's length open; JSEP implementations use a few characters. A
// bound keeps a hostile offer from making every answer line long.
constexpr size_t kMaxMid = 64;
// a=rtcp-fb values kept per codec, wildcard ones included: browsers send five or six. Without a
// bound, a 64 KB offer of "a=rtcp-fb:* x" lines would copy each into all 128 payload types.
constexpr size_t kMaxFeedbackPerCodec = 32;
constexpr std::string_view kSecureRtpProtocol = "UDP/TLS/RTP/SAVPF";
// RFC 6184 section 8.1: without profile-level-id, Baseline level 1.0.
constexpr std::string_view kDefaultProfileLevelId = "420010";

using core::equals_ignore_case;

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_hex(char c) {
  return is_digit(c) || (core::ascii_lower(c) >= 'a' && core::ascii_lower(c) <= 'f');
}

template <typename T>
bool parse_number(std::string_view text, T& out) {
  if (text.empty()) return false;
  for (char c : text)
    if (!is_digit(c)) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

bool parse_payload_type(std::string_view text, uint8_t& out) {
  return parse_number(text, out) && out <= 127;
}

// Splits at the first `separator`: `head` before it, `tail` after (empty when there is none).
void split_once(std::string_view text, char separator, std::string_view& head,
                std::string_view& tail) {
  size_t at = text.find(separator);
  head = text.substr(0, at);
  tail = at == std::string_view::npos ? std::string_view{} : text.substr(at + 1);
}

// SDP separates with single spaces (RFC 8866 section 5); tabs are not whitespace there.
std::string_view trim(std::string_view s) {
  return core::trim(s, " ");
}

bool is_ice_chars(std::string_view s, size_t min_size) {
  if (s.size() < min_size || s.size() > kMaxIceCredential) return false;
  for (char c : s) {
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!alpha && !is_digit(c) && c != '+' && c != '/') return false;
  }
  return true;
}

// RFC 8866 section 9: token-char.
// An IPv4 dotted quad or an IPv6 literal (hex digits, colons, dots): what a candidate's address
// must be for syncd to send to it without a resolver.
bool is_ip_literal(std::string_view s) {
  if (s.empty() || s.size() > 45) return false;
  const bool v6 = s.find(':') != std::string_view::npos;
  for (char c : s) {
    const bool digit = c >= '0' && c <= '9';
    const bool hex = digit || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if (!(v6 ? hex || c == ':' || c == '.' : digit || c == '.')) return false;
  }
  return true;
}

bool is_token(std::string_view s, size_t max_size) {
  if (s.empty() || s.size() > max_size) return false;
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    bool ok = c == 0x21 || (c >= 0x23 && c <= 0x27) || c == 0x2A || c == 0x2B || c == 0x2D ||
              c == 0x2E || (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) ||
              (c >= 0x5E && c <= 0x7E);
    if (!ok) return false;
  }
  return true;
}

// The transport attributes that may be written at session or media level.
struct TransportAttributes {
  std::string ice_ufrag, ice_pwd, setup;
  bool has_fingerprint = false;
  secure::Fingerprint fingerprint;
};

struct ParseState {
  TransportAttributes session;
  std::vector<TransportAttributes> media;                   // one per m-line
  std::vector<std::vector<std::string>> wildcard_feedback;  // a=rtcp-fb:* per m-line
  bool saw_other_fingerprint = false;  // a fingerprint with a hash other than sha-256
};

SdpCodec& codec_for(SdpMedia& media, uint8_t payload_type) {
  for (SdpCodec& c : media.codecs)
    if (c.payload_type == payload_type) return c;
  SdpCodec& c = media.codecs.emplace_back();
  c.payload_type = payload_type;
  return c;
}

// m=<media> <port>[/<number of ports>] <proto> <fmt> ... (RFC 8866 section 5.14).
SdpError parse_media_line(std::string_view value, SdpMedia& media) {
  std::vector<std::string_view> tokens;
  while (!value.empty()) {
    std::string_view token;
    split_once(value, ' ', token, value);
    if (token.empty()) return SdpError::kMalformedLine;
    tokens.push_back(token);
  }
  if (tokens.size() < 4) return SdpError::kMalformedLine;
  std::string_view port, count;
  split_once(tokens[1], '/', port, count);
  uint32_t ports = 0;
  if (!parse_number(port, media.port) ||
      (tokens[1].find('/') != std::string_view::npos && !parse_number(count, ports)))
    return SdpError::kMalformedLine;
  media.kind = tokens[0];
  media.protocol = tokens[2];
  for (size_t i = 3; i < tokens.size(); ++i) {
    media.format_tokens.emplace_back(tokens[i]);
    // A format of digits is an RTP payload type (RFC 3551 section 6: 0..127).
    if (is_digit(tokens[i][0])) {
      uint8_t pt = 0;
      if (!parse_payload_type(tokens[i], pt)) return SdpError::kMalformedLine;
      media.formats.push_back(pt);
    }
  }
  return SdpError::kNone;
}

SdpError parse_fingerprint_attribute(std::string_view value, ParseState& state,
                                     TransportAttributes& level) {
  std::string_view hash, rest;
  split_once(value, ' ', hash, rest);
  if (!equals_ignore_case(hash, "sha-256")) {
    state.saw_other_fingerprint = true;
    return SdpError::kNone;
  }
  secure::Fingerprint fingerprint;
  if (secure::parse_fingerprint(value, fingerprint) != secure::FingerprintParseError::kOk)
    return SdpError::kBadFingerprint;
  if (!level.has_fingerprint) {
    level.has_fingerprint = true;
    level.fingerprint = fingerprint;
  }
  return SdpError::kNone;
}

// Attributes valid at both levels; `handled` is set when `name` was one of them.
SdpError parse_transport_attribute(std::string_view name, std::string_view value, ParseState& state,
                                   TransportAttributes& level, bool& handled) {
  handled = true;
  if (name == "ice-ufrag") {
    if (!is_ice_chars(value, kMinUfrag)) return SdpError::kMalformedLine;
    if (level.ice_ufrag.empty()) level.ice_ufrag = value;
  } else if (name == "ice-pwd") {
    if (!is_ice_chars(value, kMinPwd)) return SdpError::kMalformedLine;
    if (level.ice_pwd.empty()) level.ice_pwd = value;
  } else if (name == "fingerprint") {
    return parse_fingerprint_attribute(value, state, level);
  } else if (name == "setup") {
    if (value != "actpass" && value != "active" && value != "passive") return SdpError::kBadSetup;
    if (level.setup.empty()) level.setup = value;
  } else {
    handled = false;
  }
  return SdpError::kNone;
}

SdpError parse_media_attribute(std::string_view name, std::string_view value, SdpMedia& media,
                               std::vector<std::string>& wildcard_feedback) {
  if (name == "mid") {
    if (!is_token(value, kMaxMid)) return SdpError::kMalformedLine;
    if (media.mid.empty()) media.mid = value;
  } else if (name == "sendrecv") {
    media.direction = SdpDirection::kSendRecv;
  } else if (name == "sendonly") {
    media.direction = SdpDirection::kSendOnly;
  } else if (name == "recvonly") {
    media.direction = SdpDirection::kRecvOnly;
  } else if (name == "inactive") {
    media.direction = SdpDirection::kInactive;
  } else if (name == "rtcp-mux") {
    media.rtcp_mux = true;
  } else if (name == "rtcp-rsize") {
    media.rtcp_rsize = true;
  } else if (name == "bundle-only") {
    media.bundle_only = true;
  } else if (name == "rtpmap") {
    // a=rtpmap:<payload type> <encoding name>/<clock rate>[/<encoding parameters>]
    std::string_view pt_text, encoding, codec_name, rates, rate, channels;
    split_once(value, ' ', pt_text, encoding);
    split_once(encoding, '/', codec_name, rates);
    split_once(rates, '/', rate, channels);
    uint8_t pt = 0;
    uint32_t clock_rate = 0, channel_count = 0;
    if (!parse_payload_type(pt_text, pt) || codec_name.empty() ||
        codec_name.find(' ') != std::string_view::npos || !parse_number(rate, clock_rate) ||
        (rates.find('/') != std::string_view::npos && !parse_number(channels, channel_count)))
      return SdpError::kMalformedLine;
    SdpCodec& codec = codec_for(media, pt);
    if (codec.name.empty()) {
      codec.name = codec_name;
      codec.clock_rate = clock_rate;
      codec.channels = channel_count;
    }
  } else if (name == "fmtp") {
    std::string_view pt_text, parameters;
    split_once(value, ' ', pt_text, parameters);
    uint8_t pt = 0;
    if (!parse_payload_type(pt_text, pt) || trim(parameters).empty())
      return SdpError::kMalformedLine;
    SdpCodec& codec = codec_for(media, pt);
    if (codec.fmtp.empty()) codec.fmtp = trim(parameters);
  } else if (name == "candidate") {
    // RFC 8839 section 5.1: <foundation> <component> <transport> <priority> <address> <port>
    // typ <type> [extensions]. Lines we cannot use are skipped, not refused: a peer may list
    // TCP, relay or mDNS candidates beside the ones we take.
    std::string_view fields[8];
    std::string_view rest = value;
    size_t n = 0;
    while (n < 8 && !rest.empty()) split_once(rest, ' ', fields[n++], rest);
    uint32_t component = 0, priority = 0;
    uint16_t port = 0;
    if (n == 8 && parse_number(fields[1], component) && component == 1 &&
        equals_ignore_case(fields[2], "udp") && parse_number(fields[3], priority) &&
        parse_number(fields[5], port) && port != 0 && fields[6] == "typ" &&
        is_ip_literal(fields[4]) && media.candidates.size() < kMaxSdpCandidates)
      media.candidates.push_back({std::string(fields[4]), port, priority, std::string(fields[7])});
  } else if (name == "rtcp-fb") {
    // RFC 4585 section 4.2: a=rtcp-fb:<payload type or *> <feedback type> [<parameter>]
    std::string_view pt_text, feedback;
    split_once(value, ' ', pt_text, feedback);
    feedback = trim(feedback);
    if (feedback.empty()) return SdpError::kMalformedLine;
    if (pt_text == "*") {
      if (wildcard_feedback.size() < kMaxFeedbackPerCodec) wildcard_feedback.emplace_back(feedback);
    } else {
      uint8_t pt = 0;
      if (!parse_payload_type(pt_text, pt)) return SdpError::kMalformedLine;
      SdpCodec& codec = codec_for(media, pt);
      if (codec.feedback.size() < kMaxFeedbackPerCodec) codec.feedback.emplace_back(feedback);
    }
  }
  return SdpError::kNone;
}

// The offer's transport value: the first media-level one, else the session's.
template <typename Has, typename Get>
auto resolve(const ParseState& state, Has has, Get get) -> decltype(get(state.session)) {
  for (const TransportAttributes& level : state.media)
    if (has(level)) return get(level);
  return get(state.session);
}

// Ranks a profile-level-id for choose_h264; -1: not one we send.
int profile_rank(std::string_view profile_level_id) {
  if (profile_level_id == "42e01f") return 0;
  if (profile_level_id == "42001f") return 1;
  if (profile_level_id.starts_with("42")) return 2;
  if (profile_level_id.starts_with("4d")) return 3;
  if (profile_level_id.starts_with("64")) return 4;
  return -1;
}

// Reads packetization-mode and profile-level-id (lower-cased) from an H.264 fmtp.
void read_h264_fmtp(std::string_view fmtp, bool& mode1, std::string& profile_level_id) {
  mode1 = false;
  profile_level_id = kDefaultProfileLevelId;
  while (!fmtp.empty()) {
    std::string_view parameter, key, value;
    split_once(fmtp, ';', parameter, fmtp);
    split_once(trim(parameter), '=', key, value);
    key = trim(key);
    value = trim(value);
    if (equals_ignore_case(key, "packetization-mode")) {
      mode1 = value == "1";
    } else if (equals_ignore_case(key, "profile-level-id")) {
      profile_level_id.clear();
      if (value.size() == 6) {
        for (char c : value) {
          if (!is_hex(c)) {
            profile_level_id.clear();
            break;
          }
          profile_level_id += core::ascii_lower(c);
        }
      }
    }
  }
}

}  // namespace

const char* to_string(SdpError e) {
  switch (e) {
    case SdpError::kNone:
      return "none";
    case SdpError::kTooLarge:
      return "too_large";
    case SdpError::kNotSdp:
      return "not_sdp";
    case SdpError::kMalformedLine:
      return "malformed_line";
    case SdpError::kNoMedia:
      return "no_media";
    case SdpError::kTooManyMedia:
      return "too_many_media";
    case SdpError::kNoIceCredentials:
      return "no_ice_credentials";
    case SdpError::kNoFingerprint:
      return "no_fingerprint";
    case SdpError::kBadFingerprint:
      return "bad_fingerprint";
    case SdpError::kBadSetup:
      return "bad_setup";
    case SdpError::kNoRtcpMux:
      return "no_rtcp_mux";
    case SdpError::kNoH264:
      return "no_h264";
    case SdpError::kNoCandidates:
      return "no_candidates";
  }
  return "unknown";
}

const SdpCodec* SdpMedia::codec(uint8_t payload_type) const {
  for (const SdpCodec& c : codecs)
    if (c.payload_type == payload_type) return &c;
  return nullptr;
}

SdpError parse_sdp_description(std::string_view text, SdpOffer& out) {
  if (text.size() > kMaxSdpBytes) return SdpError::kTooLarge;
  SdpOffer offer;
  ParseState state;
  bool first = true;
  while (!text.empty()) {
    std::string_view line;
    split_once(text, '\n', line, text);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (first) {
      // RFC 8866 section 5.1: the description starts with "v=0".
      if (line != "v=0") return SdpError::kNotSdp;
      first = false;
      continue;
    }
    if (line.empty()) continue;
    if (line.size() < 2 || line[0] < 'a' || line[0] > 'z' || line[1] != '=')
      return SdpError::kMalformedLine;
    // No control bytes (a lone CR, NUL, ...): values are echoed into the answer line by line.
    for (char c : line)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return SdpError::kMalformedLine;
    std::string_view value = line.substr(2);
    if (line[0] == 'm') {
      if (offer.media.size() == kMaxSdpMedia) return SdpError::kTooManyMedia;
      SdpMedia& media = offer.media.emplace_back();
      state.media.emplace_back();
      state.wildcard_feedback.emplace_back();
      if (SdpError e = parse_media_line(value, media); e != SdpError::kNone) return e;
      continue;
    }
    if (line[0] != 'a') continue;
    std::string_view name, attribute_value;
    split_once(value, ':', name, attribute_value);
    TransportAttributes& level = offer.media.empty() ? state.session : state.media.back();
    bool handled = false;
    if (SdpError e = parse_transport_attribute(name, attribute_value, state, level, handled);
        e != SdpError::kNone)
      return e;
    if (handled) {
      // RFC 8839 section 5.4: kept per m-line as well, for a caller that looks per m-line.
      if (!offer.media.empty() && (name == "ice-ufrag" || name == "ice-pwd")) {
        offer.media.back().ice_ufrag = level.ice_ufrag;
        offer.media.back().ice_pwd = level.ice_pwd;
      }
      continue;
    }
    if (offer.media.empty()) {
      if (name == "group") {
        std::string_view semantics, mids;
        split_once(attribute_value, ' ', semantics, mids);
        if (semantics == "BUNDLE" && offer.bundle_mids.empty()) {
          while (!mids.empty()) {
            std::string_view mid;
            split_once(mids, ' ', mid, mids);
            if (!mid.empty()) offer.bundle_mids.emplace_back(mid);
          }
        }
      } else if (name == "ice-lite") {
        offer.ice_lite = true;
      }
    } else if (SdpError e = parse_media_attribute(name, attribute_value, offer.media.back(),
                                                  state.wildcard_feedback.back());
               e != SdpError::kNone) {
      return e;
    }
  }
  if (first) return SdpError::kNotSdp;
  if (offer.media.empty()) return SdpError::kNoMedia;

  for (size_t i = 0; i < offer.media.size(); ++i)
    for (SdpCodec& codec : offer.media[i].codecs)
      for (const std::string& feedback : state.wildcard_feedback[i])
        if (codec.feedback.size() < kMaxFeedbackPerCodec) codec.feedback.push_back(feedback);

  offer.ice_ufrag = resolve(
      state, [](const TransportAttributes& l) { return !l.ice_ufrag.empty(); },
      [](const TransportAttributes& l) { return l.ice_ufrag; });
  offer.ice_pwd = resolve(
      state, [](const TransportAttributes& l) { return !l.ice_pwd.empty(); },
      [](const TransportAttributes& l) { return l.ice_pwd; });
  if (offer.ice_ufrag.empty() || offer.ice_pwd.empty()) return SdpError::kNoIceCredentials;

  bool has_fingerprint = resolve(
      state, [](const TransportAttributes& l) { return l.has_fingerprint; },
      [](const TransportAttributes& l) { return l.has_fingerprint; });
  if (!has_fingerprint)
    return state.saw_other_fingerprint ? SdpError::kBadFingerprint : SdpError::kNoFingerprint;
  offer.fingerprint = resolve(
      state, [](const TransportAttributes& l) { return l.has_fingerprint; },
      [](const TransportAttributes& l) { return l.fingerprint; });

  offer.setup = resolve(
      state, [](const TransportAttributes& l) { return !l.setup.empty(); },
      [](const TransportAttributes& l) { return l.setup; });
  if (offer.setup.empty()) return SdpError::kBadSetup;

  out = std::move(offer);
  return SdpError::kNone;
}

SdpError parse_sdp_offer(std::string_view text, SdpOffer& out) {
  SdpOffer offer;
  if (SdpError e = parse_sdp_description(text, offer); e != SdpError::kNone) return e;
  // RFC 5763 section 5: we are always the DTLS server (a=setup:passive in the answer), so the
  // offerer must be able to be the client.
  if (offer.setup == "passive") return SdpError::kBadSetup;
  std::optional<H264Choice> choice = choose_h264(offer);
  if (!choice) return SdpError::kNoH264;
  // RFC 8829 section 5.2.1 offers always mux; the runtime has one socket per session, no RTCP one.
  if (!offer.media[choice->media_index].rtcp_mux) return SdpError::kNoRtcpMux;
  out = std::move(offer);
  return SdpError::kNone;
}

std::optional<H264Choice> choose_h264(const SdpOffer& offer) {
  for (size_t i = 0; i < offer.media.size(); ++i) {
    const SdpMedia& media = offer.media[i];
    if (media.kind != "video" || media.protocol != kSecureRtpProtocol || media.mid.empty() ||
        (media.port == 0 && !media.bundle_only) ||
        (media.direction != SdpDirection::kRecvOnly && media.direction != SdpDirection::kSendRecv))
      continue;
    const SdpCodec* best = nullptr;
    int best_rank = 0;
    std::string best_profile;
    for (uint8_t pt : media.formats) {
      const SdpCodec* codec = media.codec(pt);
      if (!codec || !equals_ignore_case(codec->name, "H264") || codec->clock_rate != 90000)
        continue;
      bool mode1 = false;
      std::string profile;
      read_h264_fmtp(codec->fmtp, mode1, profile);
      int rank = profile_rank(profile);
      if (!mode1 || rank < 0 || (best && rank >= best_rank)) continue;
      best = codec;
      best_rank = rank;
      best_profile = std::move(profile);
    }
    if (!best) continue;
    H264Choice choice;
    choice.media_index = i;
    choice.payload_type = best->payload_type;
    choice.profile_level_id = std::move(best_profile);
    for (const std::string& feedback : best->feedback) {
      if (feedback == "nack") choice.nack = true;
      if (feedback == "nack pli") choice.pli = true;
      if (feedback == "ccm fir") choice.fir = true;
      if (feedback == "goog-remb") choice.remb = true;
    }
    return choice;
  }
  return std::nullopt;
}

std::optional<OpusChoice> choose_opus(const SdpOffer& offer, const H264Choice& video) {
  const std::string& video_mid = offer.media[video.media_index].mid;
  auto bundled = [&offer](const std::string& mid) {
    return std::find(offer.bundle_mids.begin(), offer.bundle_mids.end(), mid) !=
           offer.bundle_mids.end();
  };
  if (!bundled(video_mid)) return std::nullopt;
  for (size_t i = 0; i < offer.media.size(); ++i) {
    const SdpMedia& media = offer.media[i];
    if (media.kind != "audio") continue;
    if (media.protocol != kSecureRtpProtocol || media.mid.empty() || !media.rtcp_mux ||
        !bundled(media.mid) || (media.port == 0 && !media.bundle_only) ||
        (media.direction != SdpDirection::kRecvOnly && media.direction != SdpDirection::kSendRecv))
      return std::nullopt;  // the first audio m-line is the one a player listens on
    for (uint8_t pt : media.formats) {
      const SdpCodec* codec = media.codec(pt);
      if (codec && equals_ignore_case(codec->name, "opus") && codec->clock_rate == 48000 &&
          codec->channels == 2)
        return OpusChoice{i, pt};
    }
    return std::nullopt;
  }
  return std::nullopt;
}

std::string write_sdp_answer(const SdpOffer& offer, const H264Choice& choice,
                             const OpusChoice* audio, const SdpAnswerParams& params) {
  const std::string crlf = "\r\n";
  std::string sdp;
  sdp.reserve(1536 + 64 * offer.media.size());
  sdp += "v=0" + crlf;
  sdp += "o=- " + std::to_string(params.session_id) + " 2 IN IP4 127.0.0.1" + crlf;
  sdp += "s=-" + crlf;
  sdp += "t=0 0" + crlf;
  sdp += "a=group:BUNDLE";
  for (size_t i = 0; i < offer.media.size(); ++i)
    if (i == choice.media_index || (audio && i == audio->media_index))
      sdp += " " + offer.media[i].mid;
  sdp += crlf;
  sdp += "a=ice-lite" + crlf;
  sdp += "a=msid-semantic:WMS " + params.stream_id + crlf;
  // What every accepted (bundled) m-line repeats: the one transport both media share.
  auto transport_lines = [&](const SdpMedia& media) {
    sdp += "c=IN IP4 0.0.0.0" + crlf;
    sdp += "a=mid:" + media.mid + crlf;
    sdp += "a=sendonly" + crlf;
    sdp += "a=rtcp-mux" + crlf;
    if (media.rtcp_rsize) sdp += "a=rtcp-rsize" + crlf;
    sdp += "a=ice-ufrag:" + params.ice_ufrag + crlf;
    sdp += "a=ice-pwd:" + params.ice_pwd + crlf;
    sdp += "a=fingerprint:" + secure::format_fingerprint(params.fingerprint) + crlf;
    sdp += "a=setup:passive" + crlf;
  };
  auto source_lines = [&](const std::string& track_id, uint32_t ssrc) {
    sdp += "a=msid:" + params.stream_id + " " + track_id + crlf;
    sdp += "a=ssrc:" + std::to_string(ssrc) + " cname:" + params.cname + crlf;
    sdp += "a=candidate:1 1 udp 2130706431 " + params.candidate_ip + " " +
           std::to_string(params.candidate_port) + " typ host" + crlf;
    sdp += "a=end-of-candidates" + crlf;
  };
  for (size_t i = 0; i < offer.media.size(); ++i) {
    const SdpMedia& media = offer.media[i];
    if (i == choice.media_index) {
      const std::string pt = std::to_string(choice.payload_type);
      sdp += "m=video 9 UDP/TLS/RTP/SAVPF " + pt + crlf;
      transport_lines(media);
      sdp += "a=rtpmap:" + pt + " H264/90000" + crlf;
      if (choice.nack) sdp += "a=rtcp-fb:" + pt + " nack" + crlf;
      if (choice.pli) sdp += "a=rtcp-fb:" + pt + " nack pli" + crlf;
      if (choice.fir) sdp += "a=rtcp-fb:" + pt + " ccm fir" + crlf;
      if (choice.remb) sdp += "a=rtcp-fb:" + pt + " goog-remb" + crlf;
      sdp += "a=fmtp:" + pt + " level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=" +
             choice.profile_level_id + crlf;
      source_lines(params.track_id, params.video_ssrc);
    } else if (audio && i == audio->media_index) {
      const std::string pt = std::to_string(audio->payload_type);
      sdp += "m=audio 9 UDP/TLS/RTP/SAVPF " + pt + crlf;
      transport_lines(media);
      sdp += "a=rtpmap:" + pt + " opus/48000/2" + crlf;
      // RFC 7587 section 7.1: stereo=1 tells the receiver it may decode two channels (it does
      // anyway), sprop-stereo=1 that the sender sends them; minptime and in-band FEC as offered.
      sdp += "a=fmtp:" + pt + " minptime=10;useinbandfec=1" +
             (params.audio_stereo ? ";stereo=1;sprop-stereo=1" : "") + crlf;
      source_lines(params.audio_track_id, params.audio_ssrc);
    } else {
      // RFC 8829 section 5.3.1 / RFC 8866 section 5.14: a rejected m-line has port 0.
      sdp += "m=" + media.kind + " 0 " + media.protocol + " " +
             (media.format_tokens.empty() ? std::string("0") : media.format_tokens.front()) + crlf;
      if (!media.mid.empty()) sdp += "a=mid:" + media.mid + crlf;
      sdp += "a=inactive" + crlf;
    }
  }
  return sdp;
}

std::string write_sdp_offer(const SdpOfferParams& params) {
  const std::string crlf = "\r\n";
  std::string sdp;
  sdp.reserve(2048);
  sdp += "v=0" + crlf;
  sdp += "o=- " + std::to_string(params.session_id) + " 2 IN IP4 127.0.0.1" + crlf;
  sdp += "s=-" + crlf;
  sdp += "t=0 0" + crlf;
  sdp += std::string("a=group:BUNDLE 0") + (params.audio ? " 1" : "") + crlf;
  sdp += "a=msid-semantic:WMS " + params.stream_id + crlf;
  auto media_lines = [&](const char* kind, uint8_t pt, const char* mid) {
    sdp += std::string("m=") + kind + " 9 UDP/TLS/RTP/SAVPF " + std::to_string(pt) + crlf;
    sdp += "c=IN IP4 0.0.0.0" + crlf;
    sdp += std::string("a=mid:") + mid + crlf;
    sdp += "a=sendonly" + crlf;
    sdp += "a=rtcp-mux" + crlf;
    sdp += "a=rtcp-rsize" + crlf;
    sdp += "a=ice-ufrag:" + params.ice_ufrag + crlf;
    sdp += "a=ice-pwd:" + params.ice_pwd + crlf;
    sdp += "a=fingerprint:" + secure::format_fingerprint(params.fingerprint) + crlf;
    sdp += "a=setup:actpass" + crlf;
  };
  auto source_lines = [&](const std::string& track_id, uint32_t ssrc) {
    sdp += "a=msid:" + params.stream_id + " " + track_id + crlf;
    sdp += "a=ssrc:" + std::to_string(ssrc) + " cname:" + params.cname + crlf;
    // RFC 8445 5.1.2.1: type preference 126 (host), local preference falling per address.
    for (size_t i = 0; i < params.candidate_ips.size(); ++i)
      sdp += "a=candidate:" + std::to_string(i + 1) + " 1 udp " +
             std::to_string((126u << 24) | ((65535u - uint32_t(i)) << 8) | 255u) + " " +
             params.candidate_ips[i] + " " + std::to_string(params.candidate_port) + " typ host" +
             crlf;
    sdp += "a=end-of-candidates" + crlf;
  };
  const std::string vpt = std::to_string(kOfferH264PayloadType);
  media_lines("video", kOfferH264PayloadType, "0");
  sdp += "a=rtpmap:" + vpt + " H264/90000" + crlf;
  sdp += "a=rtcp-fb:" + vpt + " nack" + crlf;
  sdp += "a=rtcp-fb:" + vpt + " nack pli" + crlf;
  sdp += "a=rtcp-fb:" + vpt + " ccm fir" + crlf;
  sdp += "a=fmtp:" + vpt +
         " level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f" + crlf;
  source_lines(params.track_id, params.video_ssrc);
  if (params.audio) {
    const std::string apt = std::to_string(kOfferOpusPayloadType);
    media_lines("audio", kOfferOpusPayloadType, "1");
    sdp += "a=rtpmap:" + apt + " opus/48000/2" + crlf;
    sdp += "a=fmtp:" + apt + " minptime=10;useinbandfec=1" +
           (params.audio_stereo ? ";stereo=1;sprop-stereo=1" : "") + crlf;
    source_lines(params.audio_track_id, params.audio_ssrc);
  }
  return sdp;
}

SdpError parse_whip_answer(std::string_view text, bool audio_offered, WhipAnswer& out) {
  SdpOffer answer;
  if (SdpError e = parse_sdp_description(text, answer); e != SdpError::kNone) return e;
  // RFC 5763 section 5: the answerer picks a role; actpass is an offerer's word.
  if (answer.setup != "active" && answer.setup != "passive") return SdpError::kBadSetup;
  auto accepted = [](const SdpMedia& m) {
    return m.port != 0 &&
           (m.direction == SdpDirection::kRecvOnly || m.direction == SdpDirection::kSendRecv);
  };
  WhipAnswer result;
  const SdpMedia* video = nullptr;
  const SdpMedia* audio = nullptr;
  for (const SdpMedia& m : answer.media) {
    if (m.kind == "video" && m.mid == "0" && !video) video = &m;
    if (m.kind == "audio" && m.mid == "1" && !audio) audio = &m;
  }
  if (!video || !accepted(*video)) return SdpError::kNoH264;
  for (uint8_t pt : video->formats) {
    const SdpCodec* codec = video->codec(pt);
    if (!codec || !equals_ignore_case(codec->name, "H264") || codec->clock_rate != 90000) continue;
    bool mode1 = false;
    std::string profile;
    read_h264_fmtp(codec->fmtp, mode1, profile);
    if (!mode1) continue;
    result.video_payload_type = pt;
    break;
  }
  if (result.video_payload_type == 0) return SdpError::kNoH264;
  if (!video->rtcp_mux) return SdpError::kNoRtcpMux;
  if (audio_offered && audio && accepted(*audio) && audio->rtcp_mux) {
    for (uint8_t pt : audio->formats) {
      const SdpCodec* codec = audio->codec(pt);
      if (codec && equals_ignore_case(codec->name, "opus") && codec->clock_rate == 48000 &&
          codec->channels == 2) {
        result.audio = true;
        result.audio_payload_type = pt;
        break;
      }
    }
  }
  for (const SdpMedia* m : {video, result.audio ? audio : nullptr}) {
    if (!m) continue;
    for (const SdpCandidate& c : m->candidates) {
      const bool seen = std::any_of(
          result.candidates.begin(), result.candidates.end(),
          [&c](const SdpCandidate& o) { return o.address == c.address && o.port == c.port; });
      if (!seen) result.candidates.push_back(c);
    }
  }
  if (result.candidates.empty()) return SdpError::kNoCandidates;
  result.ice_ufrag = answer.ice_ufrag;
  result.ice_pwd = answer.ice_pwd;
  result.fingerprint = answer.fingerprint;
  result.dtls_client = answer.setup == "passive";
  result.ice_lite = answer.ice_lite;
  out = std::move(result);
  return SdpError::kNone;
}

}  // namespace syncd::webrtc
