// Turns a libuv loop on the test's thread until a condition holds: the wait every test on a
// real loop uses.
#pragma once

#include <unistd.h>
#include <uv.h>

#include <chrono>
#include <functional>

namespace syncd::test {

// Long enough for a loaded 2-core machine; a passing test never waits this long.
inline constexpr int kWaitMs = 10'000;

// Turns `loop` until `done` holds or `ms` pass; returns whether it holds.
inline bool pump(uv_loop_t* loop, const std::function<bool()>& done, int ms = kWaitMs) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    uv_run(loop, UV_RUN_NOWAIT);
    usleep(200);
  }
  return done();
}

}  // namespace syncd::test
