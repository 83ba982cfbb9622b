// describe() and to_dot() (issue 16) name every node and store that windows, suppression
// and joins add: window and session stores, the windowed aggregation nodes, the suppression
// node and its buffer, the windowing and join nodes of a stream–stream join with their
// stores and shared outer store, and the side and merge nodes of a table–table join.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <regex>
#include <set>
#include <string>

#include "sluice/sluice.hpp"

using namespace std::chrono_literals;

namespace {

sluice::topology every_window_and_join_node() {
  sluice::streams_builder b;
  auto clicks = b.stream<std::string, std::string>("clicks");
  clicks.group_by_key()
      .windowed_by(sluice::time_windows::of_size_and_grace(10s, 1s))
      .count("per-window")
      .suppress(sluice::until_window_closes().with_name("final"))
      .to_stream()
      .to("final-counts");
  clicks.group_by_key().windowed_by(sluice::sliding_windows::of_time_difference_with_no_grace(5s)).count("sliding");
  clicks.group_by_key()
      .windowed_by(sluice::session_windows::of_inactivity_gap_and_grace(30s, 0s))
      .count("sessions")
      .suppress(sluice::until_window_closes())
      .to_stream()
      .to("final-sessions");
  auto views = b.stream<std::string, std::string>("views");
  clicks
      .outer_join(
          views,
          [](const std::optional<std::string>& c, const std::optional<std::string>& v) {
            return c.value_or("") + v.value_or("");
          },
          sluice::join_windows::of_time_difference_and_grace(1s, 1s).before(2s))
      .to("joined");
  auto prices = b.table<std::string, std::int64_t>("prices", "prices-store");
  auto quantities = b.table<std::string, std::int64_t>("quantities", "quantities-store");
  prices
      .left_join(
          quantities, [](std::int64_t p, const std::optional<std::int64_t>& q) { return p * q.value_or(0); }, "totals")
      .to_stream()
      .to("totals-out");
  return b.build();
}

}  // namespace

TEST(window_and_join_description, describe_and_dot_name_every_window_suppress_and_join_node_and_store) {
  const auto t = every_window_and_join_node();
  const std::string described = t.describe();
  const std::string dot = t.to_dot();
  // Every node kind these operators add, as Kafka Streams names them, and every store.
  for (const char* part : {"KSTREAM-AGGREGATE-", "KTABLE-SUPPRESS-", "final", "KSTREAM-WINDOWED-", "KSTREAM-OUTERTHIS-",
                           "KSTREAM-OUTEROTHER-", "KSTREAM-MERGE-", "KTABLE-LEFTJOINTHIS-", "KTABLE-LEFTJOINOTHER-",
                           "KTABLE-MERGE-", "per-window", "sliding", "sessions", "final-store",
                           "KTABLE-SUPPRESS-STATE-STORE-", "-store", "KSTREAM-OUTERSHARED-", "totals"})
    EXPECT_NE(described.find(part), std::string::npos) << part << " in\n" << described;
  // Each node and store describe() names is in the DOT graph too, stores as cylinders.
  const std::regex node_line(R"((Source|Processor|Sink): (\S+) \((?:stores|topics|topic): \[?([^\])]*)\]?\))");
  std::set<std::string> nodes, stores;
  for (std::sregex_iterator it(described.begin(), described.end(), node_line), end; it != end; ++it) {
    nodes.insert((*it)[2]);
    if ((*it)[1] == "Processor") {
      const std::string list = (*it)[3];
      const std::regex item(R"([^,\s]+)");
      for (std::sregex_iterator s(list.begin(), list.end(), item); s != end; ++s) stores.insert(s->str());
    }
  }
  EXPECT_GT(nodes.size(), 20u) << described;
  for (const auto& n : nodes) EXPECT_NE(dot.find("label=\"" + n + "\""), std::string::npos) << n << " in\n" << dot;
  for (const char* s : {"per-window", "sliding", "sessions", "final-store", "totals", "KSTREAM-OUTERSHARED-"})
    EXPECT_TRUE(std::any_of(stores.begin(), stores.end(), [&](const std::string& x) { return x.find(s) == 0; }))
        << s << " among the stores of\n"
        << described;
  for (const auto& s : stores)
    EXPECT_NE(dot.find("\"store:" + s + "\" [label=\"" + s + "\", shape=cylinder]"), std::string::npos) << s << " in\n"
                                                                                                        << dot;
}
