// libFuzzer target for the decode path of an ingested encoded stream: a producer's h264 frames
// through the StreamRegistry into the DecodePublisher, decoded on its stage's worker into the
// stream's "<name>.decoded" twin, checked there by the TestPublisher (src/decode).
//
// The input is a run of frames, each one control byte, a 2-byte big-endian length and that many
// bytes (the last one takes what is left). Control bit 0: the frame is refused at admission (a
// wrong size declared, so the decoder sees a loss); bit 1: the frame says it carries the column
// marker; bit 2: the frame asks for a content hash (which decoded pixels never keep). After each
// frame the loop runs until the worker hands its result back.
//
// Must hold whatever the bytes: no crash or sanitizer report; the stage's account closes
// (frames_in == decoded + dropped, nothing left in flight); every frame the stage decoded was
// committed to the twin, and nothing else was; the publisher's account closes (offered ==
// submitted + dropped); the source stream's account closes.
#include <sched.h>
#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/clock.h"
#include "decode/decode_publisher.h"
#include "media/frame_header.h"
#include "media/publishers/test_publisher.h"
#include "media/stream_registry.h"

namespace {

using namespace syncd;

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    media::StreamRegistry registry;
    registry.add_publisher(std::make_unique<media::TestPublisher>());
    decode::DecodePublisherConfig config;
    config.pixel_publishers = true;
    config.stage.decoder.max_access_unit_bytes = 1 << 19;
    auto owned = std::make_unique<decode::DecodePublisher>(&loop, registry, config);
    decode::DecodePublisher* publisher = owned.get();
    registry.add_publisher(std::move(owned));
    media::StreamConfig c;
    c.name = "page";
    c.width = 640;
    c.height = 360;
    c.format = media::PixelFormat::kH264;
    c.slots = 2;
    media::OpenError error;
    media::Stream* stream = registry.open(c, 1, error);
    check(stream != nullptr);
    const uint32_t id = stream->id();

    uint64_t sequence = 0;
    size_t offset = 0;
    while (offset < size) {
      const uint8_t control = data[offset++];
      size_t length = size - offset;
      if (length >= 2) {
        const size_t prefixed = (size_t{data[offset]} << 8) | data[offset + 1];
        offset += 2;
        length = prefixed < size - offset ? prefixed : size - offset;
      }
      media::IngestRequest r;
      r.stream_id = id;
      r.owner = 1;
      r.sequence = ++sequence;
      r.flags = ((control & 2) ? media::frame_flag::kColumnMarker : 0) |
                ((control & 4) ? media::frame_flag::kHasContentHash : 0);
      if (control & 1) r.width = 1;  // geometry_mismatch: refused before the publishers
      media::IngestRefusal refusal;
      media::SlotLease lease = registry.begin(r, refusal);
      if (lease) {
        const size_t n = length < lease.frame_bytes() ? length : lease.frame_bytes();
        std::memcpy(lease.pixels(), data + offset, n);
        lease.commit(n, 1);  // an empty unit is refused (size_mismatch), as at ingest
      }
      offset += length;
      // The worker's result comes back through the loop (a decode takes milliseconds at most;
      // the deadline only keeps a hung worker from hanging the fuzzer: it then fails below).
      if (const decode::DecodeStage* stage = publisher->stage(id)) {
        const uint64_t deadline = core::monotonic_ns() + 10'000'000'000ull;
        while (stage->counters().in_flight > 0 && core::monotonic_ns() < deadline) {
          uv_run(&loop, UV_RUN_NOWAIT);
          sched_yield();
        }
      }
    }

    const decode::TwinCounters* twin = publisher->counters(id);
    check(twin != nullptr);
    check(twin->offered == twin->submitted + twin->dropped_total());
    const media::StreamCounters& source = stream->counters();
    check(source.offered == source.accepted + source.dropped_total());
    check(twin->offered == source.accepted);
    if (const decode::DecodeStage* stage = publisher->stage(id)) {
      const decode::DecodeStageCounters& d = stage->counters();
      check(d.in_flight == 0);
      check(d.frames_in == d.decoded + d.dropped_total());
      check(d.frames_in == twin->submitted);
      const media::Stream* decoded = registry.find(publisher->twin_of(id));
      check(decoded != nullptr);
      check(decoded->counters().accepted == d.decoded);
    }
    registry.close(stream);
    registry.stop_publishers();
  }
  uv_run(&loop, UV_RUN_NOWAIT);  // the stage's async handle closes
  uv_loop_close(&loop);
  return 0;
}
