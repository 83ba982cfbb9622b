// Windowed aggregations (issue 16) through the TopologyTestDriver, against hand-computed
// expectations with Kafka Streams 3.9's rules: windows aligned to the epoch, a record is
// late for a window when window end + grace <= the highest timestamp seen, each update of
// a window is emitted at the highest timestamp folded into it, windowed keys in the
// TimeWindowedSerializer layout.
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "sluice/sluice.hpp"
#include "sluice/state/big_endian.hpp"
#include "sluice/test_driver.hpp"
#include "windowed_output.hpp"

using sluice::testing::topology_test_driver;
using namespace std::chrono_literals;

namespace {

using sluice::test::windowed_records;
using counts = sluice::test::window_updates<std::int64_t>;

}  // namespace

TEST(windowed_aggregation, tumbling_count_with_grace_emits_every_update_and_drops_late_records) {
  sluice::streams_builder b;
  b.stream<std::string, std::string>("clicks")
      .group_by_key()
      .windowed_by(sluice::time_windows::of_size_and_grace(10ms, 5ms))
      .count("clicks-per-window")
      .to_stream()
      .to("counts");
  topology_test_driver d(b.build());
  auto in = d.input_topic<std::string, std::string>("clicks");
  in.pipe("a", "", 1);
  in.pipe("a", "", 7);
  in.pipe("a", "", 12);  // stream time 12: windows ending at or before 12 - 5 = 7 are closed
  in.pipe("a", "", 3);   // [0,10) ends at 10 > 7: still open; emitted at max(3, 7) = 7
  in.pipe("a", "", 16);  // stream time 16: [0,10) closes (10 + 5 <= 16)
  in.pipe("a", "", 9);   // late for [0,10): dropped
  in.pipe("b", "", 15);
  in.pipe("a", "", 25);  // stream time 25: [10,20) closes (20 + 5 <= 25, the boundary counts as late)
  in.pipe("a", "", 19);  // late for [10,20): dropped
  EXPECT_EQ(windowed_records<std::int64_t>(d, "counts"), (counts{{"a", 0, 1, 1},
                                                                 {"a", 0, 2, 7},
                                                                 {"a", 10, 1, 12},
                                                                 {"a", 0, 3, 7},
                                                                 {"a", 10, 2, 16},
                                                                 {"b", 10, 1, 15},
                                                                 {"a", 20, 1, 25}}));
  EXPECT_EQ(d.metrics().total("sluice_window_late_records_dropped_total"), 2);
  // The window store is inspectable: value and the timestamp of its latest update.
  auto store = d.state_store<sluice::windowed_aggregate_store<std::string, std::int64_t>>("clicks-per-window");
  EXPECT_EQ(store.fetch("a", 10), (sluice::value_and_timestamp<std::int64_t>{2, 16}));
  EXPECT_EQ(store.fetch("a", 20), (sluice::value_and_timestamp<std::int64_t>{1, 25}));
}

TEST(windowed_aggregation, hopping_aggregate_updates_every_window_a_record_falls_in) {
  sluice::streams_builder b;
  b.stream<std::string, std::int64_t>("amounts")
      .group_by_key()
      .windowed_by(sluice::time_windows::of_size_with_no_grace(10ms).advance_by(5ms))
      .aggregate([] { return std::int64_t{0}; },
                 [](const std::string&, std::int64_t v, std::int64_t sum) { return sum + v; }, "sums")
      .to_stream()
      .to("sums-out");
  topology_test_driver d(b.build());
  auto in = d.input_topic<std::string, std::int64_t>("amounts");
  in.pipe("a", 1, 7);      // windows [0,10) and [5,15)
  in.pipe("a", 10, 12);    // [5,15) and [10,20); stream time 12
  in.pipe("a", 100, 4);    // only [0,10), which ended at 10 <= 12: late, dropped
  in.pipe("a", 1000, 14);  // [5,15) (15 > 14, open) and [10,20)
  in.pipe("a", 5, 15);     // [10,20) and [15,25); [5,15) is not one of its windows
  EXPECT_EQ(windowed_records<std::int64_t>(d, "sums-out"), (counts{{"a", 0, 1, 7},
                                                                   {"a", 5, 1, 7},
                                                                   {"a", 5, 11, 12},
                                                                   {"a", 10, 10, 12},
                                                                   {"a", 5, 1011, 14},
                                                                   {"a", 10, 1010, 14},
                                                                   {"a", 10, 1015, 15},
                                                                   {"a", 15, 5, 15}}));
  EXPECT_EQ(d.metrics().total("sluice_window_late_records_dropped_total"), 1);
}

TEST(windowed_aggregation, windows_start_at_multiples_of_the_advance_counted_from_the_epoch) {
  sluice::streams_builder b;
  b.stream<std::string, std::string>("in")
      .group_by_key()
      .windowed_by(sluice::time_windows::of_size_with_no_grace(60s).advance_by(20s))
      .count("c")
      .to_stream()
      .to("out");
  topology_test_driver d(b.build());
  // 2023-11-14T22:13:20.123Z: the minute windows containing it start on 20 s boundaries.
  d.input_topic<std::string, std::string>("in").pipe("k", "", 1'700'000'000'123);
  auto r = windowed_records<std::int64_t>(d, "out");
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(std::get<1>(r[0]), 1'699'999'960'000);
  EXPECT_EQ(std::get<1>(r[1]), 1'699'999'980'000);
  EXPECT_EQ(std::get<1>(r[2]), 1'700'000'000'000);
}

TEST(windowed_aggregation, windowed_reduce_after_group_by_repartitions_and_keys_out_in_the_time_windowed_layout) {
  sluice::streams_builder b;
  b.stream<std::string, std::int64_t>("scores")                                           // key: user, value: score
      .group_by([](const std::string& user, std::int64_t) { return user.substr(0, 1); })  // team
      .windowed_by(sluice::time_windows::of_size_with_no_grace(100ms))
      .reduce([](std::int64_t best, std::int64_t v) { return std::max(best, v); }, "best-per-team")
      .to_stream()
      .to("best");
  auto t = b.build();
  topology_test_driver d(std::move(t));
  auto in = d.input_topic<std::string, std::int64_t>("scores");
  in.pipe("ann", 5, 10);
  in.pipe("amy", 3, 20);
  in.pipe("al", 9, 150);
  EXPECT_EQ(windowed_records<std::int64_t>(d, "best"), (counts{{"a", 0, 5, 10}, {"a", 0, 5, 20}, {"a", 100, 9, 150}}));
  EXPECT_EQ(d.records(d.application_id() + "-best-per-team-repartition").size(), 3u);
  // Kafka Streams' TimeWindowedSerializer: the key's bytes, then the start as 8 bytes big-endian.
  in.pipe("al", 1, 160);
  auto& raw = d.records("best");
  ASSERT_EQ(raw.size(), 1u);
  EXPECT_EQ(*raw.front().key, std::string("a\0\0\0\0\0\0\0\x64", 9));
  EXPECT_EQ(*raw.front().value, std::string("\0\0\0\0\0\0\0\x09", 8));
}

TEST(windowed_aggregation, describe_and_dot_show_the_window_store_and_its_changelog) {
  sluice::streams_builder b;
  b.stream<std::string, std::string>("in")
      .group_by_key()
      .windowed_by(sluice::time_windows::of_size_with_no_grace(1min))
      .count("per-minute")
      .to_stream()
      .to("out");
  auto t = b.build();
  const auto text = t.describe();
  EXPECT_NE(text.find("Processor: KSTREAM-AGGREGATE-0000000001 (stores: [per-minute])"), std::string::npos) << text;
  EXPECT_NE(text.find("<application.id>-per-minute-changelog"), std::string::npos) << text;
  EXPECT_NE(t.to_dot().find("store:per-minute"), std::string::npos);
  topology_test_driver d(std::move(t));
  d.input_topic<std::string, std::string>("in").pipe("k", "", 5);
  // The store's layout record (its segment interval), the window, then at the commit the
  // layout record again with the aggregation's record time (5), which a restart goes on from.
  const auto& changelog = d.records(d.application_id() + "-per-minute-changelog");
  ASSERT_EQ(changelog.size(), 3u);
  EXPECT_EQ(changelog[0].key, std::string(4, '\0'));
  EXPECT_EQ(changelog[2].key, std::string(4, '\0'));
  ASSERT_TRUE(changelog[2].value && changelog[2].value->size() == 16);
  EXPECT_EQ(sluice::state::read_u64(*changelog[2].value, 8), 5u);
}

TEST(windowed_aggregation, invalid_windows_are_refused_with_what_to_change) {
  EXPECT_THROW(sluice::time_windows::of_size_with_no_grace(0ms), sluice::error);
  EXPECT_THROW(sluice::time_windows::of_size_and_grace(10ms, -1ms), sluice::error);
  try {
    (void)sluice::time_windows::of_size_with_no_grace(10ms).advance_by(11ms);
    FAIL() << "expected a refusal";
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.code(), sluice::errc::invalid_topology);
    EXPECT_NE(std::string(e.what()).find("at most the window size (10 ms)"), std::string::npos) << e.what();
  }
}

TEST(windowed_aggregation, the_time_windowed_key_serde_round_trips_and_reads_without_a_window_size) {
  using serde = sluice::default_serde<sluice::windowed<std::string>>;
  std::string bytes;
  serde::serialize({"ab", {5, 15}}, bytes);
  EXPECT_EQ(bytes, std::string("ab\0\0\0\0\0\0\0\x05", 10));
  auto back = serde::deserialize(bytes);
  EXPECT_EQ(back.key, "ab");
  EXPECT_EQ(back.window.start, 5);
  EXPECT_EQ(back.window.end, std::numeric_limits<std::int64_t>::max());
  using sized = sluice::time_windowed_serde<sluice::string_serde, 10>;
  EXPECT_EQ(sized::deserialize(bytes).window, (sluice::time_window{5, 15}));
  EXPECT_THROW(serde::deserialize("short"), sluice::serialization_error);
}

TEST(windowed_aggregation, windowed_keys_go_to_the_partition_of_their_key_as_kafka_streams_windowed_partitioner) {
  // Kafka Streams partitions a windowed sink by the key without its window
  // (WindowedStreamPartitioner): every window of a key lands in the key's partition, the
  // one a Java producer would pick for the key. Session keys likewise.
  sluice::streams_builder b;
  auto by_key = b.stream<std::string, std::string>("clicks").group_by_key();
  by_key.windowed_by(sluice::time_windows::of_size_with_no_grace(10ms)).count("per-window").to_stream().to("windows");
  by_key.windowed_by(sluice::session_windows::of_inactivity_gap_with_no_grace(5ms))
      .count("per-session")
      .to_stream()
      .to("sessions");
  constexpr std::int32_t partitions = 4;
  topology_test_driver d(b.build(), {}, {.partitions = partitions});
  auto in = d.input_topic<std::string, std::string>("clicks");
  for (std::int64_t t = 0; t < 400; t += 7)
    for (const char* key : {"a", "b", "c", "d", "e", "f"}) in.pipe(key, "", t);
  for (const auto* topic : {"windows", "sessions"}) {
    const auto& out = d.records(topic);
    ASSERT_GT(out.size(), 100u) << topic;
    std::set<std::int32_t> used;
    for (const auto& r : out) {
      const std::string key = r.key->substr(0, 1);
      EXPECT_EQ(r.partition, sluice::detail::murmur2_partition(key, partitions)) << topic << " key " << key;
      used.insert(r.partition);
    }
    EXPECT_GT(used.size(), 1u) << topic;
  }
}
