// Single-producer / single-consumer capture ring for interleaved float32 audio (docs/audio.md).
//
// Modelled on PipeWire's spa_ringbuffer: free-running 64-bit indices, acquire/release ordering,
// storage passed in by the owner. Two parallel rings share one discipline:
//   - samples: capacity_frames() frames of channels() interleaved floats;
//   - blocks:  one CaptureBlock per writer commit (absolute first_frame, capture timestamp and the
//              cumulative loss counters at that point), so the reader can tell the absolute index
//              of every frame and where every gap is.
// The writer never overwrites unread data: when a block does not fit (the reader is too slow) it
// is dropped whole and counted as an overrun, so a frame is never torn and the writer never
// waits. The reader's frames stay untouched until it calls consume(), which is what lets the
// loop thread hand ring memory straight to the kernel in a scatter write.
//
// Threads: exactly one writer thread (the backend's real-time thread) calls the "writer" group;
// exactly one reader thread (syncd's loop thread) calls the "reader" group; the counters may be
// read from anywhere. The writer side never locks, allocates or makes a syscall.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

namespace syncd::audio {

// One committed writer block. Written by the writer before the release store that publishes
// it; read by the reader only after the matching acquire load.
struct CaptureBlock {
  uint64_t ring_pos = 0;       // ring frame index (free-running) of the block's first frame
  uint64_t first_frame = 0;    // absolute frame index of the block's first frame
  uint64_t timestamp_ns = 0;   // CLOCK_MONOTONIC of the first frame
  uint64_t dropped_total = 0;  // overrun frames dropped before this block (cumulative)
  uint64_t gap_total = 0;      // frames the source never delivered before this block (cumulative)
  uint32_t frames = 0;
  uint32_t reserved = 0;
};

// Up to two contiguous pieces of interleaved samples (the second one after the wrap).
struct RingSpan {
  float* part[2] = {nullptr, nullptr};
  uint32_t frames[2] = {0, 0};
  uint32_t total() const { return frames[0] + frames[1]; }
};

// A contiguous run of frames the reader may send: no gap inside, absolute indices
// first_frame .. first_frame + samples.total() - 1.
struct ReadRun {
  RingSpan samples;  // const for the reader in spirit; pointers into ring storage
  uint64_t first_frame = 0;
  uint64_t timestamp_ns = 0;  // of first_frame (block timestamp + offset at the nominal rate)
  uint64_t dropped_total = 0;
  uint64_t gap_total = 0;
};

// Where the captured stream stands after the newest frame the reader has passed: the absolute
// index the next frame will have, the capture time it will have at the nominal rate, and the
// cumulative loss counters before it. A reader that starts here and adds the loss counters of
// every later block accounts for every frame (docs/protocol.md, "Continuity").
struct CapturePosition {
  uint64_t next_frame = 0;
  uint64_t timestamp_ns = 0;  // 0 before the first block is captured
  uint64_t dropped_total = 0;
  uint64_t gap_total = 0;
};

class CaptureRing {
 public:
  // Blocks needed so that the block ring never fills before the sample ring with writer
  // blocks of at least min_block_frames.
  static size_t blocks_for(size_t capacity_frames, size_t min_block_frames = 16) {
    return capacity_frames / min_block_frames + 16;
  }

  // samples.size() must be a multiple of channels; both spans outlive the ring.
  CaptureRing(std::span<float> samples, std::span<CaptureBlock> blocks, uint32_t channels,
              uint32_t rate)
      : samples_(samples.data()),
        blocks_(blocks.data()),
        channels_(channels),
        rate_(rate),
        capacity_frames_(samples.size() / channels),
        capacity_blocks_(blocks.size()) {}
  CaptureRing(const CaptureRing&) = delete;
  CaptureRing& operator=(const CaptureRing&) = delete;

  uint32_t channels() const { return channels_; }
  uint32_t rate() const { return rate_; }
  uint64_t capacity_frames() const { return capacity_frames_; }

  // ---- Writer (real-time thread) ----------------------------------------------------------

  // Where the next `frames` frames go, or an empty span (total() == 0) when they do not fit:
  // the caller then calls drop(frames). Nothing is visible to the reader before commit().
  RingSpan begin_write(uint32_t frames) {
    const uint64_t rf = read_frames_.load(std::memory_order_acquire);
    const uint64_t rb = read_blocks_.load(std::memory_order_acquire);
    if (frames == 0 || frames > capacity_frames_ ||
        write_frames_ + frames - rf > capacity_frames_ || write_blocks_ + 1 - rb > capacity_blocks_)
      return {};
    return span_at(write_frames_, frames);
  }

  // Publishes the frames written into the last begin_write() span.
  void commit(uint32_t frames, uint64_t timestamp_ns) {
    CaptureBlock& b = blocks_[write_blocks_ % capacity_blocks_];
    b.ring_pos = write_frames_;
    b.first_frame = next_frame_;
    b.timestamp_ns = timestamp_ns;
    b.dropped_total = dropped_;
    b.gap_total = gap_;
    b.frames = frames;
    write_frames_ += frames;
    next_frame_ += frames;
    ++write_blocks_;
    // Publishes the block and its samples (release pairs with the reader's acquire).
    written_blocks_.store(write_blocks_, std::memory_order_release);
    captured_total_.store(captured_total_.load(std::memory_order_relaxed) + frames,
                          std::memory_order_relaxed);
    const uint64_t fill = write_frames_ - read_frames_.load(std::memory_order_relaxed);
    if (fill > fill_high_water_.load(std::memory_order_relaxed))
      fill_high_water_.store(fill, std::memory_order_relaxed);
  }

  // The reader was too slow: `frames` captured frames are lost. Their absolute indices are
  // skipped, so the next block shows the gap.
  void drop(uint32_t frames) {
    dropped_ += frames;
    next_frame_ += frames;
    dropped_frames_.store(dropped_, std::memory_order_relaxed);
    overrun_events_.store(overrun_events_.load(std::memory_order_relaxed) + 1,
                          std::memory_order_relaxed);
    captured_total_.store(captured_total_.load(std::memory_order_relaxed) + frames,
                          std::memory_order_relaxed);
  }

  // The absolute index the next committed frame gets.
  uint64_t next_write_frame() const { return next_frame_; }

  // Moves the next frame's absolute index forward to `next_frame` without counting a loss: for a
  // writer that copies another ring's frames (audio_tap.h) and starts, or starts again, later
  // than where it stopped. The reader sees the jump as a discontinuity between blocks.
  void jump_to(uint64_t next_frame) {
    if (next_frame > next_frame_) next_frame_ = next_frame;
  }

  // The source delivered nothing for `frames` frames (e.g. the JACK server was away).
  void mark_gap(uint64_t frames) {
    gap_ += frames;
    next_frame_ += frames;
    gap_frames_.store(gap_, std::memory_order_relaxed);
  }

  // ---- Reader (loop thread) ----------------------------------------------------------------

  // Frames committed and not yet consumed (across gaps).
  uint64_t readable_frames() const {
    const uint64_t wb = written_blocks_.load(std::memory_order_acquire);
    if (wb == reader_block_) return 0;
    const CaptureBlock& last = blocks_[(wb - 1) % capacity_blocks_];
    return last.ring_pos + last.frames - reader_frames_;
  }

  // The longest run of at most max_frames readable frames without a gap, starting at the
  // oldest unconsumed frame. Does not consume: the memory stays valid and unchanged until
  // consume() releases it. An empty run (total() == 0) when nothing is readable.
  ReadRun peek(uint32_t max_frames) const { return peek_from(0, max_frames); }

  // Like peek(), but the run starts at the first readable frame whose absolute index is at least
  // first_frame (later than the oldest unconsumed one when the reader has read that far without
  // consuming): for a second look at frames the reader has not released yet (audio_tap.h).
  ReadRun peek_from(uint64_t first_frame, uint32_t max_frames) const {
    ReadRun run;
    const uint64_t wb = written_blocks_.load(std::memory_order_acquire);
    uint64_t b = reader_block_;
    if (max_frames == 0) return run;
    // The block holding first_frame, or the first after it (blocks rise in absolute index).
    for (; b != wb; ++b) {
      const CaptureBlock& blk = blocks_[b % capacity_blocks_];
      if (blk.first_frame + blk.frames > first_frame) break;
    }
    if (b == wb) return run;
    const CaptureBlock& first = blocks_[b % capacity_blocks_];
    uint64_t offset = first_frame > first.first_frame ? first_frame - first.first_frame : 0;
    // The first block may be partly consumed already.
    if (first.ring_pos + offset < reader_frames_) offset = reader_frames_ - first.ring_pos;
    run.first_frame = first.first_frame + offset;
    run.timestamp_ns = first.timestamp_ns + offset * 1'000'000'000ull / rate_;
    run.dropped_total = first.dropped_total;
    run.gap_total = first.gap_total;
    uint64_t frames = first.frames - offset;
    uint64_t expected_next = first.first_frame + first.frames;
    for (++b; b != wb && frames < max_frames; ++b) {
      const CaptureBlock& next = blocks_[b % capacity_blocks_];
      if (next.first_frame != expected_next) break;  // a gap: the run ends before it
      frames += next.frames;
      expected_next += next.frames;
    }
    if (frames > max_frames) frames = max_frames;
    run.samples = span_at(first.ring_pos + offset, uint32_t(frames));
    return run;
  }

  // Releases the oldest `frames` readable frames (at most readable_frames()) to the writer.
  void consume(uint64_t frames) {
    const uint64_t wb = written_blocks_.load(std::memory_order_acquire);
    const uint64_t target = reader_frames_ + frames;
    while (reader_block_ != wb) {
      const CaptureBlock& blk = blocks_[reader_block_ % capacity_blocks_];
      if (blk.ring_pos + blk.frames > target) break;  // partly consumed: keep it
      passed_ = end_of(blk);
      ++reader_block_;
    }
    reader_frames_ = target;
    // Release: our reads of the consumed samples happen-before the writer reuses them.
    read_frames_.store(reader_frames_, std::memory_order_release);
    read_blocks_.store(reader_block_, std::memory_order_release);
  }

  // Consumes everything readable; returns how many frames that was.
  uint64_t consume_all() {
    const uint64_t n = readable_frames();
    consume(n);
    return n;
  }

  // Consumes everything readable and returns the position after the newest captured frame: where
  // a reader that attaches now starts. Frames the writer loses after it show up in the next
  // block's loss counters, so nothing between the position and the next block goes uncounted.
  CapturePosition skip_to_newest() {
    consume_all();
    return passed_;
  }

  // ---- Counters (any thread; relaxed snapshots) ---------------------------------------------
  uint64_t captured_frames() const { return captured_total_.load(std::memory_order_relaxed); }
  uint64_t dropped_frames() const { return dropped_frames_.load(std::memory_order_relaxed); }
  uint64_t gap_frames() const { return gap_frames_.load(std::memory_order_relaxed); }
  uint64_t overrun_events() const { return overrun_events_.load(std::memory_order_relaxed); }
  uint64_t fill_high_water() const { return fill_high_water_.load(std::memory_order_relaxed); }

 private:
  RingSpan span_at(uint64_t pos, uint32_t frames) const {
    RingSpan s;
    const uint64_t at = pos % capacity_frames_;
    const uint64_t first = capacity_frames_ - at < frames ? capacity_frames_ - at : frames;
    s.part[0] = samples_ + at * channels_;
    s.frames[0] = uint32_t(first);
    if (first < frames) {
      s.part[1] = samples_;
      s.frames[1] = uint32_t(frames - first);
    }
    return s;
  }

  CapturePosition end_of(const CaptureBlock& b) const {
    return {b.first_frame + b.frames,
            b.timestamp_ns + uint64_t(b.frames) * 1'000'000'000ull / rate_, b.dropped_total,
            b.gap_total};
  }

  float* const samples_;
  CaptureBlock* const blocks_;
  const uint32_t channels_;
  const uint32_t rate_;
  const uint64_t capacity_frames_;
  const uint64_t capacity_blocks_;

  // Writer-owned (plain: only the writer thread touches them).
  uint64_t write_frames_ = 0;
  uint64_t write_blocks_ = 0;
  uint64_t next_frame_ = 0;
  uint64_t dropped_ = 0;
  uint64_t gap_ = 0;
  // Reader-owned.
  uint64_t reader_frames_ = 0;
  uint64_t reader_block_ = 0;
  CapturePosition passed_;  // the end of the newest block consumed whole

  // Shared indices on their own cache lines so the two threads do not false-share.
  alignas(64) std::atomic<uint64_t> written_blocks_{0};  // writer stores, reader loads
  alignas(64) std::atomic<uint64_t> read_frames_{0};     // reader stores, writer loads
  std::atomic<uint64_t> read_blocks_{0};
  // Statistics: writer stores, anyone loads.
  alignas(64) std::atomic<uint64_t> captured_total_{0};
  std::atomic<uint64_t> dropped_frames_{0};
  std::atomic<uint64_t> gap_frames_{0};
  std::atomic<uint64_t> overrun_events_{0};
  std::atomic<uint64_t> fill_high_water_{0};
};

}  // namespace syncd::audio
