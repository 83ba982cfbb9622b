// The metrics registry: counters, gauges, histograms and Prometheus text.
#include <gtest/gtest.h>

#include "sluice/metrics.hpp"

TEST(metrics, counters_sum_over_labels_and_appear_in_prometheus_text) {
  sluice::metrics_registry r;
  r.get_counter("sluice_records_processed_total", "thread=\"0\"").add(3);
  r.get_counter("sluice_records_processed_total", "thread=\"1\"").add(4);
  r.get_gauge("sluice_restore_remaining_records").set(7);
  EXPECT_EQ(r.total("sluice_records_processed_total"), 7);
  EXPECT_EQ(r.total("sluice_restore_remaining_records"), 7);
  auto text = r.prometheus_text();
  EXPECT_NE(text.find("# TYPE sluice_records_processed_total counter"), std::string::npos) << text;
  EXPECT_NE(text.find("sluice_records_processed_total{thread=\"1\"} 4"), std::string::npos) << text;
}

TEST(metrics, histogram_quantiles_bound_the_recorded_latencies) {
  sluice::histogram h;
  for (int i = 0; i < 99; ++i) h.record(3);
  h.record(1000);
  EXPECT_EQ(h.count(), 100u);
  EXPECT_EQ(h.quantile(0.5), 3);
  EXPECT_GE(h.quantile(0.999), 1000);
}
