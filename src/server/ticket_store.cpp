#include "server/ticket_store.h"

#include <openssl/rand.h>

namespace syncd::server {

std::string TicketStore::create(uint32_t stream_id, uint64_t owner, uint32_t uses, uint32_t ttl_s,
                                uint64_t now_ns, TicketRefusal& refusal) {
  purge(now_ns);
  refusal = TicketRefusal::kNone;
  if (owned_by(owner) >= kMaxTicketsPerOwner) {
    refusal = TicketRefusal::kOwnerFull;
    return "";
  }
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1) {
    refusal = TicketRefusal::kNoRandomness;
    return "";
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token(32, '0');
  for (size_t i = 0; i < sizeof bytes; ++i) {
    token[2 * i] = kHex[bytes[i] >> 4];
    token[2 * i + 1] = kHex[bytes[i] & 15];
  }
  tickets_[token] = Ticket{stream_id, owner, uses, now_ns + uint64_t(ttl_s) * 1'000'000'000};
  return token;
}

TicketCheck TicketStore::redeem(const std::string& ticket, uint32_t stream_id, uint64_t now_ns) {
  auto it = tickets_.find(ticket);
  if (it == tickets_.end()) return TicketCheck::kUnknown;
  if (now_ns >= it->second.expires_ns) {
    tickets_.erase(it);
    return TicketCheck::kExpired;
  }
  if (it->second.stream_id != stream_id) return TicketCheck::kWrongStream;
  if (--it->second.uses_left == 0) tickets_.erase(it);
  return TicketCheck::kValid;
}

template <typename Pred>
void TicketStore::erase_if(Pred pred) {
  for (auto it = tickets_.begin(); it != tickets_.end();)
    it = pred(it->second) ? tickets_.erase(it) : std::next(it);
}

void TicketStore::drop_stream(uint32_t stream_id) {
  erase_if([&](const Ticket& t) { return t.stream_id == stream_id; });
}

void TicketStore::drop_owner(uint64_t owner) {
  erase_if([&](const Ticket& t) { return t.owner == owner; });
}

void TicketStore::purge(uint64_t now_ns) {
  erase_if([&](const Ticket& t) { return now_ns >= t.expires_ns; });
}

size_t TicketStore::owned_by(uint64_t owner) const {
  size_t n = 0;
  for (const auto& [token, t] : tickets_) n += t.owner == owner;
  return n;
}

}  // namespace syncd::server
