// Builder for the Prometheus text exposition format (version 0.0.4). Control plane: allocates.
// Not thread-safe; build on the loop thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "telemetry/stage_stats.h"

namespace syncd::telemetry {

class PrometheusText {
 public:
  // Emits "# HELP" and "# TYPE" once per family; call before its samples.
  void family(std::string_view name, std::string_view type, std::string_view help);
  // labels: already formatted, e.g. R"(stream="main",reason="pool_full")", or empty.
  void sample(std::string_view name, std::string_view labels, double value);
  void sample(std::string_view name, std::string_view labels, uint64_t value);
  // A histogram family "<name>_seconds" from a StageStats (buckets converted to seconds).
  void histogram(std::string_view name, std::string_view labels, const StageStats& stats);

  const std::string& text() const { return text_; }

 private:
  void labelled(std::string_view name, std::string_view labels);
  std::string text_;
};

// Escapes a label value (backslash, quote, newline).
std::string prometheus_label_value(std::string_view v);

}  // namespace syncd::telemetry
