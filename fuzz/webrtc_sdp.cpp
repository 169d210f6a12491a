// libFuzzer target for the SDP core (src/webrtc/sdp.h): any text through parse_sdp_offer and
// parse_sdp_description; for an accepted offer, choose_h264 must have a value, and the answer
// written for it (with the Opus m-line choose_opus picks, when it picks one) must parse back as a
// description with the chosen mids bundled, our fingerprint, passive setup and sendonly direction.
//
// Input: the whole input is the SDP text, copied into its own exact-size allocation so a read
// past it trips ASan.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "webrtc/sdp.h"

namespace {

using namespace syncd::webrtc;

SdpAnswerParams make_params() {
  SdpAnswerParams p;
  p.session_id = 0x0123456789abcdefull;
  p.ice_ufrag = "fUzZ";
  p.ice_pwd = "0123456789abcdefghijkl";
  for (size_t i = 0; i < p.fingerprint.sha256.size(); ++i)
    p.fingerprint.sha256[i] = static_cast<uint8_t>(i * 37 + 1);
  p.candidate_ip = "2001:db8::1";
  p.candidate_port = 40000;
  p.video_ssrc = 0xdeadbeef;
  p.cname = "fuzz";
  p.stream_id = "stream";
  p.track_id = "video";
  p.audio_ssrc = 0xfeedface;
  p.audio_track_id = "audio";
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const SdpAnswerParams params = make_params();
  std::unique_ptr<char[]> copy(new char[size ? size : 1]);
  if (size) std::memcpy(copy.get(), data, size);
  std::string_view text(copy.get(), size);

  SdpOffer description;
  SdpError structural = parse_sdp_description(text, description);
  SdpOffer offer;
  SdpError e = parse_sdp_offer(text, offer);
  FUZZ_CHECK(to_string(e)[0] != '\0');
  // An offer is a description first: whatever the structure refuses, the offer refuses the same.
  if (structural != SdpError::kNone) FUZZ_CHECK(e == structural);
  if (e != SdpError::kNone) {
    if (structural == SdpError::kNone) (void)choose_h264(description);
    return 0;
  }
  FUZZ_CHECK(structural == SdpError::kNone);
  FUZZ_CHECK(!offer.media.empty() && offer.media.size() <= kMaxSdpMedia);
  FUZZ_CHECK(offer.setup == "actpass" || offer.setup == "active");
  std::optional<H264Choice> choice = choose_h264(offer);
  FUZZ_CHECK(choice.has_value());
  FUZZ_CHECK(choice->media_index < offer.media.size());
  const SdpMedia& chosen = offer.media[choice->media_index];
  FUZZ_CHECK(chosen.kind == "video" && !chosen.mid.empty() && chosen.rtcp_mux);
  FUZZ_CHECK(chosen.codec(choice->payload_type) != nullptr);
  FUZZ_CHECK(choice->profile_level_id.size() == 6);

  std::optional<OpusChoice> audio = choose_opus(offer, *choice);
  if (audio) {
    FUZZ_CHECK(audio->media_index < offer.media.size() &&
               audio->media_index != choice->media_index);
    const SdpMedia& m = offer.media[audio->media_index];
    FUZZ_CHECK(m.kind == "audio" && !m.mid.empty() && m.rtcp_mux);
    FUZZ_CHECK(m.codec(audio->payload_type) != nullptr);
  }
  std::string answer = write_sdp_answer(offer, *choice, audio ? &*audio : nullptr, params);
  // The answer echoes the offer's kinds, protocols, first formats and mids and adds under a
  // kilobyte of its own; only an offer near kMaxSdpBytes can make it too large to re-parse.
  if (answer.size() > kMaxSdpBytes) {
    FUZZ_CHECK(answer.size() <= text.size() + 4096);
    return 0;
  }
  SdpOffer parsed;
  FUZZ_CHECK(parse_sdp_description(answer, parsed) == SdpError::kNone);
  FUZZ_CHECK(parsed.media.size() == offer.media.size());
  FUZZ_CHECK(parsed.fingerprint == params.fingerprint);
  FUZZ_CHECK(parsed.setup == "passive");
  FUZZ_CHECK(parsed.ice_ufrag == params.ice_ufrag && parsed.ice_pwd == params.ice_pwd);
  FUZZ_CHECK(parsed.bundle_mids.size() == (audio ? 2u : 1u));
  FUZZ_CHECK(std::find(parsed.bundle_mids.begin(), parsed.bundle_mids.end(), chosen.mid) !=
             parsed.bundle_mids.end());
  const SdpMedia& answered = parsed.media[choice->media_index];
  FUZZ_CHECK(answered.mid == chosen.mid);
  FUZZ_CHECK(answered.direction == SdpDirection::kSendOnly);
  FUZZ_CHECK(answered.formats.size() == 1 && answered.formats[0] == choice->payload_type);
  for (size_t i = 0; i < parsed.media.size(); ++i) {
    FUZZ_CHECK(parsed.media[i].kind == offer.media[i].kind);
    FUZZ_CHECK(parsed.media[i].mid == offer.media[i].mid);
    if (audio && i == audio->media_index) {
      FUZZ_CHECK(parsed.media[i].port == 9);
      FUZZ_CHECK(parsed.media[i].direction == SdpDirection::kSendOnly);
      FUZZ_CHECK(parsed.media[i].formats.size() == 1 &&
                 parsed.media[i].formats[0] == audio->payload_type);
    } else if (i != choice->media_index) {
      FUZZ_CHECK(parsed.media[i].port == 0);
      FUZZ_CHECK(parsed.media[i].direction == SdpDirection::kInactive);
    }
  }
  return 0;
}
