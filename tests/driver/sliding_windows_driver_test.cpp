// Sliding-window aggregations (issue 16) through the TopologyTestDriver, against
// hand-computed expectations with Kafka Streams 3.9's KStreamSlidingWindowAggregate (KIP-450):
// a record at t creates its left window [t - d, t], the right window of the previous record
// when it falls in it, and its own right window [t + 1, t + 1 + d] when a later record is
// already there; records before d go to [0, d]. The comment on each record lists what it
// emits, in order, as (window start, value, timestamp).
#include <gtest/gtest.h>

#include <tuple>

#include "sluice/sluice.hpp"
#include "sluice/test_driver.hpp"

using sluice::testing::topology_test_driver;
using namespace std::chrono_literals;

namespace {

/// (window start, window end, value, timestamp) of every record on `topic` for `key`.
using updates = std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>>;

updates read_updates(topology_test_driver& d, const std::string& topic, std::int64_t difference_ms) {
  updates out;
  // The key layout has no window end; reading with the window size gives it back.
  using key_serde = sluice::time_windowed_serde<sluice::default_serde<std::string>>;
  for (auto& m : d.records(topic)) {
    const auto key = key_serde::deserialize(*m.key);
    out.emplace_back(key.window.start, key.window.start + difference_ms,
                     sluice::default_serde<std::int64_t>::deserialize(*m.value), m.timestamp);
  }
  d.records(topic).clear();
  return out;
}

}  // namespace

TEST(sliding_windows, count_creates_left_and_right_windows_and_drops_late_records) {
  sluice::streams_builder b;
  b.stream<std::string, std::string>("clicks")
      .group_by_key()
      .windowed_by(sluice::sliding_windows::of_time_difference_and_grace(10ms, 20ms))
      .count("clicks-sliding")
      .to_stream()
      .to("counts");
  topology_test_driver d(b.build());
  auto in = d.input_topic<std::string, std::string>("clicks");
  in.pipe("a", "", 10);  // its left window [0,10]
  EXPECT_EQ(read_updates(d, "counts", 10), (updates{{0, 10, 1, 10}}));
  in.pipe("a", "", 15);  // 10's right window [11,21] (15 is in it), then its left window [5,15] = 10 + 15
  EXPECT_EQ(read_updates(d, "counts", 10), (updates{{11, 21, 1, 15}, {5, 15, 2, 15}}));
  in.pipe("a", "", 25);  // 15's right window [16,26], its left window [15,25]
  EXPECT_EQ(read_updates(d, "counts", 10), (updates{{16, 26, 1, 25}, {15, 25, 2, 25}}));
  in.pipe("a", "", 40);  // 25's right window [26,36] would be empty: only [30,40]
  EXPECT_EQ(read_updates(d, "counts", 10), (updates{{30, 40, 1, 40}}));
  // Out of order (stream time 40, grace 20: windows ending before 20 are closed). 20 joins
  // [16,26], [15,25], [11,21] (newest first), gets its left window [10,20] = 10, 15, 20,
  // and its right window [21,31] with what is after it (25), without itself.
  in.pipe("a", "", 20);
  EXPECT_EQ(read_updates(d, "counts", 10),
            (updates{{16, 26, 2, 25}, {15, 25, 3, 25}, {11, 21, 2, 20}, {10, 20, 3, 20}, {21, 31, 1, 25}}));
  in.pipe("a", "", 5);  // 5 + 1 + 10 <= 40 - 20: even its right window is closed; dropped whole
  EXPECT_TRUE(d.records("counts").empty());
  // 12 is late for [5,15] and its own left window [2,12] (ends before 20), not for the
  // others: it updates [11,21] and [10,20] and creates its right window [13,23] (15, 20).
  in.pipe("a", "", 12);
  EXPECT_EQ(read_updates(d, "counts", 10), (updates{{11, 21, 3, 20}, {10, 20, 4, 20}, {13, 23, 2, 20}}));
  EXPECT_EQ(d.metrics().total("sluice_window_late_records_dropped_total"), 3);
  auto store = d.state_store<sluice::windowed_aggregate_store<std::string, std::int64_t>>("clicks-sliding");
  EXPECT_EQ(store.fetch("a", 21), (sluice::value_and_timestamp<std::int64_t>{1, 25}));
  EXPECT_EQ(store.fetch("a", 2), std::nullopt);
}

TEST(sliding_windows, records_earlier_than_the_time_difference_share_the_window_starting_at_zero) {
  sluice::streams_builder b;
  b.stream<std::string, std::string>("clicks")
      .group_by_key()
      .windowed_by(sluice::sliding_windows::of_time_difference_and_grace(10ms, 100ms))
      .count("clicks-sliding")
      .to_stream()
      .to("counts");
  topology_test_driver d(b.build());
  auto in = d.input_topic<std::string, std::string>("clicks");
  in.pipe("b", "", 3);  // [0,10] instead of [-7,3]
  EXPECT_EQ(read_updates(d, "counts", 10), (updates{{0, 10, 1, 3}}));
  in.pipe("b", "", 8);  // 3's right window [4,14], then [0,10]
  EXPECT_EQ(read_updates(d, "counts", 10), (updates{{4, 14, 1, 8}, {0, 10, 2, 8}}));
  in.pipe("b", "", 5);  // joins [4,14], gets its right window [6,16] = 8, then [0,10]
  EXPECT_EQ(read_updates(d, "counts", 10), (updates{{4, 14, 2, 8}, {6, 16, 1, 8}, {0, 10, 3, 8}}));
  in.pipe("b", "", 12);  // joins [6,16] and [4,14]; 8's right window [9,19]; its left window [2,12]
  EXPECT_EQ(read_updates(d, "counts", 10), (updates{{6, 16, 2, 12}, {4, 14, 3, 12}, {9, 19, 1, 12}, {2, 12, 4, 12}}));
}

TEST(sliding_windows, aggregate_seeds_the_left_window_with_the_previous_windows_aggregate) {
  sluice::streams_builder b;
  b.stream<std::string, std::int64_t>("amounts")
      .group_by_key()
      .windowed_by(sluice::sliding_windows::of_time_difference_with_no_grace(10ms))
      .aggregate([] { return std::int64_t{0}; },
                 [](const std::string&, std::int64_t v, std::int64_t sum) { return sum + v; }, "sums")
      .to_stream()
      .to("sums-out");
  topology_test_driver d(b.build());
  auto in = d.input_topic<std::string, std::int64_t>("amounts");
  in.pipe("c", 1, 10);
  in.pipe("c", 2, 15);
  in.pipe("c", 4, 18);
  EXPECT_EQ(
      read_updates(d, "sums-out", 10),
      (updates{{0, 10, 1, 10}, {11, 21, 2, 15}, {5, 15, 3, 15}, {11, 21, 6, 18}, {16, 26, 4, 18}, {8, 18, 7, 18}}));
}

TEST(sliding_windows, reduce_and_a_final_result_per_window_with_suppress) {
  sluice::streams_builder b;
  b.stream<std::string, std::int64_t>("amounts")
      .group_by_key()
      .windowed_by(sluice::sliding_windows::of_time_difference_with_no_grace(10ms))
      .reduce([](std::int64_t sum, std::int64_t v) { return sum + v; }, "sums")
      .suppress(sluice::until_window_closes())
      .to_stream()
      .to("final-sums");
  topology_test_driver d(b.build());
  auto in = d.input_topic<std::string, std::int64_t>("amounts");
  // A sliding window's end is inclusive, yet (as in Kafka Streams) it is due once stream
  // time reaches its end: with no grace, a window ending at a record's time comes out with it.
  in.pipe("c", 1, 10);  // [0,10], due at once
  in.pipe("c", 2, 15);  // [11,21], then [5,15], due at once
  in.pipe("c", 4, 18);  // [11,21], [16,26], then [8,18], due at once
  in.pipe("c", 8, 40);  // [30,40]; due by window end: [11,21], [16,26], [30,40]
  EXPECT_EQ(
      read_updates(d, "final-sums", 10),
      (updates{{0, 10, 1, 10}, {5, 15, 3, 15}, {8, 18, 7, 18}, {11, 21, 6, 18}, {16, 26, 4, 18}, {30, 40, 8, 40}}));
}

TEST(sliding_windows, a_time_difference_of_zero_counts_the_records_of_each_millisecond) {
  // Kafka Streams accepts a time difference of 0: windows [t, t]. With no grace a window
  // closes as soon as stream time passes it; with grace, a record of an earlier millisecond
  // still joins its window until then.
  sluice::streams_builder b;
  b.stream<std::string, std::string>("clicks")
      .group_by_key()
      .windowed_by(sluice::sliding_windows::of_time_difference_and_grace(0ms, 5ms))
      .count("clicks-same-ms")
      .to_stream()
      .to("counts");
  topology_test_driver d(b.build());
  auto in = d.input_topic<std::string, std::string>("clicks");
  in.pipe("a", "", 10);
  in.pipe("a", "", 10);
  EXPECT_EQ(read_updates(d, "counts", 0), (updates{{10, 10, 1, 10}, {10, 10, 2, 10}}));
  in.pipe("a", "", 11);  // its own window only: 10 is not within 0 ms of it
  EXPECT_EQ(read_updates(d, "counts", 0), (updates{{11, 11, 1, 11}}));
  in.pipe("a", "", 10);  // out of order, within grace: joins [10,10], not [11,11]
  EXPECT_EQ(read_updates(d, "counts", 0), (updates{{10, 10, 3, 10}}));
  in.pipe("b", "", 20);  // stream time 20: windows ending before 15 are closed
  EXPECT_EQ(read_updates(d, "counts", 0), (updates{{20, 20, 1, 20}}));
  in.pipe("a", "", 12);  // late: dropped
  EXPECT_TRUE(d.records("counts").empty());
  EXPECT_EQ(d.metrics().total("sluice_window_late_records_dropped_total"), 1);
  auto store = d.state_store<sluice::windowed_aggregate_store<std::string, std::int64_t>>("clicks-same-ms");
  EXPECT_EQ(store.fetch("b", 20), (sluice::value_and_timestamp<std::int64_t>{1, 20}));

  // Without grace the window of the newest millisecond is kept (retention is at least 1 ms).
  sluice::streams_builder nb;
  nb.stream<std::string, std::string>("clicks")
      .group_by_key()
      .windowed_by(sluice::sliding_windows::of_time_difference_with_no_grace(0ms))
      .count("clicks-no-grace")
      .to_stream()
      .to("counts");
  topology_test_driver no_grace(nb.build());
  auto nin = no_grace.input_topic<std::string, std::string>("clicks");
  nin.pipe("a", "", 30);
  nin.pipe("a", "", 30);
  nin.pipe("a", "", 29);  // late at once
  EXPECT_EQ(read_updates(no_grace, "counts", 0), (updates{{30, 30, 1, 30}, {30, 30, 2, 30}}));
  auto kept = no_grace.state_store<sluice::windowed_aggregate_store<std::string, std::int64_t>>("clicks-no-grace");
  EXPECT_EQ(kept.fetch("a", 30), (sluice::value_and_timestamp<std::int64_t>{2, 30}));
  EXPECT_THROW(sluice::sliding_windows::of_time_difference_with_no_grace(-1ms), sluice::error);
}
