#include "fec/decoder.h"

#include <isa-l/erasure_code.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "fec/encoder.h"  // kSymbolStride
#include "fec/matrix.h"

namespace syncd::fec {

namespace {

// RFC 3550 serial-number arithmetic on 16-bit sequences: a - b, from -32768 to 32767.
int32_t seq_diff(uint16_t a, uint16_t b) {
  return static_cast<int16_t>(static_cast<uint16_t>(a - b));
}

constexpr size_t kDecodeTablesBytes = 32 * size_t{kMaxK} * kMaxM;

}  // namespace

uint64_t DecoderCounters::refused_total() const {
  uint64_t total = 0;
  for (uint64_t n : refused) total += n;
  return total;
}

struct Decoder::SourceSlot {
  uint16_t sequence = 0;
  bool valid = false;
  uint16_t dirty = 0;  // bytes of the row written since it was last all zero
};

struct Decoder::Block {
  bool used = false;
  bool done = false;  // complete or recovered: nothing more to emit
  uint16_t base = 0;
  uint8_t k = 0;
  uint8_t m = 0;
  uint16_t symbol_bytes = 0;
  uint16_t repair_mask = 0;  // bit r: repair index r received
  uint64_t opened_ns = 0;
  uint8_t* repairs = nullptr;  // kMaxM rows of kSymbolStride
};

Decoder::Decoder(DecoderConfig config) : config_(config) {
  uint32_t ring = std::clamp<uint32_t>(config_.source_ring_packets, 128, 4096);
  ring = std::bit_ceil(ring);
  config_.source_ring_packets = ring;
  config_.max_blocks = std::clamp<uint32_t>(config_.max_blocks, 1, 256);
  ring_mask_ = ring - 1;
  ring_.reset(new SourceSlot[ring]);
  ring_symbols_.reset(new uint8_t[size_t{ring} * kSymbolStride]());
  blocks_.reset(new Block[config_.max_blocks]);
  repair_symbols_.reset(new uint8_t[size_t{config_.max_blocks} * kMaxM * kSymbolStride]());
  for (uint32_t b = 0; b < config_.max_blocks; ++b) {
    blocks_[b].repairs = repair_symbols_.get() + size_t{b} * kMaxM * kSymbolStride;
  }
  scratch_.reset(new uint8_t[kMaxM * kSymbolStride + kDecodeTablesBytes]());
}

Decoder::~Decoder() = default;

void Decoder::reset(uint32_t media_ssrc) {
  config_.media_ssrc = media_ssrc;
  for (uint32_t i = 0; i <= ring_mask_; ++i) ring_[i].valid = false;
  for (uint32_t b = 0; b < config_.max_blocks; ++b) blocks_[b].used = false;
  have_highest_ = false;
}

uint32_t Decoder::blocks_in_flight() const {
  uint32_t n = 0;
  for (uint32_t b = 0; b < config_.max_blocks; ++b) n += blocks_[b].used;
  return n;
}

Refusal Decoder::refuse(Refusal why) {
  ++counters_.refused[static_cast<size_t>(why)];
  return why;
}

bool Decoder::has_source(uint16_t sequence) const {
  const SourceSlot& slot = ring_[sequence & ring_mask_];
  return slot.valid && slot.sequence == sequence;
}

const uint8_t* Decoder::source_symbol(uint16_t sequence) const {
  return ring_symbols_.get() + size_t{sequence & ring_mask_} * kSymbolStride;
}

void Decoder::store_source(uint16_t sequence, std::span<const uint8_t> packet) {
  SourceSlot& slot = ring_[sequence & ring_mask_];
  uint8_t* row = ring_symbols_.get() + size_t{sequence & ring_mask_} * kSymbolStride;
  const size_t used = kLengthPrefixBytes + packet.size();
  store_be16(row, static_cast<uint16_t>(packet.size()));
  std::memmove(row + kLengthPrefixBytes, packet.data(), packet.size());
  if (slot.dirty > used) std::memset(row + used, 0, slot.dirty - used);
  slot.dirty = static_cast<uint16_t>(used);
  slot.sequence = sequence;
  slot.valid = true;
  zero_extension({row + kLengthPrefixBytes, packet.size()}, config_.volatile_extension_id);
}

Decoder::Block* Decoder::find_block(uint16_t base) {
  for (uint32_t b = 0; b < config_.max_blocks; ++b) {
    if (blocks_[b].used && blocks_[b].base == base) return &blocks_[b];
  }
  return nullptr;
}

Decoder::Block* Decoder::block_holding(uint16_t sequence) {
  for (uint32_t b = 0; b < config_.max_blocks; ++b) {
    Block& block = blocks_[b];
    if (!block.used) continue;
    const int32_t d = seq_diff(sequence, block.base);
    if (d >= 0 && d < block.k) return &block;
  }
  return nullptr;
}

void Decoder::retire(Block& block, bool evicted) {
  if (evicted)
    ++counters_.blocks_evicted;
  else if (!block.done)
    ++counters_.blocks_expired_unrecovered;
  block.used = false;
}

Decoder::Block* Decoder::allocate_block(uint64_t now_ns) {
  Block* oldest = nullptr;
  for (uint32_t b = 0; b < config_.max_blocks; ++b) {
    Block& block = blocks_[b];
    if (!block.used) {
      oldest = &block;
      break;
    }
    if (!oldest || block.opened_ns < oldest->opened_ns) oldest = &block;
  }
  if (oldest->used) retire(*oldest, /*evicted=*/true);
  oldest->used = true;
  oldest->done = false;
  oldest->repair_mask = 0;
  oldest->opened_ns = now_ns;
  ++counters_.blocks_opened;
  return oldest;
}

// A block lives while all its sequences are within the ring's reach behind the highest one
// seen; past that its source slots may hold newer packets.
void Decoder::age_by_window() {
  if (!have_highest_) return;
  const int32_t window = static_cast<int32_t>(config_.source_ring_packets) - 2 * kMaxK;
  for (uint32_t b = 0; b < config_.max_blocks; ++b) {
    Block& block = blocks_[b];
    if (!block.used) continue;
    const uint16_t last = static_cast<uint16_t>(block.base + block.k - 1);
    if (seq_diff(highest_, last) > window) retire(block, false);
  }
}

void Decoder::expire(uint64_t now_ns) {
  for (uint32_t b = 0; b < config_.max_blocks; ++b) {
    Block& block = blocks_[b];
    if (block.used && now_ns > block.opened_ns &&
        now_ns - block.opened_ns > config_.max_block_age_ns) {
      retire(block, false);
    }
  }
}

Refusal Decoder::add_source(uint16_t sequence, std::span<const uint8_t> packet, uint64_t now_ns,
                            RecoverySink& sink) {
  if (packet.size() < kMinPacketBytes) return refuse(Refusal::kSourceTooShort);
  if (packet.size() > kMaxPacketBytes) return refuse(Refusal::kSourceTooLong);
  if ((packet[0] >> 6) != 2) return refuse(Refusal::kSourceNotRtp);
  if (load_be16(&packet[2]) != sequence) return refuse(Refusal::kSourceSequenceMismatch);
  if (load_be32(&packet[8]) != config_.media_ssrc) return refuse(Refusal::kSourceForeignSsrc);
  ++counters_.sources_accepted;
  store_source(sequence, packet);
  if (!have_highest_ || seq_diff(sequence, highest_) > 0) {
    highest_ = sequence;
    have_highest_ = true;
    age_by_window();
  }
  expire(now_ns);
  if (Block* block = block_holding(sequence); block && !block->done) try_recover(*block, sink);
  return Refusal::kNone;
}

Refusal Decoder::add_repair(std::span<const uint8_t> payload, uint64_t now_ns, RecoverySink& sink) {
  RepairHeader header;
  if (Refusal why = parse_repair_header(payload, &header); why != Refusal::kNone) {
    return refuse(why);
  }
  if (header.media_ssrc != config_.media_ssrc) return refuse(Refusal::kRepairForeignSsrc);
  expire(now_ns);
  if (have_highest_) {
    const int32_t window = static_cast<int32_t>(config_.source_ring_packets) - 2 * kMaxK;
    const int32_t behind =
        seq_diff(highest_, static_cast<uint16_t>(header.base_sequence + header.k - 1));
    const int32_t ahead = seq_diff(header.base_sequence, highest_);
    if (behind > window || ahead > static_cast<int32_t>(config_.source_ring_packets / 2)) {
      return refuse(Refusal::kRepairOutOfWindow);
    }
  }
  Block* block = find_block(header.base_sequence);
  if (block) {
    if (block->k != header.k || block->m != header.m ||
        block->symbol_bytes != header.symbol_bytes) {
      return refuse(Refusal::kRepairInconsistent);
    }
    if (block->done) {
      ++counters_.repairs_unneeded;
      return Refusal::kNone;
    }
    if (block->repair_mask & (1u << header.repair_index)) {
      return refuse(Refusal::kRepairDuplicate);
    }
  } else {
    for (uint32_t b = 0; b < config_.max_blocks; ++b) {
      const Block& other = blocks_[b];
      if (!other.used) continue;
      const int32_t d = seq_diff(header.base_sequence, other.base);
      if ((d >= 0 && d < other.k) || (d < 0 && -d < header.k)) {
        return refuse(Refusal::kRepairOverlap);
      }
    }
    block = allocate_block(now_ns);
    block->base = header.base_sequence;
    block->k = header.k;
    block->m = header.m;
    block->symbol_bytes = header.symbol_bytes;
  }
  std::memcpy(block->repairs + size_t{header.repair_index} * kSymbolStride,
              payload.data() + kHeaderBytes, header.symbol_bytes);
  block->repair_mask = static_cast<uint16_t>(block->repair_mask | (1u << header.repair_index));
  ++counters_.repairs_accepted;
  try_recover(*block, sink);
  // A block whose sources contradict its symbol length is dropped by try_recover; say so.
  if (!block->used && !block->done) return Refusal::kRepairSymbolTooShort;
  return Refusal::kNone;
}

void Decoder::try_recover(Block& block, RecoverySink& sink) {
  const uint8_t k = block.k;
  uint8_t missing[kMaxK];
  uint8_t present[kMaxK];
  uint8_t missing_count = 0;
  uint8_t present_count = 0;
  for (uint8_t i = 0; i < k; ++i) {
    const uint16_t sequence = static_cast<uint16_t>(block.base + i);
    if (has_source(sequence)) {
      // RFC-free sanity: a source longer than the block's symbol means the header lies.
      const uint16_t length = load_be16(source_symbol(sequence));
      if (kLengthPrefixBytes + length > block.symbol_bytes) {
        ++counters_.refused[static_cast<size_t>(Refusal::kRepairSymbolTooShort)];
        block.used = false;  // poisoned: nothing it says can be trusted
        return;
      }
      present[present_count++] = i;
    } else {
      missing[missing_count++] = i;
    }
  }
  if (missing_count == 0) {
    block.done = true;
    ++counters_.blocks_complete;
    return;
  }
  const int repairs_have = std::popcount(block.repair_mask);
  if (present_count + repairs_have < k) return;

  // The e = missing_count lost symbols s_M from e repairs R: with C the Cauchy rows,
  //   repair_r = sum_{j present} C[r][j] s_j + sum_{j in M} C[r][j] s_j,
  // so s_M = D^-1 (repair_R + C[R][present] s_present), D = C[R][M] (e x e; addition is XOR in
  // GF(2^8)). Only the e x e matrix is inverted, not the k x k one.
  const uint8_t e = missing_count;
  uint8_t repair_rows_used[kMaxM];
  uint8_t used = 0;
  for (uint8_t r = 0; r < block.m && used < e; ++r) {
    if (block.repair_mask & (1u << r)) repair_rows_used[used++] = r;
  }
  uint8_t cauchy[kMaxM * kMaxK];
  cauchy_repair_rows(k, block.m, cauchy);
  uint8_t d[kMaxM * kMaxM];
  uint8_t d_inverse[kMaxM * kMaxM];
  for (uint8_t a = 0; a < e; ++a) {
    for (uint8_t b = 0; b < e; ++b) d[a * e + b] = cauchy[repair_rows_used[a] * k + missing[b]];
  }
  if (gf_invert_matrix(d, d_inverse, e) != 0) {
    // Cannot happen for a Cauchy matrix; counted rather than trusted.
    ++counters_.refused[static_cast<size_t>(Refusal::kRecoveredInvalid)];
    return;
  }
  // Decode rows over the k inputs, in this order: present sources, then the e repairs.
  uint8_t decode_rows[kMaxM * kMaxK];
  uint8_t* inputs[kMaxK];
  for (uint8_t j = 0; j < present_count; ++j) {
    inputs[j] = const_cast<uint8_t*>(source_symbol(static_cast<uint16_t>(block.base + present[j])));
  }
  for (uint8_t a = 0; a < e; ++a) {
    inputs[present_count + a] = block.repairs + size_t{repair_rows_used[a]} * kSymbolStride;
  }
  for (uint8_t i = 0; i < e; ++i) {
    uint8_t* row = decode_rows + size_t{i} * k;
    for (uint8_t j = 0; j < present_count; ++j) {
      uint8_t sum = 0;
      for (uint8_t a = 0; a < e; ++a) {
        sum ^= gf_mul(d_inverse[i * e + a], cauchy[repair_rows_used[a] * k + present[j]]);
      }
      row[j] = sum;
    }
    for (uint8_t a = 0; a < e; ++a) row[present_count + a] = d_inverse[i * e + a];
  }
  uint8_t* outputs[kMaxM];
  for (uint8_t i = 0; i < e; ++i) outputs[i] = scratch_.get() + size_t{i} * kSymbolStride;
  uint8_t* tables = scratch_.get() + size_t{kMaxM} * kSymbolStride;
  ec_init_tables(k, e, decode_rows, tables);
  ec_encode_data(block.symbol_bytes, k, e, tables, inputs, outputs);

  block.done = true;
  uint32_t recovered = 0;
  for (uint8_t i = 0; i < e; ++i) {
    const uint8_t* symbol = outputs[i];
    const uint16_t sequence = static_cast<uint16_t>(block.base + missing[i]);
    const size_t length = load_be16(symbol);
    bool valid = length >= kMinPacketBytes && kLengthPrefixBytes + length <= block.symbol_bytes;
    if (valid) {
      const uint8_t* packet = symbol + kLengthPrefixBytes;
      valid = (packet[0] >> 6) == 2 && load_be16(packet + 2) == sequence &&
              load_be32(packet + 8) == config_.media_ssrc;
      for (size_t at = kLengthPrefixBytes + length; valid && at < block.symbol_bytes; ++at) {
        valid = symbol[at] == 0;  // the padding the encoder zeroed
      }
    }
    if (!valid) {
      ++counters_.refused[static_cast<size_t>(Refusal::kRecoveredInvalid)];
      continue;
    }
    const std::span<const uint8_t> packet(symbol + kLengthPrefixBytes, length);
    // Keep it as received, so a block seen again (a late repair after this one aged) finds it
    // present; never over a newer packet in the same slot.
    const SourceSlot& slot = ring_[sequence & ring_mask_];
    if (!slot.valid || seq_diff(slot.sequence, sequence) < 0) store_source(sequence, packet);
    ++recovered;
    ++counters_.packets_recovered;
    sink.on_recovered(sequence, packet);
  }
  if (recovered > 0) ++counters_.blocks_recovered;
}

}  // namespace syncd::fec
