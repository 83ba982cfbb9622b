// Task idling (max.task.idle.ms) in the TopologyTestDriver. The driver holds all input
// locally, so an empty input is always caught up (zero lag): with the default of 0 a task
// processes each record when it is piped, in the order piped (as Kafka Streams' driver
// does); with a positive value it holds a record while another input of the task is empty,
// until the driver's wall clock has moved that far or the empty input receives records.
// The rule's other cases (unknown or positive lag) need a broker: unit tests of
// partition_group and the integration test task_idling_test.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "sluice/sluice.hpp"
#include "sluice/test_driver.hpp"

using sluice::testing::topology_test_driver;
using namespace std::chrono_literals;

namespace {

/// "a" and "c" merged into "out": one task reading two partitions; the output's order is
/// the order the task processed its records in.
sluice::topology merged() {
  sluice::streams_builder b;
  auto a = b.stream<std::string, std::string>("a");
  auto c = b.stream<std::string, std::string>("c");
  a.merge(c).to("out");
  return b.build();
}

std::vector<std::string> values(topology_test_driver& d) {
  std::vector<std::string> out;
  for (const auto& r : d.output_topic<std::string, std::string>("out").read_all()) out.push_back(r.value);
  return out;
}

sluice::config idle_ms(const std::string& value) {
  sluice::config c;
  c.set("max.task.idle.ms", value);
  return c;
}

/// Pipes one side's backlog first ("a@30", "a@50" into "a", then "c@10", "c@40", "c@60" into
/// "c"), each with the record timestamp `timestamp_of` gives its value, lets the idle time of
/// 1000 ms pass and returns the output in processing order.
std::vector<std::string> process_backlog(sluice::topology t, std::int64_t (*timestamp_of)(const std::string&)) {
  topology_test_driver d(std::move(t), idle_ms("1000"));
  auto a = d.input_topic<std::string, std::string>("a");
  auto c = d.input_topic<std::string, std::string>("c");
  for (const std::string v : {"a@30", "a@50"}) a.pipe("k", v, timestamp_of(v));
  for (const std::string v : {"c@10", "c@40", "c@60"}) c.pipe("k", v, timestamp_of(v));
  d.advance_wall_clock(1000ms);
  return values(d);
}

/// The time written in a value ("a@30" -> 30).
std::int64_t time_in(const std::string& v) { return std::stoll(v.substr(v.find('@') + 1)); }

}  // namespace

TEST(task_idling_driver, by_default_records_are_processed_in_the_order_piped) {
  topology_test_driver d(merged());
  d.input_topic<std::string, std::string>("a").pipe("k", "a@20", 20);
  EXPECT_EQ(values(d), std::vector<std::string>{"a@20"});  // not held: the other input is caught up
  d.input_topic<std::string, std::string>("c").pipe("k", "c@10", 10);
  EXPECT_EQ(values(d), std::vector<std::string>{"c@10"});
  // Each went through while the task's other input was empty: enforced processing.
  EXPECT_EQ(d.metrics().total("sluice_enforced_processing_total"), 2);
}

TEST(task_idling_driver, a_positive_idle_time_holds_a_record_until_the_clock_passes_it_or_older_records_arrive) {
  topology_test_driver d(merged(), idle_ms("100"));
  auto a = d.input_topic<std::string, std::string>("a");
  auto c = d.input_topic<std::string, std::string>("c");
  a.pipe("k", "a@20", 20);
  EXPECT_TRUE(values(d).empty());  // held: "c" may still get an older record
  c.pipe("k", "c@10", 10);
  // Both inputs had a record: the older first; then "c" is empty again and a@20 waits anew.
  EXPECT_EQ(values(d), std::vector<std::string>{"c@10"});
  d.advance_wall_clock(99ms);
  EXPECT_TRUE(values(d).empty());
  d.advance_wall_clock(1ms);
  EXPECT_EQ(values(d), std::vector<std::string>{"a@20"});
  EXPECT_EQ(d.metrics().total("sluice_enforced_processing_total"), 1);
}

TEST(task_idling_driver, idle_time_orders_a_backlog_piped_one_side_first_by_timestamp) {
  EXPECT_EQ(process_backlog(merged(), time_in), (std::vector<std::string>{"c@10", "a@30", "c@40", "a@50", "c@60"}));
}

TEST(task_idling_driver, co_partitioned_records_interleave_by_their_extracted_timestamps) {
  // The time is in the value ("a@30"); the Kafka record timestamps say the opposite order.
  auto from_value = [](const std::string&, const std::string& v, std::int64_t) { return time_in(v); };
  sluice::streams_builder b;
  b.stream<std::string, std::string>("a", from_value)
      .merge(b.stream<std::string, std::string>("c", from_value))
      .to("out");
  auto reversed = [](const std::string& v) -> std::int64_t { return 1030 - time_in(v); };
  EXPECT_EQ(process_backlog(b.build(), reversed), (std::vector<std::string>{"c@10", "a@30", "c@40", "a@50", "c@60"}));
}

TEST(task_idling_driver, a_record_decoded_to_order_it_is_not_decoded_again_to_process_it) {
  auto extractions = std::make_shared<int>(0);
  auto counted = [extractions](const std::string&, const std::string& v, std::int64_t) {
    ++*extractions;
    return time_in(v);
  };
  sluice::streams_builder b;
  b.stream<std::string, std::string>("a", counted).merge(b.stream<std::string, std::string>("c", counted)).to("out");
  EXPECT_EQ(process_backlog(b.build(), time_in), (std::vector<std::string>{"c@10", "a@30", "c@40", "a@50", "c@60"}));
  EXPECT_EQ(*extractions, 5);  // once per record, whether or not it was ordered against another first
}

TEST(task_idling_driver, minus_one_never_holds_a_record) {
  topology_test_driver d(merged(), idle_ms("-1"));
  d.input_topic<std::string, std::string>("a").pipe("k", "a@20", 20);
  d.input_topic<std::string, std::string>("c").pipe("k", "c@10", 10);
  EXPECT_EQ(values(d), (std::vector<std::string>{"a@20", "c@10"}));
  EXPECT_EQ(d.metrics().total("sluice_enforced_processing_total"), 0);
}

TEST(task_idling_driver, a_value_below_minus_one_is_refused_naming_the_key) {
  try {
    topology_test_driver d(merged(), idle_ms("-2"));
    FAIL() << "max.task.idle.ms=-2 was accepted";
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.code(), sluice::errc::invalid_config);
    EXPECT_NE(std::string(e.what()).find("max.task.idle.ms"), std::string::npos) << e.what();
  }
}
