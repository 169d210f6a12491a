// Tickets that let a receiver read one stream (docs/protocol.md, "Tickets"): random 128-bit
// tokens, each for one stream, with an expiry and a use count. The stream's owner creates them,
// at most kMaxTicketsPerOwner live at once, and they go with the stream and with the owner's
// connection, so no client can fill the store for the others.
// Control plane (allocates). Thread: the loop thread.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

namespace syncd::server {

enum class TicketCheck { kValid, kUnknown, kExpired, kWrongStream };
enum class TicketRefusal { kNone, kOwnerFull, kNoRandomness };

class TicketStore {
 public:
  static constexpr uint32_t kMaxUses = 16;
  static constexpr uint32_t kMaxTtlSeconds = 3600;
  static constexpr size_t kMaxTicketsPerOwner = 64;

  // A new ticket (32 lowercase hex digits) for a stream of `owner` (a connection id), or "" and
  // why: the owner holds kMaxTicketsPerOwner live tickets, or randomness is unavailable.
  std::string create(uint32_t stream_id, uint64_t owner, uint32_t uses, uint32_t ttl_s,
                     uint64_t now_ns, TicketRefusal& refusal);
  // Checks a presented ticket for stream_id and spends one use when valid.
  TicketCheck redeem(const std::string& ticket, uint32_t stream_id, uint64_t now_ns);
  // Forgets the tickets of a stream that closed, or of an owner whose connection closed.
  void drop_stream(uint32_t stream_id);
  void drop_owner(uint64_t owner);
  void purge(uint64_t now_ns);  // forgets expired tickets
  size_t size() const { return tickets_.size(); }
  size_t owned_by(uint64_t owner) const;

 private:
  struct Ticket {
    uint32_t stream_id;
    uint64_t owner;
    uint32_t uses_left;
    uint64_t expires_ns;
  };
  template <typename Pred>
  void erase_if(Pred pred);
  std::unordered_map<std::string, Ticket> tickets_;
};

}  // namespace syncd::server
