#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <cstring>
#include <random>
#include <set>
#include <string_view>
#include <vector>

#include "secure/srtp_aead.h"
#include "secure/srtp_libsrtp.h"
#include "secure/srtp_session.h"

namespace syncd::secure {
namespace {

SrtpMasterKey key_from(uint32_t seed) {
  SrtpMasterKey key;
  std::mt19937 rng(seed);
  for (auto& b : key.key) b = static_cast<uint8_t>(rng());
  for (auto& b : key.salt) b = static_cast<uint8_t>(rng());
  return key;
}

// An RTP packet (RFC 3550 5.1) with room for the trailer.
std::vector<uint8_t> rtp_packet(uint16_t seq, uint32_t timestamp, uint32_t ssrc, size_t payload,
                                uint8_t fill = 0) {
  std::vector<uint8_t> p(12 + payload + kRtpTrailerBytes);
  p[0] = 0x80;
  p[1] = 96;
  p[2] = static_cast<uint8_t>(seq >> 8);
  p[3] = static_cast<uint8_t>(seq);
  for (int i = 0; i < 4; ++i) p[4 + i] = static_cast<uint8_t>(timestamp >> (24 - 8 * i));
  for (int i = 0; i < 4; ++i) p[8 + i] = static_cast<uint8_t>(ssrc >> (24 - 8 * i));
  for (size_t i = 0; i < payload; ++i) p[12 + i] = static_cast<uint8_t>(fill + i * 7);
  return p;
}

// An RTCP receiver report (RFC 3550 6.4.2) with no blocks.
std::vector<uint8_t> rtcp_packet(uint32_t ssrc) {
  std::vector<uint8_t> p(8 + kRtcpTrailerBytes);
  p[0] = 0x80;
  p[1] = 201;
  p[3] = 1;
  for (int i = 0; i < 4; ++i) p[4 + i] = static_cast<uint8_t>(ssrc >> (24 - 8 * i));
  return p;
}

// Every test runs on both implementations: ours (RFC 7714 framing over EVP) and libsrtp2's.
struct Ours {
  using Tx = SrtpSender;
  using Rx = SrtpReceiver;
};
struct Libsrtp {
  using Tx = LibSrtpSender;
  using Rx = LibSrtpReceiver;
};

template <class Impl>
struct Pair {
  typename Impl::Tx tx;
  typename Impl::Rx rx;
  explicit Pair(uint32_t epoch = 7, uint32_t seed = 1) {
    EXPECT_TRUE(tx.install(epoch, key_from(seed)));
    EXPECT_TRUE(tx.use_epoch(epoch));
    EXPECT_TRUE(rx.install(epoch, key_from(seed)));
  }
};

template <class Impl>
class SecureSrtp : public ::testing::Test {};
using Implementations = ::testing::Types<Ours, Libsrtp>;
TYPED_TEST_SUITE(SecureSrtp, Implementations);

TYPED_TEST(SecureSrtp, RtpRoundTripsAtEverySizeWithTagThenMkiLast) {
  Pair<TypeParam> pair(0x01020304);
  for (size_t payload : {0, 1, 15, 16, 17, 160, 1000, 1148, 1400}) {
    std::vector<uint8_t> p =
        rtp_packet(static_cast<uint16_t>(100 + payload), 9000, 0xabcdef01, payload, 3);
    std::vector<uint8_t> plain(p.begin(), p.end() - kRtpTrailerBytes);
    size_t size = plain.size();
    ASSERT_EQ(pair.tx.protect_rtp(p.data(), size, p.size()), SrtpStatus::kOk);
    ASSERT_EQ(size, plain.size() + kRtpTrailerBytes);
    // The header stays in the clear (RFC 7714 section 8.2: it is the AAD), the payload does not,
    // and the MKI (our epoch) is the last 4 bytes.
    EXPECT_EQ(0, std::memcmp(p.data(), plain.data(), 12));
    if (payload >= 16) {
      EXPECT_NE(0, std::memcmp(p.data() + 12, plain.data() + 12, payload));
    }
    EXPECT_EQ(srtp_packet_epoch(p.data(), size), 0x01020304u);
    uint32_t epoch = 0;
    ASSERT_EQ(pair.rx.unprotect_rtp(p.data(), size, &epoch), SrtpStatus::kOk);
    EXPECT_EQ(epoch, 0x01020304u);
    ASSERT_EQ(size, plain.size());
    EXPECT_EQ(0, std::memcmp(p.data(), plain.data(), size));
  }
  EXPECT_EQ(pair.rx.counters().rtp_unprotected, 9u);
}

TYPED_TEST(SecureSrtp, RtcpRoundTripsWithItsIndexThenMki) {
  Pair<TypeParam> pair(3);
  for (int i = 0; i < 5; ++i) {
    std::vector<uint8_t> p = rtcp_packet(0x11223344);
    std::vector<uint8_t> plain(p.begin(), p.end() - kRtcpTrailerBytes);
    size_t size = plain.size();
    ASSERT_EQ(pair.tx.protect_rtcp(p.data(), size, p.size()), SrtpStatus::kOk);
    ASSERT_EQ(size, plain.size() + kRtcpTrailerBytes);
    EXPECT_EQ(srtp_packet_epoch(p.data(), size), 3u);
    // RFC 7714 section 9: E flag set and the SRTCP index right before the MKI.
    uint32_t e_index = static_cast<uint32_t>(p[size - 8]) << 24 | p[size - 7] << 16 |
                       p[size - 6] << 8 | p[size - 5];
    EXPECT_EQ(e_index, 0x80000000u | static_cast<uint32_t>(i + 1));
    ASSERT_EQ(pair.rx.unprotect_rtcp(p.data(), size), SrtpStatus::kOk);
    EXPECT_EQ(size, plain.size());
    EXPECT_EQ(0, std::memcmp(p.data(), plain.data(), size));
  }
}

// Every single-bit flip anywhere is refused: in the MKI as an unknown epoch, elsewhere (header
// = AAD, ciphertext, tag) as an authentication failure.
TYPED_TEST(SecureSrtp, TamperingAnyByteFailsAuthentication) {
  Pair<TypeParam> pair(5);
  std::vector<uint8_t> p = rtp_packet(1, 1, 0x5555, 100);
  size_t size = p.size() - kRtpTrailerBytes;
  ASSERT_EQ(pair.tx.protect_rtp(p.data(), size, p.size()), SrtpStatus::kOk);
  for (size_t i = 0; i < size; ++i) {
    for (uint8_t bit : {0x01, 0x80}) {
      std::vector<uint8_t> copy(p.begin(), p.begin() + size);
      copy[i] ^= bit;
      size_t n = size;
      SrtpStatus status = pair.rx.unprotect_rtp(copy.data(), n);
      if (i >= size - kSrtpMkiBytes) {
        EXPECT_EQ(status, SrtpStatus::kUnknownEpoch) << i;
      } else if (i < 2 && bit == 0x80) {
        // Version bits: libsrtp may refuse the header before authenticating.
        EXPECT_NE(status, SrtpStatus::kOk) << i;
      } else {
        EXPECT_TRUE(status == SrtpStatus::kAuthFailed || status == SrtpStatus::kMalformed) << i;
        if (i >= 12) {
          EXPECT_EQ(status, SrtpStatus::kAuthFailed) << i;
        }
      }
    }
  }
  EXPECT_GT(pair.rx.counters().auth_failed, 0u);
  // The genuine packet still goes through afterwards (failures leave the window alone).
  ASSERT_EQ(pair.rx.unprotect_rtp(p.data(), size), SrtpStatus::kOk);
}

TYPED_TEST(SecureSrtp, ReplaysAreRefusedAndCounted) {
  Pair<TypeParam> pair;
  std::vector<std::vector<uint8_t>> sent;
  for (uint16_t seq = 0; seq < 2000; ++seq) {
    std::vector<uint8_t> p = rtp_packet(seq, seq * 3000u, 0x1234, 50);
    size_t size = p.size() - kRtpTrailerBytes;
    ASSERT_EQ(pair.tx.protect_rtp(p.data(), size, p.size()), SrtpStatus::kOk);
    sent.push_back(p);
  }
  for (auto& p : sent) {
    std::vector<uint8_t> copy = p;
    size_t size = copy.size();
    ASSERT_EQ(pair.rx.unprotect_rtp(copy.data(), size), SrtpStatus::kOk);
  }
  // Inside the window: replay; older than it: replay (too old) as well.
  for (size_t index : {size_t{1999}, size_t{1990}, size_t{1500}, size_t{0}}) {
    std::vector<uint8_t> copy = sent[index];
    size_t size = copy.size();
    EXPECT_EQ(pair.rx.unprotect_rtp(copy.data(), size), SrtpStatus::kReplayed) << index;
  }
  EXPECT_EQ(pair.rx.counters().replayed, 4u);

  // RTCP: the SRTCP index is replay-checked too.
  std::vector<uint8_t> r = rtcp_packet(0x1234);
  size_t size = 8;
  ASSERT_EQ(pair.tx.protect_rtcp(r.data(), size, r.size()), SrtpStatus::kOk);
  std::vector<uint8_t> again = r;
  size_t n = size;
  ASSERT_EQ(pair.rx.unprotect_rtcp(r.data(), n), SrtpStatus::kOk);
  n = size;
  EXPECT_EQ(pair.rx.unprotect_rtcp(again.data(), n), SrtpStatus::kReplayed);
}

// A sender's SR from its media SSRC may arrive before that SSRC's first RTP packet (the relay
// reports at once on connecting). The SSRC's RTCP state must not make the first RTP packet, at
// any sequence number, look like a replay: its RTP window has not started.
TYPED_TEST(SecureSrtp, AnSrBeforeTheFirstRtpPacketDoesNotMakeItAReplay) {
  for (uint16_t first : {uint16_t{5}, uint16_t{39879}, uint16_t{65535}}) {
    Pair<TypeParam> pair;
    std::vector<uint8_t> r = rtcp_packet(0x1234);
    size_t size = 8;
    ASSERT_EQ(pair.tx.protect_rtcp(r.data(), size, r.size()), SrtpStatus::kOk);
    ASSERT_EQ(pair.rx.unprotect_rtcp(r.data(), size), SrtpStatus::kOk);
    for (uint16_t i = 0; i < 3; ++i) {
      const uint16_t seq = static_cast<uint16_t>(first + i);
      std::vector<uint8_t> p = rtp_packet(seq, 90u * i, 0x1234, 40);
      size_t n = p.size() - kRtpTrailerBytes;
      ASSERT_EQ(pair.tx.protect_rtp(p.data(), n, p.size()), SrtpStatus::kOk);
      EXPECT_EQ(pair.rx.unprotect_rtp(p.data(), n), SrtpStatus::kOk) << first << "+" << i;
    }
  }
}

TYPED_TEST(SecureSrtp, ReorderedPacketsInsideTheWindowAreAccepted) {
  Pair<TypeParam> pair;
  std::vector<std::vector<uint8_t>> sent;
  for (uint16_t seq = 0; seq < 600; ++seq) {
    std::vector<uint8_t> p = rtp_packet(seq, 0, 0x99, 20);
    size_t size = p.size() - kRtpTrailerBytes;
    ASSERT_EQ(pair.tx.protect_rtp(p.data(), size, p.size()), SrtpStatus::kOk);
    sent.push_back(p);
  }
  std::mt19937 rng(7);
  // Shuffle within blocks of 64 (a reordering depth far below the 1024 window).
  for (size_t b = 0; b < sent.size(); b += 64)
    std::shuffle(sent.begin() + b, sent.begin() + std::min(b + 64, sent.size()), rng);
  for (auto& p : sent) {
    size_t size = p.size();
    ASSERT_EQ(pair.rx.unprotect_rtp(p.data(), size), SrtpStatus::kOk);
  }
}

TYPED_TEST(SecureSrtp, SequenceAndTimestampWraparoundKeepsWorking) {
  Pair<TypeParam> pair;
  // 16-bit sequence wraps (RFC 3711 3.3.1: the rollover counter takes over) and so does the
  // 32-bit timestamp; 140,000 packets cross the sequence wrap twice.
  uint16_t seq = 65500;
  uint32_t timestamp = 0xffffff00u;
  for (int i = 0; i < 140000; ++i, ++seq, timestamp += 1500) {
    std::vector<uint8_t> p = rtp_packet(seq, timestamp, 0x77, 8, static_cast<uint8_t>(i));
    size_t size = p.size() - kRtpTrailerBytes;
    ASSERT_EQ(pair.tx.protect_rtp(p.data(), size, p.size()), SrtpStatus::kOk) << i;
    ASSERT_EQ(pair.rx.unprotect_rtp(p.data(), size), SrtpStatus::kOk) << i;
    ASSERT_EQ(p[12], static_cast<uint8_t>(i));
  }
}

TYPED_TEST(SecureSrtp, TruncationAtEveryLengthIsRefusedNeverRead) {
  Pair<TypeParam> pair;
  std::vector<uint8_t> p = rtp_packet(10, 10, 0x42, 64);
  size_t size = p.size() - kRtpTrailerBytes;
  ASSERT_EQ(pair.tx.protect_rtp(p.data(), size, p.size()), SrtpStatus::kOk);
  for (size_t n = 0; n < size; ++n) {
    // Exactly n bytes on the heap, so ASan catches any read past them.
    std::vector<uint8_t> cut(p.begin(), p.begin() + n);
    size_t length = n;
    SrtpStatus status = pair.rx.unprotect_rtp(cut.data(), length);
    EXPECT_NE(status, SrtpStatus::kOk) << n;
    if (n < 12 + kRtpTrailerBytes) {
      EXPECT_EQ(status, SrtpStatus::kTooShort) << n;
    }
    std::vector<uint8_t> cut_rtcp(p.begin(), p.begin() + n);
    length = n;
    EXPECT_NE(pair.rx.unprotect_rtcp(cut_rtcp.data(), length), SrtpStatus::kOk) << n;
  }
}

TYPED_TEST(SecureSrtp, RefusesWithoutRoomWithoutKeyAndUnderAnUnknownEpoch) {
  typename TypeParam::Tx tx;
  std::vector<uint8_t> p = rtp_packet(1, 1, 1, 10);
  size_t size = p.size() - kRtpTrailerBytes;
  EXPECT_EQ(tx.protect_rtp(p.data(), size, p.size()), SrtpStatus::kNoSendKey);
  ASSERT_TRUE(tx.install(1, key_from(1)));
  EXPECT_FALSE(tx.install(1, key_from(2)));  // an epoch is installed once
  EXPECT_FALSE(tx.use_epoch(2));
  ASSERT_TRUE(tx.use_epoch(1));
  EXPECT_EQ(tx.protect_rtp(p.data(), size, p.size() - 1), SrtpStatus::kNoRoom);
  EXPECT_EQ(size, p.size() - kRtpTrailerBytes);
  // Exactly the trailer's room is enough (ASan checks nothing more is written).
  std::vector<uint8_t> exact(p.begin(), p.end());
  ASSERT_EQ(tx.protect_rtp(exact.data(), size, exact.size()), SrtpStatus::kOk);
  typename TypeParam::Rx rx;
  ASSERT_TRUE(rx.install(2, key_from(1)));
  size_t n = size;
  EXPECT_EQ(rx.unprotect_rtp(exact.data(), n), SrtpStatus::kUnknownEpoch);
  EXPECT_EQ(rx.counters().unknown_epoch, 1u);
  EXPECT_EQ(tx.counters().no_room, 1u);
  EXPECT_EQ(tx.counters().no_send_key, 1u);
}

// Epoch identities are unordered (docs/wan.md "Key epochs"): use_epoch drops the send keys
// installed before the one it switches to, whatever their values, and keeps a newer one.
TYPED_TEST(SecureSrtp, UseEpochDropsTheKeysInstalledBeforeItNotTheSmallerValues) {
  typename TypeParam::Tx tx;
  ASSERT_TRUE(tx.install(0xf0000000u, key_from(1)));
  ASSERT_TRUE(tx.install(5, key_from(2)));
  ASSERT_TRUE(tx.install(0x80000000u, key_from(3)));
  ASSERT_TRUE(tx.use_epoch(5));
  EXPECT_FALSE(tx.has(0xf0000000u));
  EXPECT_TRUE(tx.has(5));
  EXPECT_TRUE(tx.has(0x80000000u));
  ASSERT_TRUE(tx.use_epoch(0x80000000u));
  EXPECT_EQ(tx.size(), 1u);
}

TYPED_TEST(SecureSrtp, ReceiverPicksTheKeyByMkiAndRetiredEpochsAreRefused) {
  typename TypeParam::Tx tx;
  typename TypeParam::Rx rx;
  for (uint32_t e = 0; e < 3; ++e) {
    ASSERT_TRUE(tx.install(e, key_from(100 + e)));
    ASSERT_TRUE(rx.install(e, key_from(100 + e)));
  }
  std::vector<std::vector<uint8_t>> packets;
  for (uint32_t e = 0; e < 3; ++e) {
    ASSERT_TRUE(tx.use_epoch(e));
    // use_epoch drops older send keys.
    EXPECT_EQ(tx.size(), 3u - e);
    std::vector<uint8_t> p = rtp_packet(static_cast<uint16_t>(e), 0, 0x10, 30);
    size_t size = p.size() - kRtpTrailerBytes;
    ASSERT_EQ(tx.protect_rtp(p.data(), size, p.size()), SrtpStatus::kOk);
    packets.push_back(p);
  }
  // Any order: each finds its own key.
  for (int i : {2, 0, 1}) {
    std::vector<uint8_t> copy = packets[i];
    size_t size = copy.size();
    uint32_t epoch = 99;
    ASSERT_EQ(rx.unprotect_rtp(copy.data(), size, &epoch), SrtpStatus::kOk);
    EXPECT_EQ(epoch, static_cast<uint32_t>(i));
  }
  rx.retire(0);
  std::vector<uint8_t> copy = packets[0];
  size_t size = copy.size();
  EXPECT_EQ(rx.unprotect_rtp(copy.data(), size), SrtpStatus::kUnknownEpoch);
  // An MKI rewritten to a live epoch does not make it decrypt under that key.
  copy = packets[0];
  copy[copy.size() - 1] = 2;
  size = copy.size();
  EXPECT_EQ(rx.unprotect_rtp(copy.data(), size), SrtpStatus::kAuthFailed);
}

// An independent implementation of RFC 7714's framing from the RFCs and OpenSSL's EVP, to check
// libsrtp2's output byte for byte: RFC 3711 4.3 key derivation (AES-CM PRF, kdr 0), RFC 7714 8.1
// IV, RFC 7714 8.2 AAD = the header, ciphertext || tag, then our MKI.
std::array<uint8_t, 16> derive(const SrtpMasterKey& master, uint8_t label, size_t length) {
  // RFC 3711 4.3.1: x = (label || r) XOR master_salt, r = 0; the PRF is AES-CM keyed by the
  // master key with IV x * 2^16. RFC 7714 section 11: the 96-bit salt is used as the first 12
  // bytes of the 112-bit one.
  uint8_t x[16] = {};
  std::memcpy(x, master.salt.data(), 12);
  x[7] ^= label;
  std::array<uint8_t, 16> out{};
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  int n = 0;
  EVP_EncryptInit_ex(ctx, EVP_aes_128_ecb(), nullptr, master.key.data(), nullptr);
  EVP_CIPHER_CTX_set_padding(ctx, 0);
  EVP_EncryptUpdate(ctx, out.data(), &n, x, 16);
  EVP_CIPHER_CTX_free(ctx);
  std::fill(out.begin() + static_cast<long>(length), out.end(), 0);
  return out;
}

TYPED_TEST(SecureSrtp, MatchesAnIndependentRfc7714ImplementationByteForByte) {
  const uint32_t epoch = 0x00000abc;
  SrtpMasterKey master = key_from(42);
  typename TypeParam::Tx tx;
  ASSERT_TRUE(tx.install(epoch, master));
  ASSERT_TRUE(tx.use_epoch(epoch));
  auto session_key = derive(master, 0x00, 16);
  auto session_salt = derive(master, 0x02, 12);
  const uint32_t ssrc = 0xcafebabe;
  uint16_t seq = 65530;
  uint32_t roc = 0;
  for (int i = 0; i < 12; ++i, ++seq) {
    if (seq == 0) ++roc;  // RFC 3711 3.3.1: the sender's ROC steps when SEQ wraps
    std::vector<uint8_t> p = rtp_packet(seq, 1000u * i, ssrc, 37 + i, static_cast<uint8_t>(i));
    size_t plain_size = p.size() - kRtpTrailerBytes;
    std::vector<uint8_t> plain(p.begin(), p.begin() + plain_size);
    size_t size = plain_size;
    ASSERT_EQ(tx.protect_rtp(p.data(), size, p.size()), SrtpStatus::kOk);

    // RFC 7714 8.1: IV = (0x0000 || SSRC || ROC || SEQ) XOR salt.
    uint8_t iv[12] = {0,
                      0,
                      static_cast<uint8_t>(ssrc >> 24),
                      static_cast<uint8_t>(ssrc >> 16),
                      static_cast<uint8_t>(ssrc >> 8),
                      static_cast<uint8_t>(ssrc),
                      static_cast<uint8_t>(roc >> 24),
                      static_cast<uint8_t>(roc >> 16),
                      static_cast<uint8_t>(roc >> 8),
                      static_cast<uint8_t>(roc),
                      static_cast<uint8_t>(seq >> 8),
                      static_cast<uint8_t>(seq)};
    for (int b = 0; b < 12; ++b) iv[b] ^= session_salt[b];
    std::vector<uint8_t> expected(plain.begin(), plain.begin() + 12);
    expected.resize(plain_size + kSrtpTagBytes);
    EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
    int n = 0;
    ASSERT_EQ(EVP_EncryptInit_ex(ctx, EVP_aes_128_gcm(), nullptr, session_key.data(), iv), 1);
    ASSERT_EQ(EVP_EncryptUpdate(ctx, nullptr, &n, plain.data(), 12), 1);  // AAD: the header
    ASSERT_EQ(EVP_EncryptUpdate(ctx, expected.data() + 12, &n, plain.data() + 12,
                                static_cast<int>(plain_size - 12)),
              1);
    ASSERT_EQ(EVP_EncryptFinal_ex(ctx, expected.data() + 12 + n, &n), 1);
    ASSERT_EQ(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, expected.data() + plain_size), 1);
    EVP_CIPHER_CTX_free(ctx);
    for (int b = 0; b < 4; ++b) expected.push_back(static_cast<uint8_t>(epoch >> (24 - 8 * b)));
    ASSERT_EQ(size, expected.size());
    EXPECT_EQ(std::vector<uint8_t>(p.begin(), p.begin() + size), expected) << "seq " << seq;
  }
}

// A random RTP packet: CSRCs and a header extension (RFC 3550 5.3.1) some of the time.
std::vector<uint8_t> random_rtp(std::mt19937& rng, uint16_t seq, uint32_t ssrc) {
  size_t csrcs = rng() % 4 == 0 ? rng() % 4 : 0;
  size_t extension_words = rng() % 3 == 0 ? rng() % 4 : 0;
  bool extension = rng() % 3 == 0;
  size_t payload = rng() % 1201;
  size_t header = 12 + 4 * csrcs + (extension ? 4 + 4 * extension_words : 0);
  std::vector<uint8_t> p(header + payload + kRtpTrailerBytes);
  for (auto& b : p) b = static_cast<uint8_t>(rng());
  p[0] = static_cast<uint8_t>(0x80 | (extension ? 0x10 : 0) | csrcs);
  p[2] = static_cast<uint8_t>(seq >> 8);
  p[3] = static_cast<uint8_t>(seq);
  for (int i = 0; i < 4; ++i) p[8 + i] = static_cast<uint8_t>(ssrc >> (24 - 8 * i));
  if (extension) {
    size_t at = 12 + 4 * csrcs;
    p[at] = 0xbe;
    p[at + 1] = 0xde;
    p[at + 2] = 0;
    p[at + 3] = static_cast<uint8_t>(extension_words);
  }
  p.resize(p.size() - kRtpTrailerBytes);
  return p;
}

// Ours and libsrtp2 write the same bytes for the same packets, and each reads the other's, over
// 3 SSRCs, random sizes and headers, a sequence-number wrap and reordered delivery.
TEST(SecureSrtpCross, OursAndLibsrtpWriteTheSameBytesAndReadEachOthersPackets) {
  const SrtpMasterKey key = key_from(31337);
  const uint32_t epoch = 0x00c0ffee;
  SrtpSender ours_tx;
  LibSrtpSender lib_tx;
  SrtpReceiver ours_rx;
  LibSrtpReceiver lib_rx;
  ASSERT_TRUE(ours_tx.install(epoch, key) && ours_tx.use_epoch(epoch));
  ASSERT_TRUE(lib_tx.install(epoch, key) && lib_tx.use_epoch(epoch));
  ASSERT_TRUE(ours_rx.install(epoch, key));
  ASSERT_TRUE(lib_rx.install(epoch, key));
  std::mt19937 rng(99);
  const uint32_t ssrcs[3] = {0x11111111, 0x22222222, 0xfedcba98};
  uint16_t seqs[3] = {65000, 100, 40000};
  struct Sent {
    std::vector<uint8_t> plain, wire;
  };
  std::vector<Sent> sent;
  for (int i = 0; i < 3000; ++i) {
    int s = static_cast<int>(rng() % 3);
    std::vector<uint8_t> plain = random_rtp(rng, seqs[s]++, ssrcs[s]);
    std::vector<uint8_t> a = plain, b = plain;
    a.resize(plain.size() + kRtpTrailerBytes);
    b.resize(plain.size() + kRtpTrailerBytes);
    size_t na = plain.size(), nb = plain.size();
    ASSERT_EQ(ours_tx.protect_rtp(a.data(), na, a.size()), SrtpStatus::kOk) << i;
    ASSERT_EQ(lib_tx.protect_rtp(b.data(), nb, b.size()), SrtpStatus::kOk) << i;
    ASSERT_EQ(a, b) << "packet " << i;
    sent.push_back({plain, a});
  }
  for (size_t b = 0; b < sent.size(); b += 32)
    std::shuffle(sent.begin() + b, sent.begin() + std::min(b + 32, sent.size()), rng);
  for (size_t i = 0; i < sent.size(); ++i) {
    std::vector<uint8_t> a = sent[i].wire, b = sent[i].wire;
    size_t na = a.size(), nb = b.size();
    ASSERT_EQ(ours_rx.unprotect_rtp(a.data(), na), SrtpStatus::kOk) << i;
    ASSERT_EQ(lib_rx.unprotect_rtp(b.data(), nb), SrtpStatus::kOk) << i;
    a.resize(na);
    b.resize(nb);
    EXPECT_EQ(a, sent[i].plain) << i;
    EXPECT_EQ(b, sent[i].plain) << i;
  }
  // SRTCP: the same, for compound packets of random length.
  for (int i = 0; i < 300; ++i) {
    std::vector<uint8_t> plain(8 + 4 * (rng() % 64));
    for (auto& c : plain) c = static_cast<uint8_t>(rng());
    plain[0] = 0x81;
    plain[1] = 200;
    std::vector<uint8_t> a = plain, b = plain;
    a.resize(plain.size() + kRtcpTrailerBytes);
    b.resize(plain.size() + kRtcpTrailerBytes);
    size_t na = plain.size(), nb = plain.size();
    ASSERT_EQ(ours_tx.protect_rtcp(a.data(), na, a.size()), SrtpStatus::kOk);
    ASSERT_EQ(lib_tx.protect_rtcp(b.data(), nb, b.size()), SrtpStatus::kOk);
    ASSERT_EQ(a, b) << "rtcp " << i;
    std::vector<uint8_t> c = a;
    size_t nc = nb;
    ASSERT_EQ(ours_rx.unprotect_rtcp(a.data(), na), SrtpStatus::kOk) << i;
    ASSERT_EQ(lib_rx.unprotect_rtcp(c.data(), nc), SrtpStatus::kOk) << i;
    a.resize(na);
    c.resize(nc);
    EXPECT_EQ(a, plain);
    EXPECT_EQ(c, plain);
  }
}

TEST(SecureSrtpIndex, EstimatesTheRolloverCounterPerRfc3711AppendixA) {
  auto at = [](uint32_t roc, uint16_t s_l) { return (uint64_t{roc} << 16) | s_l; };
  EXPECT_EQ(estimate_srtp_index(0, false, 4711), 4711);
  EXPECT_EQ(estimate_srtp_index(at(5, 100), true, 101), 5 * 65536 + 101);
  EXPECT_EQ(estimate_srtp_index(at(5, 100), true, 50), 5 * 65536 + 50);
  // A late packet from before the wrap: ROC - 1.
  EXPECT_EQ(estimate_srtp_index(at(5, 100), true, 65000), 4 * 65536 + 65000);
  // A packet after the wrap: ROC + 1.
  EXPECT_EQ(estimate_srtp_index(at(5, 65000), true, 10), 6 * 65536 + 10);
  EXPECT_EQ(estimate_srtp_index(at(5, 65000), true, 64000), 5 * 65536 + 64000);
  // Halfway points.
  EXPECT_EQ(estimate_srtp_index(at(5, 0), true, 32768), 5 * 65536 + 32768);
  EXPECT_EQ(estimate_srtp_index(at(5, 0), true, 32769), 4 * 65536 + 32769);
  EXPECT_EQ(estimate_srtp_index(at(5, 40000), true, 7232), 5 * 65536 + 7232);
  EXPECT_EQ(estimate_srtp_index(at(5, 40000), true, 7231), 6 * 65536 + 7231);
  // Before index 0: impossible, refused.
  EXPECT_EQ(estimate_srtp_index(at(0, 10), true, 65000), -1);
}

TEST(SecureSrtpReplayWindow, RefusesRepeatsAndTheTooOldAcceptsTheReordered) {
  ReplayWindow window;
  EXPECT_TRUE(window.check(123456));
  window.accept(5000);
  EXPECT_FALSE(window.check(5000));
  EXPECT_TRUE(window.check(4999));
  EXPECT_TRUE(window.check(5000 - kReplayWindow + 1));
  EXPECT_FALSE(window.check(5000 - kReplayWindow));  // too old to tell
  window.accept(4990);
  EXPECT_FALSE(window.check(4990));
  // A jump of less than the window keeps the history; of more, forgets it.
  window.accept(5500);
  EXPECT_FALSE(window.check(4990));
  EXPECT_TRUE(window.check(4991));
  window.accept(5500 + kReplayWindow + 5);
  EXPECT_FALSE(window.check(5500));  // now too old
  EXPECT_TRUE(window.check(5500 + kReplayWindow + 4));
  // Property: against a reference set, over random indices near the top.
  std::mt19937_64 rng(5);
  ReplayWindow w;
  std::set<uint64_t> seen;
  uint64_t highest = 0;
  for (int i = 0; i < 200000; ++i) {
    uint64_t index = highest + 50 > 2000 ? highest + 50 - rng() % 2000 : rng() % 2000;
    bool expected =
        seen.empty() || index > highest || (highest - index < kReplayWindow && !seen.count(index));
    ASSERT_EQ(w.check(index), expected) << i << " " << index << " " << highest;
    if (expected) {
      w.accept(index);
      seen.insert(index);
      highest = std::max(highest, index);
    }
  }
}

std::vector<uint8_t> from_hex(std::string_view hex) {
  std::vector<uint8_t> out;
  int high = -1;
  for (char c : hex) {
    int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (v < 0) continue;
    if (high < 0) {
      high = v;
    } else {
      out.push_back(static_cast<uint8_t>(high << 4 | v));
      high = -1;
    }
  }
  return out;
}

// RFC 7714 sections 16 and 17: the session key 000102..0f and salt "Quid pro quo".
SrtpSessionKey rfc7714_session_key() {
  SrtpSessionKey key;
  auto k = from_hex("000102030405060708090a0b0c0d0e0f");
  auto salt = from_hex("517569642070726f2071756f");
  std::copy(k.begin(), k.end(), key.key.begin());
  std::copy(salt.begin(), salt.end(), key.salt.begin());
  return key;
}

TEST(SecureSrtpRfc7714, IvsMatchSections16And17) {
  uint8_t iv[12];
  // Section 16.1: SSRC 0x5501a0b2, ROC 0, SEQ 0xf17b.
  srtp_rtp_iv(iv, 0x5501a0b2, 0xf17b, rfc7714_session_key());
  EXPECT_EQ(std::vector<uint8_t>(iv, iv + 12), from_hex("51753c6580c2726f20718414"));
  // Section 17.1: SSRC "Mars", SRTCP index 0x5d4.
  srtp_rtcp_iv(iv, 0x4d617273, 0x5d4, rfc7714_session_key());
  EXPECT_EQ(std::vector<uint8_t>(iv, iv + 12), from_hex("517524055203726f207170bb"));
}

// Section 16.1.1: AEAD_AES_128_GCM encryption of the RTP packet, then our MKI after the tag.
TEST(SecureSrtpRfc7714, RtpVectorOfSection16EncryptsAndDecrypts) {
  const std::vector<uint8_t> plain = from_hex(
      "8040f17b 8041f8d3 5501a0b2 47616c6c 69612065 7374206f 6d6e6973"
      "20646976 69736120 696e2070 61727465 73207472 6573");
  const std::vector<uint8_t> expected = from_hex(
      "8040f17b 8041f8d3 5501a0b2"
      "f24de3a3 fb34de6c acba861c 9d7e4bca be633bd5 0d294e6f 42a5f47a 51c7d19b 36de3adf 8833"
      "899d7f27 beb16a91 52cf765e e4390cce");
  SrtpAeadContext tx, rx;
  ASSERT_TRUE(tx.init_with_session_keys(9, rfc7714_session_key(), rfc7714_session_key(), true));
  ASSERT_TRUE(rx.init_with_session_keys(9, rfc7714_session_key(), rfc7714_session_key(), false));
  std::vector<uint8_t> packet = plain;
  packet.resize(plain.size() + kRtpTrailerBytes);
  size_t size = plain.size();
  ASSERT_EQ(tx.protect_rtp(packet.data(), size, packet.size()), SrtpStatus::kOk);
  ASSERT_EQ(size, expected.size() + kSrtpMkiBytes);
  EXPECT_EQ(std::vector<uint8_t>(packet.begin(), packet.begin() + expected.size()), expected);
  EXPECT_EQ(srtp_packet_epoch(packet.data(), size), 9u);
  ASSERT_EQ(rx.unprotect_rtp(packet.data(), size), SrtpStatus::kOk);
  packet.resize(size);
  EXPECT_EQ(packet, plain);
  // The vector's last tag byte changed: refused.
  std::vector<uint8_t> forged = expected;
  forged.back() ^= 1;
  forged.insert(forged.end(), {0, 0, 0, 9});
  SrtpAeadContext rx2;
  ASSERT_TRUE(rx2.init_with_session_keys(9, rfc7714_session_key(), rfc7714_session_key(), false));
  size = forged.size();
  EXPECT_EQ(rx2.unprotect_rtp(forged.data(), size), SrtpStatus::kAuthFailed);
}

// Without an MKI (a browser's DTLS-SRTP): the packet is exactly RFC 7714's vector, and RTCP
// goes through with a trailer 4 bytes shorter; a packet cut by the MKI's 4 bytes is refused.
TEST(SecureSrtpRfc7714, WithoutMkiTheRtpVectorIsExactAndRtcpRoundTrips) {
  const std::vector<uint8_t> plain = from_hex(
      "8040f17b 8041f8d3 5501a0b2 47616c6c 69612065 7374206f 6d6e6973"
      "20646976 69736120 696e2070 61727465 73207472 6573");
  const std::vector<uint8_t> expected = from_hex(
      "8040f17b 8041f8d3 5501a0b2"
      "f24de3a3 fb34de6c acba861c 9d7e4bca be633bd5 0d294e6f 42a5f47a 51c7d19b 36de3adf 8833"
      "899d7f27 beb16a91 52cf765e e4390cce");
  SrtpAeadContext tx, rx;
  ASSERT_TRUE(tx.init_with_session_keys(0, rfc7714_session_key(), rfc7714_session_key(), true,
                                        /*with_mki=*/false));
  ASSERT_TRUE(rx.init_with_session_keys(0, rfc7714_session_key(), rfc7714_session_key(), false,
                                        /*with_mki=*/false));
  EXPECT_EQ(tx.rtp_trailer_bytes(), kSrtpTagBytes);
  std::vector<uint8_t> packet = plain;
  packet.resize(plain.size() + kSrtpTagBytes);
  size_t size = plain.size();
  ASSERT_EQ(tx.protect_rtp(packet.data(), size, packet.size()), SrtpStatus::kOk);
  ASSERT_EQ(size, expected.size());
  EXPECT_EQ(packet, expected);
  ASSERT_EQ(rx.unprotect_rtp(packet.data(), size), SrtpStatus::kOk);
  packet.resize(size);
  EXPECT_EQ(packet, plain);

  std::vector<uint8_t> rtcp = rtcp_packet(0x11223344);
  const std::vector<uint8_t> rtcp_plain(rtcp.begin(), rtcp.begin() + 8);
  size = 8;
  ASSERT_EQ(tx.protect_rtcp(rtcp.data(), size, rtcp.size()), SrtpStatus::kOk);
  EXPECT_EQ(size, 8 + kSrtpTagBytes + 4);
  std::vector<uint8_t> cut(rtcp.begin(), rtcp.begin() + size - 1);
  size_t cut_size = cut.size();
  EXPECT_NE(rx.unprotect_rtcp(cut.data(), cut_size), SrtpStatus::kOk);
  ASSERT_EQ(rx.unprotect_rtcp(rtcp.data(), size), SrtpStatus::kOk);
  EXPECT_EQ(std::vector<uint8_t>(rtcp.begin(), rtcp.begin() + size), rtcp_plain);
}

}  // namespace
}  // namespace syncd::secure
