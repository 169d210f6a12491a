#include "secure/srtp_session.h"

#include "secure/srtp_aead.h"

namespace syncd::secure {

void count_srtp_status(SrtpCounters& counters, SrtpStatus status) {
  switch (status) {
    case SrtpStatus::kOk:
      break;
    case SrtpStatus::kTooShort:
      ++counters.too_short;
      break;
    case SrtpStatus::kMalformed:
      ++counters.malformed;
      break;
    case SrtpStatus::kNoRoom:
      ++counters.no_room;
      break;
    case SrtpStatus::kAuthFailed:
      ++counters.auth_failed;
      break;
    case SrtpStatus::kReplayed:
      ++counters.replayed;
      break;
    case SrtpStatus::kUnknownEpoch:
      ++counters.unknown_epoch;
      break;
    case SrtpStatus::kNoSendKey:
      ++counters.no_send_key;
      break;
    case SrtpStatus::kFailed:
      ++counters.failed;
      break;
  }
}

const char* to_string(SrtpStatus status) {
  switch (status) {
    case SrtpStatus::kOk:
      return "ok";
    case SrtpStatus::kTooShort:
      return "too short";
    case SrtpStatus::kMalformed:
      return "malformed header";
    case SrtpStatus::kNoRoom:
      return "no room for the trailer";
    case SrtpStatus::kAuthFailed:
      return "authentication failed";
    case SrtpStatus::kReplayed:
      return "replayed";
    case SrtpStatus::kUnknownEpoch:
      return "unknown key epoch";
    case SrtpStatus::kNoSendKey:
      return "no send key";
    case SrtpStatus::kFailed:
      return "srtp error";
  }
  return "?";
}

std::optional<uint32_t> srtp_packet_epoch(const uint8_t* packet, size_t size) {
  if (size < kSrtpMkiBytes) return std::nullopt;
  const uint8_t* mki = packet + size - kSrtpMkiBytes;
  return static_cast<uint32_t>(mki[0]) << 24 | static_cast<uint32_t>(mki[1]) << 16 |
         static_cast<uint32_t>(mki[2]) << 8 | mki[3];
}

SrtpEpochs::SrtpEpochs() = default;
SrtpEpochs::~SrtpEpochs() = default;

size_t SrtpEpochs::size() const {
  size_t n = 0;
  for (const auto& slot : slots_) n += slot != nullptr;
  return n;
}

SrtpAeadContext* SrtpEpochs::find(uint32_t epoch) const {
  for (const auto& slot : slots_)
    if (slot && slot->epoch() == epoch) return slot.get();
  return nullptr;
}

void SrtpEpochs::remove(uint32_t epoch) {
  for (auto& slot : slots_)
    if (slot && slot->epoch() == epoch) slot.reset();
}

bool SrtpEpochs::add(uint32_t epoch, const SrtpMasterKey& key, bool outbound) {
  if (has(epoch)) return false;
  for (auto& slot : slots_) {
    if (slot) continue;
    auto context = std::make_unique<SrtpAeadContext>();
    if (!context->init(epoch, key, outbound)) return false;
    slot = std::move(context);
    installed_order_[size_t(&slot - slots_.data())] = ++installs_;
    return true;
  }
  return false;
}

bool SrtpSender::install(uint32_t epoch, const SrtpMasterKey& key) {
  return add(epoch, key, /*outbound=*/true);
}

bool SrtpSender::use_epoch(uint32_t epoch) {
  SrtpAeadContext* context = find(epoch);
  if (!context) return false;
  current_ = epoch;
  current_context_ = context;
  // Older send keys are never used again: retransmissions are protected afresh under the
  // current epoch (RTX, RFC 4588), so nothing needs them.
  uint64_t order = 0;
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].get() == context) order = installed_order_[i];
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i] && installed_order_[i] < order) slots_[i].reset();
  return true;
}

SrtpStatus SrtpSender::protect_rtp(uint8_t* packet, size_t& size, size_t capacity) {
  SrtpStatus status = current_context_ ? current_context_->protect_rtp(packet, size, capacity)
                                       : SrtpStatus::kNoSendKey;
  if (status == SrtpStatus::kOk) ++counters_.rtp_protected;
  count_srtp_status(counters_, status);
  return status;
}

SrtpStatus SrtpSender::protect_rtcp(uint8_t* packet, size_t& size, size_t capacity) {
  SrtpStatus status = current_context_ ? current_context_->protect_rtcp(packet, size, capacity)
                                       : SrtpStatus::kNoSendKey;
  if (status == SrtpStatus::kOk) ++counters_.rtcp_protected;
  count_srtp_status(counters_, status);
  return status;
}

bool SrtpReceiver::install(uint32_t epoch, const SrtpMasterKey& key) {
  return add(epoch, key, /*outbound=*/false);
}

SrtpStatus SrtpReceiver::unprotect(uint8_t* packet, size_t& size, uint32_t* epoch_out, bool rtcp) {
  SrtpStatus status;
  const size_t minimum = rtcp ? 8 + kRtcpTrailerBytes : 12 + kRtpTrailerBytes;
  SrtpAeadContext* context = nullptr;
  std::optional<uint32_t> epoch;
  if (size < minimum) {
    status = SrtpStatus::kTooShort;
  } else if (epoch = srtp_packet_epoch(packet, size), !(context = find(*epoch))) {
    status = SrtpStatus::kUnknownEpoch;
  } else {
    status = rtcp ? context->unprotect_rtcp(packet, size) : context->unprotect_rtp(packet, size);
  }
  if (status == SrtpStatus::kOk) {
    ++(rtcp ? counters_.rtcp_unprotected : counters_.rtp_unprotected);
    if (epoch_out) *epoch_out = *epoch;
  }
  count_srtp_status(counters_, status);
  return status;
}

SrtpStatus SrtpReceiver::unprotect_rtp(uint8_t* packet, size_t& size, uint32_t* epoch) {
  return unprotect(packet, size, epoch, false);
}

SrtpStatus SrtpReceiver::unprotect_rtcp(uint8_t* packet, size_t& size, uint32_t* epoch) {
  return unprotect(packet, size, epoch, true);
}

}  // namespace syncd::secure
