// The same SRTP sender and receiver as srtp_session.h (same API, same bytes on the wire), on
// libsrtp2 2.5 instead of our RFC 7714 framing over OpenSSL's EVP. Kept as the reference the
// unit tests cross-check against packet for packet, and as the benchmark's comparison: Debian
// builds libsrtp2 on NSS, whose PK11_Encrypt makes and frees a PKCS#11 context per packet
// (malloc, mutexes), so it runs at under half of OpenSSL's speed (docs/benchmarks.md). Not in
// the daemon: its own library, sync_secure_reference, linked by the tests and benchmarks.
//
// Threads: any thread; not thread-safe; one sender and one receiver per session.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "secure/libsrtp.h"
#include "secure/srtp_session.h"

struct srtp_ctx_t_;

namespace syncd::secure {

// libsrtp sessions indexed by epoch; the common part of sender and receiver.
class LibSrtpEpochs {
 public:
  LibSrtpEpochs() = default;
  ~LibSrtpEpochs();
  LibSrtpEpochs(const LibSrtpEpochs&) = delete;
  LibSrtpEpochs& operator=(const LibSrtpEpochs&) = delete;

  bool has(uint32_t epoch) const { return find(epoch) != nullptr; }
  size_t size() const;
  void remove(uint32_t epoch);

 protected:
  bool add(uint32_t epoch, const SrtpMasterKey& key, bool outbound);
  srtp_ctx_t_* find(uint32_t epoch) const;

  struct Slot {
    bool used = false;
    uint32_t epoch = 0;
    srtp_ctx_t_* session = nullptr;
    uint64_t installed_order = 0;  // epoch identities are unordered: older = installed earlier
  };
  std::array<Slot, kMaxEpochs> slots_{};
  uint64_t installs_ = 0;
};

class LibSrtpSender : public LibSrtpEpochs {
 public:
  // Makes a send context for `epoch` (control plane). False if the epoch exists already, no slot
  // is free, or libsrtp refused the key.
  bool install(uint32_t epoch, const SrtpMasterKey& key);
  // Sends under `epoch` from the next packet on (the switch is at a packet boundary) and drops
  // the send contexts of older epochs. False if `epoch` is not installed.
  bool use_epoch(uint32_t epoch);
  std::optional<uint32_t> epoch() const { return current_; }

  // Encrypts the RTP packet packet[0, size) in place and appends tag and MKI; size grows by
  // kRtpTrailerBytes. capacity: bytes writable at packet.
  SrtpStatus protect_rtp(uint8_t* packet, size_t& size, size_t capacity);
  SrtpStatus protect_rtcp(uint8_t* packet, size_t& size, size_t capacity);

  const SrtpCounters& counters() const { return counters_; }

 private:
  SrtpStatus protect(uint8_t* packet, size_t& size, size_t capacity, bool rtcp);
  std::optional<uint32_t> current_;
  srtp_ctx_t_* current_session_ = nullptr;
  SrtpCounters counters_;
};

class LibSrtpReceiver : public LibSrtpEpochs {
 public:
  // Makes a receive context for `epoch` (control plane); see SrtpSender::install.
  bool install(uint32_t epoch, const SrtpMasterKey& key);
  // Forgets the epoch's key: its packets are refused from now on as kUnknownEpoch.
  void retire(uint32_t epoch) { remove(epoch); }

  // Authenticates and decrypts in place; on kOk, size shrinks to the plain packet and `epoch`
  // (when not null) is the packet's key epoch.
  SrtpStatus unprotect_rtp(uint8_t* packet, size_t& size, uint32_t* epoch = nullptr);
  SrtpStatus unprotect_rtcp(uint8_t* packet, size_t& size, uint32_t* epoch = nullptr);

  const SrtpCounters& counters() const { return counters_; }

 private:
  SrtpStatus unprotect(uint8_t* packet, size_t& size, uint32_t* epoch, bool rtcp);
  SrtpCounters counters_;
};

}  // namespace syncd::secure
