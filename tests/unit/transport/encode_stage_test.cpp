// The relay's encoder stage (src/egress/encode_stage.h) over a real uv loop and frame pool: raw
// frames in, H.264 access units out on the loop, each decodable with its column marker; a low
// estimate steps the resolution down; keyframe requests are honoured at most once per gap; a full
// stage refuses; stop() hands back every frame it held.
#include "egress/encode_stage.h"

#include <gtest/gtest.h>
#include <uv.h>

#include <cstring>
#include <vector>

#include "core/clock.h"
#include "media/column_marker.h"
#include "video_codec/h264_decoder.h"

namespace syncd::egress {
namespace {

constexpr uint32_t kWidth = 640;
constexpr uint32_t kHeight = 360;
constexpr size_t kFrameBytes = kWidth * kHeight * 3 / 2;

struct Harness {
  uv_loop_t loop{};
  media::FramePool* pool = nullptr;
  std::unique_ptr<EncodeStage> stage;
  std::vector<EncodedFrame> results;
  std::vector<std::vector<uint8_t>> access_units;
  std::vector<uint64_t> sequences;

  explicit Harness(EncodeSettings settings = {}) {
    uv_loop_init(&loop);
    pool = media::FramePool::create(kFrameBytes, 8);
    media::StreamConfig c{"canvas", kWidth, kHeight, media::PixelFormat::kI420, 60, 8};
    stage = std::make_unique<EncodeStage>(c, 7, settings, &on_done, this);
    EXPECT_TRUE(stage->start(&loop));
  }
  ~Harness() {
    stage->stop();
    stage.reset();
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    pool->drop_ref();
  }
  static void on_done(const EncodedFrame& frame, void* context) {
    auto* self = static_cast<Harness*>(context);
    self->results.push_back(frame);
    if (frame.access_unit) {
      const uint8_t* p = frame.access_unit->pixels;
      self->access_units.emplace_back(p, p + frame.access_unit->info.bytes);
      self->sequences.push_back(frame.access_unit->info.sequence);
      EXPECT_EQ(frame.access_unit->info.stream_id, 7u);
      EXPECT_EQ(frame.access_unit->info.format, media::PixelFormat::kH264);
      EXPECT_TRUE(frame.access_unit->info.flags & media::frame_flag::kColumnMarker);
      self->stage->release(frame.access_unit);
    }
    media::FramePool::unpin(frame.raw);
  }
  // A pinned frame with the marker of `sequence` (the pool's reference handed to the pin).
  media::FrameSlot* frame(uint64_t sequence) {
    media::FrameSlot* slot = pool->acquire();
    if (!slot) return nullptr;
    uint8_t* y = slot->pixels;
    for (uint32_t row = 0; row < kHeight; ++row)
      for (uint32_t x = 0; x < kWidth; ++x) y[row * kWidth + x] = uint8_t(x / 4 + row + sequence);
    std::memset(y + kWidth * kHeight, 128, kWidth * kHeight / 2);
    media::draw_column_marker(y, kWidth, kWidth, kHeight, uint16_t(sequence));
    slot->info.sequence = sequence;
    slot->info.flags = media::frame_flag::kColumnMarker;
    slot->info.bytes = kFrameBytes;
    slot->info.accept_ns = core::monotonic_ns();
    EXPECT_TRUE(media::FramePool::try_pin(slot));
    media::FramePool::release(slot);
    return slot;
  }
  bool encode(uint64_t sequence) {
    media::FrameSlot* slot = frame(sequence);
    if (!slot) return false;
    if (stage->submit(*slot, core::monotonic_ns())) return true;
    media::FramePool::unpin(slot);
    return false;
  }
  // Encodes frames first..last one at a time, each waited for. False when one was refused.
  bool encode_each(uint64_t first, uint64_t last) {
    for (uint64_t s = first; s <= last; ++s) {
      if (!encode(s)) return false;
      wait_for(s);
    }
    return true;
  }
  void wait_for(size_t count) {
    const uint64_t deadline = core::monotonic_ns() + 10'000'000'000ull;
    while (results.size() < count && core::monotonic_ns() < deadline) {
      uv_run(&loop, UV_RUN_NOWAIT);
      usleep(200);
    }
    ASSERT_EQ(results.size(), count);
  }
};

// Decodes every access unit in order with a new decoder, checks every marker; returns the
// decoded sizes, one entry per size change.
std::vector<std::pair<uint32_t, uint32_t>> decoded_sizes(const Harness& h) {
  std::vector<std::pair<uint32_t, uint32_t>> sizes;
  video_codec::H264Decoder decoder;
  EXPECT_TRUE(decoder.open());
  for (size_t i = 0; i < h.access_units.size(); ++i) {
    std::vector<uint8_t> picture(kFrameBytes);
    // Any size up to the stream's: lay the output out for what the decoder says it has.
    for (uint32_t attempt = 0; attempt < 2; ++attempt) {
      const uint32_t w = sizes.empty() ? kWidth : sizes.back().first;
      const uint32_t hh = sizes.empty() ? kHeight : sizes.back().second;
      video_codec::OutputPicture out;
      out.width = w;
      out.height = hh;
      out.planes[0] = picture.data();
      out.planes[1] = picture.data() + w * hh;
      out.planes[2] = picture.data() + w * hh + w * hh / 4;
      out.strides[0] = w;
      out.strides[1] = out.strides[2] = w / 2;
      video_codec::DecodeStatus status;
      video_codec::DecodeResult r{};
      if (attempt == 0) {
        r = decoder.decode(h.access_units[i], out);
        status = r.status;
      } else {
        status = decoder.copy_picture(out);
      }
      if (status == video_codec::DecodeStatus::kSizeChanged) {
        sizes.emplace_back(r.width, r.height);
        continue;
      }
      EXPECT_EQ(status, video_codec::DecodeStatus::kPicture) << "access unit " << i;
      if (status != video_codec::DecodeStatus::kPicture) return sizes;
      if (sizes.empty()) sizes.emplace_back(w, hh);
      // The receiver scales a stepped-down picture back to the stream's size before anyone
      // reads it; the marker's columns are sized for that (nearest-neighbour here).
      std::vector<uint8_t> luma(size_t(kWidth) * kHeight);
      for (uint32_t y = 0; y < kHeight; ++y)
        for (uint32_t x = 0; x < kWidth; ++x)
          luma[y * kWidth + x] = picture[(y * hh / kHeight) * w + x * w / kWidth];
      EXPECT_EQ(media::read_column_marker(luma.data(), kWidth, kWidth, kHeight),
                uint16_t(h.sequences[i]))
          << "access unit " << i << " at " << w << "x" << hh;
      break;
    }
  }
  return sizes;
}

TEST(EncodeStage, RawFramesComeBackAsDecodableAccessUnitsInOrder) {
  Harness h;
  ASSERT_TRUE(h.encode_each(1, 12));
  const EncodeStageCounters& c = h.stage->counters();
  EXPECT_EQ(c.encoded, 12u);
  EXPECT_EQ(c.keyframes, 1u);
  EXPECT_EQ(c.encode.count(), 12u);
  for (size_t i = 0; i < h.sequences.size(); ++i) EXPECT_EQ(h.sequences[i], i + 1);
  const auto sizes = decoded_sizes(h);
  ASSERT_EQ(sizes.size(), 1u);
  EXPECT_EQ(sizes[0], std::make_pair(kWidth, kHeight));
}

TEST(EncodeStage, ALowEstimateStepsTheResolutionDownWithAnIdr) {
  Harness h;
  ASSERT_TRUE(h.encode_each(1, 5));
  // 300 kbit/s for 640x360 at 60 fps: below 0.05 bit/pixel at 2/3 too, so half size.
  h.stage->on_estimate(core::monotonic_ns(), 300'000);
  EXPECT_EQ(h.stage->counters().width, 320u);
  ASSERT_TRUE(h.encode_each(6, 10));
  const EncodeStageCounters& c = h.stage->counters();
  EXPECT_EQ(c.resizes, 1u);
  EXPECT_EQ(c.resize_failures, 0u);
  EXPECT_EQ(c.keyframes, 2u);  // the first frame, and the first at the new size
  EXPECT_TRUE(h.results[5].keyframe);
  const auto sizes = decoded_sizes(h);
  ASSERT_EQ(sizes.size(), 2u);
  EXPECT_EQ(sizes[1], std::make_pair(320u, 180u));
}

TEST(EncodeStage, KeyframeRequestsAreHonouredAtMostOncePerGap) {
  EncodeSettings settings;
  settings.keyframe_interval = 1000;
  Harness h(settings);
  ASSERT_TRUE(h.encode(1));
  h.wait_for(1);
  h.stage->request_keyframe(core::monotonic_ns());
  ASSERT_TRUE(h.encode(2));
  h.wait_for(2);
  EXPECT_TRUE(h.results[1].keyframe);
  h.stage->request_keyframe(core::monotonic_ns());  // inside the gap: waits
  ASSERT_TRUE(h.encode(3));
  h.wait_for(3);
  EXPECT_FALSE(h.results[2].keyframe);
  usleep(EncodeStage::kMinKeyframeGapNs / 1000);
  ASSERT_TRUE(h.encode(4));  // the request still stands: honoured now
  h.wait_for(4);
  EXPECT_TRUE(h.results[3].keyframe);
  EXPECT_EQ(h.stage->counters().keyframe_requests, 2u);
  EXPECT_EQ(h.stage->counters().keyframes_forced, 2u);
}

TEST(EncodeStage, AFullStageRefusesAndStopHandsEverythingBack) {
  Harness h;
  size_t taken = 0;
  for (uint64_t s = 1; s <= EncodeStage::kSlots + 1; ++s) taken += h.encode(s) ? 1 : 0;
  EXPECT_EQ(taken, EncodeStage::kSlots);  // the loop has not run: nothing came back yet
  h.stage->stop();                        // the worker finishes them; their results come back now
  EXPECT_EQ(h.results.size(), EncodeStage::kSlots);
  EXPECT_FALSE(h.stage->in_use());
  EXPECT_EQ(h.pool->slots_in_use(), 0u);
}

}  // namespace
}  // namespace syncd::egress
