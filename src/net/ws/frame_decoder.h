// RFC 6455 frame decoder for the server side: bytes in, events out.
//
// Pure code: no sockets, clocks, logs or allocation after construction, so the same object is
// unit-tested, fuzzed and benchmarked. One decoder per connection; it is not thread-safe and is
// driven by whichever thread owns the connection (the loop thread in syncd).
//
// Payload bytes are unmasked *in place* in the buffer handed to consume(). This is what lets the
// caller read a large binary message straight into its final destination (a frame-pool slot):
// it asks data_payload_remaining(), reads at most that many bytes into the destination, and hands
// that same memory to consume(); on_message_data() then reports the very pointer it was given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace syncd::ws {

// RFC 6455 section 5.2.
enum class Opcode : uint8_t {
  kContinuation = 0x0,
  kText = 0x1,
  kBinary = 0x2,
  kClose = 0x8,
  kPing = 0x9,
  kPong = 0xA,
};

// RFC 6455 section 7.4.1.
namespace close_code {
inline constexpr uint16_t kNormal = 1000;
inline constexpr uint16_t kGoingAway = 1001;
inline constexpr uint16_t kProtocolError = 1002;
inline constexpr uint16_t kUnsupportedData = 1003;
inline constexpr uint16_t kNoStatus = 1005;  // never sent on the wire
inline constexpr uint16_t kInvalidPayload = 1007;
inline constexpr uint16_t kPolicyViolation = 1008;
inline constexpr uint16_t kMessageTooBig = 1009;
inline constexpr uint16_t kInternalError = 1011;
}  // namespace close_code

// True for codes a peer may legitimately send in a Close frame (RFC 6455 section 7.4).
bool is_valid_close_code(uint16_t code);

struct DecoderLimits {
  // Largest data message (sum of its fragments) accepted; larger ones fail with 1009, decided
  // from the frame header before any of the payload is read.
  uint64_t max_message_bytes = 64ull << 20;
};

// Receives decoder events. All callbacks run inside FrameDecoder::consume().
class DecoderSink {
 public:
  virtual ~DecoderSink() = default;
  // A text or binary message begins. first_frame_bytes is the payload length of its first
  // frame; when single_frame is true that is the whole message.
  virtual void on_message_begin(Opcode opcode, uint64_t first_frame_bytes, bool single_frame) = 0;
  // Unmasked payload bytes of the current message, in place in the caller's buffer. Text is
  // UTF-8 validated incrementally: an invalid byte fails the stream with 1007 at once (before
  // the chunk holding it is reported), and a sequence left open at the end of the message fails
  // it before on_message_end().
  virtual void on_message_data(uint8_t* data, size_t size) = 0;
  // Payload bytes of a binary message, still masked, in place in the caller's buffer: byte i is
  // unmasked by XOR with key byte (phase + i) % 4 (see unmask()). A sink that unmasks them in
  // the same pass as other work overrides this (syncd's ingest unmasks while it hashes); the
  // default unmasks and calls on_message_data().
  virtual void on_masked_message_data(uint8_t* data, size_t size, uint32_t mask_key,
                                      uint64_t phase);
  virtual void on_message_end() = 0;
  virtual void on_ping(std::span<const uint8_t> payload) = 0;
  virtual void on_pong(std::span<const uint8_t> payload) = 0;
  // A valid Close frame arrived. code is kNoStatus when the frame carried no code.
  virtual void on_close(uint16_t code, std::string_view reason) = 0;
  // The peer broke the protocol; the caller should send a Close with close_code and stop reading.
  // reason is a static string. The decoder refuses further input afterwards.
  virtual void on_protocol_error(uint16_t close_code, const char* reason) = 0;
};

class FrameDecoder {
 public:
  explicit FrameDecoder(DecoderLimits limits = {});

  // Consumes bytes, unmasking payload in place (binary payload: see on_masked_message_data).
  // Returns the bytes consumed: all of them, unless the peer broke the protocol, a Close frame
  // ended the stream, or the sink asked for a pause.
  size_t consume(uint8_t* data, size_t size, DecoderSink& sink);

  // From a sink callback: consume() returns after the frame being reported, leaving the rest of
  // its input unconsumed, so the caller can stop decoding a peer's requests (while the peer's
  // replies go unread) and hand the rest back later.
  void request_pause() { pause_requested_ = true; }

  // Payload bytes still to come in the current *data* frame (0 when the decoder is not inside a
  // text/binary/continuation frame's payload). The caller may read up to this many bytes directly
  // into their destination and pass that memory to consume().
  uint64_t data_payload_remaining() const;

  // Opcode of the data message in progress (kContinuation when none).
  Opcode message_opcode() const;

  bool failed() const;
  bool closed() const;

 private:
  // Implementation state; kept small (a few dozen bytes plus the 125-byte control buffer).
  enum class State : uint8_t { kHeader, kPayload, kFailed, kClosed };

  size_t consume_header(const uint8_t* data, size_t size, DecoderSink& sink);
  size_t consume_payload(uint8_t* data, size_t size, DecoderSink& sink);
  bool check_fixed_header(DecoderSink& sink);
  void begin_frame(DecoderSink& sink);
  void finish_frame(DecoderSink& sink);
  void finish_close(DecoderSink& sink);
  bool fail(DecoderSink& sink, uint16_t close_code, const char* reason);

  DecoderLimits limits_;
  State state_ = State::kHeader;
  uint8_t header_[14] = {};
  uint8_t header_have_ = 0;
  uint8_t header_need_ = 2;
  Opcode frame_opcode_ = Opcode::kContinuation;
  Opcode message_opcode_ = Opcode::kContinuation;  // kContinuation: no message in progress
  bool frame_fin_ = false;
  uint32_t mask_key_ = 0;  // as it appears on the wire, loaded little-endian
  uint64_t frame_remaining_ = 0;
  uint64_t frame_offset_ = 0;  // payload bytes of this frame already consumed (mask phase)
  uint64_t message_bytes_ = 0;
  uint32_t utf8_state_ = 0;
  uint8_t control_[125] = {};
  uint8_t control_have_ = 0;
  bool pause_requested_ = false;
};

}  // namespace syncd::ws
