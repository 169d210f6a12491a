// The transports' common floor: RFC 7983 demultiplexing (src/transport/datagram_kind.h) and the
// packet store every RTP packet lives in (src/transport/packet_store.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "transport/datagram_kind.h"
#include "transport/packet_store.h"

using namespace syncd::transport;

TEST(DatagramKind, DatagramsAreToldApartByTheirFirstBytes) {
  auto kind = [](std::vector<uint8_t> d) { return classify_datagram(d); };
  // RFC 7983: 20..63 DTLS (22 handshake, 23 application data), 128..191 RTP/RTCP.
  EXPECT_EQ(kind({22, 0xFE, 0xFD}), DatagramKind::kDtls);
  EXPECT_EQ(kind({20}), DatagramKind::kDtls);
  EXPECT_EQ(kind({63}), DatagramKind::kDtls);
  EXPECT_EQ(kind({19}), DatagramKind::kUnknown);
  EXPECT_EQ(kind({64}), DatagramKind::kUnknown);
  // RFC 7983 0..3 STUN, once it has a whole STUN header (20 bytes).
  std::vector<uint8_t> stun(20, 0);
  stun[1] = 1;
  EXPECT_EQ(kind(stun), DatagramKind::kStun);
  EXPECT_EQ(kind({0, 1, 0, 0}), DatagramKind::kUnknown);
  // RFC 5761: packet types 192..223 are RTCP (SR 200, RR 201, RTPFB 205, PSFB 206, APP 204).
  EXPECT_EQ(kind({0x80, 200, 0, 6, 1, 2, 3, 4}), DatagramKind::kRtcp);
  EXPECT_EQ(kind({0x81, 205, 0, 3, 1, 2, 3, 4}), DatagramKind::kRtcp);
  EXPECT_EQ(kind({0x80, 96, 0, 1, 0, 0, 0, 0}), DatagramKind::kRtp);
  EXPECT_EQ(kind({0x80, 96 | 0x80, 0, 1, 0, 0, 0, 0}),
            DatagramKind::kRtp);  // marker set
  EXPECT_EQ(kind({0x80, 96}),
            DatagramKind::kUnknown);  // shorter than any RTP/RTCP header
  EXPECT_EQ(kind({0xC0, 96, 0, 1, 0, 0, 0, 0}), DatagramKind::kUnknown);  // version 3
  EXPECT_EQ(kind({}), DatagramKind::kUnknown);
}

TEST(PacketStore, HandsOutEveryBufferOnceAndRefusesASecondGiveBack) {
  PacketStore store(4);
  std::vector<uint32_t> taken;
  for (int i = 0; i < 4; ++i) taken.push_back(store.take());
  EXPECT_EQ(store.take(), PacketStore::kNone);
  EXPECT_EQ(store.in_use(), 4u);
  std::sort(taken.begin(), taken.end());
  EXPECT_EQ(taken, (std::vector<uint32_t>{0, 1, 2, 3}));
  store.room(2)[0] = 0xAB;
  store.set_size(2, 1200);
  EXPECT_EQ(store.packet(2).size(), 1200u);
  EXPECT_EQ(store.packet(2)[0], 0xAB);
  EXPECT_NE(store.room(1).data(), store.room(2).data());
  EXPECT_TRUE(store.give_back(2));
  EXPECT_FALSE(store.give_back(2));  // already free
  EXPECT_FALSE(store.give_back(9));  // not a handle
  EXPECT_EQ(store.in_use(), 3u);
  EXPECT_EQ(store.take(), 2u);
  EXPECT_EQ(store.packet(2).size(), 0u);
}
