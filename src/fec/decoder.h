// Reed-Solomon FEC decoder (docs/wan.md, "FEC payload format"): received source packets and
// repair payloads in, missing source packets out.
//
// The relay hands it every plaintext RTP packet of the media SSRC it receives (after SRTP
// unprotect) and every FEC payload (the bytes after the PT 115 RTP header). When a block has any
// k of its k + m packets, the decoder rebuilds the missing source packets byte for byte (whole
// RTP packets, as the sender fed them to its encoder, with the volatile extension's value zeroed)
// and reports each once to the sink. Blocks leave by a window of sequence numbers and by age, so
// memory is fixed: all storage is allocated in the constructor, nothing per packet.
//
// Bad input is refused with a Refusal and counted; it never makes the decoder read out of
// bounds, loop without bound or emit a packet whose decoded bytes contradict its block.
//
// Pure: no sockets, clocks, logs or threads; times are passed in (uint64 ns, monotonic). Any
// thread; not thread-safe; one instance per receiving session.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "fec/payload.h"

namespace syncd::fec {

struct DecoderConfig {
  uint32_t media_ssrc = 0;
  uint8_t volatile_extension_id = 3;  // as the encoder's (EncoderConfig)
  // Received source packets are kept in a ring of this many (a power of two, 64..4096): a block
  // is repairable only while all its packets are within the ring. 512 packets is ~225 ms at
  // 20 Mbit/s in 1100-byte packets, beyond the relay's latency budget.
  uint32_t source_ring_packets = 512;
  // Blocks in flight (blocks whose repairs have arrived and that are neither aged out nor
  // evicted). When full, the oldest block is evicted.
  uint32_t max_blocks = 32;
  // A block is dropped this long after its first repair arrived: past it, a recovered packet is
  // too late for the jitter buffer anyway.
  uint64_t max_block_age_ns = 300'000'000;
};

// Receives recovered packets. Called from inside add_source() / add_repair().
class RecoverySink {
 public:
  virtual ~RecoverySink() = default;
  // A missing source packet, rebuilt: sequence and the whole RTP packet. The bytes are valid
  // only during the call.
  virtual void on_recovered(uint16_t sequence, std::span<const uint8_t> rtp_packet) = 0;
};

struct DecoderCounters {
  uint64_t sources_accepted = 0;
  uint64_t repairs_accepted = 0;
  uint64_t blocks_opened = 0;
  uint64_t blocks_complete = 0;             // every source arrived: nothing to recover
  uint64_t blocks_recovered = 0;            // at least one source rebuilt
  uint64_t blocks_expired_unrecovered = 0;  // aged out (window or time) with sources missing
  uint64_t blocks_evicted = 0;  // pushed out by a newer block while all slots were in use
  uint64_t packets_recovered = 0;
  uint64_t repairs_unneeded = 0;  // arrived for a block already complete or recovered
  std::array<uint64_t, static_cast<size_t>(Refusal::kCount)> refused{};
  uint64_t refused_total() const;
};

class Decoder {
 public:
  explicit Decoder(DecoderConfig config = {});
  ~Decoder();
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  // A received source packet (whole RTP packet) with the sequence the caller read from it.
  // Returns kNone when it was kept; may recover packets of its block into the sink.
  Refusal add_source(uint16_t sequence, std::span<const uint8_t> rtp_packet, uint64_t now_ns,
                     RecoverySink& sink);

  // A received FEC payload (after the FEC packet's RTP header). Returns kNone when it was kept
  // (or was not needed); may recover packets of its block into the sink.
  Refusal add_repair(std::span<const uint8_t> payload, uint64_t now_ns, RecoverySink& sink);

  // Drops blocks older than max_block_age_ns. add_source/add_repair do it too; a caller with
  // no input for a while calls this from its timer. Bounded by max_blocks.
  void expire(uint64_t now_ns);

  // Forgets every source packet and block (the stream restarted, or a new media SSRC); the
  // counters go on. Bounded by the ring and block counts; no allocation.
  void reset(uint32_t media_ssrc);

  const DecoderCounters& counters() const { return counters_; }
  uint32_t blocks_in_flight() const;

 private:
  struct SourceSlot;
  struct Block;

  bool has_source(uint16_t sequence) const;
  const uint8_t* source_symbol(uint16_t sequence) const;
  void store_source(uint16_t sequence, std::span<const uint8_t> packet);
  Block* find_block(uint16_t base);
  Block* block_holding(uint16_t sequence);
  Block* allocate_block(uint64_t now_ns);
  void retire(Block& block, bool evicted);
  void age_by_window();
  void try_recover(Block& block, RecoverySink& sink);
  Refusal refuse(Refusal why);

  DecoderConfig config_;
  uint32_t ring_mask_ = 0;
  std::unique_ptr<SourceSlot[]> ring_;
  std::unique_ptr<uint8_t[]> ring_symbols_;
  std::unique_ptr<Block[]> blocks_;
  std::unique_ptr<uint8_t[]> repair_symbols_;
  std::unique_ptr<uint8_t[]> scratch_;  // kMaxM decoded symbols, then decode tables
  bool have_highest_ = false;
  uint16_t highest_ = 0;  // highest source sequence seen (RFC 3550 serial arithmetic)
  DecoderCounters counters_;
};

}  // namespace syncd::fec
