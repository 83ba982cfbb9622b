// partition_group on its own: the lowest-timestamp choice across a task's partitions and
// the fetch pause / resume thresholds of pacing.
#include "runtime/partition_group.hpp"

#include <gtest/gtest.h>

#include <string>

namespace sluice::runtime {
namespace {

kafka::message record(const std::string& topic, std::int64_t offset, std::int64_t timestamp) {
  kafka::message m;
  m.topic = topic;
  m.partition = 0;
  m.offset = offset;
  m.timestamp = timestamp;
  m.value = topic + "@" + std::to_string(offset);
  return m;
}

partition_group two_partitions() {
  partition_group g;
  g.add_partition({"left", 0});
  g.add_partition({"right", 0});
  return g;
}

TEST(partition_group, next_record_is_the_lowest_timestamp_across_partitions) {
  auto g = two_partitions();
  auto l0 = record("left", 0, 100), l1 = record("left", 1, 300), l2 = record("left", 2, 500);
  auto r0 = record("right", 0, 200), r1 = record("right", 1, 250), r2 = record("right", 2, 600);
  for (auto* m : {&l0, &l1, &l2}) g.push(0, *m);
  for (auto* m : {&r0, &r1, &r2}) g.push(1, *m);
  std::vector<std::string> order;
  while (!g.empty()) {
    order.push_back(*g.next().value);
    g.pop_next();
  }
  EXPECT_EQ(order, (std::vector<std::string>{"left@0", "right@0", "right@1", "left@1", "left@2", "right@2"}));
}

TEST(partition_group, records_of_one_partition_keep_their_order_whatever_their_timestamps) {
  auto g = two_partitions();
  auto a = record("left", 0, 900), b = record("left", 1, 100), c = record("right", 0, 500);
  g.push(0, a);
  g.push(0, b);
  g.push(1, c);
  // left's head (900) is younger than right's (500): right first, then left in offset order.
  std::vector<std::string> order;
  while (!g.empty()) {
    order.push_back(*g.next().value);
    g.pop_next();
  }
  EXPECT_EQ(order, (std::vector<std::string>{"right@0", "left@0", "left@1"}));
}

TEST(partition_group, equal_timestamps_go_to_the_earlier_input) {
  auto g = two_partitions();
  auto r = record("right", 0, 100), l = record("left", 0, 100);
  g.push(1, r);
  g.push(0, l);
  EXPECT_EQ(*g.next().value, "left@0");
}

TEST(partition_group, a_partition_holding_the_high_mark_is_paused_and_resumed_at_three_quarters) {
  partition_group g;
  g.add_partition({"in", 3});
  fetch_changes changes;
  for (int i = 0; i < 7; ++i) {
    auto m = record("in", i, i);
    g.push(0, m);
  }
  g.update_fetch(1000, 8, changes);
  EXPECT_TRUE(changes.empty()) << "7 of 8 held: still fetching";
  auto m = record("in", 7, 7);
  g.push(0, m);
  g.update_fetch(1000, 8, changes);
  ASSERT_EQ(changes.pause.size(), 1u);
  EXPECT_EQ(changes.pause[0], (kafka::topic_partition{"in", 3}));
  EXPECT_TRUE(g.fetch_paused());
  changes.clear();

  // Down to 6 (= 3/4 of 8) but paused only just now: stays paused for min_fetch_pause_ms.
  g.next();
  g.pop_next();
  g.next();
  g.pop_next();
  g.update_fetch(1000 + partition_group::min_fetch_pause_ms - 1, 8, changes);
  EXPECT_TRUE(changes.empty());
  g.update_fetch(1000 + partition_group::min_fetch_pause_ms, 8, changes);
  ASSERT_EQ(changes.resume.size(), 1u);
  EXPECT_FALSE(g.fetch_paused());
}

TEST(partition_group, a_paused_partition_above_three_quarters_stays_paused) {
  partition_group g;
  g.add_partition({"in", 0});
  fetch_changes changes;
  for (int i = 0; i < 8; ++i) {
    auto m = record("in", i, i);
    g.push(0, m);
  }
  g.update_fetch(0, 8, changes);
  changes.clear();
  g.next();
  g.pop_next();  // 7 left: more than 6
  g.update_fetch(10 * partition_group::min_fetch_pause_ms, 8, changes);
  EXPECT_TRUE(changes.empty());
  EXPECT_TRUE(g.fetch_paused());
}

TEST(partition_group, resume_is_due_when_a_paused_partition_ran_empty) {
  partition_group g;
  g.add_partition({"in", 0});
  fetch_changes changes;
  auto m = record("in", 0, 0);
  g.push(0, m);
  g.update_fetch(5000, 1, changes);
  EXPECT_FALSE(g.resume_due_ms()) << "records still queued";
  g.next();
  g.pop_next();
  EXPECT_EQ(g.resume_due_ms(), 5000 + partition_group::min_fetch_pause_ms);
}

TEST(partition_group, clear_forgets_records_and_resumes_paused_partitions) {
  auto g = two_partitions();
  fetch_changes changes;
  auto a = record("left", 0, 0), b = record("right", 0, 0);
  g.push(0, a);
  g.push(1, b);
  g.update_fetch(0, 1, changes);
  ASSERT_EQ(changes.pause.size(), 2u);
  changes.clear();
  g.clear(changes);
  EXPECT_TRUE(g.empty());
  EXPECT_EQ(g.queued(0), 0u);
  EXPECT_FALSE(g.fetch_paused());
  EXPECT_EQ(changes.resume.size(), 2u);
}

TEST(partition_group, push_hands_back_the_slot_of_a_record_that_left) {
  partition_group g;
  g.add_partition({"in", 0});
  auto m = record("in", 0, 0);
  m.value = std::string(1000, 'x');
  g.push(0, m);
  g.next();
  g.pop_next();
  // The batch's message gets the freed slot, with the buffers (and capacity) of the record
  // that left: holding a steady stream allocates nothing per record.
  auto n = record("in", 1, 1);
  g.push(0, n);
  ASSERT_TRUE(n.value);
  EXPECT_EQ(*n.value, std::string(1000, 'x'));
  EXPECT_EQ(*g.next().value, "in@1");
}

}  // namespace
}  // namespace sluice::runtime
