// The metrics registry: counters, gauges, histograms and Prometheus text.
#include <gtest/gtest.h>

#include "runtime/running_total.hpp"
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

TEST(metrics, a_retired_gauge_leaves_the_text_and_comes_back_with_its_value_when_asked_for_again) {
  sluice::metrics_registry r;
  auto& lag = r.get_gauge("sluice_consumer_lag_records", "topic=\"in\",partition=\"3\"");
  lag.set(42);
  EXPECT_NE(r.prometheus_text().find("sluice_consumer_lag_records{topic=\"in\",partition=\"3\"} 42\n"),
            std::string::npos);
  r.retire_gauge("sluice_consumer_lag_records", "topic=\"in\",partition=\"3\"");
  EXPECT_EQ(r.prometheus_text().find("sluice_consumer_lag_records"), std::string::npos);
  EXPECT_EQ(r.total("sluice_consumer_lag_records"), 0);
  lag.set(7);  // a reference held elsewhere stays valid
  auto& again = r.get_gauge("sluice_consumer_lag_records", "topic=\"in\",partition=\"3\"");
  EXPECT_EQ(&again, &lag);
  EXPECT_NE(r.prometheus_text().find("sluice_consumer_lag_records{topic=\"in\",partition=\"3\"} 7\n"),
            std::string::npos);
}

TEST(metrics, a_removed_gauge_leaves_the_text_and_comes_back_new) {
  sluice::metrics_registry r;
  r.get_gauge("sluice_overflow_top_backlog", "customer=\"c-1\"").set(12);
  r.remove_gauge("sluice_overflow_top_backlog", "customer=\"c-1\"");
  EXPECT_EQ(r.prometheus_text().find("sluice_overflow_top_backlog"), std::string::npos);
  EXPECT_EQ(r.get_gauge("sluice_overflow_top_backlog", "customer=\"c-1\"").value(), 0) << "a new gauge";
  // A retired gauge is removed too, and removing an unknown one does nothing.
  r.retire_gauge("sluice_overflow_top_backlog", "customer=\"c-1\"");
  r.remove_gauge("sluice_overflow_top_backlog", "customer=\"c-1\"");
  r.remove_gauge("sluice_overflow_top_backlog", "customer=\"c-2\"");
  EXPECT_EQ(r.prometheus_text().find("sluice_overflow_top_backlog"), std::string::npos);
}

// The exposition format's escapes for a label value, and UTF-8 kept or replaced.
TEST(metrics, a_label_value_from_data_is_escaped_for_the_text_format) {
  EXPECT_EQ(sluice::prometheus_label_value("c-42"), "c-42");
  EXPECT_EQ(sluice::prometheus_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(sluice::prometheus_label_value("caf\xC3\xA9"), "caf\xC3\xA9") << "UTF-8 kept";
  EXPECT_EQ(sluice::prometheus_label_value("x\xC3"), "x\xEF\xBF\xBD") << "a cut sequence replaced";
  EXPECT_EQ(sluice::prometheus_label_value("\xFF\xFE"), "\xEF\xBF\xBD\xEF\xBF\xBD") << "one U+FFFD per byte";
  EXPECT_EQ(sluice::prometheus_label_value(std::string_view("a\0b", 3)), std::string("a\0b", 3));
}

TEST(metrics, a_refresh_sets_its_gauges_before_every_read) {
  sluice::metrics_registry r;
  int reads = 0;
  r.add_refresh([&] { r.get_gauge("sluice_allocator_in_use_bytes").set(++reads * 1000); });
  EXPECT_NE(r.prometheus_text().find("sluice_allocator_in_use_bytes 1000\n"), std::string::npos);
  EXPECT_EQ(r.total("sluice_allocator_in_use_bytes"), 2000);  // total() reads a snapshot
  EXPECT_NE(r.prometheus_text().find("# HELP sluice_allocator_in_use_bytes Memory the process's allocator"),
            std::string::npos);
  EXPECT_EQ(reads, 3);
}

TEST(metrics, gauges_kept_in_microseconds_or_milliseconds_are_exposed_in_seconds) {
  sluice::metrics_registry r;
  r.get_gauge("sluice_kafka_broker_rtt_avg_us", "broker=\"1\"").set(2500);
  r.get_gauge("sluice_overflow_oldest_buffered_age_ms", "task=\"0_1\"").set(1500);
  r.set_help("sluice_overflow_oldest_buffered_age_seconds", "Age of the oldest record buffered now, seconds.");
  auto text = r.prometheus_text();
  EXPECT_NE(text.find("# TYPE sluice_kafka_broker_rtt_avg_seconds gauge\n"), std::string::npos) << text;
  EXPECT_NE(text.find("sluice_kafka_broker_rtt_avg_seconds{broker=\"1\"} 0.0025\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# HELP sluice_overflow_oldest_buffered_age_seconds Age of the oldest"), std::string::npos)
      << text;
  EXPECT_NE(text.find("sluice_overflow_oldest_buffered_age_seconds{task=\"0_1\"} 1.5\n"), std::string::npos) << text;
  // promtool refuses an abbreviated unit in a name
  EXPECT_EQ(text.find("_us"), std::string::npos) << text;
  EXPECT_EQ(text.find("_ms"), std::string::npos) << text;
}

TEST(metrics, a_running_total_feed_adds_what_the_total_grew_by_and_restarts_from_a_recreated_clients_count) {
  sluice::metrics_registry r;
  auto& wakes = r.get_counter("sluice_fetch_wakes_total", "consumer=\"restore\"");
  sluice::runtime::running_total_feed feed(wakes);
  feed.observe(0);
  EXPECT_EQ(wakes.value(), 0u);
  feed.observe(3);
  feed.observe(3);  // unchanged: nothing added
  EXPECT_EQ(wakes.value(), 3u);
  feed.observe(5);
  EXPECT_EQ(wakes.value(), 5u);
  feed.observe(1);  // a new client counting from 0 again: its 1 is the base, not a loss
  EXPECT_EQ(wakes.value(), 5u);
  feed.observe(4);
  EXPECT_EQ(wakes.value(), 8u);
}
