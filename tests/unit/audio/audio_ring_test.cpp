// CaptureRing: wraparound, overrun accounting, gaps, and a concurrent writer/reader (run it
// under TSan: the tsan preset).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "audio/audio_tap.h"
#include "audio/backend.h"
#include "audio/capture_ring.h"
#include "audio/test_signal.h"

namespace syncd::audio {
namespace {

struct Fixture {
  Fixture(uint32_t frames, uint32_t channels, size_t blocks = 0)
      : samples(size_t(frames) * channels),
        block_store(blocks ? blocks : CaptureRing::blocks_for(frames)),
        ring(samples, block_store, channels, 48000) {}
  std::vector<float> samples;
  std::vector<CaptureBlock> block_store;
  CaptureRing ring;
};

// Writes `n` counter frames starting at absolute frame `first`; false on overrun (dropped).
bool write_counter(CaptureRing& ring, uint64_t first, uint32_t n, uint64_t ts = 0) {
  const RingSpan s = ring.begin_write(n);
  if (s.total() == 0) {
    ring.drop(n);
    return false;
  }
  fill_counter(s.part[0], first, s.frames[0], ring.channels());
  if (s.frames[1]) fill_counter(s.part[1], first + s.frames[0], s.frames[1], ring.channels());
  ring.commit(n, ts);
  return true;
}

// Checks every sample of a run against the counter signal.
void expect_counter(const ReadRun& run, uint32_t channels) {
  uint64_t frame = run.first_frame;
  for (int p = 0; p < 2; ++p) {
    for (uint32_t f = 0; f < run.samples.frames[p]; ++f, ++frame)
      for (uint32_t c = 0; c < channels; ++c)
        ASSERT_EQ(run.samples.part[p][f * channels + c], counter_sample(frame, channels, c))
            << "frame " << frame << " channel " << c;
  }
}

TEST(CaptureRing, EmptyRingReadsNothing) {
  Fixture fx(64, 2);
  EXPECT_EQ(fx.ring.readable_frames(), 0u);
  EXPECT_EQ(fx.ring.peek(100).samples.total(), 0u);
}

TEST(CaptureRing, WrapsAroundInTwoPieces) {
  Fixture fx(100, 3);
  CaptureRing& r = fx.ring;
  uint64_t next = 0;
  // Advance to position 90, then write 20 frames that wrap.
  ASSERT_TRUE(write_counter(r, next, 90));
  next += 90;
  r.consume(90);
  ASSERT_TRUE(write_counter(r, next, 20, 1234));
  const ReadRun run = r.peek(1000);
  EXPECT_EQ(run.first_frame, 90u);
  EXPECT_EQ(run.samples.frames[0], 10u);
  EXPECT_EQ(run.samples.frames[1], 10u);
  EXPECT_EQ(run.samples.part[1], fx.samples.data());
  EXPECT_EQ(run.timestamp_ns, 1234u);
  expect_counter(run, 3);
  // A partial consume keeps the rest, with the timestamp advanced at the nominal rate.
  r.consume(5);
  const ReadRun rest = r.peek(1000);
  EXPECT_EQ(rest.first_frame, 95u);
  EXPECT_EQ(rest.samples.total(), 15u);
  EXPECT_EQ(rest.timestamp_ns, 1234ull + 5ull * 1'000'000'000ull / 48000ull);
  expect_counter(rest, 3);
}

TEST(CaptureRing, PeekRespectsMaxFramesAndSpansBlocks) {
  Fixture fx(256, 1);
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(write_counter(fx.ring, i * 32, 32));
  EXPECT_EQ(fx.ring.peek(1000).samples.total(), 128u);
  EXPECT_EQ(fx.ring.peek(50).samples.total(), 50u);
  fx.ring.consume(50);
  const ReadRun run = fx.ring.peek(1000);
  EXPECT_EQ(run.first_frame, 50u);
  EXPECT_EQ(run.samples.total(), 78u);
  expect_counter(run, 1);
}

TEST(CaptureRing, OverrunDropsWholeBlocksAndShowsTheGap) {
  Fixture fx(100, 2);
  CaptureRing& r = fx.ring;
  ASSERT_TRUE(write_counter(r, 0, 60));
  ASSERT_FALSE(write_counter(r, 60, 50));  // 110 > 100: the newest block is dropped whole
  EXPECT_EQ(r.dropped_frames(), 50u);
  EXPECT_EQ(r.overrun_events(), 1u);
  ASSERT_TRUE(write_counter(r, 110, 40));  // fits exactly
  EXPECT_EQ(r.fill_high_water(), 100u);
  ASSERT_FALSE(write_counter(r, 150, 1));
  EXPECT_EQ(r.dropped_frames(), 51u);
  EXPECT_EQ(r.captured_frames(), 151u);

  // The first run stops at the gap; the next starts after it with the loss accounted.
  ReadRun a = r.peek(1000);
  EXPECT_EQ(a.first_frame, 0u);
  EXPECT_EQ(a.samples.total(), 60u);
  EXPECT_EQ(a.dropped_total, 0u);
  expect_counter(a, 2);
  r.consume(a.samples.total());
  ReadRun b = r.peek(1000);
  EXPECT_EQ(b.first_frame, 110u);
  EXPECT_EQ(b.samples.total(), 40u);
  EXPECT_EQ(b.dropped_total, 50u);
  expect_counter(b, 2);
  r.consume(b.samples.total());
  // Identity the reader relies on: first_frame(next) = first_frame + frames + new losses.
  ASSERT_TRUE(write_counter(r, 151, 10));
  ReadRun c = r.peek(1000);
  EXPECT_EQ(c.first_frame, 151u);
  EXPECT_EQ(c.dropped_total, 51u);
  EXPECT_EQ(c.first_frame, b.first_frame + b.samples.total() + (c.dropped_total - b.dropped_total));
}

TEST(CaptureRing, BlockRingFullIsAnOverrunToo) {
  Fixture fx(1000, 1, 4);  // only 4 block records
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(write_counter(fx.ring, i, 1));
  EXPECT_FALSE(write_counter(fx.ring, 4, 1));
  EXPECT_EQ(fx.ring.dropped_frames(), 1u);
  fx.ring.consume(1);
  EXPECT_TRUE(write_counter(fx.ring, 5, 1));
}

TEST(CaptureRing, SourceGapIsCountedApartFromDrops) {
  Fixture fx(100, 1);
  ASSERT_TRUE(write_counter(fx.ring, 0, 10));
  fx.ring.mark_gap(1000);
  ASSERT_TRUE(write_counter(fx.ring, 1010, 10));
  EXPECT_EQ(fx.ring.peek(100).samples.total(), 10u);
  fx.ring.consume(10);
  const ReadRun run = fx.ring.peek(100);
  EXPECT_EQ(run.first_frame, 1010u);
  EXPECT_EQ(run.gap_total, 1000u);
  EXPECT_EQ(run.dropped_total, 0u);
  EXPECT_EQ(fx.ring.gap_frames(), 1000u);
}

TEST(CaptureRing, ConsumeAllReleasesEverything) {
  Fixture fx(64, 2);
  ASSERT_TRUE(write_counter(fx.ring, 0, 40));
  EXPECT_EQ(fx.ring.consume_all(), 40u);
  EXPECT_EQ(fx.ring.readable_frames(), 0u);
  ASSERT_TRUE(write_counter(fx.ring, 40, 64));  // the whole capacity is free again
}

// Where a reader that attaches now starts (docs/protocol.md, "audio.read"): after the newest
// captured frame, with its capture time, whatever was read or discarded before.
TEST(CaptureRing, SkipToNewestStartsAfterTheNewestFrame) {
  Fixture fx(100, 1);
  const CapturePosition empty = fx.ring.skip_to_newest();
  EXPECT_EQ(empty.next_frame, 0u);
  EXPECT_EQ(empty.timestamp_ns, 0u);  // nothing captured yet

  ASSERT_TRUE(write_counter(fx.ring, 0, 30, 1'000'000'000));
  ASSERT_TRUE(write_counter(fx.ring, 30, 18, 1'000'625'000));
  fx.ring.consume(5);  // a previous reader stopped part-way through the first block
  const CapturePosition now = fx.ring.skip_to_newest();
  EXPECT_EQ(now.next_frame, 48u);
  EXPECT_EQ(now.timestamp_ns, 1'001'000'000u);  // 18 frames at 48 kHz after the newest block
  EXPECT_EQ(fx.ring.readable_frames(), 0u);
  // Nothing new: a later reader gets the same position, not an older one.
  EXPECT_EQ(fx.ring.skip_to_newest().next_frame, 48u);

  // Frames lost after the position are in the next block's counters, so a reader that starts
  // there accounts for every frame: first_frame = position + dropped.
  ASSERT_TRUE(write_counter(fx.ring, 48, 100));
  EXPECT_FALSE(write_counter(fx.ring, 148, 10));  // overrun
  const CapturePosition full = fx.ring.skip_to_newest();
  EXPECT_EQ(full.next_frame, 148u);
  EXPECT_EQ(full.dropped_total, 0u);
  ASSERT_TRUE(write_counter(fx.ring, 158, 10));
  const ReadRun run = fx.ring.peek(100);
  EXPECT_EQ(run.first_frame, full.next_frame + (run.dropped_total - full.dropped_total));
  EXPECT_EQ(run.dropped_total, 10u);
}

// A second look at frames the reader has not released (the loop thread's tap, audio_tap.h):
// from any absolute index on, across the wrap and partly consumed blocks, ending at a gap.
TEST(CaptureRing, PeekFromStartsAtAnAbsoluteIndex) {
  Fixture fx(64, 2);
  ASSERT_TRUE(write_counter(fx.ring, 0, 40, 1'000'000'000));
  fx.ring.consume(30);
  ASSERT_TRUE(write_counter(fx.ring, 40, 30, 2'000'000'000));  // wraps
  ReadRun run = fx.ring.peek_from(0, 1000);  // older than the oldest unconsumed: starts there
  EXPECT_EQ(run.first_frame, 30u);
  EXPECT_EQ(run.samples.total(), 40u);
  expect_counter(run, 2);
  run = fx.ring.peek_from(35, 1000);
  EXPECT_EQ(run.first_frame, 35u);
  EXPECT_EQ(run.timestamp_ns, 1'000'000'000u + 35u * 1'000'000'000ull / 48000);
  EXPECT_EQ(run.samples.total(), 35u);
  expect_counter(run, 2);
  run = fx.ring.peek_from(50, 5);
  EXPECT_EQ(run.first_frame, 50u);
  EXPECT_EQ(run.samples.total(), 5u);
  expect_counter(run, 2);
  EXPECT_EQ(fx.ring.peek_from(70, 1000).samples.total(), 0u);  // nothing that new yet
  // A gap ends a run; the next run starts after it.
  fx.ring.mark_gap(10);
  ASSERT_TRUE(write_counter(fx.ring, 80, 8));
  run = fx.ring.peek_from(60, 1000);
  EXPECT_EQ(run.first_frame, 60u);
  EXPECT_EQ(run.samples.total(), 10u);
  run = fx.ring.peek_from(70, 1000);
  EXPECT_EQ(run.first_frame, 80u);
  EXPECT_EQ(run.samples.total(), 8u);
  expect_counter(run, 2);
  // peek_from leaves the reader where it was.
  EXPECT_EQ(fx.ring.peek(1000).first_frame, 30u);
}

// The tap copies its two channels of every frame with the capture's indices and timestamps,
// follows gaps, and overruns (counted) rather than blocking when its consumer stalls.
TEST(AudioTap, CopiesTwoChannelsWithCaptureIndices) {
  Fixture fx(4096, 4);
  AudioTap tap(3, 1, 48000, 2048);
  EXPECT_FALSE(tap.mono());
  ASSERT_TRUE(write_counter(fx.ring, 0, 1500, 7'000'000'000));
  tap.write(fx.ring.peek_from(100, 100000), 4);  // joins late, at frame 100
  ReadRun run = tap.ring().peek(100000);
  EXPECT_EQ(run.first_frame, 100u);
  EXPECT_EQ(run.timestamp_ns, 7'000'000'000u + 100u * 1'000'000'000ull / 48000);
  EXPECT_EQ(run.samples.total(), 1400u);  // two blocks (1024 + 376), one run
  uint64_t frame = 100;
  for (int p = 0; p < 2; ++p)
    for (uint32_t f = 0; f < run.samples.frames[p]; ++f, ++frame) {
      ASSERT_EQ(run.samples.part[p][f * 2], counter_sample(frame, 4, 3));
      ASSERT_EQ(run.samples.part[p][f * 2 + 1], counter_sample(frame, 4, 1));
    }
  tap.ring().consume(run.samples.total());
  // A capture gap shows in the tap as a jump of the index, not as a loss of the tap's.
  fx.ring.consume_all();
  fx.ring.mark_gap(20);
  ASSERT_TRUE(write_counter(fx.ring, 1520, 10));
  tap.write(fx.ring.peek(100000), 4);
  run = tap.ring().peek(100000);
  EXPECT_EQ(run.first_frame, 1520u);
  EXPECT_EQ(tap.ring().dropped_frames(), 0u);
  // A stalled consumer: what does not fit is dropped whole and counted.
  fx.ring.consume_all();
  ASSERT_TRUE(write_counter(fx.ring, 1530, 3000));
  tap.write(fx.ring.peek(100000), 4);
  EXPECT_GT(tap.ring().dropped_frames(), 0u);
  EXPECT_EQ(tap.ring().readable_frames() + tap.ring().dropped_frames(), 3010u);
}

// One writer thread, one reader thread, a small ring so that both wrap thousands of times and
// overruns happen. Every frame read must be exact, and frames read + frames dropped must equal
// frames written.
TEST(CaptureRing, ConcurrentWriterAndReaderAccountForEveryFrame) {
  constexpr uint32_t kChannels = 4;
  constexpr uint64_t kTotal = 400'000;
  Fixture fx(509, kChannels);  // prime capacity: wraps land everywhere
  CaptureRing& r = fx.ring;
  std::atomic<bool> done{false};
  std::thread writer([&] {
    uint64_t next = 0;
    uint32_t n = 1;
    while (next < kTotal) {
      n = n % 61 + 1;  // varied block sizes
      const uint32_t take = uint32_t(std::min<uint64_t>(n, kTotal - next));
      write_counter(r, next, take, next);
      next += take;
      if (next % 7 == 0) std::this_thread::yield();
    }
    done.store(true, std::memory_order_release);
  });
  uint64_t read = 0, expected_next = 0, losses_seen = 0;
  uint32_t max = 1;
  for (;;) {
    const bool finished = done.load(std::memory_order_acquire);
    ReadRun run = r.peek(max = max % 97 + 1);
    if (run.samples.total() == 0) {
      if (finished && r.readable_frames() == 0) break;
      std::this_thread::yield();
      continue;
    }
    expect_counter(run, kChannels);
    if (HasFatalFailure()) break;
    // Continuity: any jump is explained by the drop counter.
    ASSERT_EQ(run.first_frame, expected_next + (run.dropped_total - losses_seen));
    losses_seen = run.dropped_total;
    expected_next = run.first_frame + run.samples.total();
    read += run.samples.total();
    r.consume(run.samples.total());
  }
  writer.join();
  EXPECT_EQ(read + r.dropped_frames(), kTotal);
  EXPECT_EQ(r.captured_frames(), kTotal);
  EXPECT_GT(read, 0u);
}

TEST(AudioSourceSpec, Parses) {
  AudioSourceConfig c;
  std::string error;
  ASSERT_TRUE(parse_audio_source_spec("synthetic:32@48000", c, error)) << error;
  EXPECT_EQ(c.backend, "synthetic");
  EXPECT_EQ(c.channels, 32u);
  EXPECT_EQ(c.rate, 48000u);
  ASSERT_TRUE(parse_audio_source_spec("jack:8", c, error));
  EXPECT_EQ(c.backend, "jack");
  EXPECT_EQ(c.channels, 8u);
  EXPECT_FALSE(parse_audio_source_spec("jack:8@44100", c, error));
  EXPECT_FALSE(parse_audio_source_spec("synthetic:0", c, error));
  EXPECT_FALSE(parse_audio_source_spec("synthetic:65", c, error));
  EXPECT_FALSE(parse_audio_source_spec("alsa:2", c, error));
  EXPECT_FALSE(parse_audio_source_spec("synthetic:2@", c, error));
  // The tone signal and the relay-written source.
  ASSERT_TRUE(parse_audio_source_spec("synthetic:4,tone", c, error)) << error;
  EXPECT_EQ(c.backend, "synthetic");
  EXPECT_EQ(c.channels, 4u);
  EXPECT_TRUE(c.tone);
  ASSERT_TRUE(parse_audio_source_spec("relay:16", c, error)) << error;
  EXPECT_EQ(c.backend, "relay");
  EXPECT_EQ(c.channels, 16u);
  EXPECT_FALSE(c.tone);
  EXPECT_FALSE(parse_audio_source_spec("relay:2@44100", c, error));
  EXPECT_FALSE(parse_audio_source_spec("jack:2,tone", c, error));
}

TEST(SyntheticBackend, TheToneSignalIsEachChannelsSine) {
  // Frame 0 is phase 0 on every channel; a quarter period of channel 0 (300 Hz: 40 frames) later
  // it peaks at the amplitude; channel 1 (450 Hz) holds its own frequency.
  float frame[3 * 41];
  fill_tone(frame, 0, 41, 3, 48000);
  EXPECT_EQ(frame[0], 0.0f);
  EXPECT_NEAR(frame[40 * 3 + 0], kToneAmplitude, 1e-6);
  EXPECT_NEAR(frame[10 * 3 + 1], kToneAmplitude * std::sin(2 * M_PI * 450 * 10 / 48000.0), 1e-6);
  // Continuity across blocks: frames 48000..48002 equal frames 0..2 (whole cycles in a second).
  float later[3 * 3];
  fill_tone(later, 48000, 3, 3, 48000);
  for (int i = 0; i < 9; ++i) EXPECT_FLOAT_EQ(later[i], frame[i]);
}

TEST(SyntheticBackend, DeliversTheExactCounterSignal) {
  AudioSourceConfig cfg;
  cfg.backend = "synthetic";
  cfg.channels = 3;
  cfg.rate = 48000;
  Fixture fx(48000, cfg.channels);
  auto backend = make_synthetic_backend(cfg, fx.ring);
  std::string error;
  ASSERT_TRUE(backend->start(error));
  uint64_t got = 0, expected = 0;
  while (got < 4800) {
    ReadRun run = fx.ring.peek(100000);
    if (run.samples.total() == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      continue;
    }
    ASSERT_EQ(run.first_frame, expected);
    expect_counter(run, cfg.channels);
    expected += run.samples.total();
    got += run.samples.total();
    fx.ring.consume(run.samples.total());
  }
  backend->stop();
  EXPECT_EQ(fx.ring.dropped_frames(), 0u);
}

}  // namespace
}  // namespace syncd::audio
