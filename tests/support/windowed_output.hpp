// Reading what a windowed topology sent, for driver tests: the records of a topic whose keys
// are windowed (time or sliding windows) or session-windowed, as tuples that compare with a
// hand-computed expectation in one EXPECT_EQ. Reading consumes the records, as
// test_output_topic::read_all does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "sluice/sluice.hpp"
#include "sluice/test_driver.hpp"

namespace sluice::test {

/// (key, window start, value, timestamp), in output order.
template <class V>
using window_updates = std::vector<std::tuple<std::string, std::int64_t, V, std::int64_t>>;

/// Every record on `topic`, a topic of windowed<std::string> keys and V values.
template <class V>
window_updates<V> windowed_records(sluice::testing::topology_test_driver& d, const std::string& topic) {
  window_updates<V> out;
  for (auto& r : d.output_topic<sluice::windowed<std::string>, V>(topic).read_all())
    out.emplace_back(r.key.key, r.key.window.start, r.value, r.timestamp);
  return out;
}

/// (key, session start, session end, value or nullopt for a tombstone, timestamp), in output
/// order.
template <class V>
using session_updates =
    std::vector<std::tuple<std::string, std::int64_t, std::int64_t, std::optional<V>, std::int64_t>>;

/// Every record on `topic`, a topic of session_windowed<std::string> keys and std::optional<V>
/// values (a session aggregation's to_stream()).
template <class V>
session_updates<V> read_sessions(sluice::testing::topology_test_driver& d, const std::string& topic) {
  session_updates<V> out;
  for (auto& r : d.output_topic<sluice::session_windowed<std::string>, std::optional<V>>(topic).read_all())
    out.emplace_back(r.key.key, r.key.window.start, r.key.window.end, r.value, r.timestamp);
  return out;
}

}  // namespace sluice::test
