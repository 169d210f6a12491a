#include "net/ws/frame_decoder.h"

#include <algorithm>
#include <cstring>

#include "net/ws/unmask.h"
#include "net/ws/utf8.h"

namespace syncd::ws {
namespace {

constexpr uint8_t kFinBit = 0x80;
constexpr uint8_t kRsvBits = 0x70;
constexpr uint8_t kOpcodeBits = 0x0F;
constexpr uint8_t kMaskBit = 0x80;
constexpr uint8_t kLength7Bits = 0x7F;
constexpr uint8_t kLength16Marker = 126;
constexpr uint8_t kLength64Marker = 127;
constexpr uint8_t kFixedHeaderBytes = 2;
constexpr uint8_t kMaskKeyBytes = 4;
constexpr uint8_t kMaxControlPayload = 125;

constexpr bool is_control(Opcode opcode) {
  return (static_cast<uint8_t>(opcode) & 0x8) != 0;
}

constexpr bool is_known_opcode(uint8_t raw) {
  switch (static_cast<Opcode>(raw)) {
    case Opcode::kContinuation:
    case Opcode::kText:
    case Opcode::kBinary:
    case Opcode::kClose:
    case Opcode::kPing:
    case Opcode::kPong:
      return true;
  }
  return false;
}

uint64_t load_be(const uint8_t* p, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value = (value << 8) | p[i];
  return value;
}

}  // namespace

bool is_valid_close_code(uint16_t code) {
  // 1004-1006 and 1015 are reserved and must never appear on the wire; 1012-1014 were
  // registered with IANA after RFC 6455 and are sent by real servers.
  if (code >= 1000 && code <= 1003) return true;
  if (code >= 1007 && code <= 1014) return true;
  return code >= 3000 && code <= 4999;
}

FrameDecoder::FrameDecoder(DecoderLimits limits) : limits_(limits) {}

// On a protocol error the count returned stops where the error was detected; the stream is dead
// by then and the caller only sends a Close.
size_t FrameDecoder::consume(uint8_t* data, size_t size, DecoderSink& sink) {
  size_t pos = 0;
  pause_requested_ = false;
  while (pos < size && !pause_requested_) {
    if (state_ == State::kHeader) {
      pos += consume_header(data + pos, size - pos, sink);
    } else if (state_ == State::kPayload) {
      pos += consume_payload(data + pos, size - pos, sink);
    } else {
      break;
    }
  }
  return pos;
}

uint64_t FrameDecoder::data_payload_remaining() const {
  return state_ == State::kPayload && !is_control(frame_opcode_) ? frame_remaining_ : 0;
}

Opcode FrameDecoder::message_opcode() const {
  return message_opcode_;
}

bool FrameDecoder::failed() const {
  return state_ == State::kFailed;
}

bool FrameDecoder::closed() const {
  return state_ == State::kClosed;
}

size_t FrameDecoder::consume_header(const uint8_t* data, size_t size, DecoderSink& sink) {
  size_t used = 0;
  for (;;) {
    size_t take = std::min<size_t>(header_need_ - header_have_, size - used);
    std::memcpy(header_ + header_have_, data + used, take);
    header_have_ += static_cast<uint8_t>(take);
    used += take;
    if (header_have_ < header_need_) return used;
    // The fixed two bytes are checked before waiting for the rest, so a bad frame fails as soon
    // as it is recognisable. Once checked, header_need_ includes the mask and is never 2 again.
    if (header_need_ == kFixedHeaderBytes) {
      if (!check_fixed_header(sink)) return used;
      continue;
    }
    begin_frame(sink);
    return used;
  }
}

bool FrameDecoder::check_fixed_header(DecoderSink& sink) {
  const uint8_t b0 = header_[0];
  const uint8_t b1 = header_[1];
  if (b0 & kRsvBits) return fail(sink, close_code::kProtocolError, "reserved bit set");
  const uint8_t raw_opcode = b0 & kOpcodeBits;
  if (!is_known_opcode(raw_opcode)) return fail(sink, close_code::kProtocolError, "unknown opcode");
  if (!(b1 & kMaskBit)) return fail(sink, close_code::kProtocolError, "client frame not masked");

  frame_opcode_ = static_cast<Opcode>(raw_opcode);
  frame_fin_ = (b0 & kFinBit) != 0;
  const uint8_t length7 = b1 & kLength7Bits;
  if (is_control(frame_opcode_)) {
    if (!frame_fin_) return fail(sink, close_code::kProtocolError, "fragmented control frame");
    if (length7 > kMaxControlPayload) {
      return fail(sink, close_code::kProtocolError, "control frame payload over 125 bytes");
    }
  } else if (frame_opcode_ == Opcode::kContinuation) {
    if (message_opcode_ == Opcode::kContinuation) {
      return fail(sink, close_code::kProtocolError, "continuation frame outside a message");
    }
  } else if (message_opcode_ != Opcode::kContinuation) {
    return fail(sink, close_code::kProtocolError, "new message inside a fragmented message");
  }

  uint8_t extended_length_bytes = 0;
  if (length7 == kLength16Marker) extended_length_bytes = 2;
  if (length7 == kLength64Marker) extended_length_bytes = 8;
  header_need_ = kFixedHeaderBytes + extended_length_bytes + kMaskKeyBytes;
  return true;
}

void FrameDecoder::begin_frame(DecoderSink& sink) {
  const uint8_t length7 = header_[1] & kLength7Bits;
  uint64_t length = length7;
  const uint8_t* mask_bytes = header_ + kFixedHeaderBytes;
  if (length7 == kLength16Marker) {
    length = load_be(header_ + 2, 2);
    mask_bytes += 2;
    if (length < kLength16Marker) {
      fail(sink, close_code::kProtocolError, "non-minimal 16-bit payload length");
      return;
    }
  } else if (length7 == kLength64Marker) {
    length = load_be(header_ + 2, 8);
    mask_bytes += 8;
    if (length >> 63) {
      fail(sink, close_code::kProtocolError, "64-bit payload length with the high bit set");
      return;
    }
    if (length <= 0xFFFF) {
      fail(sink, close_code::kProtocolError, "non-minimal 64-bit payload length");
      return;
    }
  }

  if (!is_control(frame_opcode_)) {
    // message_bytes_ never exceeds the limit (every accepted frame was checked), so the
    // subtraction cannot wrap.
    const uint64_t already = frame_opcode_ == Opcode::kContinuation ? message_bytes_ : 0;
    if (length > limits_.max_message_bytes - already) {
      fail(sink, close_code::kMessageTooBig, "message exceeds the size limit");
      return;
    }
  }

  mask_key_ = static_cast<uint32_t>(mask_bytes[0]) | static_cast<uint32_t>(mask_bytes[1]) << 8 |
              static_cast<uint32_t>(mask_bytes[2]) << 16 |
              static_cast<uint32_t>(mask_bytes[3]) << 24;
  header_have_ = 0;
  header_need_ = kFixedHeaderBytes;
  frame_remaining_ = length;
  frame_offset_ = 0;
  control_have_ = 0;
  state_ = State::kPayload;

  if (frame_opcode_ == Opcode::kText || frame_opcode_ == Opcode::kBinary) {
    message_opcode_ = frame_opcode_;
    message_bytes_ = 0;
    utf8_state_ = kUtf8Accept;
    sink.on_message_begin(frame_opcode_, length, frame_fin_);
  }
  // An empty frame has no payload bytes to trigger its completion later.
  if (length == 0) finish_frame(sink);
}

void DecoderSink::on_masked_message_data(uint8_t* data, size_t size, uint32_t mask_key,
                                         uint64_t phase) {
  unmask(data, size, mask_key, phase);
  on_message_data(data, size);
}

size_t FrameDecoder::consume_payload(uint8_t* data, size_t size, DecoderSink& sink) {
  const size_t n = static_cast<size_t>(std::min<uint64_t>(frame_remaining_, size));
  if (is_control(frame_opcode_)) {
    // Control payloads are tiny and may be split across reads; gather them so the sink gets
    // one contiguous span.
    uint8_t* dst = control_ + control_have_;
    std::memcpy(dst, data, n);
    unmask(dst, n, mask_key_, frame_offset_);
    control_have_ += static_cast<uint8_t>(n);
    frame_offset_ += n;
    frame_remaining_ -= n;
  } else if (message_opcode_ == Opcode::kBinary) {
    const uint64_t phase = frame_offset_;
    frame_offset_ += n;
    frame_remaining_ -= n;
    message_bytes_ += n;
    sink.on_masked_message_data(data, n, mask_key_, phase);
  } else {
    unmask(data, n, mask_key_, frame_offset_);
    utf8_state_ = utf8_validate(utf8_state_, data, n);
    if (utf8_state_ == kUtf8Reject) {
      fail(sink, close_code::kInvalidPayload, "text message is not valid UTF-8");
      return n;
    }
    frame_offset_ += n;
    frame_remaining_ -= n;
    message_bytes_ += n;
    sink.on_message_data(data, n);
  }
  if (frame_remaining_ == 0) finish_frame(sink);
  return n;
}

void FrameDecoder::finish_frame(DecoderSink& sink) {
  state_ = State::kHeader;
  switch (frame_opcode_) {
    case Opcode::kPing:
      sink.on_ping({control_, control_have_});
      return;
    case Opcode::kPong:
      sink.on_pong({control_, control_have_});
      return;
    case Opcode::kClose:
      finish_close(sink);
      return;
    case Opcode::kContinuation:
    case Opcode::kText:
    case Opcode::kBinary:
      break;
  }
  if (!frame_fin_) return;
  if (message_opcode_ == Opcode::kText && utf8_state_ != kUtf8Accept) {
    fail(sink, close_code::kInvalidPayload, "text message ends inside a UTF-8 sequence");
    return;
  }
  message_opcode_ = Opcode::kContinuation;
  message_bytes_ = 0;
  sink.on_message_end();
}

void FrameDecoder::finish_close(DecoderSink& sink) {
  uint16_t code = close_code::kNoStatus;
  std::string_view reason;
  if (control_have_ == 1) {
    fail(sink, close_code::kProtocolError, "close frame with a 1-byte payload");
    return;
  }
  if (control_have_ >= 2) {
    code = static_cast<uint16_t>(load_be(control_, 2));
    if (!is_valid_close_code(code)) {
      fail(sink, close_code::kProtocolError, "close frame with an invalid status code");
      return;
    }
    const uint8_t* reason_bytes = control_ + 2;
    const size_t reason_size = control_have_ - 2u;
    if (utf8_validate(kUtf8Accept, reason_bytes, reason_size) != kUtf8Accept) {
      fail(sink, close_code::kInvalidPayload, "close reason is not valid UTF-8");
      return;
    }
    reason = {reinterpret_cast<const char*>(reason_bytes), reason_size};
  }
  state_ = State::kClosed;
  sink.on_close(code, reason);
}

bool FrameDecoder::fail(DecoderSink& sink, uint16_t close_code, const char* reason) {
  state_ = State::kFailed;
  sink.on_protocol_error(close_code, reason);
  return false;
}

}  // namespace syncd::ws
