// kstream::join, left_join, outer_join with join_windows: stream–stream windowed joins, as
// Kafka Streams 3.9's KStream#join / leftJoin / outerJoin with JoinWindows.
//
//   impressions.left_join(clicks, [](const impression& i, const std::optional<click>& c) { return ...; },
//                         sluice::join_windows::of_time_difference_and_grace(10s, 2s))
//       .to("impressions-with-clicks");
//
// Each stream's records are kept in a window store for window size + grace; left and outer
// joins hold records without a match in a shared store until their window closes. See
// docs/time-and-windows.md, "Stream–stream joins".
//
// Thread-safety: values; build on one thread, like the rest of the DSL.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

#include "sluice/builder.hpp"
#include "sluice/detail/stream_join_nodes.hpp"
#include "sluice/window_store.hpp"
#include "sluice/windows.hpp"

namespace sluice {

template <class K, class V>
template <detail::stream_join_kind Kind, class VO, class F>
auto kstream<K, V>::stream_joined(const kstream<K, VO>& other, F joiner, const join_windows& windows,
                                  std::string name) const {
  using kind = detail::stream_join_kind;
  using side = detail::stream_join_side;
  using L = std::conditional_t<Kind == kind::outer, std::optional<V>, V>;
  using R = std::conditional_t<Kind == kind::inner, VO, std::optional<VO>>;
  using VOut = std::remove_cvref_t<std::invoke_result_t<F&, const L&, const R&>>;
  if (g_ != other.g_)
    throw error(errc::invalid_topology,
                "stream join: the two streams come from different streams_builders; build both "
                "with one");
  if (windows.size().count() + windows.grace().count() == 0)
    throw error(errc::invalid_topology,
                "stream join: join_windows with before + after + grace = 0 ms keep no record in the join's "
                "window stores (their retention is before + after + grace, as in Kafka Streams, where such a "
                "join never finds a partner); give a time difference, after() or a grace period above 0");
  auto& g = *g_;
  // Kafka Streams' names: JOINTHIS/JOINOTHER (inner), JOINTHIS/OUTEROTHER (left),
  // OUTERTHIS/OUTEROTHER (outer); their stores "<node>-store", the shared outer store
  // "KSTREAM-OUTERSHARED-<this node's number>-store".
  const std::string this_windowed = g.name("KSTREAM-WINDOWED");
  const std::string other_windowed = g.name("KSTREAM-WINDOWED");
  const std::string this_node = g.name(Kind == kind::outer ? "KSTREAM-OUTERTHIS" : "KSTREAM-JOINTHIS");
  const std::string other_node = g.name(Kind == kind::inner ? "KSTREAM-JOINOTHER" : "KSTREAM-OUTEROTHER");
  // With a name, Kafka Streams' StreamJoined.withStoreName(name) suffixes.
  const std::string this_store = name.empty()
                                     ? this_node + "-store"
                                     : name + (Kind == kind::outer ? "-outer-this-join-store" : "-this-join-store");
  const std::string other_store = name.empty()
                                      ? other_node + "-store"
                                      : name + (Kind == kind::inner ? "-other-join-store" : "-outer-other-join-store");
  std::string outer_store;
  if (Kind != kind::inner)
    outer_store = name.empty() ? "KSTREAM-OUTERSHARED-" + this_node.substr(this_node.rfind('-') + 1) + "-store"
                               : name + (Kind == kind::outer ? "-outer-shared-join-store" : "-left-shared-join-store");

  auto left_in = repartitioned(this_store);
  auto right_in = other.repartitioned(other_store);

  // Kafka Streams' join stores: retention = window size (before + after) + grace, duplicates
  // kept; each store's records expire by that store's own observed stream time.
  for (const auto& s : {this_store, other_store})
    g.add_store(detail::window_store_spec({.name = s}, {.retention = windows.size() + windows.grace()}));
  if (!outer_store.empty()) g.add_store({.name = outer_store});

  auto this_win = g.add({.name = this_windowed,
                         .kind = detail::node_kind::processor,
                         .stores = {this_store},
                         .parents = {left_in.node_},
                         .factory = detail::factory_of(detail::join_window_node<K, V>(this_store))});
  auto other_win = g.add({.name = other_windowed,
                          .kind = detail::node_kind::processor,
                          .stores = {other_store},
                          .parents = {right_in.node_},
                          .factory = detail::factory_of(detail::join_window_node<K, VO>(other_store))});

  auto trackers = std::make_shared<detail::join_time_trackers>();
  const std::int64_t before = windows.before().count(), after = windows.after().count();
  const std::int64_t grace = windows.grace().count();
  std::vector<std::string> this_stores{other_store}, other_stores{this_store};
  if (!outer_store.empty()) {
    this_stores.push_back(outer_store);
    other_stores.push_back(outer_store);
  }
  using this_join = detail::stream_join_node<K, V, VO, VOut, F, Kind, side::left, Kind != kind::inner>;
  using other_join = detail::stream_join_node<K, VO, V, VOut, F, Kind, side::right, Kind == kind::outer>;
  auto this_idx = g.add({.name = this_node,
                         .kind = detail::node_kind::processor,
                         .stores = this_stores,
                         .parents = {this_win},
                         .factory = detail::factory_of(this_join({.other_store = other_store,
                                                                  .outer_store = outer_store,
                                                                  .before = before,
                                                                  .after = after,
                                                                  .grace = grace,
                                                                  .windows_before = before,
                                                                  .windows_after = after},
                                                                 joiner, trackers))});
  auto other_idx = g.add({.name = other_node,
                          .kind = detail::node_kind::processor,
                          .stores = other_stores,
                          .parents = {other_win},
                          .factory = detail::factory_of(other_join({.other_store = this_store,
                                                                    .outer_store = outer_store,
                                                                    .before = after,
                                                                    .after = before,
                                                                    .grace = grace,
                                                                    .windows_before = before,
                                                                    .windows_after = after},
                                                                   joiner, trackers))});
  auto merge = g.add({.name = g.name("KSTREAM-MERGE"),
                      .kind = detail::node_kind::processor,
                      .parents = {this_idx, other_idx},
                      .factory = detail::factory_of(detail::pass_node<K, VOut>())});
  return kstream<K, VOut>(g_, merge, false);
}

template <class K, class V>
template <class VO, class F>
auto kstream<K, V>::join(const kstream<K, VO>& other, F joiner, const join_windows& windows, std::string name) const {
  static_assert(std::is_invocable_v<F&, const V&, const VO&>,
                "join: the joiner must be callable as VR(const V& value, const VO& other_value)");
  return stream_joined<detail::stream_join_kind::inner>(other, std::move(joiner), windows, std::move(name));
}

template <class K, class V>
template <class VO, class F>
auto kstream<K, V>::left_join(const kstream<K, VO>& other, F joiner, const join_windows& windows,
                              std::string name) const {
  static_assert(std::is_invocable_v<F&, const V&, const std::optional<VO>&>,
                "left_join: the joiner must be callable as VR(const V& value, const std::optional<VO>& other_value)");
  return stream_joined<detail::stream_join_kind::left>(other, std::move(joiner), windows, std::move(name));
}

template <class K, class V>
template <class VO, class F>
auto kstream<K, V>::outer_join(const kstream<K, VO>& other, F joiner, const join_windows& windows,
                               std::string name) const {
  static_assert(std::is_invocable_v<F&, const std::optional<V>&, const std::optional<VO>&>,
                "outer_join: the joiner must be callable as VR(const std::optional<V>& value, const "
                "std::optional<VO>& other_value)");
  return stream_joined<detail::stream_join_kind::outer>(other, std::move(joiner), windows, std::move(name));
}

}  // namespace sluice
