// RFC 7714 AEAD_AES_128_GCM for SRTP and SRTCP, one master key (one key epoch) and one direction:
// key derivation (RFC 3711 4.3), the IV (RFC 7714 8.1, 9.1), the AAD (8.2, 9.2), the rollover
// counter (RFC 3711 3.3.1), the replay window (RFC 3711 3.3.2) and our 4-byte MKI after the tag.
// The cipher is OpenSSL's EVP AES-128-GCM, one reused EVP_CIPHER_CTX per key, only the IV
// changing per packet.
//
// Data plane: no exceptions, no allocation after init(), bounded work per packet. The per-SSRC
// state is a fixed table; an SSRC is entered only once a packet of it authenticated.
//
// Threads: any thread; not thread-safe; used through SrtpSender / SrtpReceiver.
#pragma once

#include <openssl/evp.h>

#include <array>
#include <cstddef>
#include <cstdint>

#include "secure/srtp_session.h"

namespace syncd::secure {

// RFC 3711 4.3: session key and salt derived from the master key with the AES-CM PRF, key
// derivation rate 0; labels 0 and 2 for SRTP, 3 and 5 for SRTCP. RFC 7714 section 12: 16-byte
// keys, 12-byte salts.
struct SrtpSessionKey {
  std::array<uint8_t, 16> key{};
  std::array<uint8_t, 12> salt{};
};
bool derive_srtp_session_key(const SrtpMasterKey& master, bool rtcp, SrtpSessionKey& out);

// A window of the last kReplayWindow indices below the highest seen (RFC 3711 3.3.2), as a ring
// of bits addressed by index mod the window. Not thread-safe.
class ReplayWindow {
 public:
  bool started() const { return started_; }
  uint64_t highest() const { return highest_; }
  // True if `index` may be accepted: newer than the highest, or inside the window and unseen.
  bool check(uint64_t index) const;
  // Records `index` (after it authenticated).
  void accept(uint64_t index);

 private:
  bool bit(uint64_t index) const { return bits_[(index / 64) % kWords] >> (index % 64) & 1; }
  void set(uint64_t index) { bits_[(index / 64) % kWords] |= uint64_t{1} << (index % 64); }
  static constexpr size_t kWords = kReplayWindow / 64;
  std::array<uint64_t, kWords> bits_{};
  uint64_t highest_ = 0;
  bool started_ = false;
};

// RFC 3711 3.3.1 (and its Appendix A): the 48-bit packet index a sequence number most likely
// stands for, given the highest index seen; -1 when it would precede index 0.
int64_t estimate_srtp_index(uint64_t highest, bool started, uint16_t seq);

// RFC 7714 8.1: IV = (0x0000 || SSRC || ROC || SEQ) XOR salt, from the 48-bit index.
void srtp_rtp_iv(uint8_t iv[12], uint32_t ssrc, uint64_t index, const SrtpSessionKey& key);
// RFC 7714 9.1: IV = (0x0000 || SSRC || 0x0000 || 0 || SRTCP index) XOR salt.
void srtp_rtcp_iv(uint8_t iv[12], uint32_t ssrc, uint32_t index, const SrtpSessionKey& key);

class SrtpAeadContext {
 public:
  // Per-direction SSRCs tracked at once (media, RTX, FEC and RTCP sources of one session need
  // 4); more evict the least recently used.
  static constexpr size_t kMaxSsrcs = 8;

  SrtpAeadContext() = default;
  ~SrtpAeadContext();
  SrtpAeadContext(const SrtpAeadContext&) = delete;
  SrtpAeadContext& operator=(const SrtpAeadContext&) = delete;

  // Control plane: derives the session keys and makes the cipher contexts. with_mki: every
  // packet carries the epoch as its 4-byte MKI (the relay's key epochs); without, no MKI at all
  // (a browser's DTLS-SRTP, RFC 5764 4.1.2: WebRTC never negotiates one), so the trailers are
  // kSrtpMkiBytes shorter than kRtpTrailerBytes / kRtcpTrailerBytes.
  bool init(uint32_t epoch, const SrtpMasterKey& master, bool outbound, bool with_mki = true);
  // The same with session keys given directly (no key derivation): RFC 7714's test vectors
  // (sections 16 and 17) are written that way.
  bool init_with_session_keys(uint32_t epoch, const SrtpSessionKey& rtp, const SrtpSessionKey& rtcp,
                              bool outbound, bool with_mki = true);
  uint32_t epoch() const { return epoch_; }
  // Bytes protect adds after an RTP / RTCP packet (what unprotect takes off).
  size_t rtp_trailer_bytes() const { return kSrtpTagBytes + mki_bytes_; }
  size_t rtcp_trailer_bytes() const { return kSrtpTagBytes + 4 + mki_bytes_; }

  SrtpStatus protect_rtp(uint8_t* packet, size_t& size, size_t capacity);
  SrtpStatus unprotect_rtp(uint8_t* packet, size_t& size);
  SrtpStatus protect_rtcp(uint8_t* packet, size_t& size, size_t capacity);
  SrtpStatus unprotect_rtcp(uint8_t* packet, size_t& size);

 private:
  struct SsrcState {
    bool used = false;
    uint32_t ssrc = 0;
    uint64_t last_used = 0;
    ReplayWindow rtp;        // SRTP indices (ROC << 16 | SEQ)
    ReplayWindow rtcp;       // SRTCP indices (31 bits)
    uint32_t rtcp_sent = 0;  // sender: the last SRTCP index used
  };
  SsrcState* find(uint32_t ssrc);
  SsrcState& find_or_evict(uint32_t ssrc);
  bool seal(EVP_CIPHER_CTX* ctx, const uint8_t* iv, const uint8_t* aad, size_t aad_size,
            const uint8_t* aad_tail, size_t aad_tail_size, uint8_t* data, size_t data_size,
            uint8_t* tag);
  bool open(EVP_CIPHER_CTX* ctx, const uint8_t* iv, const uint8_t* aad, size_t aad_size,
            const uint8_t* aad_tail, size_t aad_tail_size, uint8_t* data, size_t data_size,
            const uint8_t* tag);
  void write_mki(uint8_t* at) const;

  uint32_t epoch_ = 0;
  size_t mki_bytes_ = kSrtpMkiBytes;
  bool outbound_ = false;
  SrtpSessionKey rtp_key_;
  SrtpSessionKey rtcp_key_;
  EVP_CIPHER_CTX* rtp_ctx_ = nullptr;
  EVP_CIPHER_CTX* rtcp_ctx_ = nullptr;
  std::array<SsrcState, kMaxSsrcs> ssrcs_{};
  uint64_t use_clock_ = 0;
};

}  // namespace syncd::secure
