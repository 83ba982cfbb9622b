// Session-window aggregations (issue 16) through the TopologyTestDriver, against
// hand-computed expectations with Kafka Streams 3.9's KStreamSessionWindowAggregate: a
// record joins every session of its key within the inactivity gap, the sessions it
// bridges merge (each merged-away session comes out as a tombstone keyed with its own
// window), every update comes out at its session's end, and a record whose merged session
// ends before stream time - grace - gap is dropped (a session ending at e can still grow
// until e + gap, so it closes at e + gap + grace).
#include <gtest/gtest.h>

#include <optional>
#include <tuple>

#include "sluice/sluice.hpp"
#include "sluice/test_driver.hpp"
#include "windowed_output.hpp"

using sluice::testing::topology_test_driver;
using namespace std::chrono_literals;

namespace {

using sluice::test::read_sessions;
using sluice::test::session_updates;

/// clicks counted per session (gap 5 ms, grace 10 ms) into the store "sessions", every
/// update to "session-counts".
sluice::topology session_counts() {
  sluice::streams_builder b;
  b.stream<std::string, std::string>("clicks")
      .group_by_key()
      .windowed_by(sluice::session_windows::of_inactivity_gap_and_grace(5ms, 10ms))
      .count("sessions")
      .to_stream()
      .to("session-counts");
  return b.build();
}

}  // namespace

TEST(session_windows, count_merges_sessions_a_record_bridges_and_drops_late_records) {
  topology_test_driver d(session_counts());
  auto in = d.input_topic<std::string, std::string>("clicks");
  in.pipe("a", "", 0);   // new session [0,0]
  in.pipe("a", "", 3);   // within 5 of [0,0]: merged into [0,3]
  in.pipe("a", "", 20);  // a new session [20,20]
  in.pipe("a", "", 10);  // stream time 20, grace 10, gap 5: [10,10] ends at 10 >= 5, accepted
  in.pipe("a", "", 14);  // merges [10,10] into [10,14]
  in.pipe("a", "", 16);  // bridges [10,14] and [20,20]: [10,20]
  in.pipe("a", "", 2);   // would merge into [0,3], which ends before 20 - 10 - 5: dropped
  in.pipe("b", "", 30);  // another key: its own session
  using u = session_updates<std::int64_t>;
  EXPECT_EQ(read_sessions<std::int64_t>(d, "session-counts"), (u{{"a", 0, 0, 1, 0},
                                                                 {"a", 0, 0, std::nullopt, 0},
                                                                 {"a", 0, 3, 2, 3},
                                                                 {"a", 20, 20, 1, 20},
                                                                 {"a", 10, 10, 1, 10},
                                                                 {"a", 10, 10, std::nullopt, 10},
                                                                 {"a", 10, 14, 2, 14},
                                                                 {"a", 10, 14, std::nullopt, 14},
                                                                 {"a", 20, 20, std::nullopt, 20},
                                                                 {"a", 10, 20, 4, 20},
                                                                 {"b", 30, 30, 1, 30}}));
  EXPECT_EQ(d.metrics().total("sluice_window_late_records_dropped_total"), 1);
  // The store keeps each session under its end, with its start.
  auto store = d.state_store<sluice::session_aggregate_store<std::string, std::int64_t>>("sessions");
  EXPECT_EQ(store.fetch("a", 20), (sluice::session_value<std::int64_t>{4, 10}));
  EXPECT_EQ(store.fetch("a", 14), std::nullopt);
  // [0,3] left the store's retention (gap + grace = 15 ms) once b's session ended at 30.
  EXPECT_EQ(store.fetch("a", 3), std::nullopt);
}

TEST(session_windows, a_session_closes_at_its_end_plus_gap_plus_grace_as_in_kafka_streams) {
  topology_test_driver d(session_counts());
  auto in = d.input_topic<std::string, std::string>("clicks");
  in.pipe("a", "", 0);
  in.pipe("b", "", 20);  // stream time 20: sessions ending before 20 - 10 - 5 = 5 are closed
  in.pipe("a", "", 7);   // [7,7] ends at 7 >= 5: accepted (it would be late by end + grace alone)
  in.pipe("a", "", 4);   // merges [7,7] into [4,7]; [0,0] has left retention (gap + grace)
  in.pipe("c", "", 40);  // stream time 40: closed below 25
  in.pipe("a", "", 10);  // [10,10] ends at 10 < 25: dropped
  using u = session_updates<std::int64_t>;
  EXPECT_EQ(read_sessions<std::int64_t>(d, "session-counts"), (u{{"a", 0, 0, 1, 0},
                                                                 {"b", 20, 20, 1, 20},
                                                                 {"a", 7, 7, 1, 7},
                                                                 {"a", 7, 7, std::nullopt, 7},
                                                                 {"a", 4, 7, 2, 7},
                                                                 {"c", 40, 40, 1, 40}}));
  EXPECT_EQ(d.metrics().total("sluice_window_late_records_dropped_total"), 1);
}

TEST(session_windows, aggregate_merges_sessions_with_the_merger_starting_from_the_initializer) {
  sluice::streams_builder b;
  b.stream<std::string, std::string>("letters")
      .group_by_key()
      .windowed_by(sluice::session_windows::of_inactivity_gap_and_grace(5ms, 20ms))
      .aggregate([] { return std::string(); },
                 [](const std::string&, const std::string& v, std::string agg) { return agg + v; },
                 [](const std::string&, std::string agg, std::string session) { return agg + "+" + session; },
                 "letter-sessions")
      .to_stream()
      .to("letters-out");
  topology_test_driver d(b.build());
  auto in = d.input_topic<std::string, std::string>("letters");
  in.pipe("c", "x", 0);
  in.pipe("c", "y", 10);  // 10 apart: two sessions
  in.pipe("c", "z", 5);   // within 5 of both: merger("", "x") = "+x", merger("+x", "y") = "+x+y", then + "z"
  using u = session_updates<std::string>;
  EXPECT_EQ(read_sessions<std::string>(d, "letters-out"), (u{{"c", 0, 0, "x", 0},
                                                             {"c", 10, 10, "y", 10},
                                                             {"c", 0, 0, std::nullopt, 0},
                                                             {"c", 10, 10, std::nullopt, 10},
                                                             {"c", 0, 10, "+x+yz", 10}}));
}

TEST(session_windows, reduce_and_the_session_key_layout_on_the_output_topic) {
  sluice::streams_builder b;
  b.stream<std::string, std::int64_t>("amounts")
      .group_by_key()
      .windowed_by(sluice::session_windows::of_inactivity_gap_with_no_grace(5ms))
      .reduce([](std::int64_t sum, std::int64_t v) { return sum + v; }, "amount-sessions")
      .to_stream()
      .to("amount-sessions-out");
  topology_test_driver d(b.build());
  auto in = d.input_topic<std::string, std::int64_t>("amounts");
  in.pipe("k", 1, 7);
  in.pipe("k", 2, 9);
  auto& out = d.records("amount-sessions-out");
  ASSERT_EQ(out.size(), 3u);
  // SessionWindowedSerializer: the key's bytes, then end and start as 8 bytes big-endian.
  EXPECT_EQ(*out[2].key,
            std::string("k") + std::string("\0\0\0\0\0\0\0\x09", 8) + std::string("\0\0\0\0\0\0\0\x07", 8));
  EXPECT_EQ(sluice::default_serde<std::int64_t>::deserialize(*out[2].value), 3);
  EXPECT_FALSE(out[1].value);  // [7,7] merged away: a tombstone
  out.clear();
}
