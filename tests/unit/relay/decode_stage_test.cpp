// The decode stage (src/decode/decode_stage.h) without a relay thread: access units
// made by video_codec::H264Encoder (each input with the column marker drawn in) are handed to
// the stage over a real uv loop, decoded on its worker into leases of a real StreamRegistry's
// I420 stream, and checked there by a TestPublisher by their column marker. The hooks record
// the buffers given back and the keyframe requests. Built under ASan+UBSan and TSan too.
#include "decode/decode_stage.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "core/clock.h"
#include "egress/encode_stage.h"
#include "media/frame_header.h"
#include "media/publishers/test_publisher.h"
#include "media/stream_registry.h"
#include "relay/relay_source.h"
#include "video_codec/h264_encoder.h"
#include "video_codec_pictures.h"

using namespace syncd;
using namespace syncd::relay;
using namespace syncd::decode;
using video_codec::testing::I420Frame;
using video_codec::testing::MovingPicture;

namespace {

constexpr uint64_t kOwner = 7;
constexpr uint64_t kFrameNs = 16'666'667;  // 60 fps

struct EncodedFrame {
  std::vector<uint8_t> bytes;
  bool keyframe = false;
};

// Encodes `count` frames drawn at width x height (marker = frame index), at the encoder's
// encoded size `encoded` (width x height unless resized at `resize_at`).
struct Encoding {
  uint32_t width, height;
  video_codec::H264Encoder encoder;
  MovingPicture picture;
  I420Frame frame;
  std::vector<uint8_t> out = std::vector<uint8_t>(4 << 20);

  Encoding(uint32_t w, uint32_t h, uint32_t kbps = 3000)
      : width(w), height(h), picture(w, h), frame(w, h) {
    video_codec::EncoderConfig c;
    c.width = w;
    c.height = h;
    c.fps = 60;
    c.bitrate_kbps = kbps;
    c.keyframe_interval = 1000;  // IDRs only at the start and when forced
    EXPECT_EQ(encoder.open(c), video_codec::OpenStatus::kOk);
  }
  EncodedFrame encode(uint32_t index, bool force_keyframe = false) {
    picture.draw(frame, index, uint16_t(index));
    const video_codec::EncodeResult r =
        encoder.encode(frame.input(), uint64_t(index) * kFrameNs, force_keyframe, out);
    EXPECT_EQ(r.status, video_codec::EncodeStatus::kOk);
    return {std::vector<uint8_t>(out.begin(), out.begin() + long(r.bytes)), r.keyframe};
  }
};

struct Hooks {
  std::vector<uint32_t> freed;
  int keyframe_requests = 0;
  static void buffer_done(uint32_t buffer, void* self) {
    static_cast<Hooks*>(self)->freed.push_back(buffer);
  }
  static void keyframe_wanted(void* self) { ++static_cast<Hooks*>(self)->keyframe_requests; }
};

struct Receiver {
  uv_loop_t loop{};
  media::StreamRegistry registry;
  media::TestPublisher* test = nullptr;
  media::Stream* stream = nullptr;
  Hooks hooks;
  std::unique_ptr<DecodeStage> stage;
  uint64_t now_ns = 1'000'000'000;

  explicit Receiver(uint32_t width = 640, uint32_t height = 360, uint32_t slots = 8,
                    DecodeStageConfig config = {}) {
    uv_loop_init(&loop);
    auto verifier = std::make_unique<media::TestPublisher>();
    test = verifier.get();
    registry.add_publisher(std::move(verifier));
    media::StreamConfig c;
    c.name = "cam";
    c.width = width;
    c.height = height;
    c.format = media::PixelFormat::kI420;
    c.slots = slots;
    media::OpenError error;
    stream = registry.open(c, kOwner, error);
    EXPECT_NE(stream, nullptr);
    stage = std::make_unique<DecodeStage>(
        registry, DecodeStageHooks{&Hooks::buffer_done, &Hooks::keyframe_wanted, &hooks}, config);
    std::string why;
    EXPECT_TRUE(stage->start(&loop, why)) << why;
    EXPECT_TRUE(stage->open(*stream, kOwner, why)) << why;
  }
  // Runs the loop until the worker has nothing and nothing waits.
  void drain() {
    const uint64_t deadline = core::monotonic_ns() + 10'000'000'000ull;
    while ((stage->counters().in_flight > 0 || stage->counters().queued > 0) &&
           core::monotonic_ns() < deadline) {
      uv_run(&loop, UV_RUN_NOWAIT);
      usleep(100);
    }
    ASSERT_EQ(stage->counters().in_flight + stage->counters().queued, 0u);
  }
  ~Receiver() {
    stage->stop();
    registry.close(stream);
    uv_run(&loop, UV_RUN_NOWAIT);  // the worker's async handle closes
    uv_loop_close(&loop);
  }

  // Hands the frame over (as relay buffer `buffer`) without waiting for its result.
  void hand(const EncodedFrame& f, uint64_t sequence, uint32_t buffer,
            bool loss_before = false) {
    AccessUnitIn au;
    au.loss_before = loss_before;
    au.data = f.bytes.data();
    au.bytes = f.bytes.size();
    au.buffer = buffer;
    au.sequence = sequence;
    au.capture_time_us = sequence * 16'667;
    // A content hash of the sender's raw bytes cannot match decoded pixels: the stage clears it.
    au.flags = media::frame_flag::kColumnMarker | media::frame_flag::kHasContentHash;
    au.start_ns = now_ns;
    stage->submit(au, now_ns);
  }
  // Hands the frame over and runs the loop until its result is back.
  void feed(const EncodedFrame& f, uint64_t sequence, bool loss_before = false) {
    hand(f, sequence, uint32_t(sequence), loss_before);
    const uint64_t deadline = core::monotonic_ns() + 5'000'000'000ull;
    while (stage->counters().in_flight > 0 && core::monotonic_ns() < deadline) {
      uv_run(&loop, UV_RUN_NOWAIT);
      usleep(100);
    }
    ASSERT_EQ(stage->counters().in_flight, 0u);
    now_ns += kFrameNs;
  }
  const media::TestVerdicts& verdicts() const { return *test->verdicts(stream->id()); }
  size_t dropped(DecodeDrop d) const { return stage->counters().dropped[size_t(d)]; }
  void expect_accounted() const {
    const DecodeStageCounters& c = stage->counters();
    EXPECT_EQ(c.frames_in, c.decoded + c.dropped_total() + c.in_flight + c.queued);
    const media::StreamCounters& s = stream->counters();
    // The registry's identity, with the leases the worker still fills.
    EXPECT_EQ(s.offered, s.accepted + s.dropped_total() + c.in_flight);
    EXPECT_EQ(s.accepted, c.decoded);
  }
};

TEST(RelayDecoder, DecodesEveryFrameIntoLeasesWithItsMarker) {
  Receiver rx;
  Encoding enc(640, 360);
  for (uint32_t i = 0; i < 30; ++i) rx.feed(enc.encode(i), i);
  const DecodeStageCounters& c = rx.stage->counters();
  EXPECT_EQ(c.decoded, 30u);
  EXPECT_EQ(c.dropped_total(), 0u);
  EXPECT_EQ(c.keyframes, 1u);
  EXPECT_EQ(c.keyframe_requests, 0u);
  EXPECT_EQ(c.decode.count(), 30u);
  EXPECT_EQ(c.scaled, 0u);
  EXPECT_EQ(rx.verdicts().delivered, 30u);
  EXPECT_EQ(rx.verdicts().marker_verified, 30u);  // so kHasContentHash was cleared
  EXPECT_EQ(rx.verdicts().verify_failures(), 0u);
  EXPECT_EQ(rx.verdicts().sequence_gaps, 0u);
  ASSERT_EQ(rx.hooks.freed.size(), 30u);
  EXPECT_EQ(std::set<uint32_t>(rx.hooks.freed.begin(), rx.hooks.freed.end()).size(), 30u);
  EXPECT_EQ(rx.hooks.keyframe_requests, 0);
  rx.expect_accounted();
}

// The sender drops raw frames before its encoder (a full pool, a late frame): the producer's
// sequence skips, but the encoded stream is whole, and the relay signals no loss. Every frame
// decodes; nothing waits for an IDR.
TEST(RelayDecoder, ASequenceGapWithoutARelayLossDecodesOn) {
  Receiver rx;
  Encoding enc(640, 360);
  for (uint32_t i = 0; i < 20; ++i) {
    const uint64_t sequence = i < 10 ? i : i + 3;  // three raw frames never encoded
    rx.feed(enc.encode(uint32_t(sequence)), sequence);
  }
  const DecodeStageCounters& c = rx.stage->counters();
  EXPECT_EQ(c.decoded, 20u);
  EXPECT_EQ(c.gaps, 0u);
  EXPECT_EQ(rx.dropped(DecodeDrop::kAwaitingKeyframe), 0u);
  EXPECT_EQ(rx.hooks.keyframe_requests, 0);
  EXPECT_EQ(rx.verdicts().marker_verified, 20u);
  EXPECT_EQ(rx.verdicts().sequence_gaps, 3u);  // the consumer still sees what never came
  rx.expect_accounted();
}

TEST(RelayDecoder, SkippedPFrameWaitsForAnIdrAndAsksForOneThrottled) {
  Receiver rx;
  Encoding enc(640, 360);
  std::vector<EncodedFrame> frames;
  for (uint32_t i = 0; i < 50; ++i) frames.push_back(enc.encode(i, i == 40));
  ASSERT_TRUE(frames[0].keyframe);
  ASSERT_TRUE(frames[40].keyframe);
  ASSERT_FALSE(frames[10].keyframe);
  for (uint32_t i = 0; i < 10; ++i) rx.feed(frames[i], i);
  // Frame 10 is lost on the way (the jitter buffer gave it up, and the relay says so on the
  // next access unit): 11..39 cannot decode.
  const uint64_t first_wait_ns = rx.now_ns;
  for (uint32_t i = 11; i < 40; ++i) rx.feed(frames[i], i, i == 11);
  const uint64_t waited_ns = rx.now_ns - first_wait_ns;  // 29 frames: ~483 ms
  const DecodeStageCounters& c = rx.stage->counters();
  EXPECT_EQ(c.gaps, 1u);
  EXPECT_EQ(rx.dropped(DecodeDrop::kAwaitingKeyframe), 29u);
  EXPECT_EQ(c.decoded, 10u);
  // One request at once, then one per 200 ms while it waits: 3 in 483 ms, not 29.
  EXPECT_GE(rx.hooks.keyframe_requests, 1);
  EXPECT_LE(uint64_t(rx.hooks.keyframe_requests), 1 + waited_ns / 200'000'000);
  EXPECT_EQ(uint64_t(rx.hooks.keyframe_requests), c.keyframe_requests);
  EXPECT_GT(c.keyframe_requests_throttled, 0u);
  // The forced IDR (the sender's answer to the PLI): every frame decodes again.
  for (uint32_t i = 40; i < 50; ++i) rx.feed(frames[i], i);
  EXPECT_EQ(c.decoded, 20u);
  EXPECT_EQ(c.keyframes, 2u);
  EXPECT_EQ(rx.verdicts().marker_verified, 20u);
  EXPECT_EQ(rx.verdicts().verify_failures(), 0u);
  const int requests = rx.hooks.keyframe_requests;
  for (uint32_t i = 50; i < 55; ++i) rx.feed(enc.encode(i), i);
  EXPECT_EQ(rx.hooks.keyframe_requests, requests);  // no more once it decodes
  EXPECT_EQ(rx.stream->counters().dropped[size_t(media::DropReason::kUndecodable)], 29u);
  EXPECT_EQ(rx.hooks.freed.size(), 54u);
  rx.expect_accounted();
}

TEST(RelayDecoder, BrokenAccessUnitIsADecodeErrorThenWaitsForAnIdr) {
  Receiver rx;
  Encoding enc(640, 360);
  for (uint32_t i = 0; i < 5; ++i) rx.feed(enc.encode(i), i);
  EncodedFrame broken = enc.encode(5);
  broken.bytes.resize(6);  // a start code and a slice header cut short
  rx.feed(broken, 5);
  EncodedFrame not_annexb{{1, 2, 3, 4, 5, 6, 7, 8}, false};
  rx.feed(not_annexb, 6);
  for (uint32_t i = 7; i < 10; ++i) rx.feed(enc.encode(i), i);
  const DecodeStageCounters& c = rx.stage->counters();
  EXPECT_EQ(c.decoded, 5u);
  EXPECT_EQ(rx.dropped(DecodeDrop::kDecodeError) + rx.dropped(DecodeDrop::kRefused) +
                rx.dropped(DecodeDrop::kAwaitingKeyframe),
            5u);
  EXPECT_GE(rx.hooks.keyframe_requests, 1);
  rx.feed(enc.encode(10, true), 10);
  EXPECT_EQ(c.decoded, 6u);
  EXPECT_EQ(rx.verdicts().verify_failures(), 0u);
  EXPECT_EQ(rx.hooks.freed.size(), 11u);
  rx.expect_accounted();
}

// The sender steps its resolution down (adaptive bitrate) and back up; the local stream keeps its
// size. The marker is drawn into the sender's full-size input (136 px wide at 640x360), scaled
// down by the encoder (8 px columns become 4 px at 320x180, 6 px at 480x270) and back up here.
void run_resolution_steps(uint32_t step_width, uint32_t step_height) {
  Receiver rx;
  Encoding enc(640, 360, 2000);
  for (uint32_t i = 0; i < 10; ++i) rx.feed(enc.encode(i), i);
  ASSERT_EQ(enc.encoder.resize(step_width, step_height), video_codec::OpenStatus::kOk);
  for (uint32_t i = 10; i < 40; ++i) rx.feed(enc.encode(i), i);
  const DecodeStageCounters& c = rx.stage->counters();
  EXPECT_EQ(c.picture_width, step_width);
  EXPECT_EQ(c.picture_height, step_height);
  EXPECT_EQ(c.scaled, 30u);
  EXPECT_EQ(c.scratch_allocations, 1u);  // once per size change, not per frame
  ASSERT_EQ(enc.encoder.resize(640, 360), video_codec::OpenStatus::kOk);
  for (uint32_t i = 40; i < 50; ++i) rx.feed(enc.encode(i), i);
  EXPECT_EQ(c.scaled, 30u);  // back at the stream's size: decoded straight into the lease
  EXPECT_EQ(c.scratch_allocations, 1u);
  EXPECT_EQ(c.decoded, 50u);
  EXPECT_EQ(c.dropped_total(), 0u);
  EXPECT_EQ(c.keyframe_requests, 0u);
  EXPECT_EQ(rx.verdicts().marker_verified, 50u);
  EXPECT_EQ(rx.verdicts().verify_failures(), 0u);
  rx.expect_accounted();
}

TEST(RelayDecoder, HalfSizePictureIsScaledIntoTheStreamAndItsMarkerReads) {
  run_resolution_steps(320, 180);
}

TEST(RelayDecoder, ThreeQuarterSizePictureIsScaledIntoTheStreamAndItsMarkerReads) {
  run_resolution_steps(480, 270);
}

// What does not survive: a marker drawn at the small size itself (136 px wide at 320x180) is
// 272 px wide once scaled up, its columns 16 px: read as another number, or as none.
TEST(RelayDecoder, MarkerDrawnAtTheSmallSizeDoesNotReadAfterScaling) {
  Receiver rx;
  Encoding enc(320, 180, 1000);
  for (uint32_t i = 1; i < 11; ++i) rx.feed(enc.encode(i), i);
  EXPECT_EQ(rx.stage->counters().decoded, 10u);
  EXPECT_EQ(rx.stage->counters().scaled, 10u);
  EXPECT_EQ(rx.verdicts().marker_mismatches, 10u);
}

TEST(RelayDecoder, FullPoolDropsAndWaitsForAnIdr) {
  // One slot, held by the frame the worker still fills: the next one is refused.
  Receiver rx(640, 360, 1);
  Encoding enc(640, 360);
  // The access units stay alive until their buffers come back, as the relay's do.
  std::vector<EncodedFrame> frames;
  for (uint32_t i = 0; i < 4; ++i) frames.push_back(enc.encode(i));
  rx.feed(frames[0], 0);
  rx.hand(frames[1], 1, 1);  // in flight: holds the only slot
  rx.hand(frames[2], 2, 2);  // no slot
  const DecodeStageCounters& c = rx.stage->counters();
  EXPECT_EQ(rx.dropped(DecodeDrop::kPoolFull), 1u);
  EXPECT_EQ(rx.stream->counters().dropped[size_t(media::DropReason::kPoolFull)], 1u);
  rx.expect_accounted();
  while (c.in_flight > 0) {
    uv_run(&rx.loop, UV_RUN_NOWAIT);
    usleep(100);
  }
  rx.feed(frames[3], 3);  // its reference (2) never reached the decoder
  EXPECT_EQ(rx.dropped(DecodeDrop::kAwaitingKeyframe), 1u);
  EXPECT_EQ(c.decoded, 2u);
  EXPECT_EQ(rx.hooks.freed.size(), 4u);
  rx.expect_accounted();
}

// What a jitter buffer releases at once after a repair (here 20 frames handed over without the
// loop running): the worker takes `depth`, the rest wait in order and are decoded in turn as the
// worker frees up. Nothing is dropped, every marker reads, the order holds.
TEST(RelayDecoder, ABurstBeyondTheWorkerIsQueuedAndDecodedInOrder) {
  Receiver rx(640, 360, 8, DecodeStageConfig{.depth = 4, .queue = 16});
  Encoding enc(640, 360);
  std::vector<EncodedFrame> frames;
  for (uint32_t i = 0; i < 20; ++i) frames.push_back(enc.encode(i));
  for (uint32_t i = 0; i < 20; ++i) rx.hand(frames[i], i, 200 + i);
  const DecodeStageCounters& c = rx.stage->counters();
  EXPECT_EQ(c.in_flight, 4u);
  EXPECT_EQ(c.queued, 16u);
  EXPECT_EQ(c.queued_max, 16u);
  EXPECT_EQ(c.dropped_total(), 0u);
  rx.expect_accounted();
  rx.drain();
  EXPECT_EQ(c.decoded, 20u);
  EXPECT_EQ(c.dropped_total(), 0u);
  EXPECT_EQ(rx.verdicts().marker_verified, 20u);
  EXPECT_EQ(rx.verdicts().sequence_reordered, 0u);
  EXPECT_EQ(rx.verdicts().sequence_gaps, 0u);
  EXPECT_EQ(rx.hooks.keyframe_requests, 0);
  ASSERT_EQ(rx.hooks.freed.size(), 20u);
  for (uint32_t i = 0; i < 20; ++i) EXPECT_EQ(rx.hooks.freed[i], 200 + i);  // in order
  rx.expect_accounted();
}

// Past depth + queue a frame is dropped (worker_busy): the next one in order is a loss, so it
// waits for an IDR and asks for one; the IDR decodes again.
TEST(RelayDecoder, PastTheQueueAFrameIsDroppedAndTheNextWaitsForAnIdr) {
  Receiver rx(640, 360, 8, DecodeStageConfig{.depth = 2, .queue = 2});
  Encoding enc(640, 360);
  std::vector<EncodedFrame> frames;
  for (uint32_t i = 0; i < 6; ++i) frames.push_back(enc.encode(i));
  frames.push_back(enc.encode(6, true));
  for (uint32_t i = 0; i < 5; ++i) rx.hand(frames[i], i, i);
  EXPECT_EQ(rx.dropped(DecodeDrop::kWorkerBusy), 1u);  // frame 4
  rx.expect_accounted();
  rx.drain();
  EXPECT_EQ(rx.stage->counters().decoded, 4u);
  rx.feed(frames[5], 5);  // its reference, 4, never reached the decoder
  EXPECT_EQ(rx.dropped(DecodeDrop::kAwaitingKeyframe), 1u);
  EXPECT_GE(rx.hooks.keyframe_requests, 1);
  rx.feed(frames[6], 6);
  EXPECT_EQ(rx.stage->counters().decoded, 5u);
  EXPECT_EQ(rx.hooks.freed.size(), 7u);
  rx.expect_accounted();
}

// Stopping with frames queued: each queued one is dropped (stopped) and its buffer given back;
// those with the worker finish.
TEST(RelayDecoder, StopWithFramesQueuedGivesEveryBufferBack) {
  Receiver rx(640, 360, 8, DecodeStageConfig{.depth = 2, .queue = 8});
  Encoding enc(640, 360);
  std::vector<EncodedFrame> frames;
  for (uint32_t i = 0; i < 8; ++i) frames.push_back(enc.encode(i));
  for (uint32_t i = 0; i < 8; ++i) rx.hand(frames[i], i, 300 + i);
  EXPECT_EQ(rx.stage->counters().queued, 6u);
  rx.stage->stop();
  EXPECT_EQ(rx.dropped(DecodeDrop::kStopped), 6u);
  EXPECT_EQ(rx.stage->counters().decoded, 2u);
  EXPECT_EQ(rx.stage->counters().queued, 0u);
  ASSERT_EQ(rx.hooks.freed.size(), 8u);
  EXPECT_EQ(std::set<uint32_t>(rx.hooks.freed.begin(), rx.hooks.freed.end()).size(), 8u);
  rx.expect_accounted();
}

TEST(RelayDecoder, StopWithJobsInFlightReleasesEveryLeaseAndBuffer) {
  Receiver rx;
  Encoding enc(640, 360);
  std::vector<EncodedFrame> frames;
  for (uint32_t i = 0; i < 6; ++i) frames.push_back(enc.encode(i));
  for (uint32_t i = 0; i < 6; ++i) rx.hand(frames[i], i, 100 + i);  // no loop run in between
  const DecodeStageCounters& c = rx.stage->counters();
  EXPECT_EQ(c.in_flight, DecodeStageConfig{}.depth);
  EXPECT_EQ(rx.dropped(DecodeDrop::kWorkerBusy), 2u);
  rx.expect_accounted();
  rx.stage->stop();
  EXPECT_EQ(c.in_flight, 0u);
  EXPECT_EQ(c.decoded,
            DecodeStageConfig{}.depth);  // finished, then committed before the stream goes
  ASSERT_EQ(rx.hooks.freed.size(), 6u);
  EXPECT_EQ(std::set<uint32_t>(rx.hooks.freed.begin(), rx.hooks.freed.end()),
            (std::set<uint32_t>{100, 101, 102, 103, 104, 105}));
  const media::StreamCounters& s = rx.stream->counters();
  EXPECT_EQ(s.offered, DecodeStageConfig{}.depth);
  EXPECT_EQ(s.accepted + s.dropped_total(), s.offered);  // no lease left open
  rx.expect_accounted();
  // Stopped: frames are dropped at once and their buffers given back.
  rx.hand(frames[0], 6, 106);
  EXPECT_EQ(rx.dropped(DecodeDrop::kStopped), 1u);
  EXPECT_EQ(rx.hooks.freed.back(), 106u);
}

// The figure in docs/wan.md: decode ms per 1080p frame by the stage's own StageStats.
TEST(RelayDecoder, MeasuresDecodeTimeAt1080p) {
  Receiver rx(1920, 1080);
  Encoding enc(1920, 1080, 8000);
  std::vector<EncodedFrame> frames;
  for (uint32_t i = 0; i < 120; ++i) frames.push_back(enc.encode(i));
  for (uint32_t i = 0; i < 120; ++i) rx.feed(frames[i], i);
  const DecodeStageCounters& c = rx.stage->counters();
  EXPECT_EQ(c.decoded, 120u);
  EXPECT_EQ(rx.verdicts().marker_verified, 120u);
  std::printf(
      "relay decode stage, 1080p at 8 Mbit/s, 120 frames: decode mean %.3f ms, max %.3f ms; "
      "held mean %.3f ms\n",
      double(c.decode.total_ns()) / 1e6 / double(c.decode.count()), double(c.decode.max_ns()) / 1e6,
      double(c.held.total_ns()) / 1e6 / double(c.held.count()));
}

// RelaySource routes a described stream with a source format through the stage: the local
// stream is I420 at the described size under the same name, and the frames verify. (The relay
// thread is not started: its buffers are given back into a closed channel, which refuses them.)
class IdleHandler final : public transport::TransportHandler {
 public:
  void on_start(transport::TransportThread&, uint64_t) override {}
  void on_datagram(std::span<uint8_t>, const sockaddr_storage&, uint64_t) override {}
  void on_message(transport::ToTransport&, uint64_t) override {}
  void on_timer(uint64_t) override {}
  void on_stop(uint64_t) override {}
};
void ignore_from_relay(transport::FromTransport&, void*) {}

TEST(RelayDecoder, RelaySourceOpensADescribedEncodedStreamAsI420AndDecodesIntoIt) {
  uv_loop_t loop{};
  uv_loop_init(&loop);
  {
    media::StreamRegistry registry;
    auto verifier = std::make_unique<media::TestPublisher>();
    media::TestPublisher* test = verifier.get();
    registry.add_publisher(std::move(verifier));
    transport::TransportThread thread(transport::TransportThreadConfig{},
                                      std::make_unique<IdleHandler>(), &ignore_from_relay, nullptr);
    RelaySource source(registry, thread, &loop);
    StreamDescription d;
    d.format = uint8_t(media::PixelFormat::kH264);
    d.source_format = uint8_t(media::PixelFormat::kRgba8);
    d.width = 640;
    d.height = 360;
    d.fps_millihertz = 60'000;
    d.name_bytes = 3;
    std::memcpy(d.name, "cam", 3);
    source.on_description(d);
    ASSERT_NE(source.stream(), nullptr);
    EXPECT_EQ(source.stream()->config().format, media::PixelFormat::kI420);
    EXPECT_EQ(source.stream()->config().name, "cam");
    ASSERT_NE(source.decoder(), nullptr);
    Encoding enc(640, 360);
    std::vector<EncodedFrame> frames;
    for (uint32_t i = 0; i < 10; ++i) frames.push_back(enc.encode(i));
    for (uint32_t i = 0; i < 10; ++i) {
      transport::FromTransport m;
      m.kind = transport::FromTransport::Kind::kFrameIn;
      m.data = frames[i].bytes.data();
      m.bytes = frames[i].bytes.size();
      m.buffer = i;
      m.sequence = i;
      m.flags = media::frame_flag::kColumnMarker | media::frame_flag::kHasContentHash;
      source.on_frame_in(m, core::monotonic_ns());
      const uint64_t deadline = core::monotonic_ns() + 5'000'000'000ull;
      while (source.decoder()->counters().in_flight > 0 && core::monotonic_ns() < deadline) {
        uv_run(&loop, UV_RUN_NOWAIT);
        usleep(100);
      }
    }
    EXPECT_EQ(source.decoder()->counters().decoded, 10u);
    EXPECT_EQ(test->verdicts(source.stream()->id())->marker_verified, 10u);
    EXPECT_EQ(source.counters().frames_in, 10u);
    nlohmann::json stats;
    source.write_stats(stats);
    EXPECT_EQ(stats["decoder"]["decoded"], 10u);
    source.stop();
    EXPECT_EQ(source.stream(), nullptr);
  }
  uv_run(&loop, UV_RUN_NOWAIT);
  uv_loop_close(&loop);
}

}  // namespace
