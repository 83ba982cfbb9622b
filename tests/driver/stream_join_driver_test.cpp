// Stream–stream windowed joins (issue 16) through the TopologyTestDriver, against
// hand-computed expectations with Kafka Streams 3.9's KStreamKStreamJoin: a record joins the
// other stream's records of its key within the time difference, in (timestamp, arrival)
// order, each result at the later timestamp; a left/outer record without a match waits in
// the shared outer store and comes out with the other side missing once stream time passes
// its time + difference + grace (released by the next record at stream time), or at once
// when it arrives after that.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "sluice/sluice.hpp"
#include "sluice/test_driver.hpp"

using sluice::testing::topology_test_driver;
using namespace std::chrono_literals;

namespace {

/// (key, value, timestamp) in output order.
using results = std::vector<std::tuple<std::string, std::string, std::int64_t>>;

results read_results(topology_test_driver& d, const std::string& topic) {
  results out;
  for (auto& r : d.output_topic<std::string, std::string>(topic).read_all())
    out.emplace_back(r.key, r.value, r.timestamp);
  return out;
}

std::string show(const std::optional<std::string>& v) { return v ? *v : "null"; }

/// "left" left-joined with "right" within 10 ms, grace 5 ms, into "out" as "left+right"
/// ("left+null" for an unmatched left record).
sluice::topology left_join_within_10ms_grace_5ms() {
  sluice::streams_builder b;
  auto l = b.stream<std::string, std::string>("left");
  auto r = b.stream<std::string, std::string>("right");
  l.left_join(
       r, [](const std::string& lv, const std::optional<std::string>& rv) { return lv + "+" + show(rv); },
       sluice::join_windows::of_time_difference_and_grace(10ms, 5ms))
      .to("out");
  return b.build();
}

}  // namespace

TEST(stream_join, inner_join_pairs_records_within_the_time_difference_in_time_then_arrival_order) {
  sluice::streams_builder b;
  auto l = b.stream<std::string, std::string>("left");
  auto r = b.stream<std::string, std::string>("right");
  l.join(
       r, [](const std::string& lv, const std::string& rv) { return lv + "+" + rv; },
       sluice::join_windows::of_time_difference_and_grace(10ms, 20ms))
      .to("out");
  topology_test_driver d(b.build());
  auto left = d.input_topic<std::string, std::string>("left");
  auto right = d.input_topic<std::string, std::string>("right");
  left.pipe("k", "a", 0);
  right.pipe("k", "b", 5);       // a@0 within 10: a+b at 5
  left.pipe("k", "c", 12);       // b@5: c+b at 12 (a@0 is not a left record's partner)
  right.pipe("k", "d", 30);      // left [20, 40]: none
  left.pipe("k", "e", 25);       // out of order: right [15, 35] has d@30: e+d at 30
  right.pipe("k", "f", 12);      // out of order: left [2, 22] has c@12: c+f at 12
  right.pipe("k", "h", 12);      // the same time again: c+h at 12, both kept
  left.pipe("k", "i", 13);       // right [3, 23]: b@5, then f and h @12 in arrival order
  right.pipe("other", "x", 13);  // another key: nothing
  const results expected = {
      {"k", "a+b", 5},  {"k", "c+b", 12}, {"k", "e+d", 30}, {"k", "c+f", 12},
      {"k", "c+h", 12}, {"k", "i+b", 13}, {"k", "i+f", 13}, {"k", "i+h", 13},
  };
  EXPECT_EQ(read_results(d, "out"), expected);
}

TEST(stream_join, left_join_emits_an_unmatched_left_record_once_its_window_closes) {
  topology_test_driver d(left_join_within_10ms_grace_5ms());
  auto left = d.input_topic<std::string, std::string>("left");
  auto right = d.input_topic<std::string, std::string>("right");
  left.pipe("k", "a", 0);     // no match yet: waits (closes after stream time 15)
  right.pipe("k", "b", 3);    // matches a: a+b at 3, a no longer waits
  left.pipe("k", "c", 4);     // c+b at 4
  left.pipe("k2", "x", 6);    // waits until stream time passes 6 + 10 + 5 = 21
  right.pipe("k3", "y", 20);  // stream time 20: x's window is still open; a right record alone is no result
  left.pipe("k3", "z", 22);   // stream time 22 releases x+null (at 6) first, then z+y at 22
  left.pipe("k4", "w", 5);    // its window closed long ago (5 + 10 < 22): w+null at once
  left.pipe("k5", "v", 23);   // waits: its window is open at the end
  const results expected = {
      {"k", "a+b", 3}, {"k", "c+b", 4}, {"k2", "x+null", 6}, {"k3", "z+y", 22}, {"k4", "w+null", 5},
  };
  EXPECT_EQ(read_results(d, "out"), expected);
}

TEST(stream_join, outer_join_emits_unmatched_records_of_either_side_when_their_windows_close) {
  sluice::streams_builder b;
  auto l = b.stream<std::string, std::string>("left");
  auto r = b.stream<std::string, std::string>("right");
  l.outer_join(
       r,
       [](const std::optional<std::string>& lv, const std::optional<std::string>& rv) {
         return show(lv) + "+" + show(rv);
       },
       sluice::join_windows::of_time_difference_and_grace(10ms, 5ms), "clicks")
      .to("out");
  topology_test_driver d(b.build());
  auto left = d.input_topic<std::string, std::string>("left");
  auto right = d.input_topic<std::string, std::string>("right");
  left.pipe("k", "a", 0);     // waits
  right.pipe("k2", "b", 2);   // waits (a right record of an outer join)
  right.pipe("k", "c", 5);    // matches a: a+c at 5
  left.pipe("k3", "d", 20);   // stream time 20 > 2 + 15: null+b (at 2) comes out first; d waits
  right.pipe("k4", "e", 36);  // stream time 36 > 20 + 15: d+null (at 20); e waits
  left.pipe("k4", "f", 37);   // matches e: f+e at 37, e no longer waits
  const results expected = {
      {"k", "a+c", 5},
      {"k2", "null+b", 2},
      {"k3", "d+null", 20},
      {"k4", "f+e", 37},
  };
  EXPECT_EQ(read_results(d, "out"), expected);
  // The name names the stores as Kafka Streams' StreamJoined.withStoreName does.
  const auto described = b.build().describe();
  for (const char* store :
       {"clicks-outer-this-join-store", "clicks-outer-other-join-store", "clicks-outer-shared-join-store"})
    EXPECT_NE(described.find(store), std::string::npos) << store << " in\n" << described;
}

TEST(stream_join, describe_names_the_windowed_join_and_merge_nodes_and_their_stores) {
  sluice::streams_builder b;
  auto l = b.stream<std::string, std::string>("left");
  auto r = b.stream<std::string, std::string>("right");
  l.left_join(
       r, [](const std::string& lv, const std::optional<std::string>&) { return lv; },
       sluice::join_windows::of_time_difference_without_grace(1s))
      .to("out");
  const auto t = b.build();
  const auto described = t.describe();
  for (const char* part :
       {"KSTREAM-WINDOWED-0000000002", "KSTREAM-JOINTHIS-0000000004", "KSTREAM-OUTEROTHER-0000000005",
        "KSTREAM-MERGE-0000000006", "KSTREAM-JOINTHIS-0000000004-store", "KSTREAM-OUTEROTHER-0000000005-store",
        "KSTREAM-OUTERSHARED-0000000004-store"})
    EXPECT_NE(described.find(part), std::string::npos) << part << " in\n" << described;
  EXPECT_EQ(t.subtopologies().size(), 1u);
}

TEST(stream_join, join_windows_refuse_a_negative_time_difference_or_grace) {
  EXPECT_THROW(sluice::join_windows::of_time_difference_and_grace(-1ms, 0ms), sluice::error);
  EXPECT_THROW(sluice::join_windows::of_time_difference_and_grace(1ms, -1ms), sluice::error);
}

TEST(stream_join, unmatched_records_of_one_time_come_out_in_key_order_not_arrival_order) {
  topology_test_driver d(left_join_within_10ms_grace_5ms());
  auto left = d.input_topic<std::string, std::string>("left");
  left.pipe("kb", "x", 0);
  left.pipe("ka", "y", 0);
  left.pipe("kc", "z", 16);  // stream time 16 > 0 + 10 + 5: both due, ordered by (time, side, key bytes)
  const results expected = {{"ka", "y+null", 0}, {"kb", "x+null", 0}};
  EXPECT_EQ(read_results(d, "out"), expected);
}

// Asymmetric windows (Kafka Streams' JoinWindows.before/after): a left record at t joins right
// records in [t - before, t + after]; a right record at t' joins left records in
// [t' - after, t' + before]. Each store keeps before + after + grace past its own stream time.

TEST(stream_join, asymmetric_inner_join_matches_records_exactly_on_both_bounds_of_each_side) {
  sluice::streams_builder b;
  auto l = b.stream<std::string, std::string>("left");
  auto r = b.stream<std::string, std::string>("right");
  // before 5, after 10: left at t sees right [t - 5, t + 10]; right at t' sees left [t' - 10, t' + 5].
  const auto windows = sluice::join_windows::of_time_difference_and_grace(10ms, 3ms).before(5ms);
  EXPECT_EQ(windows.before(), 5ms);
  EXPECT_EQ(windows.after(), 10ms);
  EXPECT_EQ(windows.grace(), 3ms);
  EXPECT_EQ(windows.size(), 15ms);
  l.join(
       r, [](const std::string& lv, const std::string& rv) { return lv + "+" + rv; }, windows)
      .to("out");
  topology_test_driver d(b.build());
  auto left = d.input_topic<std::string, std::string>("left");
  auto right = d.input_topic<std::string, std::string>("right");
  left.pipe("k", "a", 10);
  right.pipe("k", "r5", 5);    // left [0, 10]: a@10 on the upper bound: a+r5 at 10
  right.pipe("k", "r4", 4);    // left [0, 9]: none
  right.pipe("k", "r20", 20);  // left [10, 25]: a@10 on the lower bound: a+r20 at 20
  right.pipe("k", "r21", 21);  // left [11, 26]: none
  left.pipe("k", "c", 26);     // right [21, 36]: r21 on the lower bound: c+r21 at 26
  left.pipe("k", "d", 10);     // right [5, 20]: r5 and r20 on the bounds, not r4 or r21
  const results expected = {
      {"k", "a+r5", 10}, {"k", "a+r20", 20}, {"k", "c+r21", 26}, {"k", "d+r5", 10}, {"k", "d+r20", 20},
  };
  EXPECT_EQ(read_results(d, "out"), expected);
}

TEST(stream_join,
     asymmetric_left_join_with_a_window_after_the_record_releases_unmatched_records_at_time_plus_after_plus_grace) {
  sluice::streams_builder b;
  auto l = b.stream<std::string, std::string>("left");
  auto r = b.stream<std::string, std::string>("right");
  // before -3, after 10, grace 2: left at t sees right [t + 3, t + 10]; right at t' sees left
  // [t' - 10, t' - 3]; an unmatched left record closes once stream time passes t + 10 + 2.
  // Each store keeps 7 + 2 = 9 ms. (Times from 100: the bounds are clamped at 0.)
  const auto windows = sluice::join_windows::of_time_difference_and_grace(0ms, 2ms).after(10ms).before(-3ms);
  EXPECT_EQ(windows.size(), 7ms);
  l.left_join(
       r, [](const std::string& lv, const std::optional<std::string>& rv) { return lv + "+" + show(rv); }, windows)
      .to("out");
  topology_test_driver d(b.build());
  auto left = d.input_topic<std::string, std::string>("left");
  auto right = d.input_topic<std::string, std::string>("right");
  left.pipe("k", "a", 100);      // right [103, 110]: none yet; waits
  right.pipe("k", "r102", 102);  // left [92, 99]: none (a is 2 ms before, not 3)
  right.pipe("k", "r103", 103);  // left [93, 100]: a on its bound: a+r103 at 103; a no longer waits
  right.pipe("k", "r110", 110);  // left [100, 107]: a+r110 at 110
  right.pipe("k", "r111", 111);  // left [101, 108]: none
  left.pipe("k", "b", 100);    // out of order; right [103, 110] (r102 also left the right store's 9 ms): b+r103, b+r110
  left.pipe("k2", "c", 105);   // right [108, 115]: none; waits until stream time passes 117
  right.pipe("k5", "x", 117);  // stream time 117: c's window is still open
  left.pipe("k3", "d", 118);   // stream time 118 releases c+null (at 105); d waits
  left.pipe("k6", "f", 100);   // its window closed (110 < 118) without a match: f+null at once
  const results expected = {
      {"k", "a+r103", 103}, {"k", "a+r110", 110},  {"k", "b+r103", 103},
      {"k", "b+r110", 110}, {"k2", "c+null", 105}, {"k6", "f+null", 100},
  };
  EXPECT_EQ(read_results(d, "out"), expected);
}

TEST(stream_join, asymmetric_outer_join_closes_each_sides_unmatched_records_with_its_own_bound) {
  sluice::streams_builder b;
  auto l = b.stream<std::string, std::string>("left");
  auto r = b.stream<std::string, std::string>("right");
  // before 8, after 2, grace 1: left at t sees right [t - 8, t + 2]; right at t' sees left
  // [t' - 2, t' + 8]. An unmatched left record closes once stream time passes t + 2 + 1, a
  // right one once it passes t' + 8 + 1.
  const auto windows = sluice::join_windows::of_time_difference_and_grace(2ms, 1ms).before(8ms);
  l.outer_join(
       r,
       [](const std::optional<std::string>& lv, const std::optional<std::string>& rv) {
         return show(lv) + "+" + show(rv);
       },
       windows)
      .to("out");
  topology_test_driver d(b.build());
  auto left = d.input_topic<std::string, std::string>("left");
  auto right = d.input_topic<std::string, std::string>("right");
  left.pipe("k", "a", 100);      // right [92, 102]: none; waits
  right.pipe("k", "r92", 92);    // left [90, 100]: a on its bound: a+r92 at 100
  right.pipe("k", "r102", 102);  // left [100, 110]: a+r102 at 102
  right.pipe("k", "r91", 91);    // left [89, 99]: none, and its window closed (91 + 8 < 102): null+r91 at once
  right.pipe("k", "r103", 103);  // left [101, 111]: none; waits until stream time passes 112
  left.pipe("k2", "b", 105);     // right [97, 107] of k2: none; waits until stream time passes 108
  left.pipe("k3", "c", 109);     // stream time 109 releases b+null (at 105); r103 still waits; c waits until 112
  left.pipe("k4", "d", 112);     // stream time 112: r103 (103 + 9) and c (109 + 3) still wait
  right.pipe("k5", "e", 113);    // stream time 113, but the oldest-waiting hint (109) + the right
                                 // side's after (8) + grace says nothing is due: no scan (as Kafka Streams)
  left.pipe("k6", "f", 114);     // stream time 114 releases null+r103 (at 103), c+null (at 109)
  const results expected = {
      {"k", "a+r92", 100},   {"k", "a+r102", 102},    {"k", "null+r91", 91},
      {"k2", "b+null", 105}, {"k", "null+r103", 103}, {"k3", "c+null", 109},
  };
  EXPECT_EQ(read_results(d, "out"), expected);
}

TEST(stream_join, join_windows_before_and_after_refuse_a_negative_size_and_a_join_that_keeps_nothing) {
  const auto w = sluice::join_windows::of_time_difference_without_grace(5ms);
  EXPECT_NO_THROW(w.before(-5ms));
  try {
    (void)w.after(-6ms);
    FAIL() << "before 5 + after -6 < 0 was accepted";
  } catch (const sluice::error& e) {
    EXPECT_NE(std::string(e.what()).find("before + after must be >= 0"), std::string::npos) << e.what();
  }
  // before + after + grace = 0: Kafka Streams' join stores would have retention 0 and find
  // no partner ever; sluice refuses the topology instead.
  sluice::streams_builder b;
  auto l = b.stream<std::string, std::string>("left");
  auto r = b.stream<std::string, std::string>("right");
  try {
    (void)l.join(
        r, [](const std::string& lv, const std::string&) { return lv; }, w.before(-5ms));
    FAIL() << "a join window of size 0 without grace was accepted";
  } catch (const sluice::error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("before + after + grace = 0 ms"), std::string::npos) << message;
    EXPECT_NE(message.find("grace period above 0"), std::string::npos) << message;
  }
}

// A stream joined with itself runs as Kafka Streams 3.9 runs it without
// topology.optimization: both windowing nodes read the one source, this side first, so a
// record meets the other side's store without itself, then this side's store with itself.
TEST(stream_join, self_join_pairs_each_record_with_itself_and_with_the_others_in_the_window_both_ways) {
  sluice::streams_builder b;
  auto s = b.stream<std::string, std::string>("events");
  s.join(
       s, [](const std::string& lv, const std::string& rv) { return lv + "+" + rv; },
       sluice::join_windows::of_time_difference_without_grace(10ms))
      .to("out");
  const auto t = b.build();
  EXPECT_EQ(t.subtopologies().size(), 1u);
  topology_test_driver d(t);
  auto events = d.input_topic<std::string, std::string>("events");
  events.pipe("k", "a", 0);   // this side: the other store is empty; other side: a+a
  events.pipe("k", "b", 5);   // this side: b+a; other side, this store [0, 15]: a+b, b+b
  events.pipe("k", "c", 20);  // this side: other store [10, 30] empty; other side: c+c
  events.pipe("k2", "x", 6);  // another key: only x+x
  const results expected = {
      {"k", "a+a", 0}, {"k", "b+a", 5}, {"k", "a+b", 5}, {"k", "b+b", 5}, {"k", "c+c", 20}, {"k2", "x+x", 6},
  };
  EXPECT_EQ(read_results(d, "out"), expected);
}

TEST(stream_join, self_left_join_never_leaves_a_record_unmatched_since_it_meets_itself) {
  sluice::streams_builder b;
  auto s = b.stream<std::string, std::string>("events");
  s.left_join(
       s, [](const std::string& lv, const std::optional<std::string>& rv) { return lv + "+" + show(rv); },
       sluice::join_windows::of_time_difference_and_grace(10ms, 0ms))
      .to("out");
  topology_test_driver d(b.build());
  auto events = d.input_topic<std::string, std::string>("events");
  events.pipe("k", "a", 0);    // this side (the left): no match yet, waits; other side: a+a removes it
  events.pipe("k", "b", 50);   // stream time 50: nothing waits; this side: none in [40, 60], waits; other: b+b
  events.pipe("k", "c", 100);  // again: c+c, and no b+null ever
  const results expected = {{"k", "a+a", 0}, {"k", "b+b", 50}, {"k", "c+c", 100}};
  EXPECT_EQ(read_results(d, "out"), expected);
}
