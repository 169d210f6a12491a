// The system camera (`--publisher camera`, docs/camera.md): shows one stream's frames to camera
// consumers (OBS, browsers, call apps) through a backend (camera_backend.h).
//
// The camera shows the first raw stream opened while it shows none (an encoded one, h264, is
// not a picture); when that stream closes, the next one opened takes its place. The loop only pins
// the frame's slot (FramePool::try_pin) and hands it to the camera's worker (core::WorkerHandoff);
// the worker converts it into the backend's buffer and queues it, and the verdict comes back to the
// loop, which unpins. The loop never waits: a frame the worker cannot take now is dropped and
// counted by reason.
//
// Accounting, per stream shown: offered == delivered + converting + sum(dropped[reason]). A
// backend that hears back from its consumer (PipeWire) also splits what it delivered:
// delivered == consumed + abandoned + with_consumer (camera_backend.h, CameraDelivery).
//
// Thread: the loop thread (see Publisher), apart from the conversion job on the worker.
#pragma once

#include <uv.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/worker_handoff.h"
#include "media/publisher.h"
#include "media/publishers/camera/camera_backend.h"
#include "media/publishers/camera/camera_config.h"
#include "media/publishers/camera/camera_format.h"
#include "telemetry/stage_stats.h"

namespace syncd::media {

// Why a frame offered to the camera did not reach its backend.
enum class CameraDrop : uint8_t {
  kConsumerSlow,     // the worker still had its queue full: the backend is slower than the stream
  kPinRefused,       // the stream's pool had no slot left to pin (FramePool::try_pin)
  kBackendBusy,      // the backend had no free buffer: its consumer holds them all
  kNoConsumer,       // nobody takes the camera's frames now (a PipeWire node not streamed from)
  kBackendDown,      // the backend's server is gone (PipeWire restarting); it is reconnecting
  kBackendError,     // the backend refused the format or failed to take the frame
  kNoBackend,        // no backend could start (see the camera's error in /stats)
  kUnsupportedSize,  // odd width or height: no camera format can carry it
  kCount,
};
const char* camera_drop_name(CameraDrop reason);

struct CameraCounters {
  uint64_t offered = 0;
  uint64_t delivered = 0;
  uint64_t converting = 0;  // with the worker now
  // The backend's delivery figures when this stream was shown, and when it stopped being shown
  // (nullopt while it is): this stream's share is the difference.
  std::optional<CameraDelivery> delivery_base;
  std::optional<CameraDelivery> delivery_end;
  std::array<uint64_t, size_t(CameraDrop::kCount)> dropped{};
  telemetry::StageStats loop;     // on_frame's own time on the loop
  telemetry::StageStats convert;  // the worker's conversion and queueing of one frame
  telemetry::StageStats handoff;  // from the loop's hand-off to the verdict back on the loop
  uint64_t dropped_total() const {
    uint64_t t = 0;
    for (uint64_t d : dropped) t += d;
    return t;
  }
};

class CameraPublisher final : public Publisher {
 public:
  // Frames go on the loop's worker to backend, or are dropped as no_backend when it is nullptr
  // (no backend could open; backend_error says why, for /stats) or the worker cannot start.
  // Without a loop (unit tests) frames are converted on the caller's thread.
  CameraPublisher(uv_loop_t* loop, CameraConfig config, std::unique_ptr<CameraBackend> backend,
                  std::string backend_error = {});
  ~CameraPublisher() override;

  // The publisher for the command line's options: opens the backend, and says on stderr when it
  // cannot (syncd goes on serving without a camera).
  static std::unique_ptr<CameraPublisher> create(uv_loop_t* loop, const CameraConfig& config);

  std::string_view name() const override { return "camera"; }
  void stop() override;
  void on_stream_open(const Stream& stream) override;
  void on_stream_close(const Stream& stream) override;
  void on_stream_forget(uint32_t stream_id) override;
  void on_frame(const Stream& stream, FrameSlot& slot) override;
  void write_stream_stats(uint32_t stream_id, nlohmann::json& out) const override;
  void write_metrics(telemetry::PrometheusText& out,
                     const std::vector<const Stream*>& streams) const override;

  // nullptr for a stream the camera has not shown.
  const CameraCounters* counters(uint32_t stream_id) const;
  uint32_t shown_stream() const { return shown_stream_id_; }
  // Jobs with the worker (hand-off queue depth).
  static constexpr size_t kQueueDepth = 2;

 private:
  enum class Verdict : uint8_t {
    kDelivered,
    kBackendBusy,
    kNoConsumer,
    kBackendDown,
    kBackendError
  };
  struct ConvertJob {
    FrameSlot* slot;
    uint32_t stream_id;
    FrameLayout layout;
    double fps;  // the stream's nominal rate
    uint64_t submitted_ns;
    uint64_t convert_ns;  // set by the worker
    Verdict verdict;      // set by the worker
  };
  // The worker's state: the backend's current frame geometry and the converter.
  struct WorkerState {
    uint32_t width = 0;
    uint32_t height = 0;
    uint32_t stream_id = 0;
    bool failed = false;  // configure refused this geometry: not asked again
    FrameConverter converter;
  };
  static ConvertJob make_job(const Stream& stream, FrameSlot& slot, uint64_t start_ns);
  static void convert_on_worker(ConvertJob& job, void* self);
  static void verdict_on_loop(ConvertJob& job, void* self);
  Verdict convert(ConvertJob& job);
  CameraFormat preferred_format(PixelFormat source) const;
  void count_verdict(ConvertJob& job);

  CameraConfig config_;
  std::unique_ptr<CameraBackend> backend_;
  std::string backend_error_;
  WorkerState worker_state_;  // the worker's (or the caller's, without a loop)
  uint32_t shown_stream_id_ = 0;
  uint32_t last_shown_stream_id_ = 0;  // shown now, or last shown; 0 before the first
  std::unordered_map<uint32_t, CameraCounters> streams_;
  std::unique_ptr<core::WorkerHandoff<ConvertJob, kQueueDepth>> worker_;
};

}  // namespace syncd::media
