// SRTP and SRTCP with AEAD_AES_128_GCM (RFC 7714), one master key per key epoch, each packet
// carrying its epoch as a 4-byte MKI (RFC 3711 section 3.1). The framing (key derivation, IV,
// AAD, rollover counter, replay window, MKI) is ours, in srtp_aead.h; the cipher is OpenSSL's
// EVP AES-128-GCM. The bytes on the wire are libsrtp2's, checked packet for packet in the tests
// against LibSrtpSender/LibSrtpReceiver (srtp_libsrtp.h), which are 2x slower on Debian 12.
//
// Protect and unprotect work in place in the caller's buffer. The caller leaves room after a
// packet for the trailer: kRtpTrailerBytes (16-byte GCM tag, then the MKI) for RTP,
// kRtcpTrailerBytes (tag, E flag and SRTCP index, then the MKI) for RTCP. The MKI is last in
// both, so a receiver finds the epoch in a packet's last 4 bytes and picks the key by it before
// any cryptography runs.
//
// Data plane: no exceptions, no allocation (every context and per-SSRC state is made at
// install), bounded work per packet; refusals return a status and are counted. Control plane
// (install, use_epoch, retire) allocates.
//
// Threads: any thread; not thread-safe; one sender and one receiver per session, used by the
// thread that owns the session.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "secure/dtls_endpoint.h"

namespace syncd::secure {

class SrtpAeadContext;

inline constexpr size_t kSrtpTagBytes = 16;  // RFC 7714 section 12: AEAD_AES_128_GCM, 16 octets
inline constexpr size_t kSrtpMkiBytes = 4;   // our MKI: the key epoch's identity, big-endian
inline constexpr size_t kRtpTrailerBytes = kSrtpTagBytes + kSrtpMkiBytes;
// RFC 7714 section 9: SRTCP adds the 4-byte E flag and SRTCP index after the tag.
inline constexpr size_t kRtcpTrailerBytes = kSrtpTagBytes + 4 + kSrtpMkiBytes;
// Contexts held at once per direction: the live epoch, the next one, one retiring, one spare.
inline constexpr size_t kMaxEpochs = 4;
// The replay window per SSRC (RFC 3711 3.3.2); packets older than this many sequence numbers
// are refused as replays. 1024 covers ~0.1 s of 1080p60 at 20 Mbit/s (1.2 kB packets).
inline constexpr unsigned long kReplayWindow = 1024;

enum class SrtpStatus : uint8_t {
  kOk,
  kTooShort,      // shorter than a header plus trailer: nothing to authenticate
  kMalformed,     // the header's CSRC count or extension length runs past the packet, or V != 2
  kNoRoom,        // protect: capacity < size + trailer
  kAuthFailed,    // the GCM tag did not verify (forged, corrupted, or the wrong key)
  kReplayed,      // already seen, or older than the replay window (protect: index reused)
  kUnknownEpoch,  // unprotect: the MKI names no installed epoch (never installed, or retired)
  kNoSendKey,     // protect: no epoch to send under yet
  kFailed,        // anything else (the cipher library failed)
};
const char* to_string(SrtpStatus status);

struct SrtpCounters {
  uint64_t rtp_protected = 0;
  uint64_t rtcp_protected = 0;
  uint64_t rtp_unprotected = 0;
  uint64_t rtcp_unprotected = 0;
  uint64_t too_short = 0;
  uint64_t malformed = 0;
  uint64_t no_room = 0;
  uint64_t auth_failed = 0;
  uint64_t replayed = 0;
  uint64_t unknown_epoch = 0;
  uint64_t no_send_key = 0;
  uint64_t failed = 0;
};
void count_srtp_status(SrtpCounters& counters, SrtpStatus status);

// Reads the epoch from a protected packet's MKI (its last 4 bytes), or nothing if it is shorter.
std::optional<uint32_t> srtp_packet_epoch(const uint8_t* packet, size_t size);

// Contexts indexed by epoch; the common part of sender and receiver.
class SrtpEpochs {
 public:
  SrtpEpochs();
  ~SrtpEpochs();
  SrtpEpochs(const SrtpEpochs&) = delete;
  SrtpEpochs& operator=(const SrtpEpochs&) = delete;

  bool has(uint32_t epoch) const { return find(epoch) != nullptr; }
  size_t size() const;
  void remove(uint32_t epoch);

 protected:
  bool add(uint32_t epoch, const SrtpMasterKey& key, bool outbound);
  SrtpAeadContext* find(uint32_t epoch) const;

  std::array<std::unique_ptr<SrtpAeadContext>, kMaxEpochs> slots_;
  // Install order per slot: epoch identities are unordered (docs/wan.md "Key epochs"), so
  // "older" means installed earlier.
  std::array<uint64_t, kMaxEpochs> installed_order_{};
  uint64_t installs_ = 0;
};

class SrtpSender : public SrtpEpochs {
 public:
  // Makes a send context for `epoch` (control plane). False if the epoch exists already, no slot
  // is free, or OpenSSL refused the key.
  bool install(uint32_t epoch, const SrtpMasterKey& key);
  // Sends under `epoch` from the next packet on (the switch is at a packet boundary) and drops
  // the send contexts installed before it. False if `epoch` is not installed.
  bool use_epoch(uint32_t epoch);
  std::optional<uint32_t> epoch() const { return current_; }

  // Encrypts the RTP packet packet[0, size) in place and appends tag and MKI; size grows by
  // kRtpTrailerBytes. capacity: bytes writable at packet.
  SrtpStatus protect_rtp(uint8_t* packet, size_t& size, size_t capacity);
  // The same for one RTCP compound packet; size grows by kRtcpTrailerBytes.
  SrtpStatus protect_rtcp(uint8_t* packet, size_t& size, size_t capacity);

  const SrtpCounters& counters() const { return counters_; }

 private:
  std::optional<uint32_t> current_;
  SrtpAeadContext* current_context_ = nullptr;
  SrtpCounters counters_;
};

class SrtpReceiver : public SrtpEpochs {
 public:
  // Makes a receive context for `epoch` (control plane); see SrtpSender::install.
  bool install(uint32_t epoch, const SrtpMasterKey& key);
  // Forgets the epoch's key: its packets are refused from now on as kUnknownEpoch.
  void retire(uint32_t epoch) { remove(epoch); }

  // Authenticates and decrypts in place; on kOk, size shrinks to the plain packet and `epoch`
  // (when not null) is the packet's key epoch. On failure the packet's bytes are unspecified.
  SrtpStatus unprotect_rtp(uint8_t* packet, size_t& size, uint32_t* epoch = nullptr);
  SrtpStatus unprotect_rtcp(uint8_t* packet, size_t& size, uint32_t* epoch = nullptr);

  const SrtpCounters& counters() const { return counters_; }

 private:
  SrtpStatus unprotect(uint8_t* packet, size_t& size, uint32_t* epoch, bool rtcp);
  SrtpCounters counters_;
};

}  // namespace syncd::secure
