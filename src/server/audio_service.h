// syncd's side of audio capture (docs/audio.md): owns the capture ring's storage and the
// backend, and serves audio.read / audio.info for the control protocol.
//
// The ring has one consumer, this service on the loop thread. The first connection that reads
// becomes the source's reader until it disconnects; its packets go through the connection's
// writer straight from ring memory (SocketWriter::send_borrowed: NAUD header + up to two ring
// pieces), and the frames are released to the capture thread only when the write completes, so
// samples are copied once, by the kernel. While no
// connection reads, a timer discards what the backend captures so the ring never overruns.
//
// Taps (audio/audio_tap.h): consumers on other threads (WHEP egresses) get a copy of two chosen
// channels. The service copies every frame once, as it first sees it: on its timer and before a
// reader's packet is sent (a reader's frames are released only after its write completes, so
// they are still in the ring to be copied).
//
// Thread: the loop thread for everything here; the backend's threads only touch the ring.
#pragma once

#include <uv.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "audio/audio_tap.h"
#include "audio/backend.h"
#include "audio/capture_ring.h"
#include "audio/naud.h"
#include "control/control_message.h"
#include "net/ws/frame_encoder.h"
#include "server/service.h"
#include "telemetry/prometheus.h"
#include "telemetry/stage_stats.h"

namespace syncd::server {

class Connection;
class ControlRouter;

class AudioService final : public Service {
 public:
  // Largest NAUD payload in one reply; a reader asking for more gets it over several reads.
  static constexpr size_t kMaxPacketBytes = 4u << 20;
  static constexpr uint32_t kMaxWaitMs = 10'000;

  AudioService(uv_loop_t* loop, audio::AudioSourceConfig config);
  ~AudioService() override;
  AudioService(const AudioService&) = delete;
  AudioService& operator=(const AudioService&) = delete;

  // Allocates and locks the ring, starts the backend and the service timer. False with a
  // reason when the backend cannot run at all (a JACK server that is merely absent is retried).
  bool start(std::string& error);
  // Sender with relayed audio, before the relay thread starts: the relay thread becomes the
  // ring's one reader (this service stops reading it; audio.read answers audio_in_use). nullptr
  // when there is no ring, or it is a relay-written one.
  audio::CaptureRing* lend_ring_to_relay();
  // A tap of capture channels left and right (equal for mono) for a consumer on another thread;
  // it lives as long as either side holds it. nullptr when there is no ring or the relay thread
  // reads it (lend_ring_to_relay), with the reason in `why`.
  std::shared_ptr<audio::AudioTap> open_tap(uint32_t left, uint32_t right, std::string& why);
  uint32_t channels() const { return config_.channels; }
  // Receiver (--audio-source relay:N): the ring the relay thread writes, or nullptr.
  audio::CaptureRing* ring_for_relay_writer();
  std::string_view name() const override { return "audio"; }
  // Stops the backend (joins its threads) and closes the timer handle. Idempotent.
  void stop() override;
  // audio.info and audio.read's refusal when syncd runs without --audio-source.
  static void register_absent(ControlRouter& router);

  // audio.read from `connection`. Returns nullptr when a reply is sent now or later, else an
  // error code (control::error_code) with `message` set; the caller sends the error.
  const char* read(Connection& connection, const control::AudioRead& request, std::string& message);
  // The audio.info reply (JSON text).
  std::string info_json() const;
  // From the connection's close callback, after every write callback of it has run.
  void connection_closed(Connection& c) override;
  // Routes audio.read and audio.info to this service.
  void register_control(ControlRouter& router) override;

  void write_stats(nlohmann::json& out) const override;
  void write_metrics(telemetry::PrometheusText& out) const override;

 private:
  struct Reader {
    Connection* connection = nullptr;
    uint64_t id = 0;
    bool waiting = false;  // a read is held until min_frames or its deadline
    bool writing = false;  // a reply's uv_write is in flight
    control::AudioRead request;
    uint64_t received_ns = 0;
    uint64_t deadline_ns = 0;
    uint32_t sequence = 0;
    // Loss counters at the position this reader attached at: its packets count from there.
    uint64_t dropped_base = 0;
    uint64_t gap_base = 0;
    // Where this reader stands: set at attach to just after the newest captured frame, then moved
    // past every packet. A packet that does not start here is flagged, and the frames in between
    // are in its dropped_frames / gap_frames.
    audio::CapturePosition position;
    uint32_t frames_in_flight = 0;
    uint8_t header[ws::kMaxServerHeaderBytes + audio::kNaudHeaderBytes];
  };

  static void on_timer(uv_timer_t* timer);
  // Copies every frame not yet copied into the taps that want it.
  void feed_taps();
  static void on_write(void* self, int status);
  void send_packet(uint64_t now_ns);
  uint32_t max_packet_frames() const;

  uv_loop_t* loop_;
  audio::AudioSourceConfig config_;
  std::vector<float> samples_;
  std::vector<audio::CaptureBlock> blocks_;
  std::unique_ptr<audio::CaptureRing> ring_;
  std::unique_ptr<audio::CaptureBackend> backend_;
  uv_timer_t timer_;
  bool timer_open_ = false;
  std::unique_ptr<Reader> reader_;  // allocated once, reused by each attaching connection
  bool attached_ = false;
  bool lent_to_relay_ = false;
  std::vector<std::shared_ptr<audio::AudioTap>> taps_;
  uint64_t tapped_next_frame_ = 0;  // the capture index of the first frame not yet copied

  // Loop-thread counters.
  uint64_t frames_delivered_ = 0;
  uint64_t frames_discarded_ = 0;  // captured while no connection was reading
  uint64_t reads_ = 0;
  uint64_t reads_busy_ = 0;
  uint64_t reads_in_use_ = 0;
  uint64_t packets_refused_ = 0;  // the reader's output limits refused a packet
  uint64_t attaches_ = 0;
  uint64_t bytes_sent_ = 0;
  telemetry::StageStats read_rtt_;  // request received -> reply written
};

}  // namespace syncd::server
