// Test helpers for src/fec: seeded RTP packets. Test code only.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "fec/decoder.h"
#include "fec/encoder.h"
#include "fec/payload.h"

namespace syncd::fec::testing {

inline constexpr uint32_t kSsrc = 0x5EED1234;

// An RTP packet (RFC 3550 section 5.1), PT 96, of exactly `size` bytes (>= 12, or >= 20 with
// the abs-send-time extension), payload from rng.
inline std::vector<uint8_t> make_rtp(uint16_t sequence, size_t size, std::mt19937& rng,
                                     bool marker = false, int abs_send_time = -1) {
  std::vector<uint8_t> packet(size);
  const bool extension = abs_send_time >= 0;
  packet[0] = extension ? 0x90 : 0x80;
  packet[1] = static_cast<uint8_t>((marker ? 0x80 : 0) | 96);
  store_be16(&packet[2], sequence);
  store_be32(&packet[4], 90000u * sequence);
  store_be32(&packet[8], kSsrc);
  size_t at = 12;
  if (extension) {  // RFC 8285 one-byte form: 0xBEDE, 1 word: id 3, len 3, value
    store_be16(&packet[12], 0xBEDE);
    store_be16(&packet[14], 1);
    packet[16] = 0x32;
    packet[17] = static_cast<uint8_t>(abs_send_time >> 16);
    packet[18] = static_cast<uint8_t>(abs_send_time >> 8);
    packet[19] = static_cast<uint8_t>(abs_send_time);
    at = 20;
  }
  for (; at < size; ++at) packet[at] = static_cast<uint8_t>(rng());
  return packet;
}

struct RecordingSink : RecoverySink {
  struct Recovered {
    uint16_t sequence;
    std::vector<uint8_t> packet;
  };
  std::vector<Recovered> recovered;
  void on_recovered(uint16_t sequence, std::span<const uint8_t> packet) override {
    recovered.push_back({sequence, {packet.begin(), packet.end()}});
  }
};

// One encoded block: its source packets and repair payloads.
struct EncodedBlock {
  std::vector<std::vector<uint8_t>> sources;
  std::vector<std::vector<uint8_t>> repairs;
};

inline EncodedBlock encode_block(uint16_t base, uint8_t k, uint8_t m, std::mt19937& rng,
                                 size_t min_size = 12, size_t max_size = kMaxPacketBytes) {
  EncoderConfig config;
  config.media_ssrc = kSsrc;
  config.initial_shape = {k, m};
  Encoder encoder(config);
  EncodedBlock block;
  std::uniform_int_distribution<size_t> size(min_size, max_size);
  for (uint8_t i = 0; i < k; ++i) {
    block.sources.push_back(make_rtp(static_cast<uint16_t>(base + i), size(rng), rng));
    const AddStatus status =
        encoder.add_source(static_cast<uint16_t>(base + i), block.sources.back());
    if (status == AddStatus::kBlockReady) break;
  }
  block.repairs.assign(m, std::vector<uint8_t>(encoder.ready_payload_bytes()));
  std::vector<uint8_t*> out;
  for (auto& r : block.repairs) out.push_back(r.data());
  encoder.emit_repairs(out);
  return block;
}

inline DecoderConfig test_decoder_config() {
  DecoderConfig config;
  config.media_ssrc = kSsrc;
  return config;
}

}  // namespace syncd::fec::testing
