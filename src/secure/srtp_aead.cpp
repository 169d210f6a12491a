#include "secure/srtp_aead.h"

#include <openssl/crypto.h>

#include <cstring>

namespace syncd::secure {
namespace {

constexpr size_t kRtpFixedHeader = 12;  // RFC 3550 5.1
constexpr size_t kRtcpHeader = 8;       // RFC 3550 6.4.1: V P RC PT length, then the SSRC

uint32_t load32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) << 24 | static_cast<uint32_t>(p[1]) << 16 |
         static_cast<uint32_t>(p[2]) << 8 | p[3];
}

void store32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}

// RFC 3550 5.1 and 5.3.1: fixed header, CSRCs, then (X) a 4-byte extension header and its
// length in 32-bit words. 0 when the header does not fit in `size` bytes.
size_t rtp_header_size(const uint8_t* p, size_t size) {
  size_t header = kRtpFixedHeader + 4 * static_cast<size_t>(p[0] & 0x0f);
  if (p[0] & 0x10) {
    if (header + 4 > size) return 0;
    header += 4 + 4 * static_cast<size_t>(p[header + 2] << 8 | p[header + 3]);
  }
  return header <= size ? header : 0;
}

}  // namespace

bool derive_srtp_session_key(const SrtpMasterKey& master, bool rtcp, SrtpSessionKey& out) {
  // RFC 3711 4.3.1: x = key_id XOR master_salt, key_id = label || r with r = 0 (kdr = 0); the
  // label lands in octet 7 of the 112-bit salt, whose last two octets are 0 for a 96-bit salt
  // (RFC 7714 section 11). The PRF is AES-CM keyed by the master key with IV = x * 2^16, so one
  // AES block of x || 0x0000 gives 16 octets: the key, or the salt's 12.
  const uint8_t key_label = rtcp ? 3 : 0;
  const uint8_t salt_label = rtcp ? 5 : 2;
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  if (!ctx) return false;
  bool ok = EVP_EncryptInit_ex(ctx, EVP_aes_128_ecb(), nullptr, master.key.data(), nullptr) == 1 &&
            EVP_CIPHER_CTX_set_padding(ctx, 0) == 1;
  uint8_t block[16];
  uint8_t x[16];
  int n = 0;
  for (uint8_t label : {key_label, salt_label}) {
    std::memset(x, 0, sizeof x);
    std::memcpy(x, master.salt.data(), master.salt.size());
    x[7] ^= label;
    ok = ok && EVP_EncryptUpdate(ctx, block, &n, x, 16) == 1 && n == 16;
    if (!ok) break;
    if (label == key_label)
      std::memcpy(out.key.data(), block, out.key.size());
    else
      std::memcpy(out.salt.data(), block, out.salt.size());
  }
  OPENSSL_cleanse(block, sizeof block);
  EVP_CIPHER_CTX_free(ctx);
  return ok;
}

bool ReplayWindow::check(uint64_t index) const {
  if (!started_ || index > highest_) return true;
  if (highest_ - index >= kReplayWindow) return false;  // too old to tell: refused
  return !bit(index);
}

void ReplayWindow::accept(uint64_t index) {
  if (!started_ || index >= highest_ + kReplayWindow) {
    bits_.fill(0);
  } else if (index > highest_) {
    // The slots of the indices skipped over now stand for new ones: at most the window's size.
    for (uint64_t i = highest_ + 1; i <= index; ++i)
      bits_[(i / 64) % kWords] &= ~(uint64_t{1} << (i % 64));
  }
  if (!started_ || index > highest_) highest_ = index;
  started_ = true;
  set(index);
}

int64_t estimate_srtp_index(uint64_t highest, bool started, uint16_t seq) {
  if (!started) return seq;  // the first packet of an SSRC: ROC 0 (RFC 3711 3.3.1)
  const int64_t roc = static_cast<int64_t>(highest >> 16);
  const int32_t s_l = static_cast<int32_t>(highest & 0xffff);
  int64_t v = roc;
  // RFC 3711 Appendix A: pick ROC-1, ROC or ROC+1, whichever puts the index nearest s_l.
  if (s_l < 32768) {
    if (static_cast<int32_t>(seq) - s_l > 32768) v = roc - 1;
  } else {
    if (s_l - 32768 > static_cast<int32_t>(seq)) v = roc + 1;
  }
  if (v < 0) return -1;
  return v * 65536 + seq;
}

SrtpAeadContext::~SrtpAeadContext() {
  EVP_CIPHER_CTX_free(rtp_ctx_);
  EVP_CIPHER_CTX_free(rtcp_ctx_);
  OPENSSL_cleanse(&rtp_key_, sizeof rtp_key_);
  OPENSSL_cleanse(&rtcp_key_, sizeof rtcp_key_);
}

bool SrtpAeadContext::init(uint32_t epoch, const SrtpMasterKey& master, bool outbound,
                           bool with_mki) {
  SrtpSessionKey rtp, rtcp;
  bool ok = derive_srtp_session_key(master, false, rtp) &&
            derive_srtp_session_key(master, true, rtcp) &&
            init_with_session_keys(epoch, rtp, rtcp, outbound, with_mki);
  OPENSSL_cleanse(&rtp, sizeof rtp);
  OPENSSL_cleanse(&rtcp, sizeof rtcp);
  return ok;
}

bool SrtpAeadContext::init_with_session_keys(uint32_t epoch, const SrtpSessionKey& rtp,
                                             const SrtpSessionKey& rtcp, bool outbound,
                                             bool with_mki) {
  if (rtp_ctx_ || rtcp_ctx_) return false;  // once per context
  epoch_ = epoch;
  mki_bytes_ = with_mki ? kSrtpMkiBytes : 0;
  outbound_ = outbound;
  rtp_key_ = rtp;
  rtcp_key_ = rtcp;
  rtp_ctx_ = EVP_CIPHER_CTX_new();
  rtcp_ctx_ = EVP_CIPHER_CTX_new();
  if (!rtp_ctx_ || !rtcp_ctx_) return false;
  // The key schedule (AES round keys, GHASH tables) is computed once here; per packet only the
  // IV changes.
  auto init = outbound ? EVP_EncryptInit_ex : EVP_DecryptInit_ex;
  return init(rtp_ctx_, EVP_aes_128_gcm(), nullptr, rtp_key_.key.data(), nullptr) == 1 &&
         init(rtcp_ctx_, EVP_aes_128_gcm(), nullptr, rtcp_key_.key.data(), nullptr) == 1;
}

SrtpAeadContext::SsrcState* SrtpAeadContext::find(uint32_t ssrc) {
  for (SsrcState& s : ssrcs_) {
    if (s.used && s.ssrc == ssrc) {
      s.last_used = ++use_clock_;
      return &s;
    }
  }
  return nullptr;
}

SrtpAeadContext::SsrcState& SrtpAeadContext::find_or_evict(uint32_t ssrc) {
  if (SsrcState* s = find(ssrc)) return *s;
  SsrcState* slot = &ssrcs_[0];
  for (SsrcState& s : ssrcs_) {
    if (!s.used) {
      slot = &s;
      break;
    }
    if (s.last_used < slot->last_used) slot = &s;
  }
  *slot = SsrcState{};
  slot->used = true;
  slot->ssrc = ssrc;
  slot->last_used = ++use_clock_;
  return *slot;
}

void SrtpAeadContext::write_mki(uint8_t* at) const {
  if (mki_bytes_) store32(at, epoch_);
}

bool SrtpAeadContext::seal(EVP_CIPHER_CTX* ctx, const uint8_t* iv, const uint8_t* aad,
                           size_t aad_size, const uint8_t* aad_tail, size_t aad_tail_size,
                           uint8_t* data, size_t data_size, uint8_t* tag) {
  int n = 0;
  uint8_t scratch[16];
  return EVP_EncryptInit_ex(ctx, nullptr, nullptr, nullptr, iv) == 1 &&
         EVP_EncryptUpdate(ctx, nullptr, &n, aad, static_cast<int>(aad_size)) == 1 &&
         (aad_tail_size == 0 ||
          EVP_EncryptUpdate(ctx, nullptr, &n, aad_tail, static_cast<int>(aad_tail_size)) == 1) &&
         (data_size == 0 ||
          EVP_EncryptUpdate(ctx, data, &n, data, static_cast<int>(data_size)) == 1) &&
         EVP_EncryptFinal_ex(ctx, scratch, &n) == 1 &&
         EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, static_cast<int>(kSrtpTagBytes), tag) == 1;
}

bool SrtpAeadContext::open(EVP_CIPHER_CTX* ctx, const uint8_t* iv, const uint8_t* aad,
                           size_t aad_size, const uint8_t* aad_tail, size_t aad_tail_size,
                           uint8_t* data, size_t data_size, const uint8_t* tag) {
  int n = 0;
  uint8_t scratch[16];
  uint8_t tag_copy[kSrtpTagBytes];
  std::memcpy(tag_copy, tag, sizeof tag_copy);
  return EVP_DecryptInit_ex(ctx, nullptr, nullptr, nullptr, iv) == 1 &&
         EVP_DecryptUpdate(ctx, nullptr, &n, aad, static_cast<int>(aad_size)) == 1 &&
         (aad_tail_size == 0 ||
          EVP_DecryptUpdate(ctx, nullptr, &n, aad_tail, static_cast<int>(aad_tail_size)) == 1) &&
         (data_size == 0 ||
          EVP_DecryptUpdate(ctx, data, &n, data, static_cast<int>(data_size)) == 1) &&
         EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, static_cast<int>(kSrtpTagBytes),
                             tag_copy) == 1 &&
         EVP_DecryptFinal_ex(ctx, scratch, &n) == 1;
}

void srtp_rtp_iv(uint8_t iv[12], uint32_t ssrc, uint64_t index, const SrtpSessionKey& key) {
  iv[0] = 0;
  iv[1] = 0;
  store32(iv + 2, ssrc);
  store32(iv + 6, static_cast<uint32_t>(index >> 16));
  iv[10] = static_cast<uint8_t>(index >> 8);
  iv[11] = static_cast<uint8_t>(index);
  for (size_t i = 0; i < 12; ++i) iv[i] ^= key.salt[i];
}

void srtp_rtcp_iv(uint8_t iv[12], uint32_t ssrc, uint32_t index, const SrtpSessionKey& key) {
  iv[0] = 0;
  iv[1] = 0;
  store32(iv + 2, ssrc);
  iv[6] = 0;
  iv[7] = 0;
  store32(iv + 8, index & 0x7fffffffu);
  for (size_t i = 0; i < 12; ++i) iv[i] ^= key.salt[i];
}

SrtpStatus SrtpAeadContext::protect_rtp(uint8_t* packet, size_t& size, size_t capacity) {
  if (!outbound_) return SrtpStatus::kFailed;
  if (size < kRtpFixedHeader) return SrtpStatus::kTooShort;
  if (packet[0] >> 6 != 2) return SrtpStatus::kMalformed;
  size_t header = rtp_header_size(packet, size);
  if (header == 0) return SrtpStatus::kMalformed;
  if (size > INT32_MAX - kRtpTrailerBytes || capacity < size + rtp_trailer_bytes())
    return SrtpStatus::kNoRoom;
  const uint32_t ssrc = load32(packet + 8);
  const uint16_t seq = static_cast<uint16_t>(packet[2] << 8 | packet[3]);
  SsrcState& state = find_or_evict(ssrc);
  int64_t index = estimate_srtp_index(state.rtp.highest(), state.rtp.started(), seq);
  // Never the same index twice under one key: GCM with a repeated IV gives the key away.
  if (index < 0 || !state.rtp.check(static_cast<uint64_t>(index))) return SrtpStatus::kReplayed;
  uint8_t iv[12];
  srtp_rtp_iv(iv, ssrc, static_cast<uint64_t>(index), rtp_key_);
  // RFC 7714 8.2: the AAD is the whole header, CSRCs and extension included.
  if (!seal(rtp_ctx_, iv, packet, header, nullptr, 0, packet + header, size - header,
            packet + size))
    return SrtpStatus::kFailed;
  write_mki(packet + size + kSrtpTagBytes);
  size += rtp_trailer_bytes();
  state.rtp.accept(static_cast<uint64_t>(index));
  return SrtpStatus::kOk;
}

SrtpStatus SrtpAeadContext::unprotect_rtp(uint8_t* packet, size_t& size) {
  if (outbound_) return SrtpStatus::kFailed;
  if (size < kRtpFixedHeader + rtp_trailer_bytes()) return SrtpStatus::kTooShort;
  if (packet[0] >> 6 != 2) return SrtpStatus::kMalformed;
  if (size > INT32_MAX) return SrtpStatus::kMalformed;
  const size_t body = size - rtp_trailer_bytes();  // header + ciphertext
  size_t header = rtp_header_size(packet, body);
  if (header == 0) return SrtpStatus::kMalformed;
  if (mki_bytes_ && load32(packet + size - kSrtpMkiBytes) != epoch_)
    return SrtpStatus::kUnknownEpoch;
  const uint32_t ssrc = load32(packet + 8);
  const uint16_t seq = static_cast<uint16_t>(packet[2] << 8 | packet[3]);
  SsrcState* state = find(ssrc);
  // An SSRC's state may exist for its RTCP alone (an SR before its first RTP packet): its RTP
  // window then has not started, and the first RTP packet is index seq, ROC 0.
  int64_t index =
      state ? estimate_srtp_index(state->rtp.highest(), state->rtp.started(), seq) : seq;
  // The replay check comes first: a replay costs no decryption (RFC 3711 3.3).
  if (index < 0 || (state && !state->rtp.check(static_cast<uint64_t>(index))))
    return SrtpStatus::kReplayed;
  uint8_t iv[12];
  srtp_rtp_iv(iv, ssrc, static_cast<uint64_t>(index), rtp_key_);
  if (!open(rtp_ctx_, iv, packet, header, nullptr, 0, packet + header, body - header,
            packet + body))
    return SrtpStatus::kAuthFailed;
  // Only an authenticated packet may create or move an SSRC's state.
  if (!state) state = &find_or_evict(ssrc);
  state->rtp.accept(static_cast<uint64_t>(index));
  size = body;
  return SrtpStatus::kOk;
}

SrtpStatus SrtpAeadContext::protect_rtcp(uint8_t* packet, size_t& size, size_t capacity) {
  if (!outbound_) return SrtpStatus::kFailed;
  if (size < kRtcpHeader) return SrtpStatus::kTooShort;
  if (packet[0] >> 6 != 2) return SrtpStatus::kMalformed;
  if (size > INT32_MAX - kRtcpTrailerBytes || capacity < size + rtcp_trailer_bytes())
    return SrtpStatus::kNoRoom;
  const uint32_t ssrc = load32(packet + 4);
  SsrcState& state = find_or_evict(ssrc);
  // RFC 3711 3.4: a 31-bit SRTCP index per SSRC, never reused under one key.
  if (state.rtcp_sent >= 0x7fffffffu) return SrtpStatus::kReplayed;
  const uint32_t index = ++state.rtcp_sent;
  uint8_t e_index[4];
  store32(e_index, 0x80000000u | index);  // E = 1: encrypted (RFC 3711 3.4)
  uint8_t iv[12];
  srtp_rtcp_iv(iv, ssrc, index, rtcp_key_);
  // RFC 7714 9.2: AAD = the first 8 octets, then E || SRTCP index.
  if (!seal(rtcp_ctx_, iv, packet, kRtcpHeader, e_index, 4, packet + kRtcpHeader,
            size - kRtcpHeader, packet + size))
    return SrtpStatus::kFailed;
  std::memcpy(packet + size + kSrtpTagBytes, e_index, 4);
  write_mki(packet + size + kSrtpTagBytes + 4);
  size += rtcp_trailer_bytes();
  return SrtpStatus::kOk;
}

SrtpStatus SrtpAeadContext::unprotect_rtcp(uint8_t* packet, size_t& size) {
  if (outbound_) return SrtpStatus::kFailed;
  if (size < kRtcpHeader + rtcp_trailer_bytes()) return SrtpStatus::kTooShort;
  if (packet[0] >> 6 != 2 || size > INT32_MAX) return SrtpStatus::kMalformed;
  if (mki_bytes_ && load32(packet + size - kSrtpMkiBytes) != epoch_)
    return SrtpStatus::kUnknownEpoch;
  const size_t body = size - rtcp_trailer_bytes();
  const uint8_t* e_index = packet + body + kSrtpTagBytes;
  const uint32_t e_and_index = load32(e_index);
  // We always encrypt SRTCP; an E = 0 packet is not one of ours.
  if (!(e_and_index & 0x80000000u)) return SrtpStatus::kMalformed;
  const uint32_t index = e_and_index & 0x7fffffffu;
  const uint32_t ssrc = load32(packet + 4);
  SsrcState* state = find(ssrc);
  if (state && !state->rtcp.check(index)) return SrtpStatus::kReplayed;
  uint8_t iv[12];
  srtp_rtcp_iv(iv, ssrc, index, rtcp_key_);
  if (!open(rtcp_ctx_, iv, packet, kRtcpHeader, e_index, 4, packet + kRtcpHeader,
            body - kRtcpHeader, packet + body))
    return SrtpStatus::kAuthFailed;
  if (!state) state = &find_or_evict(ssrc);
  state->rtcp.accept(index);
  size = body;
  return SrtpStatus::kOk;
}

}  // namespace syncd::secure
