// A whep::WhepService on a real libuv loop turned by the test's thread, over a real
// media::StreamRegistry: the set-up of the WHEP offer and WHIP push tests. The service is
// created by the test (start() here, or its own with a WHIP target); TearDown stops it as the
// server does: the service, then the registry's publishers, then whatever handles are left.
#pragma once

#include <gtest/gtest.h>
#include <uv.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "loop_pump.h"
#include "media/stream_registry.h"
#include "whep/whep_service.h"

namespace syncd::test {

struct WhepFixture : ::testing::Test {
  uv_loop_t loop;
  std::unique_ptr<media::StreamRegistry> registry;
  std::unique_ptr<whep::WhepService> whep;

  void SetUp() override {
    uv_loop_init(&loop);
    registry = std::make_unique<media::StreamRegistry>();
  }
  void TearDown() override {
    if (whep) whep->stop();
    registry->stop_publishers();
    pump(&loop, [&] { return !uv_loop_alive(&loop); });
    whep.reset();
    registry.reset();
    EXPECT_EQ(uv_loop_close(&loop), 0);
  }
  // Creates and starts the service; false (with why) when start() refuses its config.
  bool start_service(whep::WhepConfig config, std::string& why) {
    whep = std::make_unique<whep::WhepService>(std::move(config), *registry, &loop);
    return whep->start(why);
  }
  // A 64x64 stream opened by client 1.
  media::Stream* open_stream(const std::string& name,
                             media::PixelFormat format = media::PixelFormat::kH264) {
    media::StreamConfig config;
    config.name = name;
    config.width = 64;
    config.height = 64;
    config.format = format;
    media::OpenError error;
    media::Stream* s = registry->open(config, /*owner=*/1, error);
    EXPECT_NE(s, nullptr) << media::open_error_code(error);
    return s;
  }
  nlohmann::json stats() {
    nlohmann::json out;
    whep->write_stats(out);
    return out;
  }
};

}  // namespace syncd::test
