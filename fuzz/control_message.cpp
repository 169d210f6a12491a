// libFuzzer target: control protocol v1 message parsing (JSON text -> typed message or coded
// error). Any input must give one or the other, never an exception or a crash.
#include "control/control_message.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto result = syncd::control::parse_control_message(text);
  if (auto* e = std::get_if<syncd::control::ControlError>(&result)) {
    if (e->code == nullptr || e->code[0] == '\0') std::abort();
    (void)syncd::control::error_json(e->code, e->message);
  }
  return 0;
}
