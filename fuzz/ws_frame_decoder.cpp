// libFuzzer target for syncd::ws::FrameDecoder.
//
// Input: byte 0 selects how the rest is split into consume() calls; the rest is the client byte
// stream. Each input is decoded twice, split and whole, and the two runs must agree. Every piece
// is copied into its own exact-size allocation so any read or write past it trips ASan, and the
// sink checks the event contract as it goes.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fuzz_check.h"
#include "net/ws/frame_decoder.h"
#include "net/ws/utf8.h"

namespace {

using syncd::ws::DecoderLimits;
using syncd::ws::DecoderSink;
using syncd::ws::FrameDecoder;
using syncd::ws::Opcode;

constexpr uint64_t kMaxMessageBytes = 1 << 20;

// FNV-1a; only used to compare two runs' event streams.
struct Digest {
  uint64_t value = 1469598103934665603ull;
  void add(const void* p, size_t n) {
    const auto* bytes = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) value = (value ^ bytes[i]) * 1099511628211ull;
  }
  void add_u64(uint64_t v) { add(&v, sizeof v); }
};

class CheckingSink : public DecoderSink {
 public:
  // Events with data bytes, and without: a failing text chunk may be reported partly or not at
  // all depending on the split, so failing runs are compared on structure only.
  Digest full;
  Digest structure;
  bool terminated = false;
  bool failed = false;
  uint16_t error_code = 0;

  void set_piece(const uint8_t* begin, size_t size) {
    piece_begin_ = begin;
    piece_end_ = begin + size;
    last_data_end_ = begin;
  }

  void on_message_begin(Opcode opcode, uint64_t first_frame_bytes, bool single_frame) override {
    FUZZ_CHECK(!terminated);
    FUZZ_CHECK(!in_message_);
    FUZZ_CHECK(opcode == Opcode::kText || opcode == Opcode::kBinary);
    FUZZ_CHECK(first_frame_bytes <= kMaxMessageBytes);
    in_message_ = true;
    opcode_ = opcode;
    single_frame_ = single_frame;
    first_frame_bytes_ = first_frame_bytes;
    message_bytes_ = 0;
    utf8_state_ = syncd::ws::kUtf8Accept;
    record('B', static_cast<uint64_t>(opcode) << 1 | single_frame);
    record_both(first_frame_bytes);
  }

  void on_message_data(uint8_t* data, size_t size) override {
    FUZZ_CHECK(!terminated);
    FUZZ_CHECK(in_message_);
    FUZZ_CHECK(size > 0);
    // In place, in order, and inside the piece handed to consume().
    FUZZ_CHECK(data >= piece_begin_ && data >= last_data_end_);
    FUZZ_CHECK(data + size <= piece_end_);
    last_data_end_ = data + size;
    message_bytes_ += size;
    FUZZ_CHECK(message_bytes_ <= kMaxMessageBytes);
    if (single_frame_) FUZZ_CHECK(message_bytes_ <= first_frame_bytes_);
    if (opcode_ == Opcode::kText) {
      utf8_state_ = syncd::ws::utf8_validate(utf8_state_, data, size);
      FUZZ_CHECK(utf8_state_ != syncd::ws::kUtf8Reject);
    }
    full.add(data, size);
  }

  void on_message_end() override {
    FUZZ_CHECK(!terminated);
    FUZZ_CHECK(in_message_);
    if (single_frame_) FUZZ_CHECK(message_bytes_ == first_frame_bytes_);
    if (opcode_ == Opcode::kText) FUZZ_CHECK(utf8_state_ == syncd::ws::kUtf8Accept);
    in_message_ = false;
    record('E', message_bytes_);
  }

  void on_ping(std::span<const uint8_t> payload) override { on_control('P', payload); }
  void on_pong(std::span<const uint8_t> payload) override { on_control('O', payload); }

  void on_close(uint16_t code, std::string_view reason) override {
    FUZZ_CHECK(!terminated);
    FUZZ_CHECK(code == syncd::ws::close_code::kNoStatus || syncd::ws::is_valid_close_code(code));
    FUZZ_CHECK(reason.size() <= 123);
    FUZZ_CHECK(syncd::ws::utf8_validate(syncd::ws::kUtf8Accept,
                                        reinterpret_cast<const uint8_t*>(reason.data()),
                                        reason.size()) == syncd::ws::kUtf8Accept);
    terminated = true;
    record('C', code);
    record_bytes(reason.data(), reason.size());
  }

  void on_protocol_error(uint16_t close_code, const char* reason) override {
    FUZZ_CHECK(!terminated);
    FUZZ_CHECK(reason != nullptr && reason[0] != '\0');
    FUZZ_CHECK(close_code == 1002 || close_code == 1007 || close_code == 1009);
    terminated = true;
    failed = true;
    error_code = close_code;
    record('X', close_code);
  }

 private:
  void on_control(char tag, std::span<const uint8_t> payload) {
    FUZZ_CHECK(!terminated);
    FUZZ_CHECK(payload.size() <= 125);
    record(tag, payload.size());
    record_bytes(payload.data(), payload.size());
  }
  void record(char tag, uint64_t value) {
    full.add(&tag, 1);
    structure.add(&tag, 1);
    record_both(value);
  }
  void record_both(uint64_t value) {
    full.add_u64(value);
    structure.add_u64(value);
  }
  void record_bytes(const void* p, size_t n) {
    full.add(p, n);
    structure.add(p, n);
  }

  const uint8_t* piece_begin_ = nullptr;
  const uint8_t* piece_end_ = nullptr;
  const uint8_t* last_data_end_ = nullptr;
  bool in_message_ = false;
  bool single_frame_ = false;
  Opcode opcode_ = Opcode::kContinuation;
  uint64_t first_frame_bytes_ = 0;
  uint64_t message_bytes_ = 0;
  uint32_t utf8_state_ = 0;
};

struct RunResult {
  Digest full;
  Digest structure;
  size_t consumed = 0;
  bool failed = false;
  bool closed = false;
};

// Split plans chosen by the selector byte: fixed sizes 1..64, or a pseudo-random walk of sizes
// (small and large) seeded by the selector.
class SplitPlan {
 public:
  explicit SplitPlan(uint8_t selector) : selector_(selector), rng_(selector * 2654435761u + 1) {}
  size_t next() {
    if (selector_ < 128) return (selector_ & 63) + 1;
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 17;
    rng_ ^= rng_ << 5;
    return (selector_ & 1) ? 1 + rng_ % 7 : 1 + rng_ % 300;
  }

 private:
  uint8_t selector_;
  uint32_t rng_;
};

RunResult run(const uint8_t* stream, size_t size, SplitPlan* plan) {
  FrameDecoder decoder(DecoderLimits{kMaxMessageBytes});
  CheckingSink sink;
  RunResult result;
  size_t pos = 0;
  while (pos < size && !sink.terminated) {
    size_t n = plan ? plan->next() : size;
    if (n > size - pos) n = size - pos;
    std::vector<uint8_t> piece(stream + pos, stream + pos + n);
    sink.set_piece(piece.data(), piece.size());
    const size_t used = decoder.consume(piece.data(), piece.size(), sink);
    FUZZ_CHECK(used <= n);
    FUZZ_CHECK(decoder.data_payload_remaining() <= kMaxMessageBytes);
    if (!decoder.failed() && !decoder.closed()) FUZZ_CHECK(used == n);
    FUZZ_CHECK(decoder.failed() == sink.failed);
    FUZZ_CHECK(decoder.failed() || decoder.closed() || !sink.terminated);
    result.consumed += used;
    pos += n;
  }
  // A terminated decoder accepts nothing more.
  if (sink.terminated && pos < size) {
    std::vector<uint8_t> rest(stream + pos, stream + size);
    FUZZ_CHECK(decoder.consume(rest.data(), rest.size(), sink) == 0);
  }
  result.full = sink.full;
  result.structure = sink.structure;
  result.failed = decoder.failed();
  result.closed = decoder.closed();
  return result;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  SplitPlan plan(data[0]);
  const uint8_t* stream = data + 1;
  const size_t stream_size = size - 1;

  const RunResult whole = run(stream, stream_size, nullptr);
  const RunResult split = run(stream, stream_size, &plan);

  FUZZ_CHECK(whole.failed == split.failed);
  FUZZ_CHECK(whole.closed == split.closed);
  FUZZ_CHECK(whole.structure.value == split.structure.value);
  if (!whole.failed) {
    FUZZ_CHECK(whole.full.value == split.full.value);
    FUZZ_CHECK(whole.consumed == split.consumed);
  }
  return 0;
}
