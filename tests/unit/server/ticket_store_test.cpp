// TicketStore: per-owner cap, and tickets that go with their stream and their owner.
#include "server/ticket_store.h"

#include <gtest/gtest.h>

using syncd::server::TicketCheck;
using syncd::server::TicketRefusal;
using syncd::server::TicketStore;

namespace {
constexpr uint64_t kNow = 1'000'000'000;

std::string make(TicketStore& store, uint32_t stream, uint64_t owner, TicketRefusal& refusal) {
  return store.create(stream, owner, /*uses=*/1, /*ttl_s=*/60, kNow, refusal);
}
}  // namespace

TEST(TicketStore, AnOwnerAtItsCapLeavesOthersTheirTickets) {
  TicketStore store;
  TicketRefusal refusal;
  for (size_t i = 0; i < TicketStore::kMaxTicketsPerOwner; ++i)
    ASSERT_FALSE(make(store, 1, /*owner=*/7, refusal).empty());
  EXPECT_TRUE(make(store, 1, 7, refusal).empty());
  EXPECT_EQ(refusal, TicketRefusal::kOwnerFull);
  // Another connection, with its own stream, still gets one.
  const std::string other = make(store, 2, /*owner=*/8, refusal);
  EXPECT_FALSE(other.empty());
  EXPECT_EQ(refusal, TicketRefusal::kNone);
  EXPECT_EQ(store.redeem(other, 2, kNow), TicketCheck::kValid);
}

TEST(TicketStore, TicketsGoWithTheirStreamAndTheirOwner) {
  TicketStore store;
  TicketRefusal refusal;
  const std::string a = make(store, 1, 7, refusal);
  const std::string b = make(store, 2, 7, refusal);
  const std::string c = make(store, 3, 8, refusal);
  store.drop_stream(1);
  EXPECT_EQ(store.redeem(a, 1, kNow), TicketCheck::kUnknown);
  EXPECT_EQ(store.size(), 2u);
  store.drop_owner(7);
  EXPECT_EQ(store.redeem(b, 2, kNow), TicketCheck::kUnknown);
  EXPECT_EQ(store.owned_by(7), 0u);
  EXPECT_EQ(store.redeem(c, 3, kNow), TicketCheck::kValid);
}

TEST(TicketStore, ExpiredTicketsFreeTheOwnersCap) {
  TicketStore store;
  TicketRefusal refusal;
  for (size_t i = 0; i < TicketStore::kMaxTicketsPerOwner; ++i)
    ASSERT_FALSE(store.create(1, 7, 1, /*ttl_s=*/1, kNow, refusal).empty());
  EXPECT_FALSE(store.create(1, 7, 1, 1, kNow + 2'000'000'000, refusal).empty());
  EXPECT_EQ(store.owned_by(7), 1u);
}
