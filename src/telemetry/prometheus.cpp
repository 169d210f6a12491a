#include "telemetry/prometheus.h"

#include <charconv>
#include <cmath>

namespace syncd::telemetry {

void PrometheusText::family(std::string_view name, std::string_view type, std::string_view help) {
  text_.append("# HELP ").append(name).append(" ").append(help).append("\n");
  text_.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

void PrometheusText::labelled(std::string_view name, std::string_view labels) {
  text_.append(name);
  if (!labels.empty()) text_.append("{").append(labels).append("}");
  text_.push_back(' ');
}

void PrometheusText::sample(std::string_view name, std::string_view labels, uint64_t value) {
  labelled(name, labels);
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, value);
  text_.append(buf, r.ptr).push_back('\n');
}

void PrometheusText::sample(std::string_view name, std::string_view labels, double value) {
  labelled(name, labels);
  if (std::isnan(value)) {
    text_.append("NaN\n");
    return;
  }
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, value);
  text_.append(buf, r.ptr).push_back('\n');
}

void PrometheusText::histogram(std::string_view name, std::string_view labels,
                               const StageStats& stats) {
  const std::string base(name);
  const std::string sep = labels.empty() ? "" : ",";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < StageStats::kBuckets; ++i) {
    cumulative += stats.bucket(i);
    std::string le;
    if (i < StageStats::kBucketBoundsNs.size()) {
      char buf[32];
      auto r = std::to_chars(buf, buf + sizeof buf, double(StageStats::kBucketBoundsNs[i]) / 1e9);
      le.assign(buf, r.ptr);
    } else {
      le = "+Inf";
    }
    sample(base + "_bucket", std::string(labels) + sep + "le=\"" + le + "\"", cumulative);
  }
  sample(base + "_sum", labels, double(stats.total_ns()) / 1e9);
  sample(base + "_count", labels, stats.count());
}

std::string prometheus_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out.append("\\n");
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace syncd::telemetry
