#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "net/ws/frame_decoder.h"
#include "net/ws/frame_encoder.h"

namespace syncd::ws {
namespace {

using Bytes = std::vector<uint8_t>;

constexpr uint32_t kTestKey = 0x3d21fa37;  // wire bytes 37 fa 21 3d, as in RFC 6455 section 5.7

// ---------------------------------------------------------------------------------------------
// Recording sink

struct Event {
  enum Kind { kBegin, kData, kEnd, kPing, kPong, kClose, kError } kind;
  Opcode opcode = Opcode::kContinuation;
  uint64_t first_frame_bytes = 0;
  bool single_frame = false;
  uint16_t code = 0;
  std::string bytes;  // message data, ping/pong payload or close reason

  bool operator==(const Event&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Event& e) {
  static const char* const kNames[] = {"Begin", "Data", "End", "Ping", "Pong", "Close", "Error"};
  os << kNames[e.kind];
  switch (e.kind) {
    case Event::kBegin:
      return os << "(op=" << int(e.opcode) << ", first=" << e.first_frame_bytes
                << ", single=" << e.single_frame << ")";
    case Event::kClose:
    case Event::kError:
      return os << "(" << e.code << ", " << testing::PrintToString(e.bytes) << ")";
    case Event::kEnd:
      return os;
    default:
      return os << "(" << testing::PrintToString(e.bytes) << ")";
  }
}

Event begin_event(Opcode op, uint64_t first, bool single) {
  return {Event::kBegin, op, first, single, 0, {}};
}
Event data_event(std::string_view s) {
  return {Event::kData, {}, 0, false, 0, std::string(s)};
}
Event end_event() {
  return {Event::kEnd};
}
Event ping_event(std::string_view s) {
  return {Event::kPing, {}, 0, false, 0, std::string(s)};
}
Event pong_event(std::string_view s) {
  return {Event::kPong, {}, 0, false, 0, std::string(s)};
}
Event close_event(uint16_t code, std::string_view reason = {}) {
  return {Event::kClose, {}, 0, false, code, std::string(reason)};
}
// Protocol errors are compared by code only; the reason text is for humans.
Event error_event(uint16_t code) {
  return {Event::kError, {}, 0, false, code, {}};
}

class RecordingSink : public DecoderSink {
 public:
  // Adjacent data chunks are merged so that the same stream fed in different pieces records the
  // same events; the raw chunks are kept separately for pointer checks.
  std::vector<Event> events;
  struct Chunk {
    const uint8_t* data;
    size_t size;
  };
  std::vector<Chunk> chunks;

  void on_message_begin(Opcode opcode, uint64_t first_frame_bytes, bool single_frame) override {
    events.push_back(begin_event(opcode, first_frame_bytes, single_frame));
  }
  void on_message_data(uint8_t* p, size_t size) override {
    EXPECT_GT(size, 0u) << "empty data chunks should not be reported";
    chunks.push_back({p, size});
    if (events.empty() || events.back().kind != Event::kData) events.push_back(data_event(""));
    events.back().bytes.append(reinterpret_cast<const char*>(p), size);
  }
  void on_message_end() override { events.push_back(end_event()); }
  void on_ping(std::span<const uint8_t> payload) override {
    events.push_back(ping_event(as_text(payload)));
  }
  void on_pong(std::span<const uint8_t> payload) override {
    events.push_back(pong_event(as_text(payload)));
  }
  void on_close(uint16_t code, std::string_view reason) override {
    events.push_back(close_event(code, reason));
  }
  void on_protocol_error(uint16_t code, const char* reason) override {
    EXPECT_NE(reason, nullptr);
    EXPECT_GT(std::strlen(reason), 0u);
    events.push_back(error_event(code));
  }

 private:
  static std::string_view as_text(std::span<const uint8_t> s) {
    return {reinterpret_cast<const char*>(s.data()), s.size()};
  }
};

// ---------------------------------------------------------------------------------------------
// Frame builders. Masking is done here by the RFC's definition, independently of unmask.cpp.

void mask_payload(uint8_t* p, size_t n, uint32_t key) {
  for (size_t i = 0; i < n; ++i) p[i] ^= static_cast<uint8_t>(key >> (8 * (i % 4)));
}

// A well-formed client frame.
Bytes frame(Opcode op, std::string_view payload, bool fin = true, uint32_t key = kTestKey) {
  Bytes out(kMaxClientHeaderBytes);
  out.resize(encode_client_header(out.data(), op, payload.size(), key, fin));
  const size_t header = out.size();
  out.insert(out.end(), payload.begin(), payload.end());
  mask_payload(out.data() + header, payload.size(), key);
  return out;
}

// A frame with hand-picked first bytes and extended length, for malformed headers.
Bytes raw_frame(uint8_t b0, uint8_t b1, Bytes extended_length, std::string_view payload,
                uint32_t key = kTestKey) {
  Bytes out = extended_length;
  out.insert(out.begin(), {b0, b1});
  if (b1 & 0x80) {
    for (int j = 0; j < 4; ++j) out.push_back(static_cast<uint8_t>(key >> (8 * j)));
  }
  const size_t header = out.size();
  out.insert(out.end(), payload.begin(), payload.end());
  if (b1 & 0x80) mask_payload(out.data() + header, payload.size(), key);
  return out;
}

Bytes close_frame(uint16_t code, std::string_view reason = {}) {
  return frame(Opcode::kClose, close_payload(code, reason));
}

Bytes concat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

Bytes be(uint64_t value, int bytes) {
  Bytes out;
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Drivers

struct Result {
  std::vector<Event> events;
  size_t consumed = 0;
  bool failed = false;
  bool closed = false;
};

// Feeds `stream` (a private copy: the decoder unmasks in place) in pieces of the given sizes,
// then whatever is left in one piece. Each piece is its own allocation so a read outside it is
// visible to sanitizers.
Result feed(Bytes stream, const std::vector<size_t>& piece_sizes = {}, DecoderLimits limits = {}) {
  FrameDecoder decoder(limits);
  RecordingSink sink;
  Result result;
  size_t pos = 0;
  auto feed_piece = [&](size_t n) {
    Bytes piece(stream.begin() + pos, stream.begin() + pos + n);
    const size_t used = decoder.consume(piece.data(), piece.size(), sink);
    EXPECT_LE(used, n);
    result.consumed += used;
    pos += n;
  };
  for (size_t n : piece_sizes) {
    if (pos + n > stream.size()) break;
    feed_piece(n);
  }
  if (pos < stream.size()) feed_piece(stream.size() - pos);
  result.events = sink.events;
  result.failed = decoder.failed();
  result.closed = decoder.closed();
  return result;
}

Result feed_bytewise(const Bytes& stream) {
  return feed(stream, std::vector<size_t>(stream.size(), 1));
}

// ---------------------------------------------------------------------------------------------
// Basic messages

TEST(WsFrameDecoder, RfcSingleFrameMaskedText) {
  // RFC 6455 section 5.7, verbatim.
  Bytes wire = {0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58};
  Result r = feed(wire);
  EXPECT_EQ(r.events, (std::vector<Event>{begin_event(Opcode::kText, 5, true), data_event("Hello"),
                                          end_event()}));
  EXPECT_EQ(r.consumed, wire.size());
  EXPECT_FALSE(r.failed);
  EXPECT_FALSE(r.closed);
}

TEST(WsFrameDecoder, BinaryMessageWithEveryByteValue) {
  std::string payload;
  for (int i = 0; i < 256; ++i) payload += static_cast<char>(i);
  Result r = feed(frame(Opcode::kBinary, payload, true, 0x01020304));
  EXPECT_EQ(r.events, (std::vector<Event>{begin_event(Opcode::kBinary, 256, true),
                                          data_event(payload), end_event()}));
}

TEST(WsFrameDecoder, ZeroLengthMessages) {
  Result r = feed(concat({frame(Opcode::kText, ""), frame(Opcode::kBinary, "")}));
  EXPECT_EQ(r.events, (std::vector<Event>{begin_event(Opcode::kText, 0, true), end_event(),
                                          begin_event(Opcode::kBinary, 0, true), end_event()}));
  EXPECT_FALSE(r.failed);
}

TEST(WsFrameDecoder, ZeroLengthFragments) {
  Bytes wire =
      concat({frame(Opcode::kText, "", false), frame(Opcode::kContinuation, "", false),
              frame(Opcode::kContinuation, "abc", false), frame(Opcode::kContinuation, "", true)});
  Result r = feed(wire);
  EXPECT_EQ(r.events, (std::vector<Event>{begin_event(Opcode::kText, 0, false), data_event("abc"),
                                          end_event()}));
  EXPECT_EQ(r.consumed, wire.size());
}

TEST(WsFrameDecoder, ZeroLengthFrameAtEndOfInputCompletesImmediately) {
  FrameDecoder decoder;
  RecordingSink sink;
  Bytes wire = frame(Opcode::kBinary, "");
  EXPECT_EQ(decoder.consume(wire.data(), wire.size(), sink), wire.size());
  EXPECT_EQ(sink.events, (std::vector<Event>{begin_event(Opcode::kBinary, 0, true), end_event()}));
  EXPECT_EQ(decoder.message_opcode(), Opcode::kContinuation);
}

TEST(WsFrameDecoder, FragmentedMessageWithInterleavedControlFrames) {
  Bytes wire = concat({
      frame(Opcode::kText, "Hel", false),
      frame(Opcode::kPing, "are you there"),
      frame(Opcode::kContinuation, "lo, ", false),
      frame(Opcode::kPong, ""),
      frame(Opcode::kPing, ""),
      frame(Opcode::kContinuation, "world", true),
      frame(Opcode::kPing, "after"),
  });
  Result r = feed(wire);
  EXPECT_EQ(r.events, (std::vector<Event>{
                          begin_event(Opcode::kText, 3, false),
                          data_event("Hel"),
                          ping_event("are you there"),
                          data_event("lo, "),
                          pong_event(""),
                          ping_event(""),
                          data_event("world"),
                          end_event(),
                          ping_event("after"),
                      }));
  EXPECT_EQ(r.consumed, wire.size());
}

TEST(WsFrameDecoder, ControlFrameOfMaximumSizeSplitAcrossReads) {
  const std::string payload(125, 'p');
  Bytes wire = frame(Opcode::kPing, payload, true, 0xA1B2C3D4);
  for (size_t first : {size_t{1}, size_t{6}, size_t{7}, size_t{50}, wire.size() - 1}) {
    Result r = feed(wire, {first});
    EXPECT_EQ(r.events, (std::vector<Event>{ping_event(payload)})) << first;
  }
}

TEST(WsFrameDecoder, MessageOpcodeTracksMessageInProgress) {
  FrameDecoder decoder;
  RecordingSink sink;
  EXPECT_EQ(decoder.message_opcode(), Opcode::kContinuation);
  Bytes first = frame(Opcode::kBinary, "ab", false);
  decoder.consume(first.data(), first.size(), sink);
  EXPECT_EQ(decoder.message_opcode(), Opcode::kBinary);
  Bytes ping_frame = frame(Opcode::kPing, "x");
  decoder.consume(ping_frame.data(), ping_frame.size(), sink);
  EXPECT_EQ(decoder.message_opcode(), Opcode::kBinary);
  Bytes last = frame(Opcode::kContinuation, "cd", true);
  decoder.consume(last.data(), last.size(), sink);
  EXPECT_EQ(decoder.message_opcode(), Opcode::kContinuation);
}

// ---------------------------------------------------------------------------------------------
// Payload lengths

TEST(WsFrameDecoder, SixteenBitLengths) {
  for (size_t n : {size_t{126}, size_t{127}, size_t{1000}, size_t{65535}}) {
    std::string payload(n, 'x');
    payload[n - 1] = 'z';
    Bytes wire = frame(Opcode::kBinary, payload);
    ASSERT_EQ(wire[1], 0x80 | 126);
    Result r = feed(wire);
    EXPECT_EQ(r.events, (std::vector<Event>{begin_event(Opcode::kBinary, n, true),
                                            data_event(payload), end_event()}))
        << n;
  }
}

TEST(WsFrameDecoder, SixtyFourBitLengths) {
  for (size_t n : {size_t{65536}, size_t{1} << 20, size_t{1920 * 1080 * 4}}) {
    std::string payload(n, '\0');
    std::mt19937 rng(static_cast<uint32_t>(n));
    for (auto& c : payload) c = static_cast<char>(rng());
    Bytes wire = frame(Opcode::kBinary, payload, true, 0x9badf00d);
    ASSERT_EQ(wire[1], 0x80 | 127);
    Result r = feed(wire, {3, 7, 1000});  // header split, then payload from odd phases
    ASSERT_EQ(r.events.size(), 3u);
    EXPECT_EQ(r.events[0], begin_event(Opcode::kBinary, n, true));
    EXPECT_TRUE(r.events[1].bytes == payload) << n;
    EXPECT_EQ(r.events[2], end_event());
  }
}

TEST(WsFrameDecoder, NonMinimalLengthEncodingsAreProtocolErrors) {
  const std::vector<Bytes> wires = {
      raw_frame(0x82, 0x80 | 126, be(0, 2), ""),
      raw_frame(0x82, 0x80 | 126, be(125, 2), std::string(125, 'a')),
      raw_frame(0x82, 0x80 | 127, be(0, 8), ""),
      raw_frame(0x82, 0x80 | 127, be(125, 8), std::string(125, 'a')),
      raw_frame(0x82, 0x80 | 127, be(126, 8), std::string(126, 'a')),
      raw_frame(0x82, 0x80 | 127, be(65535, 8), std::string(65535, 'a')),
  };
  for (const Bytes& wire : wires) {
    Result r = feed(wire);
    EXPECT_EQ(r.events, (std::vector<Event>{error_event(close_code::kProtocolError)}));
    EXPECT_TRUE(r.failed);
  }
}

TEST(WsFrameDecoder, MinimalBoundaryLengthsAreAccepted) {
  Result r16 = feed(raw_frame(0x82, 0x80 | 126, be(126, 2), std::string(126, 'a')));
  EXPECT_FALSE(r16.failed);
  EXPECT_EQ(r16.events.back(), end_event());
  Result r64 = feed(raw_frame(0x82, 0x80 | 127, be(65536, 8), std::string(65536, 'a')));
  EXPECT_FALSE(r64.failed);
  EXPECT_EQ(r64.events.back(), end_event());
}

TEST(WsFrameDecoder, SixtyFourBitLengthWithHighBitSetIsProtocolError) {
  DecoderLimits unlimited{~0ull};
  for (uint64_t length : {1ull << 63, ~0ull}) {
    Result r = feed(raw_frame(0x82, 0x80 | 127, be(length, 8), ""), {}, unlimited);
    EXPECT_EQ(r.events, (std::vector<Event>{error_event(close_code::kProtocolError)}));
  }
}

// ---------------------------------------------------------------------------------------------
// Header-level protocol errors

TEST(WsFrameDecoder, UnmaskedClientFrameIsProtocolError) {
  for (uint8_t op : {0x1, 0x2, 0x8, 0x9, 0xA}) {
    Result r = feed(raw_frame(0x80 | op, 0x05, {}, "Hello"));
    EXPECT_EQ(r.events, (std::vector<Event>{error_event(close_code::kProtocolError)})) << int(op);
  }
}

TEST(WsFrameDecoder, ReservedBitsAreProtocolErrors) {
  for (uint8_t rsv : {0x40, 0x20, 0x10, 0x70}) {
    Result r = feed(raw_frame(0x80 | rsv | 0x1, 0x85, {}, "Hello"));
    EXPECT_EQ(r.events, (std::vector<Event>{error_event(close_code::kProtocolError)})) << int(rsv);
  }
}

TEST(WsFrameDecoder, UnknownOpcodesAreProtocolErrors) {
  for (uint8_t op : {0x3, 0x4, 0x5, 0x6, 0x7, 0xB, 0xC, 0xD, 0xE, 0xF}) {
    Result r = feed(raw_frame(0x80 | op, 0x80, {}, ""));
    EXPECT_EQ(r.events, (std::vector<Event>{error_event(close_code::kProtocolError)})) << int(op);
  }
}

TEST(WsFrameDecoder, ErrorIsReportedFromTheFirstTwoBytes) {
  // No need to wait for the mask key or payload to reject an unmasked frame.
  FrameDecoder decoder;
  RecordingSink sink;
  uint8_t two[] = {0x82, 0x7E};
  decoder.consume(two, 2, sink);
  EXPECT_TRUE(decoder.failed());
  EXPECT_EQ(sink.events, (std::vector<Event>{error_event(close_code::kProtocolError)}));
}

TEST(WsFrameDecoder, OversizedControlFrameIsProtocolError) {
  for (uint8_t op : {0x8, 0x9, 0xA}) {
    Result r16 = feed(raw_frame(0x80 | op, 0x80 | 126, be(126, 2), std::string(126, 'x')));
    EXPECT_EQ(r16.events, (std::vector<Event>{error_event(close_code::kProtocolError)})) << int(op);
    Result r64 = feed(raw_frame(0x80 | op, 0x80 | 127, be(70000, 8), ""));
    EXPECT_EQ(r64.events, (std::vector<Event>{error_event(close_code::kProtocolError)})) << int(op);
  }
}

TEST(WsFrameDecoder, FragmentedControlFrameIsProtocolError) {
  for (Opcode op : {Opcode::kPing, Opcode::kPong, Opcode::kClose}) {
    Result r = feed(frame(op, "", false));
    EXPECT_EQ(r.events, (std::vector<Event>{error_event(close_code::kProtocolError)})) << int(op);
  }
}

TEST(WsFrameDecoder, ContinuationWithoutMessageIsProtocolError) {
  EXPECT_EQ(feed(frame(Opcode::kContinuation, "x")).events,
            (std::vector<Event>{error_event(close_code::kProtocolError)}));
  // Also after a message has ended.
  EXPECT_EQ(feed(concat({frame(Opcode::kBinary, "a"), frame(Opcode::kContinuation, "b")})).events,
            (std::vector<Event>{begin_event(Opcode::kBinary, 1, true), data_event("a"), end_event(),
                                error_event(close_code::kProtocolError)}));
}

TEST(WsFrameDecoder, NewMessageDuringFragmentedMessageIsProtocolError) {
  for (Opcode op : {Opcode::kText, Opcode::kBinary}) {
    Result r = feed(concat({frame(Opcode::kBinary, "a", false), frame(op, "b")}));
    EXPECT_EQ(r.events, (std::vector<Event>{begin_event(Opcode::kBinary, 1, false), data_event("a"),
                                            error_event(close_code::kProtocolError)}))
        << int(op);
  }
}

// ---------------------------------------------------------------------------------------------
// Message size limit

TEST(WsFrameDecoder, SingleFrameOverLimitFailsFromHeaderAlone) {
  FrameDecoder decoder(DecoderLimits{100});
  RecordingSink sink;
  Bytes wire = frame(Opcode::kBinary, std::string(101, 'x'));
  const size_t header = 2 + 4;
  const size_t used = decoder.consume(wire.data(), header, sink);
  EXPECT_EQ(used, header);
  EXPECT_TRUE(decoder.failed());
  EXPECT_EQ(sink.events, (std::vector<Event>{error_event(close_code::kMessageTooBig)}));
}

TEST(WsFrameDecoder, MessageAtLimitIsAccepted) {
  Result r = feed(frame(Opcode::kBinary, std::string(100, 'x')), {}, DecoderLimits{100});
  EXPECT_FALSE(r.failed);
  EXPECT_EQ(r.events.back(), end_event());
}

TEST(WsFrameDecoder, LimitIsCumulativeAcrossFragments) {
  DecoderLimits limits{100};
  Bytes at_limit = concat({frame(Opcode::kText, std::string(60, 'a'), false),
                           frame(Opcode::kPing, std::string(100, 'p')),  // not counted
                           frame(Opcode::kContinuation, std::string(40, 'b'), true)});
  Result ok = feed(at_limit, {}, limits);
  EXPECT_FALSE(ok.failed);
  EXPECT_EQ(ok.events.back(), end_event());

  Bytes over = concat({frame(Opcode::kText, std::string(60, 'a'), false),
                       frame(Opcode::kContinuation, std::string(40, 'b'), false),
                       frame(Opcode::kContinuation, std::string(1, 'c'), true)});
  Result r = feed(over, {}, limits);
  EXPECT_EQ(r.events, (std::vector<Event>{begin_event(Opcode::kText, 60, false),
                                          data_event(std::string(60, 'a') + std::string(40, 'b')),
                                          error_event(close_code::kMessageTooBig)}));
}

TEST(WsFrameDecoder, LimitResetsBetweenMessages) {
  DecoderLimits limits{100};
  Bytes wire = concat({frame(Opcode::kBinary, std::string(100, 'a')),
                       frame(Opcode::kBinary, std::string(100, 'b'))});
  Result r = feed(wire, {}, limits);
  EXPECT_FALSE(r.failed);
  EXPECT_EQ(r.events.size(), 6u);
}

TEST(WsFrameDecoder, HugeDeclaredLengthFailsWithTooBig) {
  Result r = feed(raw_frame(0x82, 0x80 | 127, be(1ull << 40, 8), ""));
  EXPECT_EQ(r.events, (std::vector<Event>{error_event(close_code::kMessageTooBig)}));
}

// ---------------------------------------------------------------------------------------------
// Text validation

TEST(WsFrameDecoder, ValidMultiByteTextSplitAcrossFragments) {
  // U+20AC split 1|2 and U+1F600 split 2|2 between frames.
  Bytes wire = concat({frame(Opcode::kText, "price \xE2", false),
                       frame(Opcode::kContinuation, "\x82\xAC smile \xF0\x9F", false),
                       frame(Opcode::kContinuation, "\x98\x80", true)});
  Result r = feed(wire);
  EXPECT_EQ(r.events, (std::vector<Event>{begin_event(Opcode::kText, 7, false),
                                          data_event("price \xE2\x82\xAC smile \xF0\x9F\x98\x80"),
                                          end_event()}));
  EXPECT_EQ(feed_bytewise(wire).events, r.events);
}

TEST(WsFrameDecoder, InvalidTextFailsWith1007BeforeTheBadChunkIsReported) {
  Result r = feed(frame(Opcode::kText,
                        "abc\xFF"
                        "def"));
  EXPECT_EQ(r.events, (std::vector<Event>{begin_event(Opcode::kText, 7, true),
                                          error_event(close_code::kInvalidPayload)}));
  EXPECT_TRUE(r.failed);
}

TEST(WsFrameDecoder, InvalidTextAcrossFragmentsFailsWith1007) {
  Bytes wire =
      concat({frame(Opcode::kText, "ok \xE2\x82", false), frame(Opcode::kContinuation, "A", true)});
  Result r = feed(wire);
  EXPECT_EQ(r.events,
            (std::vector<Event>{begin_event(Opcode::kText, 5, false), data_event("ok \xE2\x82"),
                                error_event(close_code::kInvalidPayload)}));
}

TEST(WsFrameDecoder, InvalidTextFailsFastBeforeTheMessageEnds) {
  // The surrogate lead is rejected on its second byte even though the frame is incomplete.
  FrameDecoder decoder;
  RecordingSink sink;
  Bytes wire = frame(Opcode::kText, "ab\xED\xA0\x80 and much more text");
  decoder.consume(wire.data(), 6 + 4, sink);
  EXPECT_TRUE(decoder.failed());
  EXPECT_EQ(sink.events.back(), error_event(close_code::kInvalidPayload));
}

TEST(WsFrameDecoder, TextEndingInsideASequenceFailsWith1007BeforeEnd) {
  for (std::string_view tail : {"\xC3", "\xE2\x82", "\xF0\x9F\x98"}) {
    std::string text = "x";
    text.append(tail);
    Result single = feed(frame(Opcode::kText, text));
    ASSERT_FALSE(single.events.empty());
    EXPECT_EQ(single.events.back(), error_event(close_code::kInvalidPayload));
    EXPECT_EQ(std::count(single.events.begin(), single.events.end(), end_event()), 0);

    Result fragmented =
        feed(concat({frame(Opcode::kText, tail, false), frame(Opcode::kContinuation, "", true)}));
    EXPECT_EQ(fragmented.events.back(), error_event(close_code::kInvalidPayload));
  }
}

TEST(WsFrameDecoder, OverlongSurrogateAndBeyondMaxTextAreRejected) {
  for (std::string_view bad : {"\xC0\xAF", "\xE0\x80\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80"}) {
    Result r = feed(frame(Opcode::kText, bad));
    EXPECT_EQ(r.events.back(), error_event(close_code::kInvalidPayload))
        << testing::PrintToString(bad);
  }
}

TEST(WsFrameDecoder, BinaryIsNotUtf8Validated) {
  Result r = feed(frame(Opcode::kBinary, "\xFF\xFE\xC0\x80"));
  EXPECT_FALSE(r.failed);
  EXPECT_EQ(r.events.back(), end_event());
}

// ---------------------------------------------------------------------------------------------
// Close frames

TEST(WsFrameDecoder, CloseWithoutPayloadReportsNoStatus) {
  Result r = feed(frame(Opcode::kClose, ""));
  EXPECT_EQ(r.events, (std::vector<Event>{close_event(close_code::kNoStatus, "")}));
  EXPECT_TRUE(r.closed);
}

TEST(WsFrameDecoder, CloseWithCodeAndReason) {
  Result r = feed(close_frame(1000, "bye \xF0\x9F\x91\x8B"));
  EXPECT_EQ(r.events, (std::vector<Event>{close_event(1000, "bye \xF0\x9F\x91\x8B")}));
  EXPECT_TRUE(r.closed);
}

TEST(WsFrameDecoder, CloseStopsConsumptionAfterTheCloseFrame) {
  Bytes close_bytes = close_frame(1001);
  Bytes wire = concat({close_bytes, frame(Opcode::kText, "ignored")});
  FrameDecoder decoder;
  RecordingSink sink;
  EXPECT_EQ(decoder.consume(wire.data(), wire.size(), sink), close_bytes.size());
  EXPECT_TRUE(decoder.closed());
  EXPECT_EQ(decoder.consume(wire.data(), wire.size(), sink), 0u);
  EXPECT_EQ(sink.events, (std::vector<Event>{close_event(1001)}));
}

TEST(WsFrameDecoder, CloseInTheMiddleOfAFragmentedMessageIsReported) {
  Result r = feed(concat({frame(Opcode::kBinary, "part", false), close_frame(1000)}));
  EXPECT_EQ(r.events, (std::vector<Event>{begin_event(Opcode::kBinary, 4, false),
                                          data_event("part"), close_event(1000)}));
}

TEST(WsFrameDecoder, CloseWithOneBytePayloadIsProtocolError) {
  Result r = feed(frame(Opcode::kClose, "\x03"));
  EXPECT_EQ(r.events, (std::vector<Event>{error_event(close_code::kProtocolError)}));
  EXPECT_FALSE(r.closed);
  EXPECT_TRUE(r.failed);
}

TEST(WsFrameDecoder, CloseReasonMustBeUtf8) {
  Result r = feed(frame(Opcode::kClose, std::string("\x03\xE8"
                                                    "ab\xC0\x80",
                                                    6)));
  EXPECT_EQ(r.events, (std::vector<Event>{error_event(close_code::kInvalidPayload)}));
  Result truncated = feed(frame(Opcode::kClose, std::string("\x03\xE8"
                                                            "ab\xE2\x82",
                                                            6)));
  EXPECT_EQ(truncated.events, (std::vector<Event>{error_event(close_code::kInvalidPayload)}));
}

struct CloseCodeCase {
  uint16_t code;
  bool valid;
};

class WsCloseCode : public testing::TestWithParam<CloseCodeCase> {};

TEST_P(WsCloseCode, ValidatedOnTheWire) {
  const CloseCodeCase c = GetParam();
  EXPECT_EQ(is_valid_close_code(c.code), c.valid);
  Result r = feed(close_frame(c.code, "reason"));
  if (c.valid) {
    EXPECT_EQ(r.events, (std::vector<Event>{close_event(c.code, "reason")}));
    EXPECT_TRUE(r.closed);
  } else {
    EXPECT_EQ(r.events, (std::vector<Event>{error_event(close_code::kProtocolError)}));
    EXPECT_TRUE(r.failed);
  }
}

INSTANTIATE_TEST_SUITE_P(AllRanges, WsCloseCode,
                         testing::Values(CloseCodeCase{0, false}, CloseCodeCase{999, false},
                                         CloseCodeCase{1000, true}, CloseCodeCase{1001, true},
                                         CloseCodeCase{1002, true}, CloseCodeCase{1003, true},
                                         CloseCodeCase{1004, false}, CloseCodeCase{1005, false},
                                         CloseCodeCase{1006, false}, CloseCodeCase{1007, true},
                                         CloseCodeCase{1008, true}, CloseCodeCase{1009, true},
                                         CloseCodeCase{1010, true}, CloseCodeCase{1011, true},
                                         CloseCodeCase{1012, true}, CloseCodeCase{1013, true},
                                         CloseCodeCase{1014, true}, CloseCodeCase{1015, false},
                                         CloseCodeCase{1016, false}, CloseCodeCase{2000, false},
                                         CloseCodeCase{2999, false}, CloseCodeCase{3000, true},
                                         CloseCodeCase{4000, true}, CloseCodeCase{4999, true},
                                         CloseCodeCase{5000, false}, CloseCodeCase{65535, false}),
                         [](const testing::TestParamInfo<CloseCodeCase>& info) {
                           return "Code" + std::to_string(info.param.code);
                         });

// ---------------------------------------------------------------------------------------------
// Failure is terminal

TEST(WsFrameDecoder, NothingIsConsumedAfterAProtocolError) {
  FrameDecoder decoder;
  RecordingSink sink;
  Bytes bad = raw_frame(0x81, 0x05, {}, "Hello");
  decoder.consume(bad.data(), bad.size(), sink);
  ASSERT_TRUE(decoder.failed());
  Bytes good = frame(Opcode::kText, "Hello");
  EXPECT_EQ(decoder.consume(good.data(), good.size(), sink), 0u);
  EXPECT_EQ(sink.events, (std::vector<Event>{error_event(close_code::kProtocolError)}));
  EXPECT_EQ(decoder.data_payload_remaining(), 0u);
}

TEST(WsFrameDecoder, ConsumeStopsAtTheError) {
  Bytes good = frame(Opcode::kBinary, "abc");
  Bytes wire = concat({good, raw_frame(0x82, 0x03, {}, "xyz"), good});
  FrameDecoder decoder;
  RecordingSink sink;
  const size_t used = decoder.consume(wire.data(), wire.size(), sink);
  EXPECT_GE(used, good.size());
  EXPECT_LT(used, wire.size());
  EXPECT_EQ(sink.events.back(), error_event(close_code::kProtocolError));
}

// ---------------------------------------------------------------------------------------------
// Splitting: the same stream fed in any pieces must produce the same events.

std::vector<Bytes> valid_streams() {
  std::string big(70000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 31 + 7);
  return {
      concat({frame(Opcode::kText, "Hel", false, 0x11223344), frame(Opcode::kPing, "hi"),
              frame(Opcode::kContinuation, "lo \xE2\x82", false, 0x55667788),
              frame(Opcode::kPong, std::string(125, 'q')),
              frame(Opcode::kContinuation, "\xAC \xF0\x9F\x98\x80!", true, 0x99AABBCC),
              frame(Opcode::kBinary, std::string(300, 'b'), true, 0xDDEEFF00),
              frame(Opcode::kText, ""), frame(Opcode::kBinary, "", false),
              frame(Opcode::kContinuation, ""), close_frame(1000, "done \xC3\xA9")}),
      concat({frame(Opcode::kBinary, big, true, 0x12345678), close_frame(4001)}),
  };
}

std::vector<Bytes> failing_streams() {
  return {
      concat({frame(Opcode::kText, "ok"), frame(Opcode::kText, "b\xED\xA0\x80")}),
      concat({frame(Opcode::kText, "\xE2\x82", false), frame(Opcode::kContinuation, "", true)}),
      concat({frame(Opcode::kBinary, "a", false), frame(Opcode::kPing, "p"),
              frame(Opcode::kText, "b")}),
      concat({frame(Opcode::kBinary, "a"), raw_frame(0x82, 0x80 | 126, be(5, 2), "12345")}),
      concat({frame(Opcode::kPing, "x"), frame(Opcode::kClose, "\x03")}),
      concat({frame(Opcode::kPing, "x"), close_frame(1005)}),
  };
}

// Events with the bytes of data events dropped: a failing text chunk may be reported partly or
// not at all depending on where the reads split it.
std::vector<Event> without_data(std::vector<Event> events) {
  std::erase_if(events, [](const Event& e) { return e.kind == Event::kData; });
  return events;
}

TEST(WsFrameDecoder, EveryTwoWaySplitMatchesWholeFeed) {
  for (const Bytes& stream : valid_streams()) {
    if (stream.size() > 5000) continue;  // the 70 kB stream is covered by the random splits
    const Result whole = feed(stream);
    ASSERT_TRUE(whole.closed);
    ASSERT_EQ(whole.consumed, stream.size());
    for (size_t cut = 0; cut <= stream.size(); ++cut) {
      Result split = feed(stream, {cut});
      ASSERT_EQ(split.events, whole.events) << "cut at " << cut;
      ASSERT_EQ(split.consumed, stream.size());
    }
  }
  for (const Bytes& stream : failing_streams()) {
    const Result whole = feed(stream);
    ASSERT_TRUE(whole.failed);
    for (size_t cut = 0; cut <= stream.size(); ++cut) {
      Result split = feed(stream, {cut});
      ASSERT_TRUE(split.failed) << "cut at " << cut;
      ASSERT_EQ(without_data(split.events), without_data(whole.events)) << "cut at " << cut;
    }
  }
}

TEST(WsFrameDecoder, OneByteAtATimeMatchesWholeFeed) {
  for (const Bytes& stream : valid_streams()) {
    EXPECT_EQ(feed_bytewise(stream).events, feed(stream).events);
  }
  for (const Bytes& stream : failing_streams()) {
    Result bytewise = feed_bytewise(stream);
    EXPECT_TRUE(bytewise.failed);
    EXPECT_EQ(without_data(bytewise.events), without_data(feed(stream).events));
  }
}

TEST(WsFrameDecoder, RandomPiecesMatchWholeFeed) {
  std::mt19937_64 rng(6455);
  for (const Bytes& stream : valid_streams()) {
    const Result whole = feed(stream);
    for (int iter = 0; iter < 200; ++iter) {
      std::vector<size_t> pieces;
      const size_t max_piece = (iter % 2) ? 16 : 4096;
      for (size_t total = 0; total < stream.size();) {
        pieces.push_back(1 + rng() % max_piece);
        total += pieces.back();
      }
      Result split = feed(stream, pieces);
      ASSERT_EQ(split.events, whole.events) << "iteration " << iter;
      ASSERT_EQ(split.consumed, stream.size());
    }
  }
}

// ---------------------------------------------------------------------------------------------
// In-place reads into the final destination

// Simulates the daemon: header bytes are read into a small scratch buffer one at a time; once the
// decoder is inside a data payload, bytes are "read from the socket" straight into the frame
// buffer at the current write position and that same memory is passed to consume().
TEST(WsFrameDecoder, PayloadIsUnmaskedInPlaceInTheCallersDestination) {
  std::string payload(200000, '\0');
  std::mt19937 rng(42);
  for (auto& c : payload) c = static_cast<char>(rng());
  const Bytes socket = concat({
      frame(Opcode::kBinary, std::string_view(payload).substr(0, 70000), false, 0x01020304),
      frame(Opcode::kPing, "mid-message ping"),
      frame(Opcode::kContinuation, std::string_view(payload).substr(70000, 3), false, 0xCAFEBABE),
      frame(Opcode::kContinuation, std::string_view(payload).substr(70003), true, 0xFEEDFACE),
  });

  FrameDecoder decoder;
  RecordingSink sink;
  Bytes destination(payload.size());
  size_t written = 0;
  size_t socket_pos = 0;
  std::vector<const uint8_t*> expected_chunk_starts;
  while (socket_pos < socket.size()) {
    const uint64_t remaining = decoder.data_payload_remaining();
    if (remaining > 0) {
      // Read in odd sizes so chunks start at every mask phase.
      const size_t n = std::min<size_t>({remaining, socket.size() - socket_pos, 4093});
      uint8_t* into = destination.data() + written;
      std::memcpy(into, socket.data() + socket_pos, n);
      expected_chunk_starts.push_back(into);
      ASSERT_EQ(decoder.consume(into, n, sink), n);
      written += n;
      socket_pos += n;
    } else {
      uint8_t scratch = socket[socket_pos];
      ASSERT_EQ(decoder.consume(&scratch, 1, sink), 1u);
      ++socket_pos;
    }
  }
  EXPECT_FALSE(decoder.failed());
  ASSERT_EQ(written, payload.size());
  EXPECT_TRUE(std::memcmp(destination.data(), payload.data(), payload.size()) == 0);
  ASSERT_EQ(sink.chunks.size(), expected_chunk_starts.size());
  for (size_t i = 0; i < sink.chunks.size(); ++i) {
    EXPECT_EQ(sink.chunks[i].data, expected_chunk_starts[i]) << i;
  }
  EXPECT_EQ(sink.events.front(), begin_event(Opcode::kBinary, 70000, false));
  EXPECT_EQ(sink.events.back(), end_event());
}

TEST(WsFrameDecoder, DataPayloadRemainingOnlyCountsDataFramePayload) {
  FrameDecoder decoder;
  RecordingSink sink;
  EXPECT_EQ(decoder.data_payload_remaining(), 0u);

  Bytes wire = frame(Opcode::kBinary, std::string(1000, 'd'), false);
  const size_t header = 4 + 4;
  decoder.consume(wire.data(), header - 1, sink);
  EXPECT_EQ(decoder.data_payload_remaining(), 0u);  // header not complete yet
  decoder.consume(wire.data() + header - 1, 1, sink);
  EXPECT_EQ(decoder.data_payload_remaining(), 1000u);
  decoder.consume(wire.data() + header, 300, sink);
  EXPECT_EQ(decoder.data_payload_remaining(), 700u);
  decoder.consume(wire.data() + header + 300, 700, sink);
  EXPECT_EQ(decoder.data_payload_remaining(), 0u);

  Bytes ping_frame = frame(Opcode::kPing, "0123456789");
  decoder.consume(ping_frame.data(), 6 + 4, sink);
  EXPECT_EQ(decoder.data_payload_remaining(), 0u);  // inside a control payload
  decoder.consume(ping_frame.data() + 10, ping_frame.size() - 10, sink);

  Bytes last = frame(Opcode::kContinuation, "xyz", true);
  decoder.consume(last.data(), 6, sink);
  EXPECT_EQ(decoder.data_payload_remaining(), 3u);
  decoder.consume(last.data() + 6, 3, sink);
  EXPECT_EQ(decoder.data_payload_remaining(), 0u);
  EXPECT_EQ(sink.events.back(), end_event());
}

// ---------------------------------------------------------------------------------------------
// Encoder -> decoder

TEST(WsFrameDecoder, ClientEncoderRoundTrip) {
  std::mt19937_64 rng(7);
  for (uint64_t n : {0ull, 1ull, 125ull, 126ull, 127ull, 65535ull, 65536ull, 100001ull}) {
    for (Opcode op : {Opcode::kText, Opcode::kBinary}) {
      std::string payload(n, '\0');
      for (auto& c : payload) c = static_cast<char>(op == Opcode::kText ? 'a' + rng() % 26 : rng());
      const uint32_t key = static_cast<uint32_t>(rng());
      Bytes wire(kMaxClientHeaderBytes);
      wire.resize(encode_client_header(wire.data(), op, n, key));
      const size_t header = wire.size();
      wire.insert(wire.end(), payload.begin(), payload.end());
      mask_payload(wire.data() + header, n, key);

      std::vector<Event> expected = {begin_event(op, n, true)};
      if (n > 0) expected.push_back(data_event(payload));
      expected.push_back(end_event());
      EXPECT_EQ(feed(wire).events, expected) << n;
    }
  }
}

TEST(WsFrameDecoder, FrameDecoderStaysSmall) {
  // One per connection; it must not grow hidden buffers.
  EXPECT_LE(sizeof(FrameDecoder), 256u);
}

// A sink that unmasks binary payload itself (syncd's ingest does, fused with its hash) gets the
// bytes still masked, with the key and each piece's offset into its frame; text stays unmasked.
class MaskedSink : public RecordingSink {
 public:
  std::string unmasked;
  size_t masked_calls = 0;
  void on_masked_message_data(uint8_t* p, size_t size, uint32_t mask_key, uint64_t phase) override {
    ++masked_calls;
    for (size_t i = 0; i < size; ++i) {
      unmasked.push_back(char(p[i] ^ uint8_t(mask_key >> (8 * ((phase + i) % 4)))));
    }
  }
};

TEST(WsFrameDecoder, BinaryPayloadReachesAMaskedSinkWithItsKeyAndPhase) {
  const std::string first = "0123456789abcdef-fragment-one";
  const std::string second = "second fragment, another key";
  const Bytes stream = concat({frame(Opcode::kBinary, first, false, 0x11223344),
                               frame(Opcode::kContinuation, second, true, 0xA1B2C3D4),
                               frame(Opcode::kText, "text")});
  for (size_t piece : {size_t{1}, size_t{3}, size_t{7}, stream.size()}) {
    Bytes copy = stream;
    FrameDecoder decoder;
    MaskedSink sink;
    for (size_t at = 0; at < copy.size(); at += piece) {
      const size_t n = std::min(piece, copy.size() - at);
      ASSERT_EQ(decoder.consume(copy.data() + at, n, sink), n);
    }
    EXPECT_EQ(sink.unmasked, first + second) << "pieces of " << piece;
    EXPECT_GE(sink.masked_calls, 2u);
    // Only the text message went through on_message_data, unmasked.
    ASSERT_FALSE(sink.events.empty());
    bool saw_text = false;
    for (const Event& e : sink.events) {
      if (e.kind == Event::kData) {
        EXPECT_EQ(e.bytes, "text");
        saw_text = true;
      }
    }
    EXPECT_TRUE(saw_text);
  }
}

}  // namespace
}  // namespace syncd::ws
