// Control messages routed by a table: each service registers the message types it owns, and
// the connection hands every text message to route(). `capabilities` in the welcome lists what
// is registered, so a client learns from the server itself which services run.
//
// Thread: the loop thread. Registration is control plane (allocates); routing parses JSON
// (control plane as well: control messages are not the frame path).
#pragma once

#include <array>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "control/control_message.h"

namespace syncd::server {

class Connection;

class ControlRouter {
 public:
  using Handler = std::function<void(Connection&, const control::ControlMessage&)>;

  // Message type T (an alternative of control::ControlMessage) goes to handler. `capability`
  // is the name listed in the welcome ("" lists nothing). hello_first: refused with
  // hello_required until the connection said hello.
  template <typename T>
  void add(std::string capability, Handler handler, bool hello_first = true) {
    set(index_of<T>(), std::move(capability), std::move(handler), hello_first);
  }
  // Message type T names a service that is not running: answered with `code` and `message`.
  template <typename T>
  void refuse(const char* code, std::string message) {
    set(index_of<T>(), "", nullptr, true);
    routes_[index_of<T>()].refusal_code = code;
    routes_[index_of<T>()].refusal_message = std::move(message);
  }

  // A complete text message from an open WebSocket.
  void route(Connection& c, std::string_view text) const;
  // Registered capabilities, in registration order, without duplicates.
  std::vector<std::string> capabilities() const;

 private:
  static constexpr size_t kTypes = std::variant_size_v<control::ControlMessage>;
  template <typename T, size_t I = 0>
  static constexpr size_t index_of() {
    if constexpr (std::is_same_v<T, std::variant_alternative_t<I, control::ControlMessage>>)
      return I;
    else
      return index_of<T, I + 1>();
  }
  void set(size_t index, std::string capability, Handler handler, bool hello_first);

  struct Route {
    Handler handler;
    bool hello_first = true;
    const char* refusal_code = nullptr;
    std::string refusal_message;
  };
  std::array<Route, kTypes> routes_{};
  std::vector<std::string> capabilities_;
};

}  // namespace syncd::server
