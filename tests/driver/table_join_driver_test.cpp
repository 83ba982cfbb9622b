// Table–table joins (issue 16) through the TopologyTestDriver, against hand-computed
// expectations with Kafka Streams 3.9's KTableKTableInnerJoin / LeftJoin / RightJoin /
// OuterJoin: an update on either side looks up the other side's current value; a deletion
// on one side deletes the inner result when the other side is present, and a left/outer
// row with nothing left on either side; a deletion of a key neither the table nor the join
// had comes out only where Kafka Streams forwards it (the inner join with the other side
// present, the right side of a left join).
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "sluice/sluice.hpp"
#include "sluice/state/big_endian.hpp"
#include "sluice/test_driver.hpp"
#include "sluice/windows.hpp"

using sluice::testing::topology_test_driver;

namespace {

using text = std::optional<std::string>;
/// (key, value or nullopt for a tombstone, timestamp).
using updates = std::vector<std::tuple<std::string, text, std::int64_t>>;

std::string show(const text& v) { return v ? *v : "null"; }

/// `v` as 8 bytes big-endian, as a suppression buffer's store layout writes it.
std::string u64(std::uint64_t v) {
  std::string out;
  sluice::state::append_u64(out, v);
  return out;
}

updates read_updates(topology_test_driver& d, const std::string& topic) {
  updates out;
  for (auto& r : d.output_topic<std::string, text>(topic).read_all()) out.emplace_back(r.key, r.value, r.timestamp);
  return out;
}

/// The input every join test gets, (side, key, value or nullopt, timestamp): deletions of
/// present and absent keys on both sides, and a key that ends up on both sides.
struct step {
  bool left;
  std::string key;
  text value;
  std::int64_t timestamp;
};
const std::vector<step> steps = {
    {true, "a", "L1", 1},            // 1
    {false, "a", "R1", 2},           // 2
    {true, "a", "L2", 3},            // 3
    {false, "a", std::nullopt, 4},   // 4: deletes the right row
    {false, "a", std::nullopt, 5},   // 5: deletes a right key already absent
    {true, "a", std::nullopt, 6},    // 6: deletes the left row; the right is absent
    {true, "a", std::nullopt, 7},    // 7: deletes a left key already absent
    {false, "a", "R2", 8},           // 8: a right row without a left one
    {true, "b", std::nullopt, 9},    // 9: a key neither side ever had
    {true, "a", "L3", 10},           // 10
    {false, "a", std::nullopt, 11},  // 11
    {true, "a", std::nullopt, 12},   // 12
    {true, "c", "Lc", 13},           // 13
    {false, "c", "Rc", 14},          // 14
};

void pipe_steps(topology_test_driver& d) {
  auto left = d.input_topic<std::string, text>("left");
  auto right = d.input_topic<std::string, text>("right");
  for (const auto& s : steps) (s.left ? left : right).pipe(s.key, s.value, s.timestamp);
}

enum class join_kind { inner, left, outer };

/// Tables "left" and "right" (stores left-store, right-store) joined as `kind` says into store
/// "joined", whose updates go to "out" as "<left>+<right>" ("null" for a missing side).
sluice::topology left_joined_with_right(join_kind kind) {
  sluice::streams_builder b;
  auto l = b.table<std::string, std::string>("left", "left-store");
  auto r = b.table<std::string, std::string>("right", "right-store");
  switch (kind) {
    case join_kind::inner:
      l.join(
           r, [](const std::string& lv, const std::string& rv) { return lv + "+" + rv; }, "joined")
          .to_stream()
          .to("out");
      break;
    case join_kind::left:
      l.left_join(
           r, [](const std::string& lv, const text& rv) { return lv + "+" + show(rv); }, "joined")
          .to_stream()
          .to("out");
      break;
    case join_kind::outer:
      l.outer_join(
           r, [](const text& lv, const text& rv) { return show(lv) + "+" + show(rv); }, "joined")
          .to_stream()
          .to("out");
      break;
  }
  return b.build();
}

}  // namespace

TEST(table_join, inner_join_emits_on_either_side_when_both_are_present_and_deletes_when_one_leaves) {
  topology_test_driver d(left_joined_with_right(join_kind::inner));
  pipe_steps(d);
  const updates expected = {
      {"a", "L1+R1", 2},        // 2: the right arrives, the left is there
      {"a", "L2+R1", 3},        // 3
      {"a", std::nullopt, 4},   // 4: the right leaves
      {"a", std::nullopt, 5},   // 5: the left is present, so Kafka Streams forwards the deletion again
      {"a", "L3+R2", 10},       // 10
      {"a", std::nullopt, 11},  // 11
      {"c", "Lc+Rc", 14},       // 14
  };                            // 1, 6-9, 12, 13: the other side absent, nothing
  EXPECT_EQ(read_updates(d, "out"), expected);
  auto store = d.store<std::string, std::string>("joined");
  EXPECT_EQ(store.get("c"), "Lc+Rc");
  EXPECT_FALSE(store.get("a"));
}

TEST(table_join, left_join_keeps_every_left_row_and_passes_right_deletions_as_a_missing_right_value) {
  topology_test_driver d(left_joined_with_right(join_kind::left));
  pipe_steps(d);
  const updates expected = {
      {"a", "L1+null", 1},      // 1
      {"a", "L1+R1", 2},        // 2
      {"a", "L2+R1", 3},        // 3
      {"a", "L2+null", 4},      // 4: the right leaves, the left row stays
      {"a", "L2+null", 5},      // 5: again (the right side emits whenever the left is there)
      {"a", std::nullopt, 6},   // 6: the left row leaves
      {"a", "L3+R2", 10},       // 10 (7: nothing to delete; 8: no left row; 9: nothing)
      {"a", "L3+null", 11},     // 11
      {"a", std::nullopt, 12},  // 12
      {"c", "Lc+null", 13},     // 13
      {"c", "Lc+Rc", 14},       // 14
  };
  EXPECT_EQ(read_updates(d, "out"), expected);
  auto store = d.store<std::string, std::string>("joined");
  EXPECT_EQ(store.get("c"), "Lc+Rc");
  EXPECT_FALSE(store.get("a"));
  EXPECT_FALSE(store.get("b"));
}

TEST(table_join, outer_join_keeps_rows_of_either_side_and_deletes_when_both_are_gone) {
  topology_test_driver d(left_joined_with_right(join_kind::outer));
  pipe_steps(d);
  const updates expected = {
      {"a", "L1+null", 1},      // 1
      {"a", "L1+R1", 2},        // 2
      {"a", "L2+R1", 3},        // 3
      {"a", "L2+null", 4},      // 4
      {"a", "L2+null", 5},      // 5: the left is there, so the right side's deletion emits
      {"a", std::nullopt, 6},   // 6: both gone
      {"a", "null+R2", 8},      // 8: a right row alone (7, 9: nothing the join had)
      {"a", "L3+R2", 10},       // 10
      {"a", "L3+null", 11},     // 11
      {"a", std::nullopt, 12},  // 12
      {"c", "Lc+null", 13},     // 13
      {"c", "Lc+Rc", 14},       // 14
  };
  EXPECT_EQ(read_updates(d, "out"), expected);
  auto store = d.store<std::string, std::string>("joined");
  EXPECT_EQ(store.get("c"), "Lc+Rc");
  EXPECT_FALSE(store.get("a"));
}

TEST(table_join, joins_an_aggregation_table_and_chains_on_a_join_result) {
  sluice::streams_builder b;
  // clicks per user (an aggregation: never deletes) joined with user names, then with plans.
  auto clicks = b.stream<std::string, std::string>("clicks").group_by_key().count("clicks-per-user");
  auto names = b.table<std::string, std::string>("names", "names-store");
  auto plans = b.table<std::string, std::string>("plans", "plans-store");
  auto named = names.join(
      clicks, [](const std::string& n, std::int64_t c) { return n + ":" + std::to_string(c); }, "named-clicks");
  named
      .left_join(
          plans, [](const std::string& nc, const text& p) { return nc + "/" + show(p); }, "named-clicks-plans")
      .to_stream()
      .to("out");
  topology_test_driver d(b.build());
  auto c = d.input_topic<std::string, std::string>("clicks");
  auto n = d.input_topic<std::string, text>("names");
  auto p = d.input_topic<std::string, text>("plans");
  c.pipe("u1", "x", 1);           // no name yet: no named row, no left row downstream
  n.pipe("u1", "Ann", 2);         // named: Ann:1 -> Ann:1/null
  p.pipe("u1", "gold", 3);        // Ann:1/gold
  c.pipe("u1", "x", 4);           // Ann:2/gold
  n.pipe("u1", std::nullopt, 5);  // the name leaves: named deletes -> the left row deletes
  c.pipe("u1", "x", 6);           // count 3, no name: nothing
  const updates expected = {
      {"u1", "Ann:1/null", 2},
      {"u1", "Ann:1/gold", 3},
      {"u1", "Ann:2/gold", 4},
      {"u1", std::nullopt, 5},
  };
  EXPECT_EQ(read_updates(d, "out"), expected);
}

TEST(table_join, describe_names_both_join_sides_the_merge_and_the_result_store) {
  sluice::streams_builder b;
  auto l = b.table<std::string, std::string>("left", "left-store");
  auto r = b.table<std::string, std::string>("right", "right-store");
  l.outer_join(
       r, [](const text& lv, const text& rv) { return show(lv) + show(rv); }, "joined")
      .to_stream()
      .to("out");
  const auto t = b.build();
  const auto described = t.describe();
  EXPECT_NE(described.find("KTABLE-OUTERJOINTHIS-"), std::string::npos) << described;
  EXPECT_NE(described.find("KTABLE-OUTERJOINOTHER-"), std::string::npos) << described;
  EXPECT_NE(described.find("KTABLE-MERGE-"), std::string::npos) << described;
  EXPECT_NE(described.find("<application.id>-joined-changelog"), std::string::npos) << described;
  // Both tables and the join are one sub-topology (the tables must be co-partitioned).
  EXPECT_EQ(t.subtopologies().size(), 1u);
}

// A suppressed table joins as in Kafka Streams 3.9 (KTableSuppressProcessorSupplier's value
// getter): a lookup of a key its buffer holds answers with the value the suppression last
// emitted for it (absent when it never emitted one), not the buffered update; any other key
// reads the table underneath. Left join of rates with limits suppressed until_time_limit(10
// ms); the suppression's stream time moves with limits' updates only.
namespace {

sluice::topology rates_left_join_held_limits() {
  using namespace std::chrono_literals;
  sluice::streams_builder b;
  auto limits = b.table<std::string, std::string>("limits", "limits-store");
  auto rates = b.table<std::string, std::string>("rates", "rates-store");
  auto held = limits.suppress(sluice::until_time_limit(10ms, {}).with_name("held"));
  rates
      .left_join(
          held, [](const std::string& r, const text& l) { return r + "/" + show(l); }, "both")
      .to_stream()
      .to("out");
  return b.build();
}

}  // namespace

TEST(table_join, a_suppressed_until_time_limit_table_answers_lookups_with_what_it_has_emitted) {
  topology_test_driver d(rates_left_join_held_limits());
  auto limits = d.input_topic<std::string, text>("limits");
  auto rates = d.input_topic<std::string, std::string>("rates");
  rates.pipe("k", "r0", 0);  // before limits has k: absent
  EXPECT_EQ(read_updates(d, "out"), (updates{{"k", text("r0/null"), 0}}));
  limits.pipe("k", "L1", 0);  // buffered until 10; never emitted before
  rates.pipe("k", "r1", 1);   // during: k held back, nothing emitted yet -> absent
  EXPECT_EQ(read_updates(d, "out"), (updates{{"k", text("r1/null"), 1}}));
  limits.pipe("x", "X1", 10);  // suppression time 10 releases k = L1 (@0); the join's right side sees it,
  // at the later of 0 and the rates table's r1 (@1)
  EXPECT_EQ(read_updates(d, "out"), (updates{{"k", text("r1/L1"), 1}}));
  rates.pipe("k", "r2", 11);  // after: k not buffered -> the limits table: L1
  EXPECT_EQ(read_updates(d, "out"), (updates{{"k", text("r2/L1"), 11}}));
  limits.pipe("k", "L2", 12);  // buffered again (until 22); what downstream saw is L1
  rates.pipe("k", "r3", 13);
  EXPECT_EQ(read_updates(d, "out"), (updates{{"k", text("r3/L1"), 13}}));
  limits.pipe("k", std::nullopt, 14);  // a deletion replaces the buffered L2; the prior value stays L1
  rates.pipe("k", "r4", 15);
  EXPECT_EQ(read_updates(d, "out"), (updates{{"k", text("r4/L1"), 15}}));
  // Time 30 releases x (10; rates has no x: a left join's right side emits nothing) then k's
  // deletion (12, @14), which the join passes on as r4/null, at the rates table's r4 (@15).
  limits.pipe("y", "Y", 30);
  EXPECT_EQ(read_updates(d, "out"), (updates{{"k", text("r4/null"), 15}}));
  rates.pipe("k", "r5", 31);  // after: the limits table no longer has k
  EXPECT_EQ(read_updates(d, "out"), (updates{{"k", text("r5/null"), 31}}));
}

// A stream–table join reads a suppressed table the same way (Kafka Streams' stream–table
// join takes the table's value getter).
TEST(table_join, a_stream_joined_with_a_suppressed_table_sees_what_the_table_has_emitted) {
  using namespace std::chrono_literals;
  sluice::streams_builder b;
  auto limits = b.table<std::string, std::string>("limits", "limits-store");
  auto held = limits.suppress(sluice::until_time_limit(10ms, {}));
  b.stream<std::string, std::string>("orders")
      .left_join(held, [](const std::string& o, const std::optional<std::string>& l) { return o + "/" + show(l); })
      .to("orders-out");
  topology_test_driver d(b.build());
  auto limits_in = d.input_topic<std::string, std::string>("limits");
  auto orders = d.input_topic<std::string, std::string>("orders");
  auto out = [&] {
    std::vector<std::pair<std::string, std::string>> r;
    for (auto& m : d.output_topic<std::string, std::string>("orders-out").read_all()) r.emplace_back(m.key, m.value);
    return r;
  };
  using pairs = std::vector<std::pair<std::string, std::string>>;
  limits_in.pipe("k", "L1", 0);
  orders.pipe("k", "o1", 1);
  EXPECT_EQ(out(), (pairs{{"k", "o1/null"}}));  // held back, never emitted
  limits_in.pipe("x", "X", 10);                 // releases k = L1
  orders.pipe("k", "o2", 11);
  EXPECT_EQ(out(), (pairs{{"k", "o2/L1"}}));
  limits_in.pipe("k", "L2", 12);  // held back; downstream has seen L1
  orders.pipe("k", "o3", 13);
  EXPECT_EQ(out(), (pairs{{"k", "o3/L1"}}));
}

// A buffer entry restored from a changelog written before sluice kept prior values (a 'k'
// entry of the buffer time only) still comes out when due, but a join cannot look its key
// up: the lookup fails naming the buffer, its changelog and the fixes.
TEST(table_join, a_lookup_of_a_key_buffered_in_the_old_format_fails_naming_the_fix) {
  topology_test_driver d(rates_left_join_held_limits());
  auto buffer = d.store<std::string, std::string>("held-store");
  // 'k' <key> -> <u64 buffer time>; 't' <u64 time> <key> -> <u64 ts> <u64 window end> <u32 0 headers> <value>
  buffer.put("kk", u64(0));
  buffer.put("t" + u64(0) + "k", u64(0) + u64(0) + std::string(4, '\0') + "\1L1");
  try {
    d.input_topic<std::string, std::string>("rates").pipe("k", "r", 1);
    FAIL() << "a lookup of an old-format entry was answered";
  } catch (const sluice::error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("suppression buffer 'held-store' holds an entry restored from its changelog in the "
                           "format of an older sluice"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("test-driver-held-store-changelog"), std::string::npos) << message;
  }
}

TEST(table_join, a_buffer_entry_in_the_old_format_is_still_emitted_when_due) {
  using namespace std::chrono_literals;
  sluice::streams_builder b;
  b.table<std::string, std::string>("limits", "limits-store")
      .suppress(sluice::until_time_limit(10ms, {}).with_name("held"))
      .to_stream()
      .to("out");
  topology_test_driver d(b.build());
  auto buffer = d.store<std::string, std::string>("held-store");
  buffer.put("kk", u64(0));
  buffer.put("t" + u64(0) + "k", u64(3) + u64(0) + std::string(4, '\0') + "\1L1");
  d.input_topic<std::string, std::string>("limits").pipe("x", "X", 10);  // releases k (buffer time 0)
  EXPECT_EQ(read_updates(d, "out"), (updates{{"k", text("L1"), 3}}));
}

namespace {

/// (key, window start, window end, value or nullopt for a tombstone, timestamp) of the
/// records on a windowed table join's output topic.
using windowed_updates = std::vector<std::tuple<std::string, std::int64_t, std::int64_t, text, std::int64_t>>;

template <class KeySerde>
windowed_updates read_windowed(topology_test_driver& d, const std::string& topic) {
  windowed_updates out;
  for (auto& m : d.records(topic)) {
    const auto key = KeySerde::deserialize(*m.key);
    text value;
    if (m.value) value = sluice::default_serde<std::string>::deserialize(*m.value);
    out.emplace_back(key.key, key.window.start, key.window.end, value, m.timestamp);
  }
  d.records(topic).clear();
  return out;
}

std::string show_count(const std::optional<std::int64_t>& n) { return n ? std::to_string(*n) : "null"; }

/// A driver of: events grouped by key and windowed by `windows`, counted (added first) and
/// reduced (values joined by ','), the reduce left-joined with the count suppressed until its
/// windows close, to "out" as "values=count". Grace is long enough that nothing closes.
template <class Windows>
topology_test_driver reduce_left_joined_with_suppressed_count(const Windows& windows, const std::string& prefix) {
  sluice::streams_builder b;
  auto events = b.stream<std::string, std::string>("events").group_by_key();
  auto counts = events.windowed_by(windows).count(prefix + "-counts");
  auto lists = events.windowed_by(windows).reduce(
      [](const std::string& agg, const std::string& v) { return agg + "," + v; }, prefix + "-lists");
  lists
      .left_join(
          counts.suppress(sluice::until_window_closes()),
          [](const std::string& vs, const std::optional<std::int64_t>& n) { return vs + "=" + show_count(n); },
          "lists-and-counts")
      .to_stream()
      .to("out");
  return topology_test_driver(b.build());
}

}  // namespace

// Windowed tables join on the windowed key, as Kafka Streams' KTable<Windowed<K>, V> joins:
// a side reads the other aggregation's window store by key and window start (its value
// getter), and a result carries the larger of the update's timestamp and the other window's
// (the highest timestamp folded into it). Tumbling windows of 10 ms, grace 5 ms.
TEST(table_join, time_windowed_tables_join_on_key_and_window_start_with_the_larger_timestamp) {
  using namespace std::chrono_literals;
  sluice::streams_builder b;
  const auto windows = sluice::time_windows::of_size_and_grace(10ms, 5ms);
  auto clicks = b.stream<std::string, std::string>("clicks").group_by_key().windowed_by(windows).count("clicks-per-10");
  auto views = b.stream<std::string, std::string>("views").group_by_key().windowed_by(windows).count("views-per-10");
  clicks
      .join(
          views, [](std::int64_t c, std::int64_t v) { return std::to_string(c) + "/" + std::to_string(v); }, "inner")
      .to_stream()
      .to("inner-out");
  clicks
      .outer_join(
          views,
          [](const std::optional<std::int64_t>& c, const std::optional<std::int64_t>& v) {
            return show_count(c) + "/" + show_count(v);
          },
          "outer")
      .to_stream()
      .to("outer-out");
  auto topology = b.build();
  const auto described = topology.describe();
  EXPECT_NE(described.find("KTABLE-JOINTHIS-"), std::string::npos) << described;
  EXPECT_NE(described.find("KTABLE-OUTERJOINOTHER-"), std::string::npos) << described;
  topology_test_driver d(std::move(topology));
  auto c = d.input_topic<std::string, std::string>("clicks");
  auto v = d.input_topic<std::string, std::string>("views");
  using key_serde = sluice::time_windowed_serde<sluice::default_serde<std::string>, 10>;
  using u = windowed_updates;
  c.pipe("a", "", 1);  // clicks (a, [0,10)) = 1 @1; no views window yet
  EXPECT_EQ(read_windowed<key_serde>(d, "inner-out"), u{});
  EXPECT_EQ(read_windowed<key_serde>(d, "outer-out"), (u{{"a", 0, 10, "1/null", 1}}));
  v.pipe("a", "", 4);  // views (a, [0,10)) = 1 @4 finds clicks' 1 @1
  EXPECT_EQ(read_windowed<key_serde>(d, "inner-out"), (u{{"a", 0, 10, "1/1", 4}}));
  EXPECT_EQ(read_windowed<key_serde>(d, "outer-out"), (u{{"a", 0, 10, "1/1", 4}}));
  c.pipe("a", "", 3);  // clicks (a, [0,10)) = 2 @3 finds views' 1 @4: the result is at 4
  EXPECT_EQ(read_windowed<key_serde>(d, "inner-out"), (u{{"a", 0, 10, "2/1", 4}}));
  EXPECT_EQ(read_windowed<key_serde>(d, "outer-out"), (u{{"a", 0, 10, "2/1", 4}}));
  v.pipe("a", "", 12);  // views (a, [10,20)) = 1: no clicks in that window
  EXPECT_EQ(read_windowed<key_serde>(d, "inner-out"), u{});
  EXPECT_EQ(read_windowed<key_serde>(d, "outer-out"), (u{{"a", 10, 20, "null/1", 12}}));
  c.pipe("b", "", 13);  // another key, same window: nothing of a's
  EXPECT_EQ(read_windowed<key_serde>(d, "inner-out"), u{});
  EXPECT_EQ(read_windowed<key_serde>(d, "outer-out"), (u{{"b", 10, 20, "1/null", 13}}));
  v.pipe("a", "", 2);  // out of order within grace: views (a, [0,10)) = 2, still @4; clicks' 2 @3
  EXPECT_EQ(read_windowed<key_serde>(d, "inner-out"), (u{{"a", 0, 10, "2/2", 4}}));
  EXPECT_EQ(read_windowed<key_serde>(d, "outer-out"), (u{{"a", 0, 10, "2/2", 4}}));
  c.pipe("a", "", 20);  // clicks (a, [20,30)) = 1 @20
  v.pipe("a", "", 25);  // views (a, [20,30)) = 1 @25 finds it
  EXPECT_EQ(read_windowed<key_serde>(d, "inner-out"), (u{{"a", 20, 30, "1/1", 25}}));
  EXPECT_EQ(read_windowed<key_serde>(d, "outer-out"), (u{{"a", 20, 30, "1/null", 20}, {"a", 20, 30, "1/1", 25}}));
}

// Session tables join on key, session start and session end (Kafka Streams' fetchSession):
// a session of the other table that ends at the same time but starts elsewhere is no match;
// a session merged away leaves the join as a tombstone. Left join; gap 5 ms, grace 10 ms.
TEST(table_join, session_tables_join_on_key_start_and_end_and_merged_sessions_leave_the_join) {
  using namespace std::chrono_literals;
  sluice::streams_builder b;
  const auto windows = sluice::session_windows::of_inactivity_gap_and_grace(5ms, 10ms);
  auto clicks =
      b.stream<std::string, std::string>("clicks").group_by_key().windowed_by(windows).count("click-sessions");
  auto views = b.stream<std::string, std::string>("views").group_by_key().windowed_by(windows).count("view-sessions");
  clicks
      .left_join(
          views,
          [](std::int64_t c, const std::optional<std::int64_t>& v) { return std::to_string(c) + "/" + show_count(v); },
          "clicks-with-views")
      .to_stream()
      .to("out");
  auto topology = b.build();
  const auto described = topology.describe();
  EXPECT_NE(described.find("KTABLE-LEFTJOINTHIS-"), std::string::npos) << described;
  EXPECT_NE(described.find("KTABLE-LEFTJOINOTHER-"), std::string::npos) << described;
  topology_test_driver d(std::move(topology));
  auto c = d.input_topic<std::string, std::string>("clicks");
  auto v = d.input_topic<std::string, std::string>("views");
  using key_serde = sluice::session_windowed_serde<sluice::default_serde<std::string>>;
  using u = windowed_updates;
  c.pipe("a", "", 10);  // clicks (a, [10,10]) = 1
  EXPECT_EQ(read_windowed<key_serde>(d, "out"), (u{{"a", 10, 10, "1/null", 10}}));
  v.pipe("a", "", 10);  // views (a, [10,10]) = 1 finds it
  EXPECT_EQ(read_windowed<key_serde>(d, "out"), (u{{"a", 10, 10, "1/1", 10}}));
  c.pipe("a", "", 14);  // clicks merge [10,10] into [10,14] = 2: [10,10] leaves the join; views has no [10,14]
  EXPECT_EQ(read_windowed<key_serde>(d, "out"), (u{{"a", 10, 10, std::nullopt, 10}, {"a", 10, 14, "2/null", 14}}));
  v.pipe("a", "", 13);  // views merge into [10,13] = 2: no clicks session [10,10] or [10,13]
  EXPECT_EQ(read_windowed<key_serde>(d, "out"), u{});
  v.pipe("a", "", 14);  // views merge into [10,14] = 3: clicks' [10,14] finds it
  EXPECT_EQ(read_windowed<key_serde>(d, "out"), (u{{"a", 10, 14, "2/3", 14}}));
  v.pipe("b", "", 30);  // views (b, [30,30])
  c.pipe("b", "", 28);  // clicks (b, [28,28])
  c.pipe("b", "", 30);  // clicks (b, [28,30]): views' session ending at 30 starts at 30, no match
  EXPECT_EQ(read_windowed<key_serde>(d, "out"),
            (u{{"b", 28, 28, "1/null", 28}, {"b", 28, 28, std::nullopt, 28}, {"b", 28, 30, "2/null", 30}}));
}

// until_window_closes on the side of a windowed table join: a window the suppression holds
// back answers with what it has emitted for it, which for a window it never emitted is the
// count's initial 0 (Kafka Streams' KStreamWindowAggregate passes the initializer's value as
// a new window's old value, and its suppression keeps that as the window's prior value); a
// window it has released reads the window store (a window stays there for size + grace
// after the latest window start, so past its release). views left-joins final click
// counts; tumbling 10 ms windows, grace 5 ms.
TEST(table_join, a_suppressed_until_window_closes_table_answers_lookups_with_what_it_has_emitted) {
  using namespace std::chrono_literals;
  sluice::streams_builder b;
  const auto windows = sluice::time_windows::of_size_and_grace(10ms, 5ms);
  auto clicks = b.stream<std::string, std::string>("clicks").group_by_key().windowed_by(windows).count("clicks-per-10");
  auto views = b.stream<std::string, std::string>("views").group_by_key().windowed_by(windows).count("views-per-10");
  views
      .left_join(
          clicks.suppress(sluice::until_window_closes()),
          [](std::int64_t v, const std::optional<std::int64_t>& c) { return std::to_string(v) + "/" + show_count(c); },
          "views-and-final-clicks")
      .to_stream()
      .to("out");
  topology_test_driver d(b.build());
  auto c = d.input_topic<std::string, std::string>("clicks");
  auto v = d.input_topic<std::string, std::string>("views");
  using key_serde = sluice::time_windowed_serde<sluice::default_serde<std::string>, 10>;
  using u = windowed_updates;
  v.pipe("a", "", 0);  // before: no clicks of (a, [0,10))
  EXPECT_EQ(read_windowed<key_serde>(d, "out"), (u{{"a", 0, 10, "1/null", 0}}));
  c.pipe("a", "", 1);  // clicks (a, [0,10)) = 1, held until the window closes
  v.pipe("a", "", 2);  // during: held back and never emitted -> the count's initial 0
  c.pipe("a", "", 3);  // clicks = 2, still held
  v.pipe("a", "", 4);
  EXPECT_EQ(read_windowed<key_serde>(d, "out"), (u{{"a", 0, 10, "2/0", 2}, {"a", 0, 10, "3/0", 4}}));
  // Clicks at 16 close [0,10) (10 + 5 <= 16): the final count 2 (@3) reaches the join's
  // right side, which finds views' 3 (@4): the result is at 4. (a, [10,20)) is held now.
  c.pipe("a", "", 16);
  EXPECT_EQ(read_windowed<key_serde>(d, "out"), (u{{"a", 0, 10, "3/2", 4}}));
  v.pipe("a", "", 5);  // after: released, read from the window store (2 @3)
  EXPECT_EQ(read_windowed<key_serde>(d, "out"), (u{{"a", 0, 10, "4/2", 5}}));
  v.pipe("a", "", 13);  // (a, [10,20)): held back, never emitted -> 0
  EXPECT_EQ(read_windowed<key_serde>(d, "out"), (u{{"a", 10, 20, "1/0", 13}}));
}

// The prior value of a window a suppression holds and never emitted is what Kafka Streams'
// aggregation passes as the new window's old value: a windowed aggregate's initializer value
// (KStreamWindowAggregate, hopping here: each of a record's windows), none for a reduce
// (its initializer is null). views counts left-join the suppressed click lists and the
// suppressed latest click; hopping 10 ms windows advancing by 5 ms, grace 5 ms.
TEST(table_join, a_held_window_of_a_suppressed_aggregate_answers_its_initializer_and_of_a_reduce_absent) {
  using namespace std::chrono_literals;
  sluice::streams_builder b;
  const auto windows = sluice::time_windows::of_size_and_grace(10ms, 5ms).advance_by(5ms);
  auto clicks = b.stream<std::string, std::string>("clicks").group_by_key().windowed_by(windows);
  auto lists = clicks.aggregate(
      [] { return std::string("init"); },
      [](const std::string&, const std::string& v, const std::string& agg) { return agg + "+" + v; }, "click-lists");
  auto latest = clicks.reduce([](const std::string&, const std::string& v) { return v; }, "latest-click");
  auto views = b.stream<std::string, std::string>("views").group_by_key().windowed_by(windows).count("views");
  auto joined = [](std::int64_t v, const text& c) { return std::to_string(v) + "/" + show(c); };
  views.left_join(lists.suppress(sluice::until_window_closes()), joined, "views-and-lists").to_stream().to("lists-out");
  views.left_join(latest.suppress(sluice::until_window_closes()), joined, "views-and-latest")
      .to_stream()
      .to("latest-out");
  topology_test_driver d(b.build());
  auto c = d.input_topic<std::string, std::string>("clicks");
  auto v = d.input_topic<std::string, std::string>("views");
  using key_serde = sluice::time_windowed_serde<sluice::default_serde<std::string>, 10>;
  using u = windowed_updates;
  c.pipe("a", "x", 7);  // windows [0,10) and [5,15): both new, held
  v.pipe("a", "", 8);   // views in both windows
  EXPECT_EQ(read_windowed<key_serde>(d, "lists-out"), (u{{"a", 0, 10, "1/init", 8}, {"a", 5, 15, "1/init", 8}}));
  EXPECT_EQ(read_windowed<key_serde>(d, "latest-out"), (u{{"a", 0, 10, "1/null", 8}, {"a", 5, 15, "1/null", 8}}));
  // Clicks at 16 close [0,10) (10 + 5 <= 16): its final list init+x (@7) joins views' 1.
  // [5,15) now holds init+x+y, still held: its prior value stays init.
  c.pipe("a", "y", 12);
  c.pipe("a", "z", 16);
  v.pipe("a", "", 14);  // views [5,15) = 2, [10,20) = 1: both held, never emitted
  EXPECT_EQ(read_windowed<key_serde>(d, "lists-out"),
            (u{{"a", 0, 10, "1/init+x", 8}, {"a", 5, 15, "2/init", 14}, {"a", 10, 20, "1/init", 14}}));
  EXPECT_EQ(read_windowed<key_serde>(d, "latest-out"),
            (u{{"a", 0, 10, "1/x", 8}, {"a", 5, 15, "2/null", 14}, {"a", 10, 20, "1/null", 14}}));
}

// Sliding windows (KStreamSlidingWindowAggregate): a window created empty passes the
// initializer's value (a count's 0) as its old value, a left window seeded with the latest
// earlier window's aggregate passes that aggregate, though the suppression never emitted it.
// A sliding reduce of the same records (so the same windows; the count comes first, as it
// was added first) left-joins the suppressed sliding count; time difference 10 ms, grace
// 100 ms (nothing closes).
TEST(table_join, a_held_sliding_window_answers_the_old_value_kafka_streams_creates_it_with) {
  using namespace std::chrono_literals;
  auto d = reduce_left_joined_with_suppressed_count(sluice::sliding_windows::of_time_difference_and_grace(10ms, 100ms),
                                                    "sliding");
  auto e = d.input_topic<std::string, std::string>("events");
  using key_serde = sluice::time_windowed_serde<sluice::default_serde<std::string>, 10>;
  using u = windowed_updates;
  e.pipe("a", "x", 20);  // left window [10,20], empty before: 0
  EXPECT_EQ(read_windowed<key_serde>(d, "out"), (u{{"a", 10, 20, "x=0", 20}}));
  // At 25: the previous record's right window [21,31] is created empty (0); the left window
  // [15,25] is seeded with [10,20]'s count 1, which is its old value.
  e.pipe("a", "y", 25);
  EXPECT_EQ(read_windowed<key_serde>(d, "out"), (u{{"a", 21, 31, "y=0", 25}, {"a", 15, 25, "x,y=1", 25}}));
}

// Session aggregations (KStreamSessionWindowAggregate) pass no old value for a new session,
// a count's neither: a held session answers absent. A session reduce of the same records
// left-joins the suppressed session count; gap 5 ms, grace 100 ms.
TEST(table_join, a_held_session_of_a_suppressed_session_count_answers_absent) {
  using namespace std::chrono_literals;
  auto d = reduce_left_joined_with_suppressed_count(sluice::session_windows::of_inactivity_gap_and_grace(5ms, 100ms),
                                                    "session");
  auto e = d.input_topic<std::string, std::string>("events");
  using key_serde = sluice::session_windowed_serde<sluice::default_serde<std::string>>;
  using u = windowed_updates;
  e.pipe("a", "x", 10);
  e.pipe("a", "y", 12);  // [10,10] merges into [10,12]: it leaves the join
  EXPECT_EQ(read_windowed<key_serde>(d, "out"),
            (u{{"a", 10, 10, "x=null", 10}, {"a", 10, 10, std::nullopt, 10}, {"a", 10, 12, "x,y=null", 12}}));
}

// Non-windowed aggregations: a key a suppression holds and never emitted answers the
// initializer's value for a count (0) and an aggregate (KStreamAggregate passes it as a new
// key's old value), absent for a reduce (KStreamReduce); once emitted, what was emitted.
// Orders left-join each suppressed table (until_time_limit 10 ms).
TEST(table_join, a_held_key_of_a_suppressed_count_or_aggregate_answers_the_initializer_and_of_a_reduce_absent) {
  using namespace std::chrono_literals;
  sluice::streams_builder b;
  auto events = b.stream<std::string, std::string>("events").group_by_key();
  auto counts = events.count("counts").suppress(sluice::until_time_limit(10ms, {}));
  auto lists =
      events
          .aggregate([] { return std::string("init"); },
                     [](const std::string&, const std::string& v, const std::string& agg) { return agg + "+" + v; },
                     "lists")
          .suppress(sluice::until_time_limit(10ms, {}));
  auto latest = events.reduce([](const std::string&, const std::string& v) { return v; }, "latest")
                    .suppress(sluice::until_time_limit(10ms, {}));
  auto orders = b.stream<std::string, std::string>("orders");
  orders
      .left_join(counts,
                 [](const std::string& o, const std::optional<std::int64_t>& n) { return o + "/" + show_count(n); })
      .to("counts-out");
  orders.left_join(lists, [](const std::string& o, const text& l) { return o + "/" + show(l); }).to("lists-out");
  orders.left_join(latest, [](const std::string& o, const text& l) { return o + "/" + show(l); }).to("latest-out");
  topology_test_driver d(b.build());
  auto e = d.input_topic<std::string, std::string>("events");
  auto o = d.input_topic<std::string, std::string>("orders");
  auto out = [&](const std::string& topic) {
    std::vector<std::string> values;
    for (auto& m : d.output_topic<std::string, std::string>(topic).read_all()) values.push_back(m.value);
    return values;
  };
  using strings = std::vector<std::string>;
  e.pipe("k", "x", 0);  // held until 10, never emitted
  o.pipe("k", "o1", 1);
  EXPECT_EQ(out("counts-out"), strings{"o1/0"});
  EXPECT_EQ(out("lists-out"), strings{"o1/init"});
  EXPECT_EQ(out("latest-out"), strings{"o1/null"});
  e.pipe("z", "z", 10);  // releases k: 1, init+x, x
  e.pipe("k", "y", 11);  // held again: what was emitted before is the prior value
  o.pipe("k", "o2", 12);
  EXPECT_EQ(out("counts-out"), strings{"o2/1"});
  EXPECT_EQ(out("lists-out"), strings{"o2/init+x"});
  EXPECT_EQ(out("latest-out"), strings{"o2/x"});
}

// A table suppressed twice: the outer suppression's prior value of a key is the old value
// the inner one emits with it, which in Kafka Streams is the old value of the latest update
// the inner buffer held for the key (its buffer emits that change whole), not the key's
// prior value in the inner buffer.
TEST(table_join, a_table_suppressed_twice_holds_the_old_value_of_the_inner_buffers_latest_update) {
  using namespace std::chrono_literals;
  sluice::streams_builder b;
  auto counts = b.stream<std::string, std::string>("events")
                    .group_by_key()
                    .count("counts")
                    .suppress(sluice::until_time_limit(10ms, {}))
                    .suppress(sluice::until_time_limit(100ms, {}));
  b.stream<std::string, std::string>("orders")
      .left_join(counts,
                 [](const std::string& o, const std::optional<std::int64_t>& n) { return o + "/" + show_count(n); })
      .to("counts-out");
  topology_test_driver d(b.build());
  auto e = d.input_topic<std::string, std::string>("events");
  auto o = d.input_topic<std::string, std::string>("orders");
  auto out = [&] {
    std::vector<std::string> values;
    for (auto& m : d.output_topic<std::string, std::string>("counts-out").read_all()) values.push_back(m.value);
    return values;
  };
  using strings = std::vector<std::string>;
  e.pipe("k", "x", 0);  // count 1 (old value 0): the inner buffer holds k until 10, prior value 0
  e.pipe("k", "x", 1);  // count 2 (old value 1)
  e.pipe("j", "x", 2);  // count 1 (old value 0), held by the inner buffer until 12
  e.pipe("j", "x", 3);  // count 2 (old value 1)
  e.pipe("j", "x", 4);  // count 3 (old value 2)
  o.pipe("k", "o1", 5);
  EXPECT_EQ(out(), strings{"o1/0"});  // the inner buffer holds k: its prior value
  e.pipe("z", "x", 12);               // releases k = 2 (old value 1) and j = 3 (old value 2) into the outer buffer
  o.pipe("k", "o2", 13);
  o.pipe("j", "o3", 14);
  EXPECT_EQ(out(), (strings{"o2/1", "o3/2"}));
  e.pipe("y", "x", 30);  // releases z = 1 (one update, old value 0) into the outer buffer
  o.pipe("z", "o4", 31);
  EXPECT_EQ(out(), strings{"o4/0"});
}

// An aggregation's table keeps its aggregates' timestamps, so a join result of an update
// older than the aggregate carries the aggregate's timestamp, as in Kafka Streams (the
// larger of both sides').
TEST(table_join, a_result_joined_with_an_aggregation_carries_the_aggregates_timestamp_when_larger) {
  sluice::streams_builder b;
  auto clicks = b.stream<std::string, std::string>("clicks").group_by_key().count("clicks-per-user");
  b.table<std::string, std::string>("names", "names-store")
      .join(
          clicks, [](const std::string& n, std::int64_t c) { return n + ":" + std::to_string(c); }, "named-clicks")
      .to_stream()
      .to("out");
  topology_test_driver d(b.build());
  auto c = d.input_topic<std::string, std::string>("clicks");
  auto n = d.input_topic<std::string, text>("names");
  c.pipe("u1", "x", 100);
  c.pipe("u1", "x", 30);     // out of order: the count's timestamp stays 100
  n.pipe("u1", "Ann", 50);   // older than the count: the result takes 100
  c.pipe("u1", "x", 120);    // the count's own update: 120
  n.pipe("u1", "Bob", 200);  // newer: its own
  const updates expected = {{"u1", "Ann:2", 100}, {"u1", "Ann:3", 120}, {"u1", "Bob:3", 200}};
  EXPECT_EQ(read_updates(d, "out"), expected);
}

namespace {

/// Out-of-order updates of key "a" on both sides of a table–table join, (side, value or
/// nullopt, timestamp). Each table keeps a value with its own record's timestamp, also when
/// it is older than the value it replaces (left: 100, then 70, 20, deleted at 5; right: 50,
/// 60, deleted at 40, 10, deleted at 8); a result carries the later of its update's timestamp
/// and the other side's stored value's, its update's alone when the other side is absent.
const std::vector<step> out_of_order_steps = {
    {true, "a", "L1", 100},          // 1
    {false, "a", "R1", 50},          // 2: older than the left's 100
    {true, "a", "L2", 70},           // 3: older than the left's own 100; the right's is 50
    {false, "a", "R2", 60},          // 4: the left now holds 70, not 100
    {false, "a", std::nullopt, 40},  // 5: the right leaves, older than the left's 70
    {true, "a", "L3", 20},           // 6: the right is absent: its own 20
    {false, "a", "R3", 10},          // 7: older than the left's 20
    {true, "a", std::nullopt, 5},    // 8: the left leaves, older than the right's 10
    {false, "a", std::nullopt, 8},   // 9: the right leaves; the left is absent: its own 8
};

void pipe_out_of_order_steps(topology_test_driver& d) {
  auto left = d.input_topic<std::string, text>("left");
  auto right = d.input_topic<std::string, text>("right");
  for (const auto& s : out_of_order_steps) (s.left ? left : right).pipe(s.key, s.value, s.timestamp);
}

/// The timestamp `store` (a timestamped store: 8 bytes big-endian, then the value) keeps
/// with `key` on partition 0; nullopt when the key is absent.
std::optional<std::int64_t> stored_timestamp(topology_test_driver& d, const std::string& store,
                                             const std::string& key) {
  std::optional<std::int64_t> timestamp;
  const auto o = d.queries().run(store, 0, [&](sluice::state::kv_store& s) {
    std::string k;
    sluice::default_state_serde<std::string>::serialize(key, k);
    if (auto v = s.get(k)) timestamp = static_cast<std::int64_t>(sluice::state::read_u64(*v));
  });
  EXPECT_EQ(o, sluice::query_outcome::done) << store;
  return timestamp;
}

}  // namespace

TEST(table_join, inner_join_stamps_a_result_with_the_later_of_its_update_and_the_other_sides_stored_timestamp) {
  topology_test_driver d(left_joined_with_right(join_kind::inner));
  pipe_out_of_order_steps(d);
  const updates expected = {
      {"a", "L1+R1", 100},      // 2: max(50, left 100)
      {"a", "L2+R1", 70},       // 3: max(70, right 50)
      {"a", "L2+R2", 70},       // 4: max(60, left 70)
      {"a", std::nullopt, 70},  // 5: max(40, left 70)
      {"a", "L3+R3", 20},       // 7: max(10, left 20)
      {"a", std::nullopt, 10},  // 8: max(5, right 10)
  };                            // 1, 6, 9: the other side absent, nothing
  EXPECT_EQ(read_updates(d, "out"), expected);
}

TEST(table_join, left_join_stamps_a_result_with_the_later_of_its_update_and_the_other_sides_stored_timestamp) {
  topology_test_driver d(left_joined_with_right(join_kind::left));
  pipe_out_of_order_steps(d);
  const updates expected = {
      {"a", "L1+null", 100},    // 1: the right absent: its own
      {"a", "L1+R1", 100},      // 2: max(50, left 100)
      {"a", "L2+R1", 70},       // 3: max(70, right 50)
      {"a", "L2+R2", 70},       // 4: max(60, left 70)
      {"a", "L2+null", 70},     // 5: max(40, left 70)
      {"a", "L3+null", 20},     // 6: the right absent: its own
      {"a", "L3+R3", 20},       // 7: max(10, left 20)
      {"a", std::nullopt, 10},  // 8: max(5, right 10)
  };                            // 9: no left row, nothing
  EXPECT_EQ(read_updates(d, "out"), expected);
}

TEST(table_join, outer_join_stamps_a_result_with_the_later_of_its_update_and_the_other_sides_stored_timestamp) {
  topology_test_driver d(left_joined_with_right(join_kind::outer));
  auto left = d.input_topic<std::string, text>("left");
  auto right = d.input_topic<std::string, text>("right");
  const updates expected = {
      {"a", "L1+null", 100},   // 1: the right absent: its own
      {"a", "L1+R1", 100},     // 2: max(50, left 100)
      {"a", "L2+R1", 70},      // 3: max(70, right 50)
      {"a", "L2+R2", 70},      // 4: max(60, left 70)
      {"a", "L2+null", 70},    // 5: max(40, left 70)
      {"a", "L3+null", 20},    // 6: the right absent: its own
      {"a", "L3+R3", 20},      // 7: max(10, left 20)
      {"a", "null+R3", 10},    // 8: max(5, right 10)
      {"a", std::nullopt, 8},  // 9: the left absent: its own
  };
  // The join's store keeps each result with the result's timestamp, as Kafka Streams'
  // KTableKTableJoinMerger does: checked after every step.
  for (std::size_t i = 0; i < out_of_order_steps.size(); ++i) {
    const auto& s = out_of_order_steps[i];
    (s.left ? left : right).pipe(s.key, s.value, s.timestamp);
    const auto out = read_updates(d, "out");
    ASSERT_EQ(out.size(), 1u) << "step " << i + 1;
    EXPECT_EQ(out[0], expected[i]) << "step " << i + 1;
    const auto& [key, value, timestamp] = expected[i];
    EXPECT_EQ(stored_timestamp(d, "joined", key), value ? std::optional<std::int64_t>(timestamp) : std::nullopt)
        << "step " << i + 1;
  }
}

// A table read from a topic keeps each value with its record's timestamp, as Kafka Streams'
// KTableSource keeps it in its timestamped store: an out-of-order update replaces a later
// value and its timestamp (no max, unlike an aggregation), and its changelog records carry
// the records' timestamps, a tombstone's included (not the task's stream time).
TEST(table, keeps_each_value_with_its_records_timestamp_also_when_older) {
  sluice::streams_builder b;
  b.table<std::string, std::string>("left", "left-store").to_stream().to("out");
  topology_test_driver d(b.build());
  auto left = d.input_topic<std::string, text>("left");
  left.pipe("a", "A1", 100);
  EXPECT_EQ(stored_timestamp(d, "left-store", "a"), 100);
  left.pipe("a", "A2", 40);  // out of order: the table takes it, at 40
  EXPECT_EQ(stored_timestamp(d, "left-store", "a"), 40);
  EXPECT_EQ((d.store<std::string, std::string>("left-store").get("a")), "A2");
  left.pipe("b", "B1", 120);
  left.pipe("b", std::nullopt, 60);  // a deletion, older than stream time 120
  EXPECT_EQ(stored_timestamp(d, "left-store", "b"), std::nullopt);
  const updates expected = {{"a", "A1", 100}, {"a", "A2", 40}, {"b", "B1", 120}, {"b", std::nullopt, 60}};
  EXPECT_EQ(read_updates(d, "out"), expected);
  const auto changelog = d.application_id() + "-left-store-changelog";
  std::vector<std::tuple<std::string, text, std::int64_t>> logged;
  for (const auto& m : d.records(changelog))
    logged.emplace_back(m.key.value_or(""), m.value ? text(std::string(*m.value)) : std::nullopt, m.timestamp);
  const updates expected_log = {{"a", "A1", 100}, {"a", "A2", 40}, {"b", "B1", 120}, {"b", std::nullopt, 60}};
  EXPECT_EQ(logged, expected_log);
}
