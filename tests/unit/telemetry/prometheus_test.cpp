#include "telemetry/prometheus.h"

#include <gtest/gtest.h>

using syncd::telemetry::PrometheusText;
using syncd::telemetry::StageStats;

TEST(Prometheus, FamilyAndSamples) {
  PrometheusText p;
  p.family("x_total", "counter", "An x.");
  p.sample("x_total", R"(a="b")", uint64_t(3));
  p.sample("x_total", "", 0.5);
  EXPECT_EQ(p.text(),
            "# HELP x_total An x.\n# TYPE x_total counter\nx_total{a=\"b\"} 3\nx_total 0.5\n");
}

TEST(Prometheus, HistogramIsCumulative) {
  StageStats s;
  s.record(500);
  s.record(1500);
  PrometheusText p;
  p.histogram("h_seconds", R"(s="a")", s);
  const std::string& t = p.text();
  EXPECT_NE(t.find("h_seconds_bucket{s=\"a\",le=\"1e-06\"} 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("h_seconds_bucket{s=\"a\",le=\"2e-06\"} 2\n"), std::string::npos) << t;
  EXPECT_NE(t.find("h_seconds_bucket{s=\"a\",le=\"+Inf\"} 2\n"), std::string::npos);
  EXPECT_NE(t.find("h_seconds_count{s=\"a\"} 2\n"), std::string::npos);
}

TEST(Prometheus, LabelEscaping) {
  EXPECT_EQ(syncd::telemetry::prometheus_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}
