// libFuzzer target for syncd::secure's SRTP/SRTCP receive path (RFC 7714 framing over EVP), plus
// the DTLS datagram classifier.
//
// Input: byte 0 selects RTP or RTCP (bit 0), whether the rest is first protected with the known
// key (bit 1) and under which epoch (bit 2), and where a flip lands (bits 3-7); byte 1 is the
// flip's XOR mask (0: none). The rest is the packet. A packet we protected must come back
// unchanged, and any flipped bit must make it refused; the same again without an MKI (WHEP). Every
// buffer has its exact size, so a read or write past it trips ASan.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fuzz_check.h"
#include "secure/dtls_endpoint.h"
#include "secure/srtp_aead.h"
#include "secure/srtp_session.h"

namespace {

using namespace syncd::secure;

SrtpMasterKey key_for(uint32_t epoch) {
  SrtpMasterKey key;
  for (size_t i = 0; i < key.key.size(); ++i) key.key[i] = static_cast<uint8_t>(i * 31 + epoch);
  for (size_t i = 0; i < key.salt.size(); ++i) key.salt[i] = static_cast<uint8_t>(i * 17 + epoch);
  return key;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t mode = data[0];
  const uint8_t flip = data[1];
  const bool rtcp = mode & 1;
  const bool seal = mode & 2;
  const uint32_t epoch = (mode & 4) ? 1 : 0;
  std::vector<uint8_t> input(data + 2, data + size);

  (void)classify_dtls_datagram(input);
  (void)srtp_packet_epoch(input.data(), input.size());

  SrtpReceiver rx;
  FUZZ_CHECK(rx.install(0, key_for(0)));
  FUZZ_CHECK(rx.install(1, key_for(1)));

  std::vector<uint8_t> plain;
  bool sealed = false;
  size_t length = input.size();
  if (seal) {
    SrtpSender tx;
    FUZZ_CHECK(tx.install(epoch, key_for(epoch)) && tx.use_epoch(epoch));
    const size_t trailer = rtcp ? kRtcpTrailerBytes : kRtpTrailerBytes;
    std::vector<uint8_t> room(input.size() + trailer);
    if (!input.empty()) std::memcpy(room.data(), input.data(), input.size());
    SrtpStatus status = rtcp ? tx.protect_rtcp(room.data(), length, room.size())
                             : tx.protect_rtp(room.data(), length, room.size());
    if (status == SrtpStatus::kOk) {
      FUZZ_CHECK(length == input.size() + trailer);
      sealed = true;
      plain = input;
      input = room;
      if (flip) input[((mode >> 3) * 7919u) % input.size()] ^= flip;
    } else {
      length = input.size();
    }
  }

  uint32_t seen_epoch = 99;
  SrtpStatus status = rtcp ? rx.unprotect_rtcp(input.data(), length, &seen_epoch)
                           : rx.unprotect_rtp(input.data(), length, &seen_epoch);
  if (sealed && !flip) {
    FUZZ_CHECK(status == SrtpStatus::kOk);
    FUZZ_CHECK(seen_epoch == epoch);
    FUZZ_CHECK(length == plain.size());
    FUZZ_CHECK(std::memcmp(input.data(), plain.data(), length) == 0);
  }
  if (sealed && flip) FUZZ_CHECK(status != SrtpStatus::kOk);
  if (status == SrtpStatus::kOk) FUZZ_CHECK(length <= input.size());
  const SrtpCounters& c = rx.counters();
  FUZZ_CHECK(c.rtp_unprotected + c.rtcp_unprotected + c.too_short + c.malformed + c.auth_failed +
                 c.replayed + c.unknown_epoch + c.failed ==
             1);

  // The same packet through the MKI-less contexts a WHEP session uses (a browser's SRTP): what
  // they protect comes back unchanged, a flipped bit is refused, anything else is read safely.
  std::vector<uint8_t> bare(data + 2, data + size);
  SrtpAeadContext bare_rx;
  FUZZ_CHECK(bare_rx.init(0, key_for(0), false, /*with_mki=*/false));
  size_t bare_length = bare.size();
  bool bare_sealed = false;
  if (seal) {
    SrtpAeadContext bare_tx;
    FUZZ_CHECK(bare_tx.init(0, key_for(0), true, /*with_mki=*/false));
    const size_t trailer = rtcp ? bare_tx.rtcp_trailer_bytes() : bare_tx.rtp_trailer_bytes();
    std::vector<uint8_t> room(bare.size() + trailer);
    if (!bare.empty()) std::memcpy(room.data(), bare.data(), bare.size());
    const SrtpStatus s = rtcp ? bare_tx.protect_rtcp(room.data(), bare_length, room.size())
                              : bare_tx.protect_rtp(room.data(), bare_length, room.size());
    if (s == SrtpStatus::kOk) {
      FUZZ_CHECK(bare_length == bare.size() + trailer);
      bare_sealed = true;
      plain = bare;     // the packet as given
      bare.swap(room);  // and as protected
      if (flip) bare[((mode >> 3) * 7919u) % bare.size()] ^= flip;
    } else {
      bare_length = bare.size();
    }
  }
  const SrtpStatus bare_status = rtcp ? bare_rx.unprotect_rtcp(bare.data(), bare_length)
                                      : bare_rx.unprotect_rtp(bare.data(), bare_length);
  if (bare_sealed && !flip) {
    FUZZ_CHECK(bare_status == SrtpStatus::kOk);
    FUZZ_CHECK(bare_length == plain.size());
    FUZZ_CHECK(std::memcmp(bare.data(), plain.data(), bare_length) == 0);
  }
  if (bare_sealed && flip) FUZZ_CHECK(bare_status != SrtpStatus::kOk);
  if (bare_status == SrtpStatus::kOk) FUZZ_CHECK(bare_length <= bare.size());
  return 0;
}
