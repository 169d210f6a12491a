// Tickets that let a receiver read one stream (docs/protocol.md, "Tickets"): random 128-bit
// tokens, each for one stream, with an expiry and a use count. The stream's owner creates them.
// Control plane (allocates). Thread: the loop thread.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

namespace syncd::server {

enum class TicketCheck { kValid, kUnknown, kExpired, kWrongStream };

class TicketStore {
 public:
  static constexpr uint32_t kMaxUses = 16;
  static constexpr uint32_t kMaxTtlSeconds = 3600;
  static constexpr size_t kMaxTickets = 1024;

  // A new ticket (32 lowercase hex digits), or "" if randomness is unavailable or the store is
  // full of live tickets.
  std::string create(uint32_t stream_id, uint32_t uses, uint32_t ttl_s, uint64_t now_ns);
  // Checks a presented ticket for stream_id and spends one use when valid.
  TicketCheck redeem(const std::string& ticket, uint32_t stream_id, uint64_t now_ns);
  // Forgets the stream's tickets (it closed) and expired ones.
  void drop_stream(uint32_t stream_id);
  void purge(uint64_t now_ns);
  size_t size() const { return tickets_.size(); }

 private:
  struct Ticket {
    uint32_t stream_id;
    uint32_t uses_left;
    uint64_t expires_ns;
  };
  std::unordered_map<std::string, Ticket> tickets_;
};

}  // namespace syncd::server
