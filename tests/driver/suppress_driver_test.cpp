// ktable::suppress (issue 16) through the TopologyTestDriver, against hand-computed
// expectations with Kafka Streams 3.9's rules (KTableSuppressProcessor): the suppression's
// stream time is the highest timestamp of the updates it received; until_window_closes
// emits a window once window end + grace <= that time, until_time_limit a key once the
// timestamp of the update that first buffered it + the limit <= that time; due keys come
// out ordered by that time, then by the key's serialized bytes, each with the timestamp and
// headers of its latest update.
#include <gtest/gtest.h>

#include <tuple>

#include "sluice/sluice.hpp"
#include "sluice/test_driver.hpp"
#include "windowed_output.hpp"

using sluice::testing::topology_test_driver;
using namespace std::chrono_literals;

namespace {

using sluice::test::windowed_records;

/// (key, value, timestamp) of every record on `topic`.
std::vector<std::tuple<std::string, std::int64_t, std::int64_t>> records(topology_test_driver& d,
                                                                         const std::string& topic) {
  std::vector<std::tuple<std::string, std::int64_t, std::int64_t>> out;
  for (auto& r : d.output_topic<std::string, std::int64_t>(topic).read_all())
    out.emplace_back(r.key, r.value, r.timestamp);
  return out;
}

using windowed_counts = sluice::test::window_updates<std::int64_t>;
using counts = std::vector<std::tuple<std::string, std::int64_t, std::int64_t>>;

sluice::topology suppressed_tumbling_count(sluice::buffer_config buffer = {}) {
  sluice::streams_builder b;
  b.stream<std::string, std::string>("clicks")
      .group_by_key()
      .windowed_by(sluice::time_windows::of_size_and_grace(10ms, 5ms))
      .count("clicks-per-window")
      .suppress(sluice::until_window_closes(buffer))
      .to_stream()
      .to("final-counts");
  return b.build();
}

sluice::topology count_until_time_limit(std::chrono::milliseconds limit, sluice::buffer_config buffer) {
  sluice::streams_builder b;
  b.stream<std::string, std::string>("clicks")
      .group_by_key()
      .count("clicks")
      .suppress(sluice::until_time_limit(limit, buffer))
      .to_stream()
      .to("rate-limited-counts");
  return b.build();
}

}  // namespace

TEST(suppress, until_window_closes_emits_one_final_result_per_window_after_grace) {
  topology_test_driver d(suppressed_tumbling_count());
  auto in = d.input_topic<std::string, std::string>("clicks");
  in.pipe("a", "", 1);
  in.pipe("a", "", 7);
  in.pipe("b", "", 8);
  in.pipe("a", "", 12);  // stream time 12: [0,10) closes at 10 + 5 = 15
  EXPECT_TRUE((d.output_topic<sluice::windowed<std::string>, std::int64_t>("final-counts").empty()));
  in.pipe("a", "", 3);   // within grace: a's [0,10) becomes 3, its update at max(3, 7) = 7
  in.pipe("b", "", 15);  // stream time 15: a's and b's [0,10) close, "a" before "b"
  in.pipe("a", "", 9);   // late for [0,10): dropped by the aggregation, nothing changes
  in.pipe("a", "", 24);  // stream time 24: [10,20) closes at 25, not yet
  in.pipe("a", "", 25);  // now: a's [10,20) and b's [10,20); a's [20,30) stays buffered
  EXPECT_EQ(windowed_records<std::int64_t>(d, "final-counts"),
            (windowed_counts{{"a", 0, 3, 7}, {"b", 0, 1, 8}, {"a", 10, 1, 12}, {"b", 10, 1, 15}}));
  EXPECT_EQ(d.metrics().total("sluice_window_late_records_dropped_total"), 1);
  EXPECT_EQ(d.metrics().total("sluice_suppression_emitted_total"), 4);
}

TEST(suppress, until_window_closes_without_grace_emits_when_stream_time_reaches_the_window_end) {
  sluice::streams_builder b;
  b.stream<std::string, std::int64_t>("amounts")
      .group_by_key()
      .windowed_by(sluice::time_windows::of_size_with_no_grace(10ms).advance_by(5ms))
      .reduce([](std::int64_t sum, std::int64_t v) { return sum + v; }, "sums")
      .suppress(sluice::until_window_closes())
      .to_stream()
      .to("final-sums");
  topology_test_driver d(b.build());
  auto in = d.input_topic<std::string, std::int64_t>("amounts");
  in.pipe("a", 1, 1);    // [0,10)
  in.pipe("a", 2, 6);    // [0,10) and [5,15)
  in.pipe("a", 4, 9);    // [0,10) and [5,15); stream time 9
  in.pipe("a", 8, 10);   // [5,15) and [10,20); stream time 10 closes [0,10) (end 10 <= 10)
  in.pipe("a", 16, 4);   // late for [0,10) (its only window): dropped
  in.pipe("a", 32, 14);  // [5,15) and [10,20)
  in.pipe("a", 64, 20);  // [15,25) and [20,30); closes [5,15) and [10,20)
  EXPECT_EQ(windowed_records<std::int64_t>(d, "final-sums"),
            (windowed_counts{{"a", 0, 7, 9}, {"a", 5, 46, 14}, {"a", 10, 40, 14}}));
}

TEST(suppress, a_final_result_carries_the_headers_of_its_windows_latest_update) {
  topology_test_driver d(suppressed_tumbling_count());
  auto in = d.input_topic<std::string, std::string>("clicks");
  in.pipe("a", "", 1, sluice::headers{{"trace", "first"}});
  in.pipe("a", "", 4, sluice::headers{{"trace", "second"}, {"empty", std::nullopt}});
  in.pipe("a", "", 20);
  auto out = d.output_topic<sluice::windowed<std::string>, std::int64_t>("final-counts").read_all();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].value, 2);
  EXPECT_EQ(out[0].timestamp, 4);
  EXPECT_EQ(out[0].headers, (sluice::headers{{"trace", "second"}, {"empty", std::nullopt}}));
}

TEST(suppress, until_time_limit_emits_a_keys_latest_value_once_its_first_buffered_update_is_old_enough) {
  topology_test_driver d(count_until_time_limit(10ms, {}));
  auto in = d.input_topic<std::string, std::string>("clicks");
  in.pipe("a", "", 0);   // a buffered at time 0
  in.pipe("a", "", 3);   // a = 2, still due at 0 + 10 (the buffer time does not reset)
  in.pipe("b", "", 5);   // b buffered at 5
  in.pipe("a", "", 10);  // stream time 10: a (time 0) comes out with its latest value
  in.pipe("a", "", 12);  // a buffered again, at 12
  in.pipe("b", "", 15);  // stream time 15: b (time 5)
  in.pipe("c", "", 2);   // out of order: buffered at 2, already due at stream time 15
  in.pipe("a", "", 30);  // stream time 30: a (time 12)
  EXPECT_EQ(records(d, "rate-limited-counts"), (counts{{"a", 3, 10}, {"b", 2, 15}, {"c", 1, 2}, {"a", 5, 30}}));
}

TEST(suppress, a_full_buffer_that_emits_early_emits_its_oldest_keys_first) {
  topology_test_driver d(count_until_time_limit(1h, {.max_records = 2, .when_full = sluice::buffer_full::emit_early}));
  auto in = d.input_topic<std::string, std::string>("clicks");
  in.pipe("a", "", 1);
  in.pipe("b", "", 2);
  in.pipe("a", "", 3);  // replaces a's entry: still 2 keys
  in.pipe("c", "", 4);  // 3 keys: the oldest (a, buffered at 1) comes out early
  in.pipe("d", "", 5);  // then b
  in.pipe("c", "", 6);  // replaces c's entry: 2 keys, nothing
  EXPECT_EQ(records(d, "rate-limited-counts"), (counts{{"a", 2, 3}, {"b", 1, 2}}));
}

TEST(suppress, a_full_buffer_that_shuts_down_stops_the_job_naming_the_buffer_and_its_limit) {
  topology_test_driver d(suppressed_tumbling_count({.max_records = 2}));
  auto in = d.input_topic<std::string, std::string>("clicks");
  in.pipe("a", "", 1);
  in.pipe("b", "", 2);
  in.pipe("a", "", 3);
  try {
    in.pipe("c", "", 4);
    FAIL() << "a third key fit into a buffer of two";
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.code(), sluice::errc::state);
    EXPECT_NE(std::string(e.what()).find("suppression buffer 'KTABLE-SUPPRESS-STATE-STORE-"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("3/2 records"), std::string::npos) << e.what();
  }
}

namespace {

/// A table suppressed until_time_limit(10 ms) with `buffer`, whose key k gets a prior value
/// of 1,000 bytes held in the buffer's index while its buffered update is 1 byte: x (1 byte)
/// is buffered at 100; k = 1,000 bytes at 0 is due at once (0 <= 100 - 10) and emitted, so it
/// is never held; k = "s" at 100 is held with that prior value. Without the prior value the
/// buffer holds about 70 bytes, with it over 1,000.
sluice::topology table_until_time_limit(sluice::buffer_config buffer) {
  sluice::streams_builder b;
  b.table<std::string, std::string>("limits", "limits-store")
      .suppress(sluice::until_time_limit(10ms, buffer).with_name("held"))
      .to_stream()
      .to("out");
  return b.build();
}

using text_updates = std::vector<std::pair<std::string, std::optional<std::string>>>;

text_updates text_records(topology_test_driver& d) {
  text_updates out;
  for (auto& r : d.output_topic<std::string, std::optional<std::string>>("out").read_all())
    out.emplace_back(r.key, r.value);
  return out;
}

}  // namespace

// max_bytes counts the prior values the buffer keeps with its keys (Kafka Streams' buffer
// size counts them too): a buffer whose entries fit but whose prior values do not is full.
TEST(suppress, a_buffers_byte_limit_counts_the_prior_values_it_keeps_and_shuts_down) {
  topology_test_driver d(table_until_time_limit({.max_bytes = 500}));
  auto in = d.input_topic<std::string, std::string>("limits");
  const std::string big(1000, 'v');
  in.pipe("x", "x", 100);
  in.pipe("k", big, 0);
  EXPECT_EQ(text_records(d), (text_updates{{"k", big}}));
  try {
    in.pipe("k", "s", 100);
    FAIL() << "a 1,000-byte prior value fit into a buffer of 500 bytes";
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.code(), sluice::errc::state);
    EXPECT_NE(std::string(e.what()).find("suppression buffer 'held-store' is full: 2/unlimited records"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("/500 bytes"), std::string::npos) << e.what();
  }
}

TEST(suppress, a_buffers_byte_limit_counts_the_prior_values_it_keeps_and_emits_early) {
  topology_test_driver d(table_until_time_limit({.max_bytes = 500, .when_full = sluice::buffer_full::emit_early}));
  auto in = d.input_topic<std::string, std::string>("limits");
  const std::string big(1000, 'v');
  in.pipe("x", "x", 100);
  in.pipe("k", big, 0);
  // k then x are due at 100; k comes first (its key sorts first), and then the buffer fits.
  in.pipe("k", "s", 100);
  EXPECT_EQ(text_records(d), (text_updates{{"k", big}, {"k", "s"}}));
}

TEST(suppress, until_window_closes_is_refused_where_no_window_closes) {
  sluice::streams_builder b;
  auto counts = b.stream<std::string, std::string>("clicks").group_by_key().count("clicks");
  try {
    counts.suppress(sluice::until_window_closes());
    FAIL() << "until_window_closes accepted a table without windows";
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.code(), sluice::errc::invalid_topology);
    EXPECT_NE(std::string(e.what()).find("not windowed"), std::string::npos) << e.what();
  }
  try {
    sluice::until_window_closes({.max_records = 10, .when_full = sluice::buffer_full::emit_early});
    FAIL() << "until_window_closes accepted a buffer that emits early";
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.code(), sluice::errc::invalid_topology);
  }
}

TEST(suppress, the_buffer_is_a_changelogged_store_named_as_in_kafka_streams) {
  sluice::streams_builder b;
  b.stream<std::string, std::string>("clicks")
      .group_by_key()
      .windowed_by(sluice::time_windows::of_size_and_grace(10ms, 0ms))
      .count("per-window")
      .suppress(sluice::until_window_closes().with_name("final"))
      .to_stream()
      .to("final-counts");
  topology_test_driver d(b.build());
  auto in = d.input_topic<std::string, std::string>("clicks");
  in.pipe("a", "", 1);
  in.pipe("a", "", 10);  // closes [0,10): its entry is written, then deleted from the buffer
  auto& log = d.records(d.application_id() + "-final-store-changelog");
  // a's [0,10): index and entry put; a's [10,20): index and entry put; then a's [0,10)
  // closes: its index and entry deleted.
  ASSERT_EQ(log.size(), 6u);
  std::size_t tombstones = 0;
  for (const auto& m : log) tombstones += m.value ? 0 : 1;
  EXPECT_EQ(tombstones, 2u);
}

// Session windows (Kafka Streams 3.9): a session's buffer time is its end (its last record's
// timestamp) and it is final once stream time reaches end + inactivity gap + grace (a session
// can grow until end + gap); the tombstones of merged-away sessions replace their buffered
// value and are dropped, so each final session comes out once.
TEST(suppress, until_window_closes_emits_each_final_session_once_after_gap_plus_grace) {
  sluice::streams_builder b;
  b.stream<std::string, std::string>("clicks")
      .group_by_key()
      .windowed_by(sluice::session_windows::of_inactivity_gap_and_grace(10ms, 5ms))
      .count("sessions")
      .suppress(sluice::until_window_closes())
      .to_stream()
      .to("final-sessions");
  topology_test_driver d(b.build());
  auto in = d.input_topic<std::string, std::string>("clicks");
  in.pipe("a", "", 0);    // a [0,0] = 1, buffered at 0
  in.pipe("a", "", 5);    // a [0,0] tombstone (keeps buffer time 0), a [0,5] = 2 at 5
  in.pipe("b", "", 12);   // b [12,12] = 1
  in.pipe("c", "", 19);   // c [19,19] = 1; due up to 19 - 15 = 4: a [0,0]'s tombstone (dropped); a [0,5] waits
  in.pipe("c", "", 20);   // c [19,19] tombstone, c [19,20] = 2; due up to 5: a [0,5] = 2 (at 5), exactly on its bound
  in.pipe("b", "", 26);   // b [26,26] = 1 (14 after b's session: a new one); due up to 11: b [12,12] waits
  in.pipe("a", "", 27);   // a [27,27] = 1; due up to 12: b [12,12] = 1 exactly on its bound
  in.pipe("d", "", 100);  // due up to 85: c [19,19]'s tombstone (dropped), c [19,20] = 2, b [26,26], a [27,27]
  const sluice::test::session_updates<std::int64_t> expected = {
      {"a", 0, 5, 2, 5}, {"b", 12, 12, 1, 12}, {"c", 19, 20, 2, 20}, {"b", 26, 26, 1, 26}, {"a", 27, 27, 1, 27},
  };
  EXPECT_EQ(sluice::test::read_sessions<std::int64_t>(d, "final-sessions"), expected);
}
