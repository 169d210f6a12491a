// The SDP core against a Chromium recvonly offer (audio, then video with VP8, VP9, H.264 in four
// profiles and both packetization modes, AV1, RTX, RED, ULPFEC), its exact answer, the H.264
// preference order and each SdpError.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "webrtc/sdp.h"

namespace syncd::webrtc {
namespace {

// What Chromium 156 (Debian 12) wrote for addTransceiver("audio", {direction: "recvonly"}),
// addTransceiver("video", {direction: "recvonly"}) and createOffer(), as it was: transport
// attributes at media level, rtcp-fb before fmtp, RTX after each codec. The answer
// write_sdp_answer gives for it was accepted by that Chromium's setRemoteDescription.
constexpr std::string_view kChromiumOffer =
    "v=0\r\n"
    "o=- 5910087763962331504 2 IN IP4 127.0.0.1\r\n"
    "s=-\r\n"
    "t=0 0\r\n"
    "a=group:BUNDLE 0 1\r\n"
    "a=extmap-allow-mixed\r\n"
    "a=msid-semantic: WMS\r\n"
    "m=audio 9 UDP/TLS/RTP/SAVPF 111 63 9 0 8 13 110 126\r\n"
    "c=IN IP4 0.0.0.0\r\n"
    "a=rtcp:9 IN IP4 0.0.0.0\r\n"
    "a=ice-ufrag:8fhW\r\n"
    "a=ice-pwd:ojPQxoOpey2Zm2BPW8bn5eZy\r\n"
    "a=ice-options:trickle\r\n"
    "a=fingerprint:sha-256 "
    "89:45:37:93:EC:27:94:52:89:F0:5E:77:EE:4A:E8:01:D7:D6:CA:66:62:57:8F:27:40:74:88:9E:59:06:54:"
    "F8\r\n"
    "a=setup:actpass\r\n"
    "a=mid:0\r\n"
    "a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level\r\n"
    "a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time\r\n"
    "a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01\r\n"
    "a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid\r\n"
    "a=recvonly\r\n"
    "a=rtcp-mux\r\n"
    "a=rtcp-rsize\r\n"
    "a=rtcp-xr:rcvr-rtt=all\r\n"
    "a=rtpmap:111 opus/48000/2\r\n"
    "a=rtcp-fb:111 transport-cc\r\n"
    "a=fmtp:111 minptime=10;useinbandfec=1\r\n"
    "a=rtpmap:63 red/48000/2\r\n"
    "a=fmtp:63 111/111\r\n"
    "a=rtpmap:9 G722/8000\r\n"
    "a=rtpmap:0 PCMU/8000\r\n"
    "a=rtpmap:8 PCMA/8000\r\n"
    "a=rtpmap:13 CN/8000\r\n"
    "a=rtpmap:110 telephone-event/48000\r\n"
    "a=rtpmap:126 telephone-event/8000\r\n"
    "m=video 9 UDP/TLS/RTP/SAVPF 96 97 98 99 100 101 35 36 37 38 102 103 104 107 108 109 114 115 "
    "116 117 39 40 41 42 43 44 45 46 47 48 118 119 120 49\r\n"
    "c=IN IP4 0.0.0.0\r\n"
    "a=rtcp:9 IN IP4 0.0.0.0\r\n"
    "a=ice-ufrag:8fhW\r\n"
    "a=ice-pwd:ojPQxoOpey2Zm2BPW8bn5eZy\r\n"
    "a=ice-options:trickle\r\n"
    "a=fingerprint:sha-256 "
    "89:45:37:93:EC:27:94:52:89:F0:5E:77:EE:4A:E8:01:D7:D6:CA:66:62:57:8F:27:40:74:88:9E:59:06:54:"
    "F8\r\n"
    "a=setup:actpass\r\n"
    "a=mid:1\r\n"
    "a=extmap:14 urn:ietf:params:rtp-hdrext:toffset\r\n"
    "a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time\r\n"
    "a=extmap:13 urn:3gpp:video-orientation\r\n"
    "a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01\r\n"
    "a=extmap:5 http://www.webrtc.org/experiments/rtp-hdrext/playout-delay\r\n"
    "a=extmap:6 http://www.webrtc.org/experiments/rtp-hdrext/video-content-type\r\n"
    "a=extmap:7 http://www.webrtc.org/experiments/rtp-hdrext/video-timing\r\n"
    "a=extmap:8 http://www.webrtc.org/experiments/rtp-hdrext/color-space\r\n"
    "a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid\r\n"
    "a=extmap:10 urn:ietf:params:rtp-hdrext:sdes:rtp-stream-id\r\n"
    "a=extmap:11 urn:ietf:params:rtp-hdrext:sdes:repaired-rtp-stream-id\r\n"
    "a=recvonly\r\n"
    "a=rtcp-mux\r\n"
    "a=rtcp-rsize\r\n"
    "a=rtcp-xr:rcvr-rtt=all\r\n"
    "a=rtpmap:96 VP8/90000\r\n"
    "a=rtcp-fb:96 goog-remb\r\n"
    "a=rtcp-fb:96 transport-cc\r\n"
    "a=rtcp-fb:96 ccm fir\r\n"
    "a=rtcp-fb:96 nack\r\n"
    "a=rtcp-fb:96 nack pli\r\n"
    "a=rtpmap:97 rtx/90000\r\n"
    "a=fmtp:97 apt=96\r\n"
    "a=rtpmap:98 VP9/90000\r\n"
    "a=rtcp-fb:98 goog-remb\r\n"
    "a=rtcp-fb:98 transport-cc\r\n"
    "a=rtcp-fb:98 ccm fir\r\n"
    "a=rtcp-fb:98 nack\r\n"
    "a=rtcp-fb:98 nack pli\r\n"
    "a=fmtp:98 profile-id=0\r\n"
    "a=rtpmap:99 rtx/90000\r\n"
    "a=fmtp:99 apt=98\r\n"
    "a=rtpmap:100 VP9/90000\r\n"
    "a=rtcp-fb:100 goog-remb\r\n"
    "a=rtcp-fb:100 transport-cc\r\n"
    "a=rtcp-fb:100 ccm fir\r\n"
    "a=rtcp-fb:100 nack\r\n"
    "a=rtcp-fb:100 nack pli\r\n"
    "a=fmtp:100 profile-id=2\r\n"
    "a=rtpmap:101 rtx/90000\r\n"
    "a=fmtp:101 apt=100\r\n"
    "a=rtpmap:35 VP9/90000\r\n"
    "a=rtcp-fb:35 goog-remb\r\n"
    "a=rtcp-fb:35 transport-cc\r\n"
    "a=rtcp-fb:35 ccm fir\r\n"
    "a=rtcp-fb:35 nack\r\n"
    "a=rtcp-fb:35 nack pli\r\n"
    "a=fmtp:35 profile-id=1\r\n"
    "a=rtpmap:36 rtx/90000\r\n"
    "a=fmtp:36 apt=35\r\n"
    "a=rtpmap:37 VP9/90000\r\n"
    "a=rtcp-fb:37 goog-remb\r\n"
    "a=rtcp-fb:37 transport-cc\r\n"
    "a=rtcp-fb:37 ccm fir\r\n"
    "a=rtcp-fb:37 nack\r\n"
    "a=rtcp-fb:37 nack pli\r\n"
    "a=fmtp:37 profile-id=3\r\n"
    "a=rtpmap:38 rtx/90000\r\n"
    "a=fmtp:38 apt=37\r\n"
    "a=rtpmap:102 H264/90000\r\n"
    "a=rtcp-fb:102 goog-remb\r\n"
    "a=rtcp-fb:102 transport-cc\r\n"
    "a=rtcp-fb:102 ccm fir\r\n"
    "a=rtcp-fb:102 nack\r\n"
    "a=rtcp-fb:102 nack pli\r\n"
    "a=fmtp:102 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42001f\r\n"
    "a=rtpmap:103 rtx/90000\r\n"
    "a=fmtp:103 apt=102\r\n"
    "a=rtpmap:104 H264/90000\r\n"
    "a=rtcp-fb:104 goog-remb\r\n"
    "a=rtcp-fb:104 transport-cc\r\n"
    "a=rtcp-fb:104 ccm fir\r\n"
    "a=rtcp-fb:104 nack\r\n"
    "a=rtcp-fb:104 nack pli\r\n"
    "a=fmtp:104 level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=42001f\r\n"
    "a=rtpmap:107 rtx/90000\r\n"
    "a=fmtp:107 apt=104\r\n"
    "a=rtpmap:108 H264/90000\r\n"
    "a=rtcp-fb:108 goog-remb\r\n"
    "a=rtcp-fb:108 transport-cc\r\n"
    "a=rtcp-fb:108 ccm fir\r\n"
    "a=rtcp-fb:108 nack\r\n"
    "a=rtcp-fb:108 nack pli\r\n"
    "a=fmtp:108 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f\r\n"
    "a=rtpmap:109 rtx/90000\r\n"
    "a=fmtp:109 apt=108\r\n"
    "a=rtpmap:114 H264/90000\r\n"
    "a=rtcp-fb:114 goog-remb\r\n"
    "a=rtcp-fb:114 transport-cc\r\n"
    "a=rtcp-fb:114 ccm fir\r\n"
    "a=rtcp-fb:114 nack\r\n"
    "a=rtcp-fb:114 nack pli\r\n"
    "a=fmtp:114 level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=42e01f\r\n"
    "a=rtpmap:115 rtx/90000\r\n"
    "a=fmtp:115 apt=114\r\n"
    "a=rtpmap:116 H264/90000\r\n"
    "a=rtcp-fb:116 goog-remb\r\n"
    "a=rtcp-fb:116 transport-cc\r\n"
    "a=rtcp-fb:116 ccm fir\r\n"
    "a=rtcp-fb:116 nack\r\n"
    "a=rtcp-fb:116 nack pli\r\n"
    "a=fmtp:116 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=4d001f\r\n"
    "a=rtpmap:117 rtx/90000\r\n"
    "a=fmtp:117 apt=116\r\n"
    "a=rtpmap:39 H264/90000\r\n"
    "a=rtcp-fb:39 goog-remb\r\n"
    "a=rtcp-fb:39 transport-cc\r\n"
    "a=rtcp-fb:39 ccm fir\r\n"
    "a=rtcp-fb:39 nack\r\n"
    "a=rtcp-fb:39 nack pli\r\n"
    "a=fmtp:39 level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=4d001f\r\n"
    "a=rtpmap:40 rtx/90000\r\n"
    "a=fmtp:40 apt=39\r\n"
    "a=rtpmap:41 H264/90000\r\n"
    "a=rtcp-fb:41 goog-remb\r\n"
    "a=rtcp-fb:41 transport-cc\r\n"
    "a=rtcp-fb:41 ccm fir\r\n"
    "a=rtcp-fb:41 nack\r\n"
    "a=rtcp-fb:41 nack pli\r\n"
    "a=fmtp:41 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=f4001f\r\n"
    "a=rtpmap:42 rtx/90000\r\n"
    "a=fmtp:42 apt=41\r\n"
    "a=rtpmap:43 H264/90000\r\n"
    "a=rtcp-fb:43 goog-remb\r\n"
    "a=rtcp-fb:43 transport-cc\r\n"
    "a=rtcp-fb:43 ccm fir\r\n"
    "a=rtcp-fb:43 nack\r\n"
    "a=rtcp-fb:43 nack pli\r\n"
    "a=fmtp:43 level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=f4001f\r\n"
    "a=rtpmap:44 rtx/90000\r\n"
    "a=fmtp:44 apt=43\r\n"
    "a=rtpmap:45 AV1/90000\r\n"
    "a=rtcp-fb:45 goog-remb\r\n"
    "a=rtcp-fb:45 transport-cc\r\n"
    "a=rtcp-fb:45 ccm fir\r\n"
    "a=rtcp-fb:45 nack\r\n"
    "a=rtcp-fb:45 nack pli\r\n"
    "a=fmtp:45 level-idx=5;profile=0;tier=0\r\n"
    "a=rtpmap:46 rtx/90000\r\n"
    "a=fmtp:46 apt=45\r\n"
    "a=rtpmap:47 AV1/90000\r\n"
    "a=rtcp-fb:47 goog-remb\r\n"
    "a=rtcp-fb:47 transport-cc\r\n"
    "a=rtcp-fb:47 ccm fir\r\n"
    "a=rtcp-fb:47 nack\r\n"
    "a=rtcp-fb:47 nack pli\r\n"
    "a=fmtp:47 level-idx=5;profile=1;tier=0\r\n"
    "a=rtpmap:48 rtx/90000\r\n"
    "a=fmtp:48 apt=47\r\n"
    "a=rtpmap:118 red/90000\r\n"
    "a=rtpmap:119 rtx/90000\r\n"
    "a=fmtp:119 apt=118\r\n"
    "a=rtpmap:120 ulpfec/90000\r\n"
    "a=rtpmap:49 flexfec-03/90000\r\n"
    "a=rtcp-fb:49 goog-remb\r\n"
    "a=rtcp-fb:49 transport-cc\r\n"
    "a=fmtp:49 repair-window=10000000\r\n";

// Every occurrence of `from` replaced by `to`.
std::string replaced(std::string_view text, std::string_view from, std::string_view to) {
  std::string out(text);
  for (size_t at = out.find(from); at != std::string::npos; at = out.find(from, at + to.size()))
    out.replace(at, from.size(), to);
  return out;
}

// Every line starting with `prefix` removed.
std::string without_lines(std::string_view text, std::string_view prefix) {
  std::string out;
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string_view line = text.substr(0, end == std::string_view::npos ? text.size() : end + 1);
    if (!line.starts_with(prefix)) out += line;
    text.remove_prefix(line.size());
  }
  return out;
}

std::vector<std::string> lines_of(std::string_view text) {
  std::vector<std::string> lines;
  while (!text.empty()) {
    size_t end = text.find("\r\n");
    EXPECT_NE(end, std::string_view::npos) << "every line ends in CRLF";
    if (end == std::string_view::npos) break;
    lines.emplace_back(text.substr(0, end));
    text.remove_prefix(end + 2);
  }
  return lines;
}

SdpAnswerParams answer_params() {
  SdpAnswerParams p;
  p.session_id = 1234;
  p.ice_ufrag = "sYnC";
  p.ice_pwd = "0123456789abcdefghijklmn";
  for (size_t i = 0; i < p.fingerprint.sha256.size(); ++i)
    p.fingerprint.sha256[i] = static_cast<uint8_t>(0xA0 + i);
  p.candidate_ip = "192.0.2.10";
  p.candidate_port = 50000;
  p.video_ssrc = 0x1234;
  p.cname = "syncd";
  p.stream_id = "stream";
  p.track_id = "video";
  p.audio_ssrc = 0x5678;
  p.audio_track_id = "audio";
  return p;
}

// An offer with one video m-line offering the given H.264 fmtp lines (pt 100 + index).
std::string video_offer(const std::vector<std::string>& fmtps,
                        std::string_view direction = "recvonly") {
  std::string formats, codecs;
  for (size_t i = 0; i < fmtps.size(); ++i) {
    std::string pt = std::to_string(100 + i);
    formats += " " + pt;
    codecs += "a=rtpmap:" + pt + " H264/90000\r\n";
    if (!fmtps[i].empty()) codecs += "a=fmtp:" + pt + " " + fmtps[i] + "\r\n";
  }
  return "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n"
         "a=fingerprint:sha-256 "
         "7B:8B:F0:65:5F:78:E2:51:3B:AC:6F:F3:3F:46:1B:35:DC:B8:5F:64:1A:24:C2:43:F0:A1:58:D0:A1:"
         "2C:19:08\r\n"
         "m=video 9 UDP/TLS/RTP/SAVPF" +
         formats +
         "\r\na=ice-ufrag:abcd\r\na=ice-pwd:0123456789012345678901\r\na=setup:actpass\r\n"
         "a=mid:v\r\na=" +
         std::string(direction) + "\r\na=rtcp-mux\r\n" + codecs;
}

TEST(WebrtcSdp, ChromiumOfferParses) {
  SdpOffer offer;
  ASSERT_EQ(parse_sdp_offer(kChromiumOffer, offer), SdpError::kNone);
  EXPECT_EQ(offer.ice_ufrag, "8fhW");
  EXPECT_EQ(offer.ice_pwd, "ojPQxoOpey2Zm2BPW8bn5eZy");
  EXPECT_EQ(offer.setup, "actpass");
  EXPECT_EQ(offer.fingerprint.sha256[0], 0x89);
  EXPECT_EQ(offer.fingerprint.sha256[31], 0xF8);
  EXPECT_EQ(offer.bundle_mids, (std::vector<std::string>{"0", "1"}));
  ASSERT_EQ(offer.media.size(), 2u);
  const SdpMedia& audio = offer.media[0];
  EXPECT_EQ(audio.kind, "audio");
  EXPECT_EQ(audio.port, 9);
  EXPECT_EQ(audio.protocol, "UDP/TLS/RTP/SAVPF");
  EXPECT_EQ(audio.formats, (std::vector<uint8_t>{111, 63, 9, 0, 8, 13, 110, 126}));
  EXPECT_EQ(audio.mid, "0");
  EXPECT_EQ(audio.direction, SdpDirection::kRecvOnly);
  EXPECT_TRUE(audio.rtcp_mux);
  EXPECT_TRUE(audio.rtcp_rsize);
  ASSERT_NE(audio.codec(111), nullptr);
  EXPECT_EQ(audio.codec(111)->name, "opus");
  EXPECT_EQ(audio.codec(111)->clock_rate, 48000u);
  EXPECT_EQ(audio.codec(111)->channels, 2u);
  EXPECT_EQ(audio.codec(111)->fmtp, "minptime=10;useinbandfec=1");
  EXPECT_EQ(audio.codec(111)->feedback, (std::vector<std::string>{"transport-cc"}));
  EXPECT_EQ(audio.codec(0)->name, "PCMU");
  EXPECT_EQ(audio.codec(0)->channels, 0u);
  EXPECT_EQ(audio.ice_ufrag, "8fhW");
  const SdpMedia& video = offer.media[1];
  EXPECT_EQ(video.kind, "video");
  EXPECT_EQ(video.mid, "1");
  EXPECT_TRUE(video.rtcp_rsize);
  EXPECT_EQ(video.formats.size(), 34u);
  EXPECT_EQ(video.codecs.size(), 34u);
  EXPECT_EQ(video.codec(108)->fmtp,
            "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f");
  EXPECT_EQ(video.codec(108)->feedback.size(), 5u);
}

TEST(WebrtcSdp, ChromiumOfferChoosesConstrainedBaselineMode1) {
  SdpOffer offer;
  ASSERT_EQ(parse_sdp_offer(kChromiumOffer, offer), SdpError::kNone);
  std::optional<H264Choice> choice = choose_h264(offer);
  ASSERT_TRUE(choice);
  EXPECT_EQ(choice->media_index, 1u);
  EXPECT_EQ(choice->payload_type, 108);
  EXPECT_EQ(choice->profile_level_id, "42e01f");
  EXPECT_TRUE(choice->nack);
  EXPECT_TRUE(choice->pli);
  EXPECT_TRUE(choice->fir);
  EXPECT_TRUE(choice->remb);
}

TEST(WebrtcSdp, AnswerToChromiumOfferIsExactly) {
  SdpOffer offer;
  ASSERT_EQ(parse_sdp_offer(kChromiumOffer, offer), SdpError::kNone);
  std::optional<H264Choice> choice = choose_h264(offer);
  ASSERT_TRUE(choice);
  std::string answer = write_sdp_answer(offer, *choice, nullptr, answer_params());
  std::vector<std::string> expected = {
      "v=0",
      "o=- 1234 2 IN IP4 127.0.0.1",
      "s=-",
      "t=0 0",
      "a=group:BUNDLE 1",
      "a=ice-lite",
      "a=msid-semantic:WMS stream",
      "m=audio 0 UDP/TLS/RTP/SAVPF 111",
      "a=mid:0",
      "a=inactive",
      "m=video 9 UDP/TLS/RTP/SAVPF 108",
      "c=IN IP4 0.0.0.0",
      "a=mid:1",
      "a=sendonly",
      "a=rtcp-mux",
      "a=rtcp-rsize",
      "a=ice-ufrag:sYnC",
      "a=ice-pwd:0123456789abcdefghijklmn",
      "a=fingerprint:sha-256 A0:A1:A2:A3:A4:A5:A6:A7:A8:A9:AA:AB:AC:AD:AE:AF:B0:B1:B2:B3:B4:B5:"
      "B6:B7:B8:B9:BA:BB:BC:BD:BE:BF",
      "a=setup:passive",
      "a=rtpmap:108 H264/90000",
      "a=rtcp-fb:108 nack",
      "a=rtcp-fb:108 nack pli",
      "a=rtcp-fb:108 ccm fir",
      "a=rtcp-fb:108 goog-remb",
      "a=fmtp:108 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f",
      "a=msid:stream video",
      "a=ssrc:4660 cname:syncd",
      "a=candidate:1 1 udp 2130706431 192.0.2.10 50000 typ host",
      "a=end-of-candidates",
  };
  EXPECT_EQ(lines_of(answer), expected);

  // Our own answer parses back as a description with the same mid and fingerprint.
  SdpOffer parsed;
  ASSERT_EQ(parse_sdp_description(answer, parsed), SdpError::kNone);
  ASSERT_EQ(parsed.media.size(), 2u);
  EXPECT_EQ(parsed.media[1].mid, "1");
  EXPECT_EQ(parsed.media[0].port, 0);
  EXPECT_EQ(parsed.media[1].direction, SdpDirection::kSendOnly);
  EXPECT_EQ(parsed.fingerprint, answer_params().fingerprint);
  EXPECT_EQ(parsed.setup, "passive");
  EXPECT_EQ(parsed.bundle_mids, (std::vector<std::string>{"1"}));
  EXPECT_TRUE(parsed.ice_lite);
  // The answer is not an offer we would take: sendonly and passive.
  EXPECT_NE(parse_sdp_offer(answer, parsed), SdpError::kNone);
}

TEST(WebrtcSdp, AnswerWithAudioToChromiumOfferIsExactly) {
  SdpOffer offer;
  ASSERT_EQ(parse_sdp_offer(kChromiumOffer, offer), SdpError::kNone);
  std::optional<H264Choice> choice = choose_h264(offer);
  ASSERT_TRUE(choice);
  std::optional<OpusChoice> audio = choose_opus(offer, *choice);
  ASSERT_TRUE(audio);
  EXPECT_EQ(audio->media_index, 0u);
  EXPECT_EQ(audio->payload_type, 111);  // opus, not red (63) nor the 8 kHz codecs
  const std::string answer = write_sdp_answer(offer, *choice, &*audio, answer_params());
  const std::vector<std::string> lines = lines_of(answer);
  const std::vector<std::string> head(lines.begin(), lines.begin() + 27);
  const std::vector<std::string> expected = {
      "v=0",
      "o=- 1234 2 IN IP4 127.0.0.1",
      "s=-",
      "t=0 0",
      "a=group:BUNDLE 0 1",
      "a=ice-lite",
      "a=msid-semantic:WMS stream",
      "m=audio 9 UDP/TLS/RTP/SAVPF 111",
      "c=IN IP4 0.0.0.0",
      "a=mid:0",
      "a=sendonly",
      "a=rtcp-mux",
      "a=rtcp-rsize",
      "a=ice-ufrag:sYnC",
      "a=ice-pwd:0123456789abcdefghijklmn",
      "a=fingerprint:sha-256 A0:A1:A2:A3:A4:A5:A6:A7:A8:A9:AA:AB:AC:AD:AE:AF:B0:B1:B2:B3:B4:B5:"
      "B6:B7:B8:B9:BA:BB:BC:BD:BE:BF",
      "a=setup:passive",
      "a=rtpmap:111 opus/48000/2",
      "a=fmtp:111 minptime=10;useinbandfec=1;stereo=1;sprop-stereo=1",
      "a=msid:stream audio",
      "a=ssrc:22136 cname:syncd",
      "a=candidate:1 1 udp 2130706431 192.0.2.10 50000 typ host",
      "a=end-of-candidates",
      "m=video 9 UDP/TLS/RTP/SAVPF 108",
      "c=IN IP4 0.0.0.0",
      "a=mid:1",
      "a=sendonly",
  };
  EXPECT_EQ(head, expected);
  // The video m-line is the same as without audio.
  const std::string video_only = write_sdp_answer(offer, *choice, nullptr, answer_params());
  EXPECT_EQ(answer.substr(answer.find("m=video")), video_only.substr(video_only.find("m=video")));

  SdpOffer parsed;
  ASSERT_EQ(parse_sdp_description(answer, parsed), SdpError::kNone);
  EXPECT_EQ(parsed.bundle_mids, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(parsed.media[0].direction, SdpDirection::kSendOnly);
  EXPECT_EQ(parsed.media[0].codec(111)->fmtp, "minptime=10;useinbandfec=1;stereo=1;sprop-stereo=1");

  // Mono: no stereo parameters.
  SdpAnswerParams mono = answer_params();
  mono.audio_stereo = false;
  EXPECT_NE(write_sdp_answer(offer, *choice, &*audio, mono)
                .find("a=fmtp:111 minptime=10;useinbandfec=1\r\n"),
            std::string::npos);
}

TEST(WebrtcSdp, OpusOnlyWhereTheVideoIsBundledAndTheBrowserReceives) {
  SdpOffer offer;
  const std::string ok(kChromiumOffer);
  auto audio_of = [&offer](const std::string& text) -> std::optional<OpusChoice> {
    if (parse_sdp_offer(text, offer) != SdpError::kNone) return std::nullopt;
    return choose_opus(offer, *choose_h264(offer));
  };
  ASSERT_TRUE(audio_of(ok));
  // An audio-less offer (video only): nothing to choose.
  EXPECT_FALSE(audio_of(video_offer({"packetization-mode=1"})));
  // The browser only sends audio (the first a=recvonly is the audio m-line's): nothing to play.
  std::string send_only = ok;
  send_only.replace(send_only.find("a=recvonly"), 10, "a=sendonly");
  EXPECT_FALSE(audio_of(send_only));
  // Not in the video's BUNDLE group: it would need a transport of its own.
  EXPECT_FALSE(audio_of(replaced(ok, "a=group:BUNDLE 0 1", "a=group:BUNDLE 1")));
  // No opus/48000/2 (mono opus is not RFC 7587's form; PCMU is not offered by syncd).
  EXPECT_FALSE(audio_of(replaced(ok, "a=rtpmap:111 opus/48000/2", "a=rtpmap:111 opus/48000")));
  // Rejected by the browser itself (port 0, not bundle-only).
  EXPECT_FALSE(audio_of(replaced(ok, "m=audio 9 ", "m=audio 0 ")));
  // Upper-case codec names are the same codec (RFC 8866 6.6).
  EXPECT_TRUE(audio_of(replaced(ok, "a=rtpmap:111 opus/48000/2", "a=rtpmap:111 OPUS/48000/2")));
}

TEST(WebrtcSdp, LineFeedOnlyOfferParsesTheSame) {
  SdpOffer crlf, lf;
  ASSERT_EQ(parse_sdp_offer(kChromiumOffer, crlf), SdpError::kNone);
  ASSERT_EQ(parse_sdp_offer(replaced(kChromiumOffer, "\r\n", "\n"), lf), SdpError::kNone);
  EXPECT_EQ(choose_h264(lf)->payload_type, 108);
  EXPECT_EQ(lf.media[1].codecs.size(), crlf.media[1].codecs.size());
}

TEST(WebrtcSdp, H264PreferenceOrder) {
  auto chosen = [](const std::vector<std::string>& fmtps) -> std::string {
    SdpOffer offer;
    if (parse_sdp_offer(video_offer(fmtps), offer) != SdpError::kNone) return "refused";
    auto choice = choose_h264(offer);
    return std::to_string(choice->payload_type) + " " + choice->profile_level_id;
  };
  const std::string high = "packetization-mode=1;profile-level-id=64001f";
  const std::string main = "packetization-mode=1;profile-level-id=4d001f";
  const std::string baseline = "packetization-mode=1;profile-level-id=42001f";
  const std::string cb = "packetization-mode=1;profile-level-id=42E01F";
  const std::string other42 = "packetization-mode=1;profile-level-id=42c015";
  EXPECT_EQ(chosen({high, main, baseline, cb}), "103 42e01f");
  EXPECT_EQ(chosen({high, main, baseline}), "102 42001f");
  EXPECT_EQ(chosen({high, main, other42}), "102 42c015");
  EXPECT_EQ(chosen({high, main}), "101 4d001f");
  EXPECT_EQ(chosen({high}), "100 64001f");
  EXPECT_EQ(chosen({high, high}), "100 64001f");  // equal rank: the first in m-line order
  // RFC 6184 section 8.1: no profile-level-id means 420010.
  EXPECT_EQ(chosen({"packetization-mode=1"}), "100 420010");
  EXPECT_EQ(chosen({" profile-level-id=42e01f ; packetization-mode=1 "}), "100 42e01f");
  // Not offered in a way we can send.
  EXPECT_EQ(chosen({"packetization-mode=0;profile-level-id=42e01f"}), "refused");
  EXPECT_EQ(chosen({"profile-level-id=42e01f"}), "refused");
  EXPECT_EQ(chosen({""}), "refused");
  EXPECT_EQ(chosen({"packetization-mode=1;profile-level-id=f4001f"}), "refused");
  EXPECT_EQ(chosen({"packetization-mode=1;profile-level-id=42e0"}), "refused");
}

TEST(WebrtcSdp, FeedbackWildcardAndOnlyOffered) {
  std::string offer_text = video_offer({"packetization-mode=1;profile-level-id=42e01f"}) +
                           "a=rtcp-fb:* nack\r\na=rtcp-fb:100 ccm fir\r\n";
  SdpOffer offer;
  ASSERT_EQ(parse_sdp_offer(offer_text, offer), SdpError::kNone);
  auto choice = choose_h264(offer);
  ASSERT_TRUE(choice);
  EXPECT_TRUE(choice->nack);
  EXPECT_TRUE(choice->fir);
  EXPECT_FALSE(choice->pli);
  EXPECT_FALSE(choice->remb);
  std::string answer = write_sdp_answer(offer, *choice, nullptr, answer_params());
  EXPECT_NE(answer.find("a=rtcp-fb:100 nack\r\na=rtcp-fb:100 ccm fir\r\na=fmtp:100 "),
            std::string::npos);
  EXPECT_EQ(answer.find("a=rtcp-rsize"), std::string::npos);  // not offered
}

TEST(WebrtcSdp, FeedbackPerCodecIsBounded) {
  std::string text = video_offer({"packetization-mode=1"});
  for (int i = 0; i < 40; ++i) text += "a=rtcp-fb:100 x" + std::to_string(i) + "\r\n";
  for (int i = 0; i < 1000; ++i) text += "a=rtcp-fb:* y\r\n";
  text += "a=rtcp-fb:100 nack\r\n";
  SdpOffer offer;
  ASSERT_EQ(parse_sdp_offer(text, offer), SdpError::kNone);
  EXPECT_EQ(offer.media[0].codec(100)->feedback.size(), 32u);
  EXPECT_FALSE(choose_h264(offer)->nack);  // the 42nd value for the codec is not kept
}

TEST(WebrtcSdp, SessionLevelTransportAndOtherMedia) {
  // Firefox-like: fingerprint and credentials at session level, a data channel and an audio
  // m-line around the video one, which is sendrecv.
  std::string text =
      "v=0\r\no=mozilla...THIS_IS_SDPARTA-99.0 1 0 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\n"
      "a=fingerprint:sha-1 00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33\r\n"
      "a=fingerprint:sha-256 "
      "7B:8B:F0:65:5F:78:E2:51:3B:AC:6F:F3:3F:46:1B:35:DC:B8:5F:64:1A:24:C2:43:F0:A1:58:D0:A1:2C:"
      "19:08\r\n"
      "a=group:BUNDLE a v d\r\na=ice-options:trickle\r\na=msid-semantic:WMS *\r\n"
      "a=ice-ufrag:f00d\r\na=ice-pwd:abcdefghijklmnopqrstuvwxyz\r\na=setup:active\r\n"
      "m=audio 9 UDP/TLS/RTP/SAVPF 109\r\nc=IN IP4 0.0.0.0\r\na=mid:a\r\na=recvonly\r\n"
      "a=rtcp-mux\r\na=rtpmap:109 opus/48000/2\r\n"
      "m=video 9 UDP/TLS/RTP/SAVPF 126 97\r\nc=IN IP4 0.0.0.0\r\na=mid:v\r\na=sendrecv\r\n"
      "a=rtcp-mux\r\na=rtpmap:126 H264/90000\r\n"
      "a=fmtp:126 profile-level-id=42e01f;level-asymmetry-allowed=1;packetization-mode=1\r\n"
      "a=rtcp-fb:126 nack\r\na=rtcp-fb:126 nack pli\r\na=rtpmap:97 H264/90000\r\n"
      "a=fmtp:97 profile-level-id=42e01f;level-asymmetry-allowed=1\r\n"
      "m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\nc=IN IP4 0.0.0.0\r\na=mid:d\r\n"
      "a=sctp-port:5000\r\n";
  SdpOffer offer;
  ASSERT_EQ(parse_sdp_offer(text, offer), SdpError::kNone);
  EXPECT_EQ(offer.ice_ufrag, "f00d");
  EXPECT_EQ(offer.setup, "active");
  EXPECT_EQ(offer.fingerprint.sha256[0], 0x7B);
  EXPECT_TRUE(offer.media[0].ice_ufrag.empty());
  EXPECT_TRUE(offer.media[2].formats.empty());
  EXPECT_EQ(offer.media[2].format_tokens, (std::vector<std::string>{"webrtc-datachannel"}));
  auto choice = choose_h264(offer);
  ASSERT_TRUE(choice);
  EXPECT_EQ(choice->media_index, 1u);
  EXPECT_EQ(choice->payload_type, 126);
  EXPECT_TRUE(choice->nack && choice->pli);
  EXPECT_FALSE(choice->fir || choice->remb);
  std::vector<std::string> lines =
      lines_of(write_sdp_answer(offer, *choice, nullptr, answer_params()));
  ASSERT_GE(lines.size(), 14u);
  EXPECT_EQ(lines[4], "a=group:BUNDLE v");
  EXPECT_EQ(lines[7], "m=audio 0 UDP/TLS/RTP/SAVPF 109");
  EXPECT_EQ(lines[10], "m=video 9 UDP/TLS/RTP/SAVPF 126");
  EXPECT_EQ(lines[lines.size() - 3], "m=application 0 UDP/DTLS/SCTP webrtc-datachannel");
  EXPECT_EQ(lines[lines.size() - 2], "a=mid:d");
  EXPECT_EQ(lines[lines.size() - 1], "a=inactive");

  // Media-level values win over the session's.
  SdpOffer media_level;
  ASSERT_EQ(parse_sdp_offer(replaced(text, "a=mid:v\r\n", "a=mid:v\r\na=ice-ufrag:m3d1\r\n"),
                            media_level),
            SdpError::kNone);
  EXPECT_EQ(media_level.ice_ufrag, "m3d1");
  EXPECT_EQ(media_level.media[1].ice_ufrag, "m3d1");
}

// ---- WHIP: our offer, an SFU's answer ----

SdpOfferParams offer_params(bool audio) {
  SdpOfferParams p;
  p.session_id = 99;
  p.ice_ufrag = "wHiP";
  p.ice_pwd = "0123456789abcdefghijklmn";
  for (size_t i = 0; i < p.fingerprint.sha256.size(); ++i)
    p.fingerprint.sha256[i] = static_cast<uint8_t>(0x10 + i);
  p.candidate_ips = {"192.0.2.7", "127.0.0.1"};
  p.candidate_port = 40000;
  p.video_ssrc = 0x1111;
  p.cname = "syncd";
  p.stream_id = "stream";
  p.track_id = "video";
  p.audio = audio;
  p.audio_ssrc = 0x2222;
  p.audio_track_id = "audio";
  return p;
}

TEST(WebrtcSdp, WhipOfferParsesBackAsSendOnlyActpass) {
  const std::string text = write_sdp_offer(offer_params(true));
  SdpOffer parsed;
  ASSERT_EQ(parse_sdp_description(text, parsed), SdpError::kNone);
  EXPECT_EQ(parsed.bundle_mids, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(parsed.setup, "actpass");
  EXPECT_EQ(parsed.ice_ufrag, "wHiP");
  ASSERT_EQ(parsed.media.size(), 2u);
  EXPECT_EQ(parsed.media[0].kind, "video");
  EXPECT_EQ(parsed.media[0].direction, SdpDirection::kSendOnly);
  EXPECT_EQ(parsed.media[0].codec(102)->fmtp,
            "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f");
  EXPECT_EQ(parsed.media[0].codec(102)->feedback,
            (std::vector<std::string>{"nack", "nack pli", "ccm fir"}));
  ASSERT_EQ(parsed.media[0].candidates.size(), 2u);
  EXPECT_GT(parsed.media[0].candidates[0].priority, parsed.media[0].candidates[1].priority);
  EXPECT_EQ(parsed.media[0].candidates[1].address, "127.0.0.1");
  EXPECT_EQ(parsed.media[0].candidates[0].address, "192.0.2.7");
  EXPECT_EQ(parsed.media[0].candidates[0].port, 40000);
  EXPECT_EQ(parsed.media[0].candidates[0].type, "host");
  EXPECT_EQ(parsed.media[1].codec(111)->name, "opus");
  EXPECT_EQ(parsed.media[1].direction, SdpDirection::kSendOnly);
  // Without audio: one m-line.
  ASSERT_EQ(parse_sdp_description(write_sdp_offer(offer_params(false)), parsed), SdpError::kNone);
  EXPECT_EQ(parsed.media.size(), 1u);
}

// An SFU's answer as a full ICE agent writes it (werift's shape: candidates per m-line, host and
// a TCP one and an mDNS name we skip, setup:active).
constexpr std::string_view kWhipAnswer =
    "v=0\r\no=- 1 0 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0 1\r\n"
    "a=msid-semantic:WMS *\r\n"
    "m=video 9 UDP/TLS/RTP/SAVPF 102\r\nc=IN IP4 0.0.0.0\r\na=ice-ufrag:SfUu\r\n"
    "a=ice-pwd:abcdefghijklmnopqrstuvwx\r\na=fingerprint:sha-256 "
    "7B:8B:F0:65:5F:78:E2:51:3B:AC:6F:F3:3F:46:1B:35:DC:B8:5F:64:1A:24:C2:43:F0:A1:58:D0:A1:2C:"
    "19:08\r\na=setup:active\r\na=mid:0\r\na=recvonly\r\na=rtcp-mux\r\n"
    "a=rtpmap:102 H264/90000\r\na=rtcp-fb:102 nack\r\na=rtcp-fb:102 nack pli\r\n"
    "a=fmtp:102 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f\r\n"
    "a=candidate:1 1 udp 2130706431 127.0.0.1 50001 typ host\r\n"
    "a=candidate:2 1 tcp 1518280447 127.0.0.1 9 typ host tcptype active\r\n"
    "a=candidate:3 1 udp 2122260223 4b3c0c1d-abcd.local 50002 typ host\r\n"
    "a=candidate:4 2 udp 2130706430 127.0.0.1 50003 typ host\r\n"
    "a=end-of-candidates\r\n"
    "m=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\na=mid:1\r\na=recvonly\r\n"
    "a=rtcp-mux\r\na=rtpmap:111 opus/48000/2\r\n"
    "a=candidate:1 1 udp 2130706431 127.0.0.1 50001 typ host\r\n"
    "a=candidate:5 1 udp 1694498815 203.0.113.9 61000 typ srflx raddr 0.0.0.0 rport 0\r\n";

TEST(WebrtcSdp, WhipAnswerGivesRolesPayloadTypesAndCandidates) {
  WhipAnswer a;
  ASSERT_EQ(parse_whip_answer(kWhipAnswer, true, a), SdpError::kNone);
  EXPECT_EQ(a.ice_ufrag, "SfUu");
  EXPECT_EQ(a.ice_pwd, "abcdefghijklmnopqrstuvwx");
  EXPECT_EQ(a.fingerprint.sha256[0], 0x7B);
  EXPECT_FALSE(a.dtls_client);  // the SFU is active: we are the DTLS server
  EXPECT_EQ(a.video_payload_type, 102);
  EXPECT_TRUE(a.audio);
  EXPECT_EQ(a.audio_payload_type, 111);
  // The UDP host candidate once, the srflx one; not TCP, mDNS or component 2.
  ASSERT_EQ(a.candidates.size(), 2u);
  EXPECT_EQ(a.candidates[0].address, "127.0.0.1");
  EXPECT_EQ(a.candidates[0].port, 50001);
  EXPECT_EQ(a.candidates[1].address, "203.0.113.9");
  EXPECT_EQ(a.candidates[1].type, "srflx");

  const std::string ok(kWhipAnswer);
  EXPECT_TRUE(parse_whip_answer(replaced(ok, "a=setup:active", "a=setup:passive"), true, a) ==
                  SdpError::kNone &&
              a.dtls_client);
  EXPECT_EQ(parse_whip_answer(replaced(ok, "a=setup:active", "a=setup:actpass"), true, a),
            SdpError::kBadSetup);
  EXPECT_EQ(parse_whip_answer(replaced(ok, "m=video 9 ", "m=video 0 "), true, a),
            SdpError::kNoH264);
  EXPECT_EQ(
      parse_whip_answer(replaced(ok, "packetization-mode=1", "packetization-mode=0"), true, a),
      SdpError::kNoH264);
  EXPECT_EQ(parse_whip_answer(without_lines(ok, "a=candidate:1 "), false, a),
            SdpError::kNoCandidates);  // audio not offered: its srflx candidate is not ours
  // The audio refused by the SFU: video only.
  ASSERT_EQ(parse_whip_answer(replaced(ok, "m=audio 9 ", "m=audio 0 "), true, a), SdpError::kNone);
  EXPECT_FALSE(a.audio);
  ASSERT_EQ(parse_whip_answer(ok, false, a), SdpError::kNone);
  EXPECT_FALSE(a.audio);
  EXPECT_EQ(to_string(SdpError::kNoCandidates), std::string("no_candidates"));
}

SdpError parse(std::string_view text) {
  SdpOffer offer;
  return parse_sdp_offer(text, offer);
}

TEST(WebrtcSdp, EachErrorIsReachable) {
  const std::string ok(kChromiumOffer);
  ASSERT_EQ(parse(ok), SdpError::kNone);
  EXPECT_EQ(parse(ok + std::string(kMaxSdpBytes - ok.size() + 1, '\n')), SdpError::kTooLarge);
  EXPECT_EQ(parse(ok + std::string(kMaxSdpBytes - ok.size(), '\n')), SdpError::kNone);
  EXPECT_EQ(parse(""), SdpError::kNotSdp);
  EXPECT_EQ(parse("HTTP/1.1 200 OK\r\n"), SdpError::kNotSdp);
  EXPECT_EQ(parse("v=1\r\n"), SdpError::kNotSdp);
  EXPECT_EQ(parse(replaced(ok, "s=-\r\n", "s=-\r\nnot a line\r\n")), SdpError::kMalformedLine);
  EXPECT_EQ(parse(replaced(ok, "s=-\r\n", "s=-\r\nX=upper\r\n")), SdpError::kMalformedLine);
  EXPECT_EQ(parse(replaced(ok, "a=mid:1", "a=mid:1\rInjected")), SdpError::kMalformedLine);
  EXPECT_EQ(parse(replaced(ok, "a=mid:1", "a=mid:1 2")), SdpError::kMalformedLine);
  EXPECT_EQ(parse(replaced(ok, "a=ice-ufrag:8fhW", "a=ice-ufrag:8fh")), SdpError::kMalformedLine);
  EXPECT_EQ(parse(replaced(ok, "a=ice-ufrag:8fhW", "a=ice-ufrag:8fhW!")), SdpError::kMalformedLine);
  EXPECT_EQ(parse(replaced(ok, "opus/48000/2", "opus/48k/2")), SdpError::kMalformedLine);
  EXPECT_EQ(parse(replaced(ok, "a=rtpmap:111 ", "a=rtpmap:128 ")), SdpError::kMalformedLine);
  EXPECT_EQ(parse(replaced(ok, "m=audio 9 ", "m=audio 70000 ")), SdpError::kMalformedLine);
  EXPECT_EQ(parse(replaced(ok, "SAVPF 111 63 9 0 8 13 110 126", "SAVPF")),
            SdpError::kMalformedLine);
  EXPECT_EQ(parse(replaced(ok, "SAVPF 111 ", "SAVPF  111 ")), SdpError::kMalformedLine);
  EXPECT_EQ(parse("v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n"), SdpError::kNoMedia);
  {
    std::string many = ok;
    for (size_t i = 0; i < kMaxSdpMedia - 1; ++i)
      many += "m=audio 0 UDP/TLS/RTP/SAVPF 0\r\na=mid:x" + std::to_string(i) + "\r\n";
    EXPECT_EQ(parse(many), SdpError::kTooManyMedia);
    many = ok;
    for (size_t i = 0; i < kMaxSdpMedia - 2; ++i) many += "m=audio 0 UDP/TLS/RTP/SAVPF 0\r\n";
    EXPECT_EQ(parse(many), SdpError::kNone);
  }
  EXPECT_EQ(parse(without_lines(ok, "a=ice-pwd:")), SdpError::kNoIceCredentials);
  EXPECT_EQ(parse(without_lines(ok, "a=ice-ufrag:")), SdpError::kNoIceCredentials);
  EXPECT_EQ(parse(without_lines(ok, "a=fingerprint:")), SdpError::kNoFingerprint);
  EXPECT_EQ(parse(replaced(ok, "a=fingerprint:sha-256 89:45", "a=fingerprint:sha-256 89:4G")),
            SdpError::kBadFingerprint);
  EXPECT_EQ(parse(replaced(ok, "a=fingerprint:sha-256 89:45:", "a=fingerprint:sha-256 45:")),
            SdpError::kBadFingerprint);
  EXPECT_EQ(parse(replaced(ok, "a=fingerprint:sha-256 ", "a=fingerprint:sha-512 ")),
            SdpError::kBadFingerprint);
  EXPECT_EQ(parse(replaced(ok, "a=setup:actpass", "a=setup:passive")), SdpError::kBadSetup);
  EXPECT_EQ(parse(replaced(ok, "a=setup:actpass", "a=setup:holdconn")), SdpError::kBadSetup);
  EXPECT_EQ(parse(without_lines(ok, "a=setup:")), SdpError::kBadSetup);
  EXPECT_EQ(parse(replaced(ok, "a=setup:actpass", "a=setup:active")), SdpError::kNone);
  EXPECT_EQ(parse(without_lines(ok, "a=rtcp-mux")), SdpError::kNoRtcpMux);
  EXPECT_EQ(parse(replaced(ok, "H264/90000", "H265/90000")), SdpError::kNoH264);
  EXPECT_EQ(parse(replaced(ok, "packetization-mode=1", "packetization-mode=0")), SdpError::kNoH264);
  EXPECT_EQ(parse(replaced(ok, "a=recvonly", "a=sendonly")), SdpError::kNoH264);
  EXPECT_EQ(parse(replaced(ok, "a=recvonly", "a=inactive")), SdpError::kNoH264);
  EXPECT_EQ(parse(replaced(ok, "m=video 9 ", "m=video 0 ")), SdpError::kNoH264);
  EXPECT_EQ(parse(replaced(ok, "m=video 9 UDP/TLS/RTP/SAVPF", "m=video 9 RTP/AVP")),
            SdpError::kNoH264);
  EXPECT_EQ(parse(without_lines(ok, "a=mid:1")), SdpError::kNoH264);
  EXPECT_EQ(parse(video_offer({"packetization-mode=1"}, "sendrecv")), SdpError::kNone);
}

TEST(WebrtcSdp, ErrorNames) {
  EXPECT_STREQ(to_string(SdpError::kNoH264), "no_h264");
  EXPECT_STREQ(to_string(SdpError::kNoIceCredentials), "no_ice_credentials");
  EXPECT_STREQ(to_string(SdpError::kTooManyMedia), "too_many_media");
  EXPECT_STREQ(to_string(SdpError::kNoRtcpMux), "no_rtcp_mux");
}

}  // namespace
}  // namespace syncd::webrtc
