#include "server/control_router.h"

#include <algorithm>

#include "server/connection.h"

namespace syncd::server {

void ControlRouter::set(size_t index, std::string capability, Handler handler, bool hello_first) {
  routes_[index] = Route{std::move(handler), hello_first, nullptr, {}};
  if (!capability.empty() &&
      std::find(capabilities_.begin(), capabilities_.end(), capability) == capabilities_.end())
    capabilities_.push_back(std::move(capability));
}

std::vector<std::string> ControlRouter::capabilities() const {
  return capabilities_;
}

void ControlRouter::route(Connection& c, std::string_view text) const {
  control::ParseResult parsed = control::parse_control_message(text);
  if (auto* e = std::get_if<control::ControlError>(&parsed)) {
    c.send_error(e->code, e->message);
    return;
  }
  const control::ControlMessage& m = std::get<control::ControlMessage>(parsed);
  const Route& route = routes_[m.index()];
  if (route.hello_first && !c.hello_done()) {
    c.send_error(control::error_code::kHelloRequired, "send hello first");
    return;
  }
  if (route.refusal_code) {
    c.send_error(route.refusal_code, route.refusal_message);
    return;
  }
  if (!route.handler) {
    c.send_error(control::error_code::kUnknownType, "no service handles this message here");
    return;
  }
  route.handler(c, m);
}

}  // namespace syncd::server
