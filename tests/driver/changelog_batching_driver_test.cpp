// The key-value changelog carries the last write per key of each commit
// (statestore.changelog.buffer.bytes), observed on the changelog topic the TopologyTestDriver
// keeps: a count whose keys repeat between two commits sends one record per key per commit,
// holding the count the store reached; with buffering off, one record per write as before.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sluice/builder.hpp"
#include "sluice/config.hpp"
#include "sluice/processor.hpp"
#include "sluice/store.hpp"
#include "sluice/test_driver.hpp"

namespace {

using sluice::testing::topology_test_driver;

sluice::topology count_topology() {
  sluice::streams_builder b;
  b.stream<std::string, std::string>("in").group_by_key().count("c").to_stream().to("out");
  return b.build();
}

/// Keys of the unread changelog records of store "c", in changelog order.
std::vector<std::string> changelog_keys(topology_test_driver& d) {
  std::vector<std::string> keys;
  auto& q = d.records("test-driver-c-changelog");
  for (const auto& m : q) keys.push_back(m.key.value_or("<null>"));
  return keys;
}

TEST(changelog_batching, a_count_logs_one_record_per_key_per_commit) {
  topology_test_driver d(count_topology(), {}, {.commit_every_records = 6});
  auto in = d.input_topic<std::string, std::string>("in");
  for (const char* k : {"a", "b", "a", "a", "b", "a"}) in.pipe(k, "x");
  // One commit: a written 4 times and b twice, in first-write order, each with its last count.
  EXPECT_EQ(changelog_keys(d), (std::vector<std::string>{"a", "b"}));
  auto changelog = d.output_topic<std::string, std::int64_t>("test-driver-c-changelog").read_key_values_to_map();
  EXPECT_EQ(changelog["a"], 4);
  EXPECT_EQ(changelog["b"], 2);
  // The next commit again sends each key it wrote once.
  for (const char* k : {"b", "b", "b", "b", "b", "b"}) in.pipe(k, "x");
  EXPECT_EQ(changelog_keys(d), (std::vector<std::string>{"b"}));
  auto second = d.output_topic<std::string, std::int64_t>("test-driver-c-changelog").read_key_values_to_map();
  EXPECT_EQ(second["b"], 8);
  // The outputs are not batched: every update of the count went downstream.
  auto out = d.output_topic<std::string, std::int64_t>("out");
  EXPECT_EQ(out.size(), 12u);
}

TEST(changelog_batching, nothing_is_sent_before_the_commit_and_everything_at_it) {
  topology_test_driver d(count_topology(), {}, {.commit_every_records = 3});
  auto in = d.input_topic<std::string, std::string>("in");
  in.pipe("a", "x");
  in.pipe("a", "x");
  EXPECT_TRUE(changelog_keys(d).empty());
  in.pipe("c", "x");  // the third record commits
  EXPECT_EQ(changelog_keys(d), (std::vector<std::string>{"a", "c"}));
}

TEST(changelog_batching, buffering_off_logs_every_write) {
  sluice::config c;
  c.set("statestore.changelog.buffer.bytes", "0");
  topology_test_driver d(count_topology(), c, {.commit_every_records = 6});
  auto in = d.input_topic<std::string, std::string>("in");
  for (const char* k : {"a", "b", "a", "a", "b", "a"}) in.pipe(k, "x");
  EXPECT_EQ(changelog_keys(d), (std::vector<std::string>{"a", "b", "a", "a", "b", "a"}));
}

TEST(changelog_batching, a_store_that_asks_for_it_logs_every_write_in_order_at_the_commit) {
  // A Processor API store with log_every_write beside the count's batched store, one task.
  class keep_last : public sluice::processor<std::string, std::string, std::string, std::string> {
   public:
    void init(context_type& ctx) override {
      processor::init(ctx);
      last_.emplace(ctx.store<std::string, std::string>("last"));
    }
    void process(const sluice::record<std::string, std::string>& r) override { last_->put(r.key, r.value); }

   private:
    std::optional<sluice::key_value_store<std::string, std::string>> last_;
  };
  sluice::streams_builder b;
  b.add_state_store({.name = "last", .log_every_write = true});
  auto in = b.stream<std::string, std::string>("in");
  in.process([] { return std::make_unique<keep_last>(); }, "last");
  in.group_by_key().count("c").to_stream().to("out");
  topology_test_driver d(b.build(), {}, {.commit_every_records = 6});
  auto pipe = d.input_topic<std::string, std::string>("in");
  pipe.pipe("a", "1");
  pipe.pipe("a", "2");
  // Under at-least-once (the driver's) every write waits for the commit as the count's last
  // write per key does, so that it goes out after the outputs sent before it
  // (record_collector::send_changelog).
  EXPECT_TRUE(d.records("test-driver-last-changelog").empty());
  EXPECT_TRUE(changelog_keys(d).empty());
  for (const char* v : {"3", "4", "5", "6"}) pipe.pipe("a", v);  // the sixth record commits
  std::vector<std::string> values;
  for (const auto& m : d.records("test-driver-last-changelog")) values.push_back(m.value.value_or("<null>"));
  EXPECT_EQ(values, (std::vector<std::string>{"1", "2", "3", "4", "5", "6"}));
  EXPECT_EQ(changelog_keys(d), (std::vector<std::string>{"a"}));
}

TEST(changelog_batching, a_full_buffer_is_sent_before_the_commit) {
  sluice::config c;
  c.set("statestore.changelog.buffer.bytes", "1");  // every write passes the bound
  topology_test_driver d(count_topology(), c, {.commit_every_records = 100});
  auto in = d.input_topic<std::string, std::string>("in");
  for (const char* k : {"a", "a", "b"}) in.pipe(k, "x");
  EXPECT_EQ(changelog_keys(d), (std::vector<std::string>{"a", "a", "b"}));
}

}  // namespace
