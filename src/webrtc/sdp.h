// SDP for the WHEP endpoint: a browser's offer parsed, the H.264 video m-line (and, when syncd
// sends audio, the Opus audio m-line) chosen, the answer of an ICE-lite, DTLS-passive, send-only
// peer written.
//
// Implements the parts of RFC 8866 (SDP: section 5 line grammar, 5.14 m=, 6.6 rtpmap, 6.7
// direction, 6.15 fmtp) that JSEP offers use (RFC 8829 section 5.2 offer, 5.3 answer, 5.8
// parsing), RFC 8843 (BUNDLE: a=group:BUNDLE, a=mid, bundle-only), RFC 8839 section 5.4 (ice-ufrag,
// ice-pwd and their characters and lengths), RFC 8122 section 5 / RFC 5763 section 5 (fingerprint,
// setup), RFC 5761 (rtcp-mux), RFC 5506 (rtcp-rsize), RFC 4585 section 4.2 (rtcp-fb), RFC 6184
// section 8.1 (H.264 packetization-mode, profile-level-id), RFC 7587 section 7 (Opus: opus/48000/2,
// stereo, sprop-stereo, useinbandfec, minptime), RFC 8830 (msid).
//
// Pure: text in, structs out; no sockets, clocks, logs; nothing throws but std::bad_alloc from the
// strings and vectors (control plane: one offer per WHEP POST). Any thread; no shared state.
//
// What an offer needs to pass parse_sdp_offer (the answer then always exists):
//  - at most kMaxSdpBytes, starting "v=0", every line "<letter>=<value>" with no control bytes;
//  - 1..kMaxSdpMedia m-lines, each with a port and at least one format;
//  - ice-ufrag (4..256 ice-chars) and ice-pwd (22..256 ice-chars), session- or media-level;
//  - a sha-256 a=fingerprint (other hashes alone: kBadFingerprint);
//  - a=setup:actpass or active (we answer passive; an offer of passive or none is kBadSetup);
//  - a video m-line, UDP/TLS/RTP/SAVPF, with a mid, direction recvonly or sendrecv, port not 0
//    (unless bundle-only), offering H264/90000 with packetization-mode=1 and a known
//    profile-level-id (42xxxx, 4dxxxx, 64xxxx, or none: RFC 6184's default 420010): else kNoH264;
//  - a=rtcp-mux on that m-line: else kNoRtcpMux.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "secure/certificate.h"

namespace syncd::webrtc {

enum class SdpError : uint8_t {
  kNone,
  kTooLarge,
  kNotSdp,
  kMalformedLine,
  kNoMedia,
  kTooManyMedia,
  kNoIceCredentials,
  kNoFingerprint,
  kBadFingerprint,
  kBadSetup,
  kNoRtcpMux,
  kNoH264,        // no video m-line offers H264 packetization-mode=1
  kNoCandidates,  // an answer to our offer with no UDP candidate we can reach (WHIP)
};
// snake_case words, e.g. "no_h264", used in HTTP 400 bodies. Any thread.
const char* to_string(SdpError e);

enum class SdpDirection : uint8_t { kSendRecv, kSendOnly, kRecvOnly, kInactive };

struct SdpCodec {
  uint8_t payload_type = 0;
  std::string name;  // "H264", as written
  uint32_t clock_rate = 0;
  uint32_t channels = 0;  // 0 when the rtpmap has none
  std::string fmtp;       // the a=fmtp value after the payload type, as written
  // a=rtcp-fb values ("nack pli"), wildcard ones after the codec's own; at most the first 32.
  std::vector<std::string> feedback;
};

// An a=candidate line (RFC 8839 section 5.1) we can use: component 1 (RTP; rtcp-mux), UDP, an
// IPv4 or IPv6 literal (mDNS .local names are not resolved).
struct SdpCandidate {
  std::string address;
  uint16_t port = 0;
  uint32_t priority = 0;
  std::string type;  // host, srflx, prflx, relay
};
inline constexpr size_t kMaxSdpCandidates = 16;  // per m-line; more are ignored

struct SdpMedia {
  std::string kind;  // "video", "audio", "application"...
  uint16_t port = 0;
  std::string protocol;
  std::vector<uint8_t> formats;  // m-line order; only the numeric ones (RTP payload types)
  std::vector<std::string> format_tokens;  // every format as written ("webrtc-datachannel")
  std::string mid;
  SdpDirection direction = SdpDirection::kSendRecv;
  bool rtcp_mux = false;
  bool rtcp_rsize = false;
  bool bundle_only = false;
  std::vector<SdpCodec> codecs;    // in the order their rtpmap (or fmtp, rtcp-fb) first appears
  std::string ice_ufrag, ice_pwd;  // media-level, may be empty
  std::vector<SdpCandidate> candidates;
  const SdpCodec* codec(uint8_t payload_type) const;
};

struct SdpOffer {
  std::string ice_ufrag, ice_pwd;
  secure::Fingerprint fingerprint;
  std::string setup;  // "actpass", "active" or "passive"
  std::vector<std::string> bundle_mids;
  bool ice_lite = false;  // a=ice-lite at session level
  std::vector<SdpMedia> media;
};

inline constexpr size_t kMaxSdpBytes = 64 * 1024;  // larger: kTooLarge
inline constexpr size_t kMaxSdpMedia = 16;         // more m-lines: kTooManyMedia

// Parses an offer; ice credentials/fingerprint/setup may be session- or media-level (media-level
// wins; the first media's are taken when the session has none). Lines end in CRLF or LF.
// Succeeds only for an offer syncd can answer (see the list at the top): on kNone,
// choose_h264(out) has a value. `out` is meaningful only on kNone. Any thread.
SdpError parse_sdp_offer(std::string_view text, SdpOffer& out);

// The structural part of parse_sdp_offer: line grammar, m-lines, credentials, fingerprint, a
// setup of actpass, active or passive; no check of what is offered. Parses answers too (ours
// included, which the fuzzer relies on). Any thread.
SdpError parse_sdp_description(std::string_view text, SdpOffer& out);

// What we send back for the chosen video m-line.
struct H264Choice {
  size_t media_index = 0;
  uint8_t payload_type = 0;
  std::string profile_level_id;  // 6 hex digits, lower case
  bool nack = false, pli = false, fir = false, remb = false;
};

// What we send back for the chosen audio m-line.
struct OpusChoice {
  size_t media_index = 0;
  uint8_t payload_type = 0;
};

// Picks the audio m-line syncd's audio goes on: the first audio m-line, UDP/TLS/RTP/SAVPF with a
// mid, a port other than 0 (or bundle-only), direction recvonly or sendrecv, rtcp-mux, offering
// opus/48000/2 (RFC 7587 section 7: Opus is always written with 2 channels, whatever is sent),
// and in the same BUNDLE group as the chosen video (one ICE and DTLS transport carries both).
// None: the offer asks for no audio we can send, and its audio m-line is rejected. Any thread.
std::optional<OpusChoice> choose_opus(const SdpOffer& offer, const H264Choice& video);

// Picks the video m-line (the first with direction recvonly or sendrecv and a H264 codec with
// packetization-mode=1) and its payload type, preferring profile-level-id 42e01f, then 42001f,
// then any other 42xxxx (constrained baseline / baseline), then 4d (main), then 64 (high).
// Records which of the rtcp-fb "nack", "nack pli", "ccm fir", "goog-remb" the offer has for it.
// The m-line must also be UDP/TLS/RTP/SAVPF with a mid and a port other than 0 (or bundle-only);
// among equally preferred payload types the first in m-line order wins. Any thread.
std::optional<H264Choice> choose_h264(const SdpOffer& offer);

struct SdpAnswerParams {
  uint64_t session_id = 0;
  std::string ice_ufrag, ice_pwd;
  secure::Fingerprint fingerprint;
  std::string candidate_ip;  // IPv4 or IPv6 text
  uint16_t candidate_port = 0;
  uint32_t video_ssrc = 0;
  std::string cname, stream_id, track_id;
  // With an audio choice: its SSRC and track, and whether syncd sends two channels (stereo=1;
  // sprop-stereo=1 in the fmtp) or one.
  uint32_t audio_ssrc = 0;
  std::string audio_track_id;
  bool audio_stereo = true;
};

// The answer (CRLF lines): v=0, o=- <session_id> 2 IN IP4 127.0.0.1, s=-, t=0 0,
// a=group:BUNDLE <the chosen mid>, a=ice-lite, a=msid-semantic:WMS <stream_id>; then one m-line per
// offered m-line, in order. The chosen video: m=video 9 UDP/TLS/RTP/SAVPF <pt>, c=IN IP4 0.0.0.0,
// a=mid, a=sendonly, a=rtcp-mux (a=rtcp-rsize if offered), a=ice-ufrag, a=ice-pwd,
// a=fingerprint:sha-256 XX:..., a=setup:passive, a=rtpmap:<pt> H264/90000, the rtcp-fb lines the
// offer had among nack / nack pli / ccm fir / goog-remb, a=fmtp:<pt>
// level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=<chosen>, a=msid:<stream_id>
// <track_id>, a=ssrc:<ssrc> cname:<cname>, a=candidate:1 1 udp 2130706431 <ip> <port> typ host,
// a=end-of-candidates. With `audio`, its m-line is accepted too, in the BUNDLE group (mids in
// m-line order): m=audio 9 UDP/TLS/RTP/SAVPF <pt>, the same transport lines, a=rtpmap:<pt>
// opus/48000/2, a=fmtp:<pt> minptime=10;useinbandfec=1 (plus ;stereo=1;sprop-stereo=1 when
// audio_stereo), a=msid:<stream_id> <audio_track_id>, a=ssrc:<audio_ssrc> cname:<cname>. Every
// other m-line is rejected: "m=<kind> 0 <protocol> <its first format>", its a=mid (when it has
// one), a=inactive (not in the BUNDLE group). `offer`, `choice` and `audio` are those
// parse_sdp_offer, choose_h264 and choose_opus gave; the strings of `params` are the caller's and
// are written as they are. Any thread.
std::string write_sdp_answer(const SdpOffer& offer, const H264Choice& choice,
                             const OpusChoice* audio, const SdpAnswerParams& params);

// ---- WHIP: syncd offers, an SFU answers (RFC 9725 section 4.2) ----

struct SdpOfferParams {
  uint64_t session_id = 0;
  std::string ice_ufrag, ice_pwd;          // ours
  secure::Fingerprint fingerprint;         // our certificate's
  std::vector<std::string> candidate_ips;  // a host candidate each, all on candidate_port
  uint16_t candidate_port = 0;
  uint32_t video_ssrc = 0;
  std::string cname, stream_id, track_id;
  bool audio = false;  // offer an Opus m-line too
  uint32_t audio_ssrc = 0;
  std::string audio_track_id;
  bool audio_stereo = true;
};
inline constexpr uint8_t kOfferH264PayloadType = 102;
inline constexpr uint8_t kOfferOpusPayloadType = 111;

// syncd's offer (CRLF lines): a=group:BUNDLE 0 [1]; m=video 9 UDP/TLS/RTP/SAVPF 102, mid 0,
// sendonly, rtcp-mux, rtcp-rsize, our ice-ufrag/ice-pwd, a=fingerprint:sha-256, a=setup:actpass
// (RFC 8842 section 5.2: the answerer picks the DTLS role), H264/90000 with nack, nack pli, ccm
// fir, packetization-mode=1 profile-level-id=42e01f (constrained baseline, what the encoder
// makes), msid, ssrc cname, a host candidate per address and end-of-candidates; with audio, m=audio
// ... 111 opus/48000/2 the same way (mid 1, fmtp
// minptime=10;useinbandfec=1[;stereo=1;sprop-stereo=1]). Any thread.
std::string write_sdp_offer(const SdpOfferParams& params);

// What the answer to write_sdp_offer lets syncd send.
struct WhipAnswer {
  std::string ice_ufrag, ice_pwd;  // the SFU's
  secure::Fingerprint fingerprint;
  bool dtls_client = false;  // the answer's setup:passive makes us the DTLS client
  bool ice_lite = false;
  uint8_t video_payload_type = 0;  // the answer's for H.264 (normally ours, 102)
  bool audio = false;              // the answer accepted the Opus m-line
  uint8_t audio_payload_type = 0;
  std::vector<SdpCandidate> candidates;  // from every accepted m-line, in order, no duplicates
};

// Reads an SFU's answer to our offer: parse_sdp_description's checks, then a=setup active or
// passive (else kBadSetup), the video m-line (mid 0) accepted (port not 0, direction recvonly or
// sendrecv) with an H264/90000 packetization-mode=1 format (else kNoH264) and rtcp-mux (else
// kNoRtcpMux), and at least one usable candidate (else kNoCandidates). The audio m-line (mid 1),
// when offered, is taken if accepted with opus/48000/2; otherwise syncd sends video only. Pure;
// any thread.
SdpError parse_whip_answer(std::string_view text, bool audio_offered, WhipAnswer& out);

}  // namespace syncd::webrtc
