// The JSON form of a StageStats in /stats: count, total, mean and max in microseconds, and the
// histogram's non-cumulative bucket counts (bounds in stage_histogram_bounds_us). Control plane.
// Any thread, on a StageStats it owns.
#pragma once

#include <nlohmann/json.hpp>

#include "telemetry/stage_stats.h"

namespace syncd::telemetry {

inline nlohmann::json stage_json(const StageStats& s) {
  nlohmann::json buckets = nlohmann::json::array();
  for (size_t i = 0; i < StageStats::kBuckets; ++i) buckets.push_back(s.bucket(i));
  return {{"count", s.count()},
          {"total_us", double(s.total_ns()) / 1e3},
          {"mean_us", s.count() ? double(s.total_ns()) / 1e3 / double(s.count()) : 0.0},
          {"max_us", double(s.max_ns()) / 1e3},
          {"histogram", std::move(buckets)}};
}

}  // namespace syncd::telemetry
