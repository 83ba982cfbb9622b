// The throttle against hostile input and unusual partitioning, through the
// TopologyTestDriver: JSON nested far deeper than any real producer writes (issue 12,
// finding 4), and throttle keys that the record key does not determine (finding 6).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <set>
#include <string>

#include "text.hpp"
#include "sluice/sluice.hpp"
#include "sluice/test_driver.hpp"
#include "sluice/topologies/throttle.hpp"

using sluice::testing::topology_test_driver;
using sluice::topologies::throttle_options;
using namespace std::chrono_literals;

namespace {

using sluice::test::header_text;

/// `levels` nested arrays around an empty one: "[[[…]]]".
std::string nested_arrays(std::size_t levels) { return std::string(levels, '[') + std::string(levels, ']'); }

throttle_options by_workflow_and_recipient(std::int64_t limit) {
  throttle_options o;
  o.window = 1min;
  o.limit = limit;
  o.key_fields = {"workflow", "recipient"};
  return o;
}

}  // namespace

// Before the bound, dumping the key field to build the throttle key recursed once per level
// and overflowed the stack (SIGSEGV, on every restart of the job).
TEST(throttle_hostile_input, eighty_thousand_levels_in_a_key_field_are_dead_lettered_with_the_reason) {
  auto cfg = sluice::config{}.set("processing.error.handler", "dead_letter").set("application.id", "deep");
  topology_test_driver d(sluice::topologies::throttle_job_topology("in", "out", "", by_workflow_and_recipient(5)), cfg);
  const std::string deep = R"({"workflow":)" + nested_arrays(80'000) + R"(,"recipient":"x"})";
  ASSERT_GT(deep.size(), 160'000u);
  d.pipe_raw("in", std::string_view("k1"), std::string_view(deep), 1);
  d.pipe_raw("in", std::string_view("k2"), std::string_view(R"({"workflow":"wf1","recipient":"x"})"), 2);

  ASSERT_EQ(d.records("out").size(), 1u);
  EXPECT_EQ(d.records("out").front().key, "k2");
  auto& dead = d.records("deep-dlq");
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead.front().value, deep);  // the original bytes, whole
  EXPECT_EQ(header_text(dead.front(), "sluice.error.kind"), "processing");
  EXPECT_NE(header_text(dead.front(), "sluice.error.message").find("deeper than 1000 levels"), std::string::npos)
      << header_text(dead.front(), "sluice.error.message");
  EXPECT_EQ(d.metrics().total("sluice_records_dead_lettered_total"), 1);
}

TEST(throttle_hostile_input, nesting_up_to_the_bound_still_forms_a_throttle_key) {
  auto cfg = sluice::config{}.set("processing.error.handler", "log_and_continue");
  topology_test_driver d(sluice::topologies::throttle_job_topology("in", "out", "", by_workflow_and_recipient(1)), cfg);
  // 999 levels in the field plus the enclosing object: 1,000 in all.
  const std::string at_bound = R"({"workflow":)" + nested_arrays(999) + R"(,"recipient":"x"})";
  const std::string over = R"({"workflow":)" + nested_arrays(1000) + R"(,"recipient":"x"})";
  d.pipe_raw("in", std::string_view("k"), std::string_view(at_bound), 1);
  d.pipe_raw("in", std::string_view("k"), std::string_view(at_bound), 2);  // same key: throttled
  d.pipe_raw("in", std::string_view("k"), std::string_view(over), 3);      // skipped
  EXPECT_EQ(d.records("out").size(), 1u);
  EXPECT_EQ(d.metrics().total("sluice_throttle_throttled_total"), 1);
  EXPECT_EQ(d.metrics().total("sluice_records_skipped_total"), 1);
}

TEST(throttle_hostile_input, a_deeply_nested_rule_is_an_invalid_rule_and_the_defaults_apply) {
  auto o = by_workflow_and_recipient(1);
  o.rules_topic = "rules";
  topology_test_driver d(sluice::topologies::throttle_job_topology("in", "out", "", o));
  d.pipe_raw("rules", std::string_view("wf1"), std::string_view(R"({"limit":)" + nested_arrays(80'000) + "}"), 0);
  d.pipe_raw("in", std::string_view("k"), std::string_view(R"({"workflow":"wf1","recipient":"x"})"), 1);
  d.pipe_raw("in", std::string_view("k"), std::string_view(R"({"workflow":"wf1","recipient":"x"})"), 2);
  EXPECT_EQ(d.records("out").size(), 1u);  // limit 1, the default
  EXPECT_GE(d.metrics().total("sluice_throttle_invalid_rules_total"), 1);
}

// Finding 6: with key fields, the throttle counted per partition: records of one throttle
// key under unrelated record keys landed on every partition and each task let `limit` pass.
TEST(throttle_partitioning, one_throttle_key_under_unrelated_record_keys_passes_the_limit_once_over_four_partitions) {
  sluice::testing::driver_options four;
  four.partitions = 4;
  auto o = by_workflow_and_recipient(3);
  topology_test_driver d(sluice::topologies::throttle_job_topology("in", "out", "throttled", o), {}, four);
  std::set<std::int32_t> partitions;
  for (int i = 0; i < 20; ++i) {
    auto key = "record-" + std::to_string(i);
    partitions.insert(sluice::detail::murmur2_partition(key, 4));
    auto value = R"({"workflow":"wf1","recipient":"alice","id":)" + std::to_string(i) + "}";
    d.pipe_raw("in", std::string_view(key), std::string_view(value), 1000 + i);
  }
  ASSERT_EQ(partitions.size(), 4u) << "the record keys spread over every input partition";
  EXPECT_EQ(d.records("out").size(), 3u);
  EXPECT_EQ(d.records("throttled").size(), 17u);
  // The passed ones are the first three, unchanged (their own record keys).
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(d.records("out")[static_cast<std::size_t>(i)].key, "record-" + std::to_string(i));
  // They went through the repartition topic, on the partition of their throttle key.
  auto& through = d.records("test-driver-throttle-log-repartition");
  ASSERT_EQ(through.size(), 20u);
  for (const auto& m : through) EXPECT_EQ(m.partition, through.front().partition);
}

TEST(throttle_partitioning, throttle_keys_spread_over_partitions_keep_exact_counts_per_key) {
  sluice::testing::driver_options four;
  four.partitions = 4;
  topology_test_driver d(sluice::topologies::throttle_job_topology("in", "out", "", by_workflow_and_recipient(2)), {},
                         four);
  // 50 throttle keys x 5 records, each record with its own record key: 2 pass per key.
  for (int round = 0; round < 5; ++round)
    for (int k = 0; k < 50; ++k) {
      auto value = R"({"workflow":"wf","recipient":"user)" + std::to_string(k) + R"("})";
      auto key = std::to_string(round) + "/" + std::to_string(k);
      d.pipe_raw("in", std::string_view(key), std::string_view(value), round);
    }
  EXPECT_EQ(d.records("out").size(), 100u);
  std::set<std::int32_t> used;
  for (const auto& m : d.records("test-driver-throttle-log-repartition")) used.insert(m.partition);
  EXPECT_GT(used.size(), 1u) << "different throttle keys still spread over the tasks";
}

TEST(throttle_partitioning, without_key_fields_the_input_is_not_repartitioned) {
  sluice::testing::driver_options four;
  four.partitions = 4;
  throttle_options o;
  o.limit = 1;
  topology_test_driver d(sluice::topologies::throttle_job_topology("in", "out", "", o), {}, four);
  d.pipe_raw("in", std::string_view("alice"), std::string_view("1"), 1);
  d.pipe_raw("in", std::string_view("alice"), std::string_view("2"), 2);
  EXPECT_EQ(d.records("out").size(), 1u);
  for (const auto& t : d.topics()) EXPECT_EQ(t.find("repartition"), std::string::npos) << t;
}
