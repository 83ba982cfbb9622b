// ktime_windowed_stream<K, V, W>: a grouped stream cut into time windows, tumbling, hopping
// or sliding (kgrouped_stream::windowed_by), the input of windowed count, reduce and aggregate. Their
// results live in a window store (sluice/window_store.hpp) and come out as a
// ktable<windowed<K>, A>, one update per record and window (Kafka Streams 3.9's default
// emit strategy, "on window update"). See docs/time-and-windows.md.
//
// Thread-safety: build on one thread, like the rest of the DSL.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "sluice/builder.hpp"
#include "sluice/detail/window_nodes.hpp"
#include "sluice/error.hpp"
#include "sluice/window_store.hpp"
#include "sluice/windows.hpp"

namespace sluice {

/// The handle to a windowed aggregation's store, e.g. to inspect it in a test:
/// `driver.state_store<sluice::windowed_aggregate_store<std::string, std::int64_t>>("counts")`
/// then `.fetch(key, window_start)` -> value_and_timestamp<A>.
template <class K, class A>
using windowed_aggregate_store = detail::window_aggregate_store_handle<K, A>;

/// W: time_windows (tumbling, hopping) or sliding_windows.
template <class K, class V, class W>
class ktime_windowed_stream {
 public:
  ktime_windowed_stream(std::shared_ptr<detail::graph_builder> g, std::size_t node, bool repartition, W windows)
      : g_(std::move(g)), node_(node), repartition_(repartition), windows_(windows) {}

  /// Counts records per key and window into the window store `store`.
  ktable<windowed<K>, std::int64_t> count(materialized store) {
    auto initial = [] { return std::optional<std::int64_t>(0); };
    auto fold = [](const K&, const V&, std::optional<std::int64_t> n) { return n.value_or(0) + 1; };
    return stateful<std::int64_t>(initial, std::move(fold), std::move(store));
  }
  ktable<windowed<K>, std::int64_t> count(std::string store) { return count(named(std::move(store))); }

  /// Combines values per key and window: reducer(aggregate, value); the window's first
  /// value starts it.
  template <class F>
  ktable<windowed<K>, V> reduce(F reducer, materialized store) {
    static_assert(std::is_invocable_r_v<V, F&, const V&, const V&>,
                  "reduce: the reducer must be callable as V(const V& aggregate, const V& value)");
    auto initial = [] { return std::optional<V>(); };  // a reduce has no initializer
    auto fold = [reducer = std::move(reducer)](const K&, const V& v, std::optional<V> agg) mutable -> V {
      if (!agg) return v;
      return std::invoke(reducer, *agg, v);
    };
    return stateful<V>(initial, std::move(fold), std::move(store));
  }
  template <class F>
  ktable<windowed<K>, V> reduce(F reducer, std::string store) {
    return reduce(std::move(reducer), named(std::move(store)));
  }

  /// Folds values per key and window: initializer() -> A starts each window,
  /// aggregator(key, value, A) -> A.
  template <class Init, class Agg>
  auto aggregate(Init initializer, Agg aggregator, materialized store) {
    static_assert(std::is_invocable_v<Init&>, "aggregate: the initializer must be callable as A()");
    using A = std::remove_cvref_t<std::invoke_result_t<Init&>>;
    static_assert(std::is_invocable_r_v<A, Agg&, const K&, const V&, A>,
                  "aggregate: the aggregator must be callable as A(const K& key, const V& value, A aggregate)");
    auto initial = [initializer = std::move(initializer)]() mutable {
      return std::optional<A>(std::invoke(initializer));
    };
    // The node passes the window's aggregate or initial()'s value: never nullopt here.
    auto fold = [aggregator = std::move(aggregator)](const K& k, const V& v, std::optional<A> agg) mutable -> A {
      return std::invoke(aggregator, k, v, std::move(*agg));
    };
    return stateful<A>(std::move(initial), std::move(fold), std::move(store));
  }
  template <class Init, class Agg>
  auto aggregate(Init initializer, Agg aggregator, std::string store) {
    return aggregate(std::move(initializer), std::move(aggregator), named(std::move(store)));
  }

 private:
  static materialized named(std::string name) {
    materialized m;
    m.name = std::move(name);
    return m;
  }

  /// Repartitions if needed, declares the window store (retention as Kafka Streams'
  /// default: size + grace, or 2 x time difference + grace for sliding windows), adds the
  /// aggregating node.
  template <class A, class Initial, class Fold>
  ktable<windowed<K>, A> stateful(Initial initial, Fold fold, materialized store) {
    if (store.ttl.count() != 0)
      throw error(errc::invalid_topology, "windowed store '" + store.name +
                                              "': ttl does not apply to window stores; windows are kept for the window "
                                              "size + grace and dropped by time segment");
    kstream<K, V> in(g_, node_, repartition_);
    in = in.repartitioned(store.name);
    auto& g = *g_;
    auto spec = detail::window_store_spec(detail::store_spec_for(store), {.retention = retention()});
    spec.codec = detail::make_window_store_codec<K, A>(window_size().count(), false);
    g.add_store(std::move(spec));
    auto idx = g.add({.name = g.name("KSTREAM-AGGREGATE"),
                      .kind = detail::node_kind::processor,
                      .stores = {store.name},
                      .parents = {in.node_index()},
                      .factory = factory<A>(store.name, std::move(initial), std::move(fold))});
    return ktable<windowed<K>, A>(g_, idx, store.name, windows_.grace(), std::nullopt,
                                  detail::table_store_kind::window);
  }

  /// A window's length: its end is its start + this.
  std::chrono::milliseconds window_size() const {
    if constexpr (std::is_same_v<W, sliding_windows>)
      return windows_.time_difference();
    else
      return windows_.size();
  }

  std::chrono::milliseconds retention() const {
    if constexpr (std::is_same_v<W, sliding_windows>)
      // At least 1 ms: a store keeps windows starting after observed time - retention, so
      // the window [t, t] of a difference of 0 without grace lives until a later one starts.
      return std::max(2 * windows_.time_difference() + windows_.grace(), std::chrono::milliseconds(1));
    else
      return windows_.size() + windows_.grace();
  }

  template <class A, class Initial, class Fold>
  std::function<std::unique_ptr<detail::node>()> factory(const std::string& store, Initial initial, Fold fold) const {
    if constexpr (std::is_same_v<W, sliding_windows>)
      return detail::factory_of(detail::sliding_window_aggregate_node<K, V, A, Initial, Fold>(
          store, windows_, std::move(initial), std::move(fold)));
    else
      return detail::factory_of(
          detail::window_aggregate_node<K, V, A, Initial, Fold>(store, windows_, std::move(initial), std::move(fold)));
  }

  std::shared_ptr<detail::graph_builder> g_;
  std::size_t node_;
  bool repartition_;
  W windows_;
};

/// The handle to a session aggregation's store, e.g. to inspect it in a test:
/// `driver.state_store<sluice::session_aggregate_store<std::string, std::int64_t>>("sessions")`
/// then `.fetch(key, session_end)` -> session_value<A>{aggregate, start}.
template <class K, class A>
using session_aggregate_store = detail::session_aggregate_store_handle<K, A>;

/// A grouped stream cut into sessions (kgrouped_stream::windowed_by(session_windows)), the
/// input of session count, reduce and aggregate. Results come out as a
/// ktable<session_windowed<K>, std::optional<A>>: a session's new aggregate on every update,
/// and nullopt (a tombstone on the output topic) for a session merged into another.
template <class K, class V>
class ksession_windowed_stream {
 public:
  ksession_windowed_stream(std::shared_ptr<detail::graph_builder> g, std::size_t node, bool repartition,
                           session_windows windows)
      : g_(std::move(g)), node_(node), repartition_(repartition), windows_(windows) {}

  /// Counts records per key and session; merged sessions' counts add up.
  ktable<session_windowed<K>, std::optional<std::int64_t>> count(materialized store) {
    auto fold = [](const K&, const V&, std::optional<std::int64_t> n) { return n.value_or(0) + 1; };
    auto merge = [](const K&, std::optional<std::int64_t> n, std::int64_t session) { return n.value_or(0) + session; };
    return stateful<std::int64_t>(std::move(fold), std::move(merge), std::move(store));
  }
  ktable<session_windowed<K>, std::optional<std::int64_t>> count(std::string store) {
    return count(named(std::move(store)));
  }

  /// Combines values per key and session with reducer(aggregate, value); merging two
  /// sessions combines their aggregates with the same reducer, in order of session end.
  template <class F>
  ktable<session_windowed<K>, std::optional<V>> reduce(F reducer, materialized store) {
    static_assert(std::is_invocable_r_v<V, F&, const V&, const V&>,
                  "reduce: the reducer must be callable as V(const V& aggregate, const V& value)");
    auto fold = [reducer](const K&, const V& v, std::optional<V> agg) mutable -> V {
      if (!agg) return v;
      return std::invoke(reducer, *agg, v);
    };
    auto merge = [reducer](const K&, std::optional<V> agg, const V& session) mutable -> V {
      if (!agg) return session;
      return std::invoke(reducer, *agg, session);
    };
    return stateful<V>(std::move(fold), std::move(merge), std::move(store));
  }
  template <class F>
  ktable<session_windowed<K>, std::optional<V>> reduce(F reducer, std::string store) {
    return reduce(std::move(reducer), named(std::move(store)));
  }

  /// Folds values per key and session: initializer() -> A starts a session,
  /// aggregator(key, value, A) -> A folds a record in, merger(key, A, A) -> A combines the
  /// sessions a record bridges (starting from initializer(), in order of session end), as
  /// Kafka Streams' SessionWindowedKStream#aggregate.
  template <class Init, class Agg, class Merger>
  auto aggregate(Init initializer, Agg aggregator, Merger merger, materialized store) {
    static_assert(std::is_invocable_v<Init&>, "aggregate: the initializer must be callable as A()");
    using A = std::remove_cvref_t<std::invoke_result_t<Init&>>;
    static_assert(std::is_invocable_r_v<A, Agg&, const K&, const V&, A>,
                  "aggregate: the aggregator must be callable as A(const K& key, const V& value, A aggregate)");
    static_assert(std::is_invocable_r_v<A, Merger&, const K&, A, A>,
                  "aggregate: the session merger must be callable as A(const K& key, A aggregate, A session)");
    auto fold = [initializer, aggregator](const K& k, const V& v, std::optional<A> agg) mutable -> A {
      return std::invoke(aggregator, k, v, agg ? std::move(*agg) : std::invoke(initializer));
    };
    auto merge = [initializer, merger](const K& k, std::optional<A> agg, const A& session) mutable -> A {
      return std::invoke(merger, k, agg ? std::move(*agg) : std::invoke(initializer), session);
    };
    return stateful<A>(std::move(fold), std::move(merge), std::move(store));
  }
  template <class Init, class Agg, class Merger>
  auto aggregate(Init initializer, Agg aggregator, Merger merger, std::string store) {
    return aggregate(std::move(initializer), std::move(aggregator), std::move(merger), named(std::move(store)));
  }

 private:
  static materialized named(std::string name) {
    materialized m;
    m.name = std::move(name);
    return m;
  }

  /// Repartitions if needed, declares the session store (a window store keyed by session
  /// end; retention = gap + grace, Kafka Streams' default), adds the aggregating node.
  template <class A, class Fold, class Merge>
  ktable<session_windowed<K>, std::optional<A>> stateful(Fold fold, Merge merge, materialized store) {
    if (store.ttl.count() != 0)
      throw error(errc::invalid_topology, "session store '" + store.name +
                                              "': ttl does not apply to session stores; sessions are kept for the "
                                              "inactivity gap + grace and dropped by time segment");
    kstream<K, V> in(g_, node_, repartition_);
    in = in.repartitioned(store.name);
    auto& g = *g_;
    auto spec = detail::window_store_spec(detail::store_spec_for(store),
                                          {.retention = windows_.inactivity_gap() + windows_.grace()});
    spec.codec = detail::make_window_store_codec<K, A>(0, true);
    g.add_store(std::move(spec));
    auto idx = g.add({.name = g.name("KSTREAM-AGGREGATE"),
                      .kind = detail::node_kind::processor,
                      .stores = {store.name},
                      .parents = {in.node_index()},
                      .factory = detail::factory_of(detail::session_aggregate_node<K, V, A, Fold, Merge>(
                          store.name, windows_, std::move(fold), std::move(merge)))});
    // A session ending at e can still grow until e + gap: Kafka Streams suppresses its final
    // result for gap + grace past its end.
    return ktable<session_windowed<K>, std::optional<A>>(g_, idx, store.name,
                                                         windows_.inactivity_gap() + windows_.grace(), std::nullopt,
                                                         detail::table_store_kind::window);
  }

  std::shared_ptr<detail::graph_builder> g_;
  std::size_t node_;
  bool repartition_;
  session_windows windows_;
};

template <class K, class V>
ksession_windowed_stream<K, V> kgrouped_stream<K, V>::windowed_by(const session_windows& windows) const {
  return ksession_windowed_stream<K, V>(g_, node_, repartition_, windows);
}

template <class K, class V>
ktime_windowed_stream<K, V> kgrouped_stream<K, V>::windowed_by(const time_windows& windows) const {
  return ktime_windowed_stream<K, V>(g_, node_, repartition_, windows);
}

template <class K, class V>
ktime_windowed_stream<K, V, sliding_windows> kgrouped_stream<K, V>::windowed_by(const sliding_windows& windows) const {
  return ktime_windowed_stream<K, V, sliding_windows>(g_, node_, repartition_, windows);
}

}  // namespace sluice
