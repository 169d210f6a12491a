// libFuzzer target for syncd::fec::Decoder.
//
// The input is a program of records; each record's first byte picks what the next bytes become:
//   0: a source packet built around fuzzer bytes (RTP version, sequence and SSRC right, so it
//      gets past the first checks), 1: a repair payload whose header fields come from the fuzzer
//      (SSRC right), 2: raw bytes as a source, 3: raw bytes as a repair, 4: time moves on,
//   5: a block made by the real encoder from fuzzer bytes, fed with a fuzzer-chosen subset of its
//      packets (so the recovery path runs often), 6: expire().
// Each packet is copied into its own exact-size allocation so any read past it trips ASan. The
// sink checks that what comes out looks like what the decoder promises.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "fec/decoder.h"
#include "fec/encoder.h"
#include "fec/payload.h"
#include "fuzz_check.h"

namespace {

using namespace syncd::fec;

constexpr uint32_t kSsrc = 0xF00DF00D;

struct Reader {
  const uint8_t* data;
  size_t size;
  size_t at = 0;
  bool empty() const { return at >= size; }
  uint8_t u8() { return at < size ? data[at++] : 0; }
  uint16_t u16() { return static_cast<uint16_t>(u8() << 8 | u8()); }
  std::vector<uint8_t> bytes(size_t n) {
    std::vector<uint8_t> out;
    while (n-- > 0 && at < size) out.push_back(data[at++]);
    return out;
  }
};

struct CheckingSink : RecoverySink {
  uint64_t recovered = 0;
  void on_recovered(uint16_t sequence, std::span<const uint8_t> packet) override {
    FUZZ_CHECK(packet.size() >= kMinPacketBytes && packet.size() <= kMaxPacketBytes);
    FUZZ_CHECK((packet[0] >> 6) == 2);
    FUZZ_CHECK(load_be16(&packet[2]) == sequence);
    FUZZ_CHECK(load_be32(&packet[8]) == kSsrc);
    ++recovered;
  }
};

std::vector<uint8_t> rtp_around(uint16_t sequence, std::vector<uint8_t> body) {
  std::vector<uint8_t> packet(kMinPacketBytes);
  packet[0] = 0x80;
  packet[1] = 96;
  store_be16(&packet[2], sequence);
  store_be32(&packet[8], kSsrc);
  packet.insert(packet.end(), body.begin(), body.end());
  if (packet.size() > kMaxPacketBytes) packet.resize(kMaxPacketBytes);
  return packet;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in{data, size};
  // One decoder and encoder for the process, reset per input: their constructors' allocations
  // would otherwise dominate each run.
  static const DecoderConfig config = [] {
    DecoderConfig c;
    c.media_ssrc = kSsrc;
    c.source_ring_packets = 128;  // small, so the window and the ring wrap often
    c.max_blocks = 4;
    c.max_block_age_ns = 1000;
    return c;
  }();
  static Decoder decoder(config);
  static Encoder encoder([] {
    EncoderConfig c;
    c.media_ssrc = kSsrc;
    return c;
  }());
  decoder.reset(kSsrc);
  const uint64_t recovered_before = decoder.counters().packets_recovered;
  CheckingSink sink;
  uint64_t now = 0;
  for (int records = 0; records < 256 && !in.empty(); ++records) {
    switch (in.u8() % 7) {
      case 0: {
        const uint16_t sequence = in.u16();
        const auto packet = rtp_around(sequence, in.bytes(in.u8() * 6u));
        decoder.add_source(sequence, packet, now, sink);
        break;
      }
      case 1: {
        RepairHeader header;
        header.k = in.u8() % 50;
        header.m = in.u8() % 18;
        header.repair_index = in.u8() % 18;
        header.base_sequence = in.u16();
        header.symbol_bytes = static_cast<uint16_t>(in.u16() % 1600);
        header.media_ssrc = kSsrc;
        std::vector<uint8_t> payload(kHeaderBytes);
        write_repair_header(header, payload.data());
        const auto symbol = in.bytes(header.symbol_bytes);
        payload.insert(payload.end(), symbol.begin(), symbol.end());
        decoder.add_repair(payload, now, sink);
        break;
      }
      case 2: {
        const uint16_t sequence = in.u16();
        const auto raw = in.bytes(in.u16() % 1600);
        decoder.add_source(sequence, raw, now, sink);
        break;
      }
      case 3: {
        const auto raw = in.bytes(in.u16() % 1600);
        decoder.add_repair(raw, now, sink);
        break;
      }
      case 4:
        now += in.u8() * 16u;
        break;
      case 5: {
        const BlockShape shape{static_cast<uint8_t>(1 + in.u8() % 12),
                               static_cast<uint8_t>(1 + in.u8() % 4)};
        encoder.set_shape(shape);
        const uint16_t base = in.u16();
        const uint32_t keep = static_cast<uint32_t>(in.u16()) << 8 | in.u8();  // bit i: feed i
        std::vector<std::vector<uint8_t>> sources;
        for (uint8_t i = 0; i < shape.k; ++i) {
          sources.push_back(rtp_around(static_cast<uint16_t>(base + i), in.bytes(in.u8())));
          encoder.add_source(static_cast<uint16_t>(base + i), sources.back());
        }
        std::vector<std::vector<uint8_t>> repairs(
            encoder.ready_repair_count(), std::vector<uint8_t>(encoder.ready_payload_bytes()));
        std::vector<uint8_t*> out;
        for (auto& r : repairs) out.push_back(r.data());
        FUZZ_CHECK(encoder.emit_repairs(out) == repairs.size());
        for (size_t i = 0; i < sources.size(); ++i) {
          if (keep & (1u << i))
            decoder.add_source(static_cast<uint16_t>(base + i), sources[i], now, sink);
        }
        for (size_t r = 0; r < repairs.size(); ++r) {
          if (keep & (1u << (12 + r))) decoder.add_repair(repairs[r], now, sink);
        }
        break;
      }
      case 6:
        decoder.expire(now);
        break;
    }
    FUZZ_CHECK(decoder.blocks_in_flight() <= config.max_blocks);
  }
  const auto& c = decoder.counters();
  FUZZ_CHECK(c.packets_recovered - recovered_before == sink.recovered);
  return 0;
}
