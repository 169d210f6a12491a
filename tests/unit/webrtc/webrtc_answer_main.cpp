// webrtc_answer [--audio]: reads an SDP offer on stdin and prints the answer syncd's SDP core
// writes for it (fixed ICE credentials, fingerprint, candidate 127.0.0.1:9 and SSRCs; with --audio
// also the Opus m-line, as syncd with an audio source answers), or "refused: <reason>" on stderr
// with exit status 2. Used by tests/browser/browser/whep_sdp.test.js to hand a real
// Chromium's offer to the core and the core's answer back to Chromium.
#include <cstdint>
#include <iostream>
#include <iterator>
#include <string>
#include <string_view>

#include "webrtc/sdp.h"

int main(int argc, char** argv) {
  using namespace syncd::webrtc;
  std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  SdpOffer offer;
  if (SdpError e = parse_sdp_offer(text, offer); e != SdpError::kNone) {
    std::cerr << "refused: " << to_string(e) << "\n";
    return 2;
  }
  std::optional<H264Choice> choice = choose_h264(offer);
  const bool with_audio = argc > 1 && std::string_view(argv[1]) == "--audio";
  std::optional<OpusChoice> audio = with_audio ? choose_opus(offer, *choice) : std::nullopt;
  SdpAnswerParams params;
  params.session_id = 1;
  params.ice_ufrag = "sYnC";
  params.ice_pwd = "0123456789abcdefghijklmn";
  for (size_t i = 0; i < params.fingerprint.sha256.size(); ++i)
    params.fingerprint.sha256[i] = static_cast<uint8_t>(i * 7 + 3);
  params.candidate_ip = "127.0.0.1";
  params.candidate_port = 9;
  params.video_ssrc = 0x5eed;
  params.cname = "syncd";
  params.stream_id = "stream";
  params.track_id = "video";
  params.audio_ssrc = 0xa0d1;
  params.audio_track_id = "audio";
  std::cerr << "chose payload type " << int(choice->payload_type) << " profile-level-id "
            << choice->profile_level_id << "\n";
  if (audio) std::cerr << "chose audio payload type " << int(audio->payload_type) << "\n";
  std::cout << write_sdp_answer(offer, *choice, audio ? &*audio : nullptr, params);
  return 0;
}
