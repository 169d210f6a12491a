#include "secure/srtp_libsrtp.h"

#include <srtp2/srtp.h>

#include <cstring>
#include <mutex>

namespace syncd::secure {

namespace {

constexpr size_t kRtpHeaderBytes = 12;  // RFC 3550 5.1, fixed part
constexpr size_t kRtcpHeaderBytes = 8;  // RFC 3550 6.4.1: header and sender SSRC

SrtpStatus from_libsrtp(srtp_err_status_t status) {
  return srtp_status_from_libsrtp(status);
}

}  // namespace

LibSrtpEpochs::~LibSrtpEpochs() {
  for (Slot& slot : slots_)
    if (slot.used) srtp_dealloc(slot.session);
}

size_t LibSrtpEpochs::size() const {
  size_t n = 0;
  for (const Slot& slot : slots_) n += slot.used;
  return n;
}

srtp_ctx_t_* LibSrtpEpochs::find(uint32_t epoch) const {
  for (const Slot& slot : slots_)
    if (slot.used && slot.epoch == epoch) return slot.session;
  return nullptr;
}

void LibSrtpEpochs::remove(uint32_t epoch) {
  for (Slot& slot : slots_) {
    if (slot.used && slot.epoch == epoch) {
      srtp_dealloc(slot.session);
      slot = Slot{};
    }
  }
}

bool LibSrtpEpochs::add(uint32_t epoch, const SrtpMasterKey& key, bool outbound) {
  if (!ensure_libsrtp_initialized() || has(epoch)) return false;
  Slot* free_slot = nullptr;
  for (Slot& slot : slots_)
    if (!slot.used) {
      free_slot = &slot;
      break;
    }
  if (!free_slot) return false;

  // libsrtp wants the master key and salt concatenated (RFC 7714 section 12: 16 + 12 octets).
  uint8_t master[28];
  std::memcpy(master, key.key.data(), 16);
  std::memcpy(master + 16, key.salt.data(), 12);
  // RFC 3711 3.1: the MKI identifies the master key; ours is the epoch, big-endian.
  uint8_t mki[kSrtpMkiBytes] = {static_cast<uint8_t>(epoch >> 24),
                                static_cast<uint8_t>(epoch >> 16), static_cast<uint8_t>(epoch >> 8),
                                static_cast<uint8_t>(epoch)};
  srtp_master_key_t master_key{master, mki, kSrtpMkiBytes};
  srtp_master_key_t* keys[1] = {&master_key};

  srtp_policy_t policy;
  std::memset(&policy, 0, sizeof policy);
  srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtp);
  srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtcp);
  // One template per direction: every SSRC of the session (media, RTX, FEC) shares the key, each
  // with its own index and replay window (RFC 3711 3.2.3 allows one master key for several SSRCs
  // because the SSRC is part of the IV).
  policy.ssrc.type = outbound ? ssrc_any_outbound : ssrc_any_inbound;
  policy.keys = keys;
  policy.num_master_keys = 1;
  policy.window_size = kReplayWindow;
  policy.allow_repeat_tx = 0;
  policy.next = nullptr;

  srtp_t session = nullptr;
  srtp_err_status_t status = srtp_create(&session, &policy);
  std::memset(master, 0, sizeof master);
  if (status != srtp_err_status_ok) return false;
  *free_slot = Slot{true, epoch, session, ++installs_};
  return true;
}

bool LibSrtpSender::install(uint32_t epoch, const SrtpMasterKey& key) {
  return add(epoch, key, /*outbound=*/true);
}

bool LibSrtpSender::use_epoch(uint32_t epoch) {
  srtp_ctx_t_* session = find(epoch);
  if (!session) return false;
  current_ = epoch;
  current_session_ = session;
  // Older send keys are never used again: retransmissions are protected afresh under the
  // current epoch (RTX, RFC 4588), so nothing needs them.
  uint64_t order = 0;
  for (const Slot& slot : slots_)
    if (slot.used && slot.epoch == epoch) order = slot.installed_order;
  for (Slot& slot : slots_)
    if (slot.used && slot.installed_order < order) remove(slot.epoch);
  return true;
}

SrtpStatus LibSrtpSender::protect(uint8_t* packet, size_t& size, size_t capacity, bool rtcp) {
  SrtpStatus status = SrtpStatus::kOk;
  size_t trailer = rtcp ? kRtcpTrailerBytes : kRtpTrailerBytes;
  size_t minimum = rtcp ? kRtcpHeaderBytes : kRtpHeaderBytes;
  if (!current_session_) {
    status = SrtpStatus::kNoSendKey;
  } else if (size < minimum) {
    status = SrtpStatus::kTooShort;
  } else if (capacity < size + trailer || size + trailer > INT32_MAX) {
    status = SrtpStatus::kNoRoom;
  } else {
    int length = static_cast<int>(size);
    srtp_err_status_t result = rtcp ? srtp_protect_rtcp_mki(current_session_, packet, &length, 1, 0)
                                    : srtp_protect_mki(current_session_, packet, &length, 1, 0);
    status = from_libsrtp(result);
    if (status == SrtpStatus::kOk) {
      size = static_cast<size_t>(length);
      ++(rtcp ? counters_.rtcp_protected : counters_.rtp_protected);
    }
  }
  count_srtp_status(counters_, status);
  return status;
}

SrtpStatus LibSrtpSender::protect_rtp(uint8_t* packet, size_t& size, size_t capacity) {
  return protect(packet, size, capacity, false);
}

SrtpStatus LibSrtpSender::protect_rtcp(uint8_t* packet, size_t& size, size_t capacity) {
  return protect(packet, size, capacity, true);
}

bool LibSrtpReceiver::install(uint32_t epoch, const SrtpMasterKey& key) {
  return add(epoch, key, /*outbound=*/false);
}

SrtpStatus LibSrtpReceiver::unprotect(uint8_t* packet, size_t& size, uint32_t* epoch_out,
                                      bool rtcp) {
  SrtpStatus status = SrtpStatus::kOk;
  size_t minimum =
      (rtcp ? kRtcpHeaderBytes + kRtcpTrailerBytes : kRtpHeaderBytes + kRtpTrailerBytes);
  srtp_ctx_t_* session = nullptr;
  std::optional<uint32_t> epoch;
  if (size < minimum) {
    status = SrtpStatus::kTooShort;
  } else if (size > INT32_MAX) {
    status = SrtpStatus::kMalformed;
  } else if (epoch = srtp_packet_epoch(packet, size), !(session = find(*epoch))) {
    status = SrtpStatus::kUnknownEpoch;
  } else {
    int length = static_cast<int>(size);
    srtp_err_status_t result = rtcp ? srtp_unprotect_rtcp_mki(session, packet, &length, 1)
                                    : srtp_unprotect_mki(session, packet, &length, 1);
    status = from_libsrtp(result);
    if (status == SrtpStatus::kOk) {
      size = static_cast<size_t>(length);
      if (epoch_out) *epoch_out = *epoch;
      ++(rtcp ? counters_.rtcp_unprotected : counters_.rtp_unprotected);
    }
  }
  count_srtp_status(counters_, status);
  return status;
}

SrtpStatus LibSrtpReceiver::unprotect_rtp(uint8_t* packet, size_t& size, uint32_t* epoch) {
  return unprotect(packet, size, epoch, false);
}

SrtpStatus LibSrtpReceiver::unprotect_rtcp(uint8_t* packet, size_t& size, uint32_t* epoch) {
  return unprotect(packet, size, epoch, true);
}

}  // namespace syncd::secure
