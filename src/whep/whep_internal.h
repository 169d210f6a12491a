// WhepService's private parts, shared by whep_service.cpp (viewers) and whip_push.cpp (the WHIP
// push): an egress, and the push's state. Thread: the main loop thread.
#pragma once

#include <uv.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "egress/egress_publisher.h"
#include "net/http_client/http_response.h"
#include "transport/transport_thread.h"
#include "whep/whep_ids.h"
#include "whep/whep_service.h"

namespace syncd::whep {

// The WHIP push's egress is kept under this prefix and its stream's name; viewers' under the name.
inline constexpr std::string_view kWhipKeyPrefix = "whip:";

struct WhepService::Egress {
  WhepService* service = nullptr;
  std::string stream;
  std::unique_ptr<transport::TransportThread> thread;
  WhepTransport* transport = nullptr;            // owned by the thread
  egress::EgressPublisher* publisher = nullptr;  // owned by the registry
  size_t sessions = 0;                           // live ones
  bool audio = false;                            // its transport encodes the audio tap
  bool audio_stereo = false;
};

// A new session's own identifiers, the same for a viewer's and for the WHIP push: its id, our
// ICE credentials (RFC 8839 5.4: ufrag 8, password 24 ice-chars), distinct video and audio SSRCs,
// and its figures.
inline std::unique_ptr<WhepSessionSetup> new_session_setup() {
  auto setup = std::make_unique<WhepSessionSetup>();
  setup->id = random_u64();
  setup->local_ufrag = random_ice_chars(8);
  setup->local_password = random_ice_chars(24);
  setup->ssrc = uint32_t(random_u64());
  do setup->audio_ssrc = uint32_t(random_u64());
  while (setup->audio_ssrc == setup->ssrc);
  setup->stats = std::make_shared<WhepSessionStats>();
  return setup;
}

inline constexpr uint64_t kFirstBackoffNs = 2'000'000'000ull;

enum class WhipState : uint8_t { kWaitingForStream, kPosting, kLive, kBackoff, kStopped };

inline const char* whip_state_name(WhipState s) {
  switch (s) {
    case WhipState::kWaitingForStream:
      return "waiting_for_stream";
    case WhipState::kPosting:
      return "posting";
    case WhipState::kLive:
      return "live";
    case WhipState::kBackoff:
      return "backoff";
    case WhipState::kStopped:
      return "stopped";
  }
  return "?";
}

struct WhepService::WhipPush {
  WhipTarget target;
  http::Url url;
  uv_timer_t timer{};
  bool timer_open = false;
  WhipState state = WhipState::kWaitingForStream;
  std::string stream;  // the one pushed (the target's, or the first opened)
  Egress* egress = nullptr;
  uint64_t session_id = 0;
  uint64_t session_started_ns = 0;
  std::string location;  // the live session's resource, for DELETE
  uint64_t retry_ns = 0;
  uint64_t backoff_ns = kFirstBackoffNs;
  // Lets a reply that comes back after stop() see that the push is gone.
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);
  // Counters.
  uint64_t posts = 0, answered = 0, refused_status = 0, bad_answer = 0, fetch_failed = 0;
  uint64_t sessions_ended = 0, deletes = 0;
  int last_status = 0;
  std::string last_error;
};

}  // namespace syncd::whep
