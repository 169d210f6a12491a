// Reed-Solomon FEC encoder (docs/wan.md, "FEC payload format"): source packets in, repair
// payloads out.
//
// The relay hands it each plaintext RTP packet of the media SSRC (before SRTP) with its sequence
// number. A block is k consecutive packets; it closes at k packets, or at the end of a frame
// (the packet's marker bit) when close_at_frame_end is set, or when the caller calls
// close_block(). The caller then asks for the block's m repair payloads, written into its own
// buffers, puts each behind an RTP header (PT 115, the FEC SSRC and sequence) and protects it.
//
// Pure: no sockets, clocks, logs or threads; all storage is allocated in the constructor, so
// add_source() and emit_repairs() never allocate. Any thread; not thread-safe; one instance per
// sending session.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "fec/payload.h"

namespace syncd::fec {

struct BlockShape {
  uint8_t k = 0;  // source packets per block, 1..kMaxK
  uint8_t m = 0;  // repair packets per block, 0..kMaxM (0: no FEC)
  bool operator==(const BlockShape&) const = default;
};

struct EncoderConfig {
  uint32_t media_ssrc = 0;
  // RFC 8285 one-byte extension whose value the pacer writes after FEC (abs-send-time, id 3 in
  // docs/wan.md): its bytes count as zero in the symbols, on both sides. 0: none.
  uint8_t volatile_extension_id = 3;
  // Close a block at a packet with the RTP marker bit (the last packet of an access unit), so a
  // frame never waits for the next frame's packets to be repaired.
  bool close_at_frame_end = true;
  BlockShape initial_shape{20, 4};
};

enum class AddStatus : uint8_t {
  kBuffered,     // held in the open block
  kBlockReady,   // the block is closed: call emit_repairs() before the next add_source()
  kUnprotected,  // the shape has m == 0: nothing buffered, the packet goes out alone
  kRefused,      // not RTP, too short or too long: see last_refusal(); nothing buffered
};

struct EncoderCounters {
  uint64_t sources_buffered = 0;
  uint64_t sources_unprotected = 0;
  uint64_t sources_refused = 0;
  uint64_t blocks_closed = 0;
  uint64_t blocks_closed_at_frame_end = 0;  // closed by the marker before reaching k
  uint64_t blocks_abandoned = 0;            // a sequence gap or a ready block never emitted
  uint64_t repairs_emitted = 0;
  uint64_t repair_bytes_emitted = 0;  // payload bytes (header + symbol)
};

class Encoder {
 public:
  explicit Encoder(EncoderConfig config = {});
  ~Encoder();
  Encoder(const Encoder&) = delete;
  Encoder& operator=(const Encoder&) = delete;

  // Shape of the blocks opened from now on (e.g. from RedundancyPolicy at each frame's start);
  // a block already open keeps its own. Values are clamped to 1..kMaxK and 0..kMaxM.
  void set_shape(BlockShape shape);
  BlockShape shape() const { return next_shape_; }

  // Adds one source packet (a whole RTP packet, kMinPacketBytes..kMaxPacketBytes) with its
  // sequence. The packet is copied; the caller keeps its buffer. A sequence that does not follow
  // the open block's last one abandons that block (counted) and opens a new one.
  AddStatus add_source(uint16_t sequence, std::span<const uint8_t> rtp_packet);

  // Closes the open block now, before k packets. Returns true when a block became ready.
  bool close_block();

  // Whether a closed block waits for emit_repairs(), its repair count, and the bytes each of its
  // repair payloads takes (kHeaderBytes + symbol length).
  bool block_ready() const { return ready_; }
  uint8_t ready_repair_count() const { return ready_ ? open_shape_.m : 0; }
  size_t ready_payload_bytes() const { return ready_ ? kHeaderBytes + ready_symbol_bytes_ : 0; }

  // Writes the ready block's m repair payloads, repair index i into out[i], each exactly
  // ready_payload_bytes() long (so each out[i] must hold that many bytes; kMaxRepairPayloadBytes
  // always suffices). out.size() must be >= ready_repair_count(). Returns the payloads written
  // (0 when no block is ready or out is too small) and frees the block.
  size_t emit_repairs(std::span<uint8_t* const> out);

  const EncoderCounters& counters() const { return counters_; }
  Refusal last_refusal() const { return last_refusal_; }

 private:
  void open_block(uint16_t sequence);
  void mark_ready();
  const uint8_t* tables_for(uint8_t k);

  EncoderConfig config_;
  BlockShape next_shape_;
  BlockShape open_shape_;
  bool open_ = false;
  bool ready_ = false;
  uint16_t base_sequence_ = 0;
  uint8_t count_ = 0;  // packets in the open block
  uint16_t ready_symbol_bytes_ = 0;
  uint16_t longest_packet_ = 0;
  // Symbol storage: kMaxK rows of kSymbolStride bytes; each row is zero past its symbol, since
  // dirty_[i] remembers how far row i was written and a shorter write zeroes the rest.
  std::unique_ptr<uint8_t[]> symbols_;
  uint16_t dirty_[kMaxK] = {};
  // ISA-L expanded tables per k (kMaxM Cauchy rows each), built on first use of that k.
  std::unique_ptr<uint8_t[]> tables_;
  bool tables_ready_[kMaxK + 1] = {};
  EncoderCounters counters_;
  Refusal last_refusal_ = Refusal::kNone;
};

// Row stride of symbol storage: kMaxSymbolBytes rounded up to 64 bytes, for aligned SIMD loads.
inline constexpr size_t kSymbolStride = (kMaxSymbolBytes + 63) / 64 * 64;

}  // namespace syncd::fec
