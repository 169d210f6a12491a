#include "fec/encoder.h"

#include <isa-l/erasure_code.h>

#include <algorithm>
#include <cstring>

#include "fec/matrix.h"

namespace syncd::fec {

namespace {
constexpr size_t kTablesPerK = 32 * size_t{kMaxK} * kMaxM;
}

Encoder::Encoder(EncoderConfig config)
    : config_(config),
      symbols_(new uint8_t[kMaxK * kSymbolStride]()),
      tables_(new uint8_t[(kMaxK + 1) * kTablesPerK]()) {
  set_shape(config.initial_shape);
}

Encoder::~Encoder() = default;

void Encoder::set_shape(BlockShape shape) {
  next_shape_.k = std::clamp<uint8_t>(shape.k, 1, kMaxK);
  next_shape_.m = std::min<uint8_t>(shape.m, kMaxM);
}

const uint8_t* Encoder::tables_for(uint8_t k) {
  uint8_t* tables = tables_.get() + size_t{k} * kTablesPerK;
  if (!tables_ready_[k]) {
    uint8_t rows[kMaxM * kMaxK];
    cauchy_repair_rows(k, kMaxM, rows);
    ec_init_tables(k, kMaxM, rows, tables);
    tables_ready_[k] = true;
  }
  return tables;
}

void Encoder::open_block(uint16_t sequence) {
  open_ = true;
  open_shape_ = next_shape_;
  base_sequence_ = sequence;
  count_ = 0;
  longest_packet_ = 0;
}

void Encoder::mark_ready() {
  open_ = false;
  ready_ = true;
  ready_symbol_bytes_ = static_cast<uint16_t>(kLengthPrefixBytes + longest_packet_);
  // The block's k is what it holds: a block closed early is shorter.
  open_shape_.k = count_;
  ++counters_.blocks_closed;
}

AddStatus Encoder::add_source(uint16_t sequence, std::span<const uint8_t> packet) {
  if (packet.size() < kMinPacketBytes)
    last_refusal_ = Refusal::kSourceTooShort;
  else if (packet.size() > kMaxPacketBytes)
    last_refusal_ = Refusal::kSourceTooLong;
  else if ((packet[0] >> 6) != 2)
    last_refusal_ = Refusal::kSourceNotRtp;
  else
    last_refusal_ = Refusal::kNone;
  if (last_refusal_ != Refusal::kNone) {
    ++counters_.sources_refused;
    return AddStatus::kRefused;
  }
  if (ready_) {  // the caller did not emit the last block's repairs
    ready_ = false;
    ++counters_.blocks_abandoned;
  }
  if (open_ && static_cast<uint16_t>(base_sequence_ + count_) != sequence) {
    open_ = false;
    ++counters_.blocks_abandoned;
  }
  if (!open_) {
    if (next_shape_.m == 0) {
      ++counters_.sources_unprotected;
      return AddStatus::kUnprotected;
    }
    open_block(sequence);
  }
  uint8_t* row = symbols_.get() + size_t{count_} * kSymbolStride;
  const size_t used = kLengthPrefixBytes + packet.size();
  store_be16(row, static_cast<uint16_t>(packet.size()));
  std::memcpy(row + kLengthPrefixBytes, packet.data(), packet.size());
  if (dirty_[count_] > used) std::memset(row + used, 0, dirty_[count_] - used);
  dirty_[count_] = static_cast<uint16_t>(used);
  zero_extension({row + kLengthPrefixBytes, packet.size()}, config_.volatile_extension_id);
  longest_packet_ = std::max<uint16_t>(longest_packet_, static_cast<uint16_t>(packet.size()));
  ++count_;
  ++counters_.sources_buffered;

  const bool frame_end = (packet[1] & 0x80) != 0;  // RTP marker (RFC 3550 section 5.1)
  if (count_ >= open_shape_.k) {
    mark_ready();
    return AddStatus::kBlockReady;
  }
  if (frame_end && config_.close_at_frame_end) {
    mark_ready();
    ++counters_.blocks_closed_at_frame_end;
    return AddStatus::kBlockReady;
  }
  return AddStatus::kBuffered;
}

bool Encoder::close_block() {
  if (!open_ || count_ == 0) return false;
  mark_ready();
  return true;
}

size_t Encoder::emit_repairs(std::span<uint8_t* const> out) {
  if (!ready_ || out.size() < open_shape_.m) return 0;
  const uint8_t k = open_shape_.k;
  const uint8_t m = open_shape_.m;
  uint8_t* data[kMaxK];
  uint8_t* coding[kMaxM];
  for (uint8_t i = 0; i < k; ++i) data[i] = symbols_.get() + size_t{i} * kSymbolStride;
  RepairHeader header;
  header.k = k;
  header.m = m;
  header.base_sequence = base_sequence_;
  header.symbol_bytes = ready_symbol_bytes_;
  header.media_ssrc = config_.media_ssrc;
  for (uint8_t r = 0; r < m; ++r) {
    header.repair_index = r;
    write_repair_header(header, out[r]);
    coding[r] = out[r] + kHeaderBytes;
  }
  // The expanded tables for m rows are the first m rows' worth of the kMaxM-row tables.
  ec_encode_data(ready_symbol_bytes_, k, m, const_cast<uint8_t*>(tables_for(k)), data, coding);
  ready_ = false;
  counters_.repairs_emitted += m;
  counters_.repair_bytes_emitted += size_t{m} * (kHeaderBytes + ready_symbol_bytes_);
  return m;
}

}  // namespace syncd::fec
