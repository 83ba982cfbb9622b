// partition_group on its own: the lowest-timestamp choice across a task's partitions, the
// fetch pause / resume thresholds of pacing, and the task idling rule (max.task.idle.ms,
// Kafka Streams' KIP-695) against a fake lag source.
#include "runtime/partition_group.hpp"

#include <gtest/gtest.h>

#include <map>
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

TEST(partition_group, an_order_function_replaces_the_record_timestamps_and_is_asked_once_per_head) {
  auto g = two_partitions();
  std::map<std::string, int> asked;
  // Ordered by the negated record timestamp: the youngest head first.
  g.order_by([&](std::size_t, const kafka::message& m) {
    ++asked[*m.value];
    return -m.timestamp;
  });
  auto l0 = record("left", 0, 100), l1 = record("left", 1, 300);
  auto r0 = record("right", 0, 200), r1 = record("right", 1, 400);
  for (auto* m : {&l0, &l1}) g.push(0, *m);
  for (auto* m : {&r0, &r1}) g.push(1, *m);
  std::vector<std::string> order;
  while (!g.empty()) {
    order.push_back(*g.next().value);
    g.pop_next();
  }
  EXPECT_EQ(order, (std::vector<std::string>{"right@0", "right@1", "left@0", "left@1"}));
  for (const auto& [value, n] : asked) EXPECT_EQ(n, 1) << value;
  EXPECT_EQ(asked.size(), 4u);
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

// A consumer that goes back (librdkafka 2.0.2 did, resuming a partition that was not paused):
// what the task was handed already is recognised, per partition, until the consumer is past
// it again; a seek (clear) makes earlier offsets new again.
TEST(partition_group, a_record_delivered_again_is_recognised_until_the_consumer_is_past_it) {
  auto g = two_partitions();
  using d = partition_group::delivery;
  for (std::int64_t o = 10; o < 13; ++o) EXPECT_EQ(g.accept(0, o), d::fresh) << o;
  EXPECT_EQ(g.accept(1, 5), d::fresh) << "partitions are apart";
  EXPECT_EQ(g.accept(0, 10), d::again_first);
  EXPECT_EQ(g.accept(0, 11), d::again);
  EXPECT_EQ(g.accept(0, 12), d::again);
  EXPECT_EQ(g.accept(0, 13), d::fresh);
  EXPECT_EQ(g.accept(0, 15), d::fresh) << "a gap (compaction, markers) is no redelivery";
  EXPECT_EQ(g.accept(0, 14), d::again_first) << "a new run";
  EXPECT_EQ(g.accept(1, 5), d::again_first);
  fetch_changes changes;
  g.clear(changes);  // a seek to the committed offsets
  EXPECT_EQ(g.accept(0, 10), d::fresh);
  EXPECT_EQ(g.accept(1, 0), d::fresh);
  auto m = record("left", 20, 0);
  g.push(0, m);  // a record queued counts as delivered too
  EXPECT_EQ(g.accept(0, 20), d::again_first);
  EXPECT_EQ(g.accept(0, 21), d::fresh);
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

// --- task idling: partition_group::ready() ----------------------------------------------

/// Answers what a test sets per topic (unknown by default) and remembers what was asked.
class fake_lags final : public lag_source {
 public:
  fetched_lag lag(const kafka::topic_partition& tp, std::int64_t delivered_end) const override {
    ++asked;
    last_delivered_end = delivered_end;
    auto it = lags.find(tp.topic);
    return it == lags.end() ? fetched_lag::unknown : it->second;
  }
  std::map<std::string, fetched_lag> lags;
  mutable int asked = 0;
  mutable std::int64_t last_delivered_end = -2;
};

/// left has one record queued, right none.
partition_group left_only() {
  auto g = two_partitions();
  auto l = record("left", 0, 100);
  g.push(0, l);
  return g;
}

TEST(task_idling, every_partition_with_records_is_ready_whatever_the_lags) {
  auto g = two_partitions();
  auto l = record("left", 0, 100), r = record("right", 0, 200);
  g.push(0, l);
  g.push(1, r);
  fake_lags lags;  // unknown everywhere
  EXPECT_EQ(g.ready(1000, 0, lags), readiness::ready);
  EXPECT_EQ(g.ready(1000, 5000, lags), readiness::ready);
  EXPECT_EQ(lags.asked, 0);
}

TEST(task_idling, an_empty_partition_with_unknown_lag_waits_however_long) {
  auto g = left_only();
  fake_lags lags;
  EXPECT_EQ(g.ready(1000, 0, lags), readiness::waiting);
  EXPECT_EQ(g.ready(1000 + 3'600'000, 0, lags), readiness::waiting);
  EXPECT_EQ(g.ready(1000 + 3'600'000, 100, lags), readiness::waiting);
  EXPECT_FALSE(g.idle_deadline_ms());  // no countdown: it waits for the fetch
}

TEST(task_idling, an_empty_partition_with_records_on_the_broker_waits_however_long) {
  auto g = left_only();
  fake_lags lags;
  lags.lags["right"] = fetched_lag::positive;
  EXPECT_EQ(g.ready(1000, 0, lags), readiness::waiting);
  EXPECT_EQ(g.ready(1000 + 3'600'000, 0, lags), readiness::waiting);
  EXPECT_FALSE(g.idle_deadline_ms());
}

TEST(task_idling, zero_lag_waits_max_task_idle_ms_of_wall_time_then_processing_is_enforced) {
  auto g = left_only();
  fake_lags lags;
  lags.lags["right"] = fetched_lag::zero;
  EXPECT_EQ(g.ready(1000, 100, lags), readiness::waiting);
  ASSERT_TRUE(g.idle_deadline_ms());
  EXPECT_EQ(*g.idle_deadline_ms(), 1100);
  EXPECT_EQ(g.ready(1099, 100, lags), readiness::waiting);
  EXPECT_EQ(*g.idle_deadline_ms(), 1100);  // counted from when it was first found idle
  EXPECT_EQ(g.ready(1100, 100, lags), readiness::enforced);
  EXPECT_EQ(g.ready(5000, 100, lags), readiness::enforced);
}

TEST(task_idling, zero_lag_with_the_default_of_zero_is_enforced_at_once) {
  auto g = left_only();
  fake_lags lags;
  lags.lags["right"] = fetched_lag::zero;
  EXPECT_EQ(g.ready(1000, 0, lags), readiness::enforced);
}

TEST(task_idling, minus_one_never_waits) {
  auto g = left_only();
  fake_lags lags;  // unknown
  EXPECT_EQ(g.ready(1000, partition_group::idling_off, lags), readiness::ready);
  lags.lags["right"] = fetched_lag::positive;
  EXPECT_EQ(g.ready(1000, partition_group::idling_off, lags), readiness::ready);
}

TEST(task_idling, records_arriving_on_the_idle_partition_end_its_countdown) {
  auto g = left_only();
  fake_lags lags;
  lags.lags["right"] = fetched_lag::zero;
  EXPECT_EQ(g.ready(1000, 100, lags), readiness::waiting);
  auto r = record("right", 0, 50);
  g.push(1, r);
  EXPECT_FALSE(g.idle_deadline_ms());
  EXPECT_EQ(g.ready(1050, 100, lags), readiness::ready);
  EXPECT_EQ(*g.next().value, "right@0");  // the older record first
  g.pop_next();
  // Empty again: a new countdown from now, not the old deadline.
  EXPECT_EQ(g.ready(1050, 100, lags), readiness::waiting);
  EXPECT_EQ(*g.idle_deadline_ms(), 1150);
}

TEST(task_idling, a_lag_that_turns_unknown_or_positive_restarts_the_countdown_later) {
  auto g = left_only();
  fake_lags lags;
  lags.lags["right"] = fetched_lag::zero;
  EXPECT_EQ(g.ready(1000, 100, lags), readiness::waiting);
  lags.lags["right"] = fetched_lag::positive;
  EXPECT_EQ(g.ready(1200, 100, lags), readiness::waiting);  // past the old deadline: still waits
  EXPECT_FALSE(g.idle_deadline_ms());
  lags.lags["right"] = fetched_lag::zero;
  EXPECT_EQ(g.ready(1300, 100, lags), readiness::waiting);
  EXPECT_EQ(*g.idle_deadline_ms(), 1400);
}

TEST(task_idling, a_partition_end_settles_an_empty_partition_at_zero_lag) {
  auto g = left_only();
  fake_lags lags;  // the consumer's watermarks know nothing
  EXPECT_EQ(g.ready(1000, 0, lags), readiness::waiting);
  g.note_end(1, 7);  // the fetcher reached right's end (say past a commit marker at 6)
  EXPECT_EQ(g.ready(1000, 0, lags), readiness::enforced);
}

TEST(task_idling, an_end_noted_before_the_records_of_its_batch_are_queued_still_holds) {
  // The end event is handled inside the poll, before the poll's records are queued: the
  // records below the end are older than it, not news.
  auto g = left_only();
  fake_lags lags;
  g.note_end(1, 3);
  for (std::int64_t o = 0; o < 3; ++o) {
    auto r = record("right", o, 10 + o);  // older than left@0: they go first
    g.push(1, r);
  }
  while (g.queued(1) > 0) {
    ASSERT_EQ(g.ready(1000, 0, lags), readiness::ready);
    g.next();
    g.pop_next();
  }
  const int asked = lags.asked;
  EXPECT_EQ(g.ready(1000, 0, lags), readiness::enforced);
  EXPECT_EQ(lags.asked, asked);  // settled by the end, the consumer not asked
}

TEST(task_idling, a_record_at_or_past_the_end_makes_the_lag_unknown_again) {
  auto g = left_only();
  fake_lags lags;
  g.note_end(1, 3);
  auto r = record("right", 3, 300);  // new data, produced after the end was reached
  g.push(1, r);
  while (g.queued(1) > 0) {
    g.next();
    g.pop_next();
  }
  auto l = record("left", 1, 400);
  g.push(0, l);
  EXPECT_EQ(g.ready(1000, 0, lags), readiness::waiting);
  EXPECT_EQ(lags.last_delivered_end, 4);  // the consumer is asked about what follows offset 3
  g.note_end(1, 4);
  EXPECT_EQ(g.ready(1000, 0, lags), readiness::enforced);
}

TEST(task_idling, a_zero_from_the_consumer_is_remembered_until_the_next_record) {
  auto g = left_only();
  auto r = record("right", 0, 50);
  g.push(1, r);
  g.next();  // right@0 is older
  g.pop_next();
  fake_lags lags;
  lags.lags["right"] = fetched_lag::zero;
  EXPECT_EQ(g.ready(1000, 0, lags), readiness::enforced);
  EXPECT_EQ(lags.asked, 1);
  lags.lags["right"] = fetched_lag::unknown;
  EXPECT_EQ(g.ready(1000, 0, lags), readiness::enforced);  // known caught up at offset 1
  EXPECT_EQ(lags.asked, 1);
}

TEST(task_idling, clear_forgets_partition_ends) {
  auto g = left_only();
  fake_lags lags;
  g.note_end(1, 5);
  fetch_changes changes;
  g.clear(changes);
  auto l = record("left", 0, 100);
  g.push(0, l);
  EXPECT_EQ(g.ready(1000, 0, lags), readiness::waiting);  // after a rewind, ends are re-learned
}

TEST(task_idling, a_single_partition_is_always_ready) {
  partition_group g;
  g.add_partition({"in", 0});
  auto m = record("in", 0, 0);
  g.push(0, m);
  fake_lags lags;
  EXPECT_EQ(g.ready(0, 100, lags), readiness::ready);
}

}  // namespace
}  // namespace sluice::runtime
