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
  for (auto& r : d.output_topic<std::string, std::string>(topic).read_all()) out.emplace_back(r.key, r.value, r.timestamp);
  return out;
}

std::string show(const std::optional<std::string>& v) { return v ? *v : "null"; }

}  // namespace

TEST(stream_join, inner_join_pairs_records_within_the_time_difference_in_time_then_arrival_order) {
  sluice::streams_builder b;
  auto l = b.stream<std::string, std::string>("left");
  auto r = b.stream<std::string, std::string>("right");
  l.join(r, [](const std::string& lv, const std::string& rv) { return lv + "+" + rv; },
         sluice::join_windows::of_time_difference_and_grace(10ms, 20ms))
      .to("out");
  topology_test_driver d(b.build());
  auto left = d.input_topic<std::string, std::string>("left");
  auto right = d.input_topic<std::string, std::string>("right");
  left.pipe("k", "a", 0);
  right.pipe("k", "b", 5);    // a@0 within 10: a+b at 5
  left.pipe("k", "c", 12);    // b@5: c+b at 12 (a@0 is not a left record's partner)
  right.pipe("k", "d", 30);   // left [20, 40]: none
  left.pipe("k", "e", 25);    // out of order: right [15, 35] has d@30: e+d at 30
  right.pipe("k", "f", 12);   // out of order: left [2, 22] has c@12: c+f at 12
  right.pipe("k", "h", 12);   // the same time again: c+h at 12, both kept
  left.pipe("k", "i", 13);    // right [3, 23]: b@5, then f and h @12 in arrival order
  right.pipe("other", "x", 13);  // another key: nothing
  const results expected = {
      {"k", "a+b", 5}, {"k", "c+b", 12}, {"k", "e+d", 30}, {"k", "c+f", 12},
      {"k", "c+h", 12}, {"k", "i+b", 13}, {"k", "i+f", 13}, {"k", "i+h", 13},
  };
  EXPECT_EQ(read_results(d, "out"), expected);
}

TEST(stream_join, left_join_emits_an_unmatched_left_record_once_its_window_closes) {
  sluice::streams_builder b;
  auto l = b.stream<std::string, std::string>("left");
  auto r = b.stream<std::string, std::string>("right");
  l.left_join(r, [](const std::string& lv, const std::optional<std::string>& rv) { return lv + "+" + show(rv); },
              sluice::join_windows::of_time_difference_and_grace(10ms, 5ms))
      .to("out");
  topology_test_driver d(b.build());
  auto left = d.input_topic<std::string, std::string>("left");
  auto right = d.input_topic<std::string, std::string>("right");
  left.pipe("k", "a", 0);    // no match yet: waits (closes after stream time 15)
  right.pipe("k", "b", 3);   // matches a: a+b at 3, a no longer waits
  left.pipe("k", "c", 4);    // c+b at 4
  left.pipe("k2", "x", 6);   // waits until stream time passes 6 + 10 + 5 = 21
  right.pipe("k3", "y", 20); // stream time 20: x's window is still open; a right record alone is no result
  left.pipe("k3", "z", 22);  // stream time 22 releases x+null (at 6) first, then z+y at 22
  left.pipe("k4", "w", 5);   // its window closed long ago (5 + 10 < 22): w+null at once
  left.pipe("k5", "v", 23);  // waits: its window is open at the end
  const results expected = {
      {"k", "a+b", 3}, {"k", "c+b", 4}, {"k2", "x+null", 6}, {"k3", "z+y", 22}, {"k4", "w+null", 5},
  };
  EXPECT_EQ(read_results(d, "out"), expected);
}

TEST(stream_join, outer_join_emits_unmatched_records_of_either_side_when_their_windows_close) {
  sluice::streams_builder b;
  auto l = b.stream<std::string, std::string>("left");
  auto r = b.stream<std::string, std::string>("right");
  l.outer_join(r,
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
      {"k", "a+c", 5}, {"k2", "null+b", 2}, {"k3", "d+null", 20}, {"k4", "f+e", 37},
  };
  EXPECT_EQ(read_results(d, "out"), expected);
  // The name names the stores as Kafka Streams' StreamJoined.withStoreName does.
  const auto described = b.build().describe();
  for (const char* store : {"clicks-outer-this-join-store", "clicks-outer-other-join-store", "clicks-outer-shared-join-store"})
    EXPECT_NE(described.find(store), std::string::npos) << store << " in\n" << described;
}

TEST(stream_join, describe_names_the_windowed_join_and_merge_nodes_and_their_stores) {
  sluice::streams_builder b;
  auto l = b.stream<std::string, std::string>("left");
  auto r = b.stream<std::string, std::string>("right");
  l.left_join(r, [](const std::string& lv, const std::optional<std::string>&) { return lv; },
              sluice::join_windows::of_time_difference_without_grace(1s))
      .to("out");
  const auto t = b.build();
  const auto described = t.describe();
  for (const char* part : {"KSTREAM-WINDOWED-0000000002", "KSTREAM-JOINTHIS-0000000004", "KSTREAM-OUTEROTHER-0000000005",
                           "KSTREAM-MERGE-0000000006", "KSTREAM-JOINTHIS-0000000004-store",
                           "KSTREAM-OUTEROTHER-0000000005-store", "KSTREAM-OUTERSHARED-0000000004-store"})
    EXPECT_NE(described.find(part), std::string::npos) << part << " in\n" << described;
  EXPECT_EQ(t.subtopologies().size(), 1u);
}

TEST(stream_join, join_windows_refuse_a_negative_time_difference_or_grace) {
  EXPECT_THROW(sluice::join_windows::of_time_difference_and_grace(-1ms, 0ms), sluice::error);
  EXPECT_THROW(sluice::join_windows::of_time_difference_and_grace(1ms, -1ms), sluice::error);
}

TEST(stream_join, unmatched_records_of_one_time_come_out_in_key_order_not_arrival_order) {
  sluice::streams_builder b;
  auto l = b.stream<std::string, std::string>("left");
  auto r = b.stream<std::string, std::string>("right");
  l.left_join(r, [](const std::string& lv, const std::optional<std::string>& rv) { return lv + "+" + show(rv); },
              sluice::join_windows::of_time_difference_and_grace(10ms, 5ms))
      .to("out");
  topology_test_driver d(b.build());
  auto left = d.input_topic<std::string, std::string>("left");
  left.pipe("kb", "x", 0);
  left.pipe("ka", "y", 0);
  left.pipe("kc", "z", 16);  // stream time 16 > 0 + 10 + 5: both due, ordered by (time, side, key bytes)
  const results expected = {{"ka", "y+null", 0}, {"kb", "x+null", 0}};
  EXPECT_EQ(read_results(d, "out"), expected);
}
