// Unmask throughput on one 1080p RGBA frame, against memcpy as the memory-bandwidth yardstick.
// At 60 fps syncd must unmask ~500 MB/s per producer, so anything near memcpy speed is ample.
//
// Run e.g.: unmask_bench --benchmark_min_time=2 --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "net/ws/frame_decoder.h"
#include "net/ws/frame_encoder.h"
#include "net/ws/unmask.h"

namespace {

using namespace syncd::ws;

constexpr size_t kFrameBytes = 1920 * 1080 * 4;  // 8,294,400
constexpr uint32_t kMaskKey = 0x9badf00d;

std::vector<uint8_t> random_frame(size_t extra = 0) {
  std::vector<uint8_t> buffer(kFrameBytes + extra);
  std::mt19937_64 rng(1);
  for (auto& b : buffer) b = static_cast<uint8_t>(rng());
  return buffer;
}

void run_unmask(benchmark::State& state, UnmaskFn fn) {
  if (!fn) {
    state.SkipWithError("kernel not available on this CPU");
    return;
  }
  std::vector<uint8_t> buffer = random_frame();
  for (auto _ : state) {
    fn(buffer.data(), buffer.size(), kMaskKey, 0);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kFrameBytes);
}

void BM_UnmaskScalar(benchmark::State& state) {
  run_unmask(state, unmask_scalar);
}

void BM_UnmaskDispatched(benchmark::State& state) {
  state.SetLabel(unmask_kernel_name());
  run_unmask(state, unmask);
}

void BM_UnmaskAvx2(benchmark::State& state) {
  run_unmask(state, unmask_avx2_kernel());
}

// The decoder reads socket data at arbitrary offsets, so the destination is rarely aligned.
void BM_UnmaskDispatchedMisaligned(benchmark::State& state) {
  std::vector<uint8_t> buffer = random_frame(64);
  for (auto _ : state) {
    unmask(buffer.data() + 13, kFrameBytes, kMaskKey, 3);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kFrameBytes);
}

void BM_Memcpy(benchmark::State& state) {
  std::vector<uint8_t> source = random_frame();
  std::vector<uint8_t> destination(kFrameBytes);
  for (auto _ : state) {
    std::memcpy(destination.data(), source.data(), kFrameBytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kFrameBytes);
}

// Whole decoder path for one frame-sized binary message fed as 64 KiB reads: header parsing,
// unmasking and event dispatch together.
class NullSink : public DecoderSink {
 public:
  void on_message_begin(Opcode, uint64_t, bool) override {}
  void on_message_data(uint8_t* data, size_t) override { benchmark::DoNotOptimize(data); }
  void on_message_end() override { ++messages; }
  void on_ping(std::span<const uint8_t>) override {}
  void on_pong(std::span<const uint8_t>) override {}
  void on_close(uint16_t, std::string_view) override {}
  void on_protocol_error(uint16_t, const char*) override { std::abort(); }
  int64_t messages = 0;
};

void BM_DecodeFrameMessage(benchmark::State& state) {
  std::vector<uint8_t> wire(kMaxClientHeaderBytes);
  wire.resize(encode_client_header(wire.data(), Opcode::kBinary, kFrameBytes, kMaskKey));
  const std::vector<uint8_t> payload = random_frame();
  wire.insert(wire.end(), payload.begin(), payload.end());
  constexpr size_t kReadBytes = 64 << 10;

  FrameDecoder decoder(DecoderLimits{kFrameBytes});
  NullSink sink;
  for (auto _ : state) {
    // Unmasking in place XORs the payload; a second pass restores it, so the input needs no
    // reset between iterations (the header is never modified).
    for (size_t pos = 0; pos < wire.size(); pos += kReadBytes) {
      decoder.consume(wire.data() + pos, std::min(kReadBytes, wire.size() - pos), sink);
    }
  }
  if (sink.messages != static_cast<int64_t>(state.iterations()))
    state.SkipWithError("lost messages");
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kFrameBytes);
}

BENCHMARK(BM_Memcpy)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_UnmaskScalar)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_UnmaskDispatched)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_UnmaskAvx2)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_UnmaskDispatchedMisaligned)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodeFrameMessage)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
