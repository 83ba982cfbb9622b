// ktable::join, left_join, outer_join: table–table joins on the key, as Kafka Streams 3.9's
// KTable#join / leftJoin / outerJoin.
//
//   auto totals = quantities.join(prices, [](std::int64_t qty, std::int64_t price) { return qty * price; },
//                                 "totals");
//   totals.to_stream().to("totals-out");  // std::optional<std::int64_t>: nullopt is a tombstone
//
// Each input table's updates (deletions included) look the key up in the other table's
// store (a windowed aggregation's table: its window or session store by key and window; a
// suppressed table: first its suppression buffer, which answers a buffered key with the value
// emitted before it); the results go to the join's store and on. See docs/time-and-windows.md, "Table–table
// joins", for what comes out when.
//
// Thread-safety: values; build on one thread, like the rest of the DSL.
#pragma once

#include <optional>
#include <string>
#include <vector>
#include <type_traits>
#include <utility>

#include "sluice/builder.hpp"
#include "sluice/detail/table_join_nodes.hpp"
#include "sluice/error.hpp"
#include "sluice/windows.hpp"

namespace sluice {

template <class K, class V>
template <detail::table_join_kind Kind, class VO, class F>
auto ktable<K, V>::joined(const ktable<K, VO>& other, F joiner, materialized store) const {
  // A join's result is a ktable<K, std::optional<X>> whose store holds X: the value types
  // the joiner sees are those of the stores.
  using VL = typename detail::unwrap_optional<V>::type;
  using VR = typename detail::unwrap_optional<VO>::type;
  using L = std::conditional_t<Kind == detail::table_join_kind::outer, std::optional<VL>, VL>;
  using R = std::conditional_t<Kind == detail::table_join_kind::inner, VR, std::optional<VR>>;
  using Out = std::remove_cvref_t<std::invoke_result_t<F&, const L&, const R&>>;
  constexpr bool windowed_key = detail::is_windowed<K>::value || detail::is_session_windowed<K>::value;
  if (g_ != other.g_)
    throw error(errc::invalid_topology,
                "table join of " + described() + " and " + other.described() +
                    ": the two tables come from different streams_builders; build both with one");
  if (store.name.empty())
    throw error(errc::invalid_topology, "table join of " + described() + " and " + other.described() +
                                            ": the result's store needs a name (materialized{.name = ...})");
  constexpr const char* this_kind = Kind == detail::table_join_kind::inner  ? "KTABLE-JOINTHIS"
                                    : Kind == detail::table_join_kind::left ? "KTABLE-LEFTJOINTHIS"
                                                                            : "KTABLE-OUTERJOINTHIS";
  constexpr const char* other_kind = Kind == detail::table_join_kind::inner  ? "KTABLE-JOINOTHER"
                                     : Kind == detail::table_join_kind::left ? "KTABLE-LEFTJOINOTHER"
                                                                             : "KTABLE-OUTERJOINOTHER";
  auto& g = *g_;
  auto spec = detail::store_spec_for(store);
  // Each result with its timestamp (detail::table_join_merge_node), as Kafka Streams keeps it.
  spec.format = detail::value_format::timestamped;
  // A windowed key has no text form for interactive queries: the store has no codec then.
  if constexpr (!windowed_key) spec.codec = detail::make_timestamped_store_codec<K, Out>();
  g.add_store(std::move(spec));
  // A table read from a topic passes its deletions on from its source node (after its store
  // applied them: the source's children run in the order they were added, the store's
  // materializing node first); an aggregation's table never deletes and passes its values (a
  // session aggregation's table passes the sessions merged away as nullopt). A side reads the
  // other table by key from its key-value store, or, for a windowed aggregation's table, by
  // key and window from its window or session store (Kafka Streams' windowed value getters).
  // A suppressed table is read through its buffers first (detail::table_getter): a key one
  // holds back answers with what that suppression last emitted, as Kafka Streams' suppressed
  // value getter.
  auto side = [&]<class VThis, class VOther, class Input, detail::table_join_side Side, class VOtherTable>(
                  const ktable<K, Input>& self, const ktable<K, VOtherTable>& other_table, const char* kind) {
    auto make = [&]<class Getter>() {
      if (self.update_node_)
        return detail::factory_of(
            detail::table_join_side_node<K, std::optional<VThis>, VThis, VOther, Out, F, Kind, Side, Getter>(
                other_table.store_, other_table.suppression_buffers_, store.name, joiner));
      return detail::factory_of(detail::table_join_side_node<K, Input, VThis, VOther, Out, F, Kind, Side, Getter>(
          other_table.store_, other_table.suppression_buffers_, store.name, joiner));
    };
    std::function<std::unique_ptr<detail::node>()> factory;
    if constexpr (windowed_key) {
      if (other_table.store_kind_ == detail::table_store_kind::window)
        factory = make.template operator()<detail::window_table_getter<K, VOther>>();
    }
    if (!factory) factory = make.template operator()<detail::key_value_getter<K, VOther>>();
    std::vector<std::string> stores{other_table.store_, store.name};
    stores.insert(stores.end(), other_table.suppression_buffers_.begin(), other_table.suppression_buffers_.end());
    return g.add({.name = g.name(kind),
                  .kind = detail::node_kind::processor,
                  .stores = std::move(stores),
                  .parents = {self.update_node_.value_or(self.node_)},
                  .factory = std::move(factory)});
  };
  auto left = side.template operator()<VL, VR, V, detail::table_join_side::left>(*this, other, this_kind);
  auto right = side.template operator()<VR, VL, VO, detail::table_join_side::right>(other, *this, other_kind);
  auto merge = g.add({.name = g.name("KTABLE-MERGE"),
                      .kind = detail::node_kind::processor,
                      .stores = {store.name},
                      .parents = {left, right},
                      .factory = detail::factory_of(detail::table_join_merge_node<K, Out>(store.name))});
  return ktable<K, std::optional<Out>>(g_, merge, store.name);
}

template <class K, class V>
template <class VO, class F>
auto ktable<K, V>::join(const ktable<K, VO>& other, F joiner, materialized store) const {
  using VL = typename detail::unwrap_optional<V>::type;
  using VR = typename detail::unwrap_optional<VO>::type;
  static_assert(std::is_invocable_v<F&, const VL&, const VR&>,
                "join: the joiner must be callable as VR(const V& value, const VO& other_value)");
  return joined<detail::table_join_kind::inner>(other, std::move(joiner), std::move(store));
}

template <class K, class V>
template <class VO, class F>
auto ktable<K, V>::left_join(const ktable<K, VO>& other, F joiner, materialized store) const {
  using VL = typename detail::unwrap_optional<V>::type;
  using VR = typename detail::unwrap_optional<VO>::type;
  static_assert(std::is_invocable_v<F&, const VL&, const std::optional<VR>&>,
                "left_join: the joiner must be callable as VR(const V& value, const std::optional<VO>& other_value)");
  return joined<detail::table_join_kind::left>(other, std::move(joiner), std::move(store));
}

template <class K, class V>
template <class VO, class F>
auto ktable<K, V>::outer_join(const ktable<K, VO>& other, F joiner, materialized store) const {
  using VL = typename detail::unwrap_optional<V>::type;
  using VR = typename detail::unwrap_optional<VO>::type;
  static_assert(std::is_invocable_v<F&, const std::optional<VL>&, const std::optional<VR>&>,
                "outer_join: the joiner must be callable as VR(const std::optional<V>& value, const "
                "std::optional<VO>& other_value)");
  return joined<detail::table_join_kind::outer>(other, std::move(joiner), std::move(store));
}

}  // namespace sluice
