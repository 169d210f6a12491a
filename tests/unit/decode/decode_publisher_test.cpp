// Decoded twins (src/decode/decode_publisher.h) over a real uv loop and StreamRegistry: an h264
// stream's access units (video_codec::H264Encoder, each picture with its column marker) go in as
// a producer's frames, the DecodePublisher decodes them on its stage's worker into the
// "<name>.decoded" I420 stream, and a TestPublisher checks every decoded frame's marker. A
// SourceFeedback records what the source is asked. Built under ASan+UBSan and TSan too.
#include "decode/decode_publisher.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/clock.h"
#include "media/frame_header.h"
#include "media/publishers/test_publisher.h"
#include "media/stream_registry.h"
#include "video_codec/h264_encoder.h"
#include "video_codec_pictures.h"

using namespace syncd;
using namespace syncd::decode;
using video_codec::testing::I420Frame;
using video_codec::testing::MovingPicture;

namespace {

constexpr uint64_t kProducer = 5;
constexpr uint32_t kW = 320;
constexpr uint32_t kH = 192;

struct Encoder {
  video_codec::H264Encoder encoder;
  MovingPicture picture{kW, kH};
  I420Frame frame{kW, kH};
  std::vector<uint8_t> out = std::vector<uint8_t>(1 << 20);
  Encoder() {
    video_codec::EncoderConfig c;
    c.width = kW;
    c.height = kH;
    c.fps = 60;
    c.bitrate_kbps = 1500;
    c.keyframe_interval = 1000;  // IDRs at the start and when asked
    EXPECT_EQ(encoder.open(c), video_codec::OpenStatus::kOk);
  }
  // The access unit of sequence `seq` (its picture carries the marker of seq).
  std::vector<uint8_t> encode(uint64_t seq, bool keyframe = false) {
    picture.draw(frame, uint32_t(seq), uint16_t(seq));
    const video_codec::EncodeResult r =
        encoder.encode(frame.input(), seq * 16'666'667, keyframe, out);
    EXPECT_EQ(r.status, video_codec::EncodeStatus::kOk);
    return {out.begin(), out.begin() + long(r.bytes)};
  }
};

struct Requests final : media::SourceFeedback {
  std::vector<media::KeyframeReason> keyframes;
  std::vector<uint64_t> bitrates;
  void keyframe_wanted(const media::Stream&, media::KeyframeReason reason) override {
    keyframes.push_back(reason);
  }
  void target_bitrate(const media::Stream&, uint64_t bps) override { bitrates.push_back(bps); }
};

struct Fixture {
  uv_loop_t loop{};
  media::StreamRegistry registry;
  media::TestPublisher* test = nullptr;
  DecodePublisher* decode = nullptr;
  media::Stream* stream = nullptr;
  Requests requests;
  bool demand = false;
  Encoder encoder;

  explicit Fixture(bool pixel_publishers) {
    uv_loop_init(&loop);
    auto verifier = std::make_unique<media::TestPublisher>();
    test = verifier.get();
    registry.add_publisher(std::move(verifier));
    DecodePublisherConfig config;
    config.pixel_publishers = pixel_publishers;
    auto publisher = std::make_unique<DecodePublisher>(&loop, registry, config,
                                                       [this](uint32_t) { return demand; });
    decode = publisher.get();
    registry.add_publisher(std::move(publisher));
    media::StreamConfig c;
    c.name = "page";
    c.width = kW;
    c.height = kH;
    c.format = media::PixelFormat::kH264;
    media::OpenError error;
    stream = registry.open(c, kProducer, error);
    EXPECT_NE(stream, nullptr);
    stream->set_source_feedback(&requests);
  }
  ~Fixture() {
    registry.stop_publishers();
    if (stream && stream->open()) registry.close(stream);
    uv_run(&loop, UV_RUN_NOWAIT);  // the stage's async handle closes
    uv_loop_close(&loop);
  }

  // A producer's frame: the access unit as one frame of the h264 stream.
  bool send(const std::vector<uint8_t>& au, uint64_t seq) {
    media::IngestRequest r;
    r.stream_id = stream->id();
    r.owner = kProducer;
    r.flags = media::frame_flag::kColumnMarker;
    r.sequence = seq;
    r.payload_bytes = au.size();
    r.start_ns = core::monotonic_ns();
    media::IngestRefusal refusal;
    media::SlotLease lease = registry.begin(r, refusal);
    if (!lease) return false;
    std::memcpy(lease.pixels(), au.data(), au.size());
    return lease.commit(au.size(), core::monotonic_ns());
  }
  // Runs the loop until the stage holds nothing.
  void settle() {
    const DecodeStage* stage = decode->stage(stream->id());
    const uint64_t deadline = core::monotonic_ns() + 5'000'000'000ull;
    while (stage && stage->counters().in_flight > 0 && core::monotonic_ns() < deadline) {
      uv_run(&loop, UV_RUN_NOWAIT);
      usleep(200);
    }
  }
  void send_and_settle(uint64_t seq, bool keyframe = false) {
    ASSERT_TRUE(send(encoder.encode(seq, keyframe), seq));
    settle();
  }
  media::Stream* twin() { return registry.find(decode->twin_of(stream->id())); }
  const media::TestVerdicts& twin_verdicts() { return *test->verdicts(twin()->id()); }
  const TwinCounters& counters() { return *decode->counters(stream->id()); }
};

TEST(DecodePublisher, AnEncodedStreamIsDecodedIntoItsTwinAndEveryMarkerReads) {
  Fixture f(/*pixel_publishers=*/true);
  for (uint64_t seq = 1; seq <= 30; ++seq) f.send_and_settle(seq);
  media::Stream* twin = f.twin();
  ASSERT_NE(twin, nullptr);
  EXPECT_EQ(twin->config().name, "page.decoded");
  EXPECT_EQ(twin->config().format, media::PixelFormat::kI420);
  EXPECT_EQ(twin->config().width, kW);
  EXPECT_TRUE(media::owned_by_syncd(twin->owner()));
  EXPECT_EQ(twin->counters().accepted, 30u);
  EXPECT_EQ(f.twin_verdicts().marker_verified, 30u);
  EXPECT_EQ(f.twin_verdicts().marker_mismatches, 0u);
  EXPECT_EQ(f.twin_verdicts().sequence_gaps, 0u);
  // The source's own access units have nothing to check them by: unchecked, not failed.
  EXPECT_EQ(f.test->verdicts(f.stream->id())->unchecked, 30u);
  const TwinCounters& c = f.counters();
  EXPECT_EQ(c.offered, c.submitted + c.dropped_total());
  EXPECT_EQ(c.submitted, 30u);
  EXPECT_LE(c.buffer_growths, DecodeStage::kMaxDepth + 1);  // grown once per buffer, at most
  // The decoder started for the pixel publishers and asked the source for a picture to start
  // from (the stream began with one anyway).
  ASSERT_EQ(f.requests.keyframes.size(), 1u);
  EXPECT_EQ(f.requests.keyframes[0], media::KeyframeReason::kConsumer);
  // The twin closes with its source.
  f.registry.close(f.stream);
  EXPECT_FALSE(twin->open());
  nlohmann::json stats;
  f.decode->write_stream_stats(f.stream->id(), stats);
  EXPECT_EQ(stats["state"], "closed");
  EXPECT_EQ(stats["decoder"]["decoded"], 30);
}

TEST(DecodePublisher, WithoutAConsumerTheDecoderIdlesAndOneThatJoinsAsksForAKeyFrame) {
  Fixture f(/*pixel_publishers=*/false);
  for (uint64_t seq = 1; seq <= 5; ++seq) f.send_and_settle(seq);
  EXPECT_EQ(f.counters().dropped[size_t(TwinDrop::kNoConsumer)], 5u);
  EXPECT_EQ(f.decode->stage(f.stream->id()), nullptr);  // no worker started
  ASSERT_NE(f.twin(), nullptr);                         // open, so a receiver can find it by name
  EXPECT_TRUE(f.requests.keyframes.empty());

  f.demand = true;       // e.g. an HTTP receiver of the twin
  f.send_and_settle(6);  // a P-frame: the new decoder cannot start from it
  ASSERT_EQ(f.requests.keyframes.size(), 1u);
  EXPECT_EQ(f.requests.keyframes[0], media::KeyframeReason::kConsumer);
  EXPECT_EQ(
      f.decode->stage(f.stream->id())->counters().dropped[size_t(DecodeDrop::kAwaitingKeyframe)],
      1u);
  f.send_and_settle(7, /*keyframe=*/true);  // the source's answer
  f.send_and_settle(8);
  EXPECT_EQ(f.twin()->counters().accepted, 2u);
  EXPECT_EQ(f.twin_verdicts().marker_verified, 2u);
  EXPECT_EQ(f.counters().consumer_starts, 1u);

  f.demand = false;  // the receiver left: frames are dropped before the decoder again
  f.send_and_settle(9);
  EXPECT_EQ(f.counters().dropped[size_t(TwinDrop::kNoConsumer)], 6u);
  EXPECT_EQ(f.twin()->counters().accepted, 2u);
}

TEST(DecodePublisher, AFrameTheRegistryDroppedBreaksTheChainAndTheDecoderAsksForAnIdr) {
  Fixture f(/*pixel_publishers=*/true);
  f.send_and_settle(1);
  f.send_and_settle(2);
  // Frame 3 is refused at admission (the wrong size declared: geometry_mismatch), so it never
  // reaches the publishers; frame 4 references it.
  (void)f.encoder.encode(3);
  media::IngestRequest r;
  r.stream_id = f.stream->id();
  r.owner = kProducer;
  r.width = kW * 2;
  media::IngestRefusal refusal;
  EXPECT_FALSE(f.registry.begin(r, refusal));
  f.send_and_settle(4);
  f.send_and_settle(5);
  EXPECT_EQ(f.counters().losses, 1u);
  const DecodeStageCounters& d = f.decode->stage(f.stream->id())->counters();
  EXPECT_EQ(d.decoded, 2u);
  EXPECT_EQ(d.dropped[size_t(DecodeDrop::kAwaitingKeyframe)], 2u);
  EXPECT_EQ(d.gaps, 1u);
  // The decoder asked (counted on the stream by reason); the registry passes one request per
  // 200 ms to the source, and the decoder asks again while it waits.
  EXPECT_EQ(f.stream->source_requests().keyframes[size_t(media::KeyframeReason::kDecoder)], 1u);
  usleep(250'000);
  f.send_and_settle(6);
  ASSERT_FALSE(f.requests.keyframes.empty());
  EXPECT_EQ(f.requests.keyframes.back(), media::KeyframeReason::kDecoder);
  f.send_and_settle(7, /*keyframe=*/true);  // the source's answer
  f.send_and_settle(8);
  EXPECT_EQ(f.twin()->counters().accepted, 4u);
  EXPECT_EQ(f.twin_verdicts().marker_verified, 4u);
  EXPECT_EQ(f.twin_verdicts().marker_mismatches, 0u);
}

TEST(DecodePublisher, ATwinWhoseNameIsTakenIsReportedAndItsFramesCounted) {
  Fixture f(/*pixel_publishers=*/true);
  media::StreamConfig c;
  c.name = "page.decoded";
  c.width = 16;
  c.height = 16;
  media::OpenError error;
  ASSERT_NE(f.registry.open(c, 9, error), nullptr);
  f.send_and_settle(1);
  f.send_and_settle(2);
  EXPECT_EQ(f.counters().dropped[size_t(TwinDrop::kTwinUnavailable)], 2u);
  nlohmann::json stats;
  f.decode->write_stream_stats(f.stream->id(), stats);
  EXPECT_EQ(stats["state"], "unavailable");
  EXPECT_EQ(stats["error"], "stream_name_taken");
}

}  // namespace
