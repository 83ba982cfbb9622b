// The typed DSL: streams_builder, kstream, ktable, grouped streams and global tables, in
// the vocabulary of Kafka Streams.
//
//   sluice::streams_builder b;
//   b.stream<std::string, std::string>("words")
//       .filter([](const std::string&, const std::string& w) { return !w.empty(); })
//       .group_by([](const std::string&, const std::string& w) { return w; })
//       .count("word-counts")
//       .to_stream()
//       .to("word-counts-out");
//   sluice::topology t = b.build();
//
// Types are checked here, at compile time; build() erases them into a graph of nodes.
// A user function with the wrong signature fails with a static_assert that says what
// was expected. Key-changing operations (map, select_key, flat_map, group_by) followed by
// a stateful one insert a repartition topic, "<application.id>-<store>-repartition"
// (detail::repartition_topic).
//
// Thread-safety: build on one thread; the built topology is immutable and shareable.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <iterator>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "sluice/detail/dsl_nodes.hpp"
#include "sluice/detail/store_codec.hpp"
#include "sluice/http.hpp"
#include "sluice/processor.hpp"
#include "sluice/topology.hpp"

namespace sluice {

/// How a store is kept: backend, changelog, retention. Fields have defaults; set what you need.
struct materialized {
  std::string name;                                ///< the store's name. Required.
  store_backend backend = store_backend::rocksdb;  ///< Default: rocksdb
  bool logged = true;                              ///< Default: a changelog topic
  std::chrono::milliseconds ttl{0};                ///< Default: 0, never expire
  state::rocksdb_config_setter rocksdb_options{};  ///< Default: none (expert hook; see configure_rocksdb)
  /// The store's kind, built over its key-value storage (see detail::store_factory); a
  /// topology's own kinds (ranked index, queue) come with a function that fills this in.
  /// Default: empty, a key-value store.
  detail::store_factory make_store{};
  /// Default: false, a key-value store's changelog gets the last write per key of each commit
  /// (statestore.changelog.buffer.bytes). true: every write goes to the changelog, in order
  /// (at once under exactly-once, at the commit under at-least-once, after the outputs sent
  /// before it), for a store whose at-least-once recovery should keep each write that reached
  /// the broker before a crash (other store kinds always log every write).
  bool log_every_write = false;
};

namespace detail {

/// The store a `materialized` asks for, as far as the storage goes: its name, backend,
/// changelog, ttl and RocksDB hook. Each operation adds what it knows: the store's kind
/// (make_store) or the codec of its key and value types.
inline store_spec store_spec_for(const materialized& m) {
  return {.name = m.name,
          .backend = m.backend,
          .logged = m.logged,
          .ttl = m.ttl,
          .rocksdb_options = m.rocksdb_options,
          .log_every_write = m.log_every_write};
}

/// Collects nodes and stores while the DSL is used; shared by every stream handle.
class graph_builder {
 public:
  using node_factory = std::function<std::unique_ptr<node>()>;

  std::size_t add(node_spec spec);
  /// Kafka Streams style generated names: "KSTREAM-FILTER-0000000003".
  std::string name(std::string_view kind);
  void add_store(store_spec spec);

  // The typed DSL's usual nodes, added out of line (framework/src/dsl/topology.cpp) so
  // that a unit using the DSL compiles only the factory of each node, not the spec around it.
  /// A processor "<kind>-<n>" under `parent` using `stores`; returns its index.
  std::size_t add_processor(std::string_view kind, std::size_t parent, node_factory factory,
                            std::vector<std::string> stores = {});
  /// A source "<kind>-<n>" of `topics`; returns its index.
  std::size_t add_source(std::string_view kind, std::vector<std::string> topics, node_factory factory);
  /// A sink "KSTREAM-SINK-<n>" of `topic` under `parent`.
  void add_sink(std::size_t parent, const std::string& topic, node_factory factory);
  /// A sink to the repartition topic called `name` under `parent`, then the source that
  /// reads it back; returns the source's index.
  std::size_t add_repartition(std::size_t parent, const std::string& name, node_factory sink, node_factory source);
  /// An aggregation (count, reduce, aggregate): its key-value store as `store` asks, with
  /// `codec` for queries, keeping each value with its timestamp (value_format::timestamped),
  /// then its processor "KSTREAM-AGGREGATE-<n>" under `parent` using
  /// that store; returns the processor's index.
  std::size_t add_aggregation(std::size_t parent, const materialized& store, std::shared_ptr<const store_codec> codec,
                              node_factory factory);

  std::vector<node_spec> nodes;
  std::vector<store_spec> stores;
  std::vector<http::route> endpoints;
  std::size_t counter = 0;
};

/// Which rows a table–table join keeps (sluice/detail/table_join_nodes.hpp).
enum class table_join_kind;
/// What keeps a ktable's rows: a key-value store (a table read from a topic, an aggregation,
/// a join), a window or session store (a windowed aggregation), or a suppression buffer.
/// The first two can be joined.
enum class table_store_kind { key_value, window };
/// Which records a stream–stream join keeps (sluice/detail/stream_join_nodes.hpp).
enum class stream_join_kind;

/// What a range-for over an R visits (std::ranges::range without <ranges>).
template <class R>
concept iterable = requires(R& r) {
  std::ranges::begin(r);
  std::ranges::end(r);
};
template <class R>
using iterable_value_t = std::iter_value_t<decltype(std::ranges::begin(std::declval<R&>()))>;

/// Copies a prototype node of type N (the only per-type part of a node factory).
template <class N>
std::unique_ptr<node> clone_node(const node& prototype) {
  return std::make_unique<N>(static_cast<const N&>(prototype));
}

/// The factory of the nodes copied from `prototype` by `clone`, one per call (per task).
/// Out of line (framework/src/dsl/topology.cpp): every node factory is this one
/// std::function type, compiled once, not a std::function around a lambda per node type
/// in every unit.
graph_builder::node_factory prototype_factory(std::unique_ptr<node> prototype,
                                              std::unique_ptr<node> (*clone)(const node&));

template <class N>
graph_builder::node_factory factory_of(N prototype) {
  return prototype_factory(std::make_unique<N>(std::move(prototype)), &clone_node<N>);
}

}  // namespace detail

template <class K, class V>
class kstream;
template <class K, class V>
class ktable;
template <class K, class V>
class global_table;
class time_windows;
class sliding_windows;
class session_windows;
class join_windows;
template <class K, class V>
class ksession_windowed_stream;  // sluice/windowed_stream.hpp
class suppressed;                // sluice/suppressed.hpp
template <class K, class V, class W = time_windows>
class ktime_windowed_stream;  // sluice/windowed_stream.hpp

/// A grouped stream: the input of count, reduce and aggregate.
template <class K, class V>
class kgrouped_stream {
 public:
  kgrouped_stream(std::shared_ptr<detail::graph_builder> g, std::size_t node, bool repartition)
      : g_(std::move(g)), node_(node), repartition_(repartition) {}

  /// Counts records per key into the store `store`; emits each new count.
  ktable<K, std::int64_t> count(materialized store) {
    auto name = store.name;
    return stateful<std::int64_t>(detail::count_node<K, V>(std::move(name)), std::move(store));
  }
  ktable<K, std::int64_t> count(std::string store) { return count(materialized{.name = std::move(store)}); }

  /// Combines values per key: reducer(aggregate, value) -> aggregate; the first value starts it.
  template <class F>
  ktable<K, V> reduce(F reducer, materialized store) {
    static_assert(std::is_invocable_r_v<V, F&, const V&, const V&>,
                  "reduce: the reducer must be callable as V(const V& aggregate, const V& value)");
    auto name = store.name;
    return stateful<V>(detail::reduce_node<K, V, F>(name, std::move(reducer)), std::move(store));
  }
  template <class F>
  ktable<K, V> reduce(F reducer, std::string store) {
    return reduce(std::move(reducer), materialized{.name = std::move(store)});
  }

  /// Folds values per key: initializer() -> A, aggregator(key, value, A) -> A.
  template <class Init, class Agg>
  auto aggregate(Init initializer, Agg aggregator, materialized store) {
    static_assert(std::is_invocable_v<Init&>, "aggregate: the initializer must be callable as A()");
    using A = std::remove_cvref_t<std::invoke_result_t<Init&>>;
    static_assert(std::is_invocable_r_v<A, Agg&, const K&, const V&, A>,
                  "aggregate: the aggregator must be callable as A(const K& key, const V& value, A aggregate)");
    auto name = store.name;
    return stateful<A>(detail::aggregate_node<K, V, A, Init, Agg>(name, std::move(initializer), std::move(aggregator)),
                       std::move(store));
  }
  template <class Init, class Agg>
  auto aggregate(Init initializer, Agg aggregator, std::string store) {
    return aggregate(std::move(initializer), std::move(aggregator), materialized{.name = std::move(store)});
  }

  /// Cuts each key's records into time windows (tumbling or hopping, with grace) for a
  /// windowed count, reduce or aggregate (defined in sluice/windowed_stream.hpp, which
  /// sluice/sluice.hpp includes).
  ktime_windowed_stream<K, V> windowed_by(const time_windows& windows) const;
  /// Sliding windows (Kafka Streams' SlidingWindows), for the same aggregations.
  ktime_windowed_stream<K, V, sliding_windows> windowed_by(const sliding_windows& windows) const;
  /// Session windows (Kafka Streams' SessionWindows): count, reduce, aggregate with a merger.
  ksession_windowed_stream<K, V> windowed_by(const session_windows& windows) const;

 private:
  template <class, class, class>
  friend class ktime_windowed_stream;
  template <class, class>
  friend class ksession_windowed_stream;
  /// Repartitions if needed, declares the store, adds the aggregating node.
  template <class A, class N>
  ktable<K, A> stateful(N prototype, materialized store);

  std::shared_ptr<detail::graph_builder> g_;
  std::size_t node_;
  bool repartition_;
};

/// A table: the latest value per key, kept in a store.
template <class K, class V>
class ktable {
 public:
  /// `window_grace`: set on the result of a windowed aggregation (its windows' grace; for
  /// session windows gap + grace), for suppress(until_window_closes()).
  /// `update_node`: set on a table read from a topic (V is std::optional of the stored
  /// value), its source node, whose output carries its deletions too, for joins.
  /// `store_kind`: what keeps the rows (windowed aggregations say; a suppressed table keeps
  /// its parent's, read under its suppression buffers).
  ktable(std::shared_ptr<detail::graph_builder> g, std::size_t node, std::string store,
         std::optional<std::chrono::milliseconds> window_grace = std::nullopt,
         std::optional<std::size_t> update_node = std::nullopt,
         detail::table_store_kind store_kind = detail::table_store_kind::key_value)
      : g_(std::move(g)),
        node_(node),
        store_(std::move(store)),
        window_grace_(window_grace),
        update_node_(update_node),
        store_kind_(store_kind) {}
  /// The stream of the table's updates. A table whose updates are std::optional (one read
  /// from a topic, a join's result) forwards a deletion as std::nullopt, written as a null
  /// value (a tombstone) by to(topic).
  kstream<K, V> to_stream() const { return kstream<K, V>(g_, node_, false); }
  /// Holds updates back in a durable buffer and emits them later, as `how` says:
  /// until_window_closes() (one final result per window) or until_time_limit(...) (defined
  /// in sluice/suppress.hpp, which sluice/sluice.hpp includes).
  ktable suppress(const suppressed& how) const;

  /// Table–table joins on the key, as Kafka Streams 3.9's KTable#join / leftJoin /
  /// outerJoin: an update on either side looks up the other side's current value; the result
  /// is a table kept in the store `store` whose updates are std::optional (nullopt: the key
  /// left the join, a tombstone on an output topic), each stamped with the later of its
  /// update's timestamp and the other side's stored value's (Kafka Streams' timestamps;
  /// the update's own when the other side is absent). Both tables must be co-partitioned;
  /// windowed tables join on the windowed key; a suppressed table answers lookups with what
  /// it has emitted (a buffered key's value before its buffered update). The
  /// joiner takes this table's value first (defined in sluice/table_joins.hpp, which
  /// sluice/sluice.hpp includes; see docs/time-and-windows.md, "Table–table joins"):
  ///   join:       VR(const V& value, const VO& other_value)
  ///   left_join:  VR(const V& value, const std::optional<VO>& other_value)
  ///   outer_join: VR(const std::optional<V>& value, const std::optional<VO>& other_value)
  template <class VO, class F>
  auto join(const ktable<K, VO>& other, F joiner, materialized store) const;
  template <class VO, class F>
  auto join(const ktable<K, VO>& other, F joiner, std::string store) const {
    return join(other, std::move(joiner), materialized{.name = std::move(store)});
  }
  template <class VO, class F>
  auto left_join(const ktable<K, VO>& other, F joiner, materialized store) const;
  template <class VO, class F>
  auto left_join(const ktable<K, VO>& other, F joiner, std::string store) const {
    return left_join(other, std::move(joiner), materialized{.name = std::move(store)});
  }
  template <class VO, class F>
  auto outer_join(const ktable<K, VO>& other, F joiner, materialized store) const;
  template <class VO, class F>
  auto outer_join(const ktable<K, VO>& other, F joiner, std::string store) const {
    return outer_join(other, std::move(joiner), materialized{.name = std::move(store)});
  }

  const std::string& store_name() const noexcept { return store_; }
  std::size_t node_index() const noexcept { return node_; }

 private:
  template <class, class>
  friend class ktable;
  template <class, class>
  friend class kstream;
  template <detail::table_join_kind Kind, class VO, class F>
  auto joined(const ktable<K, VO>& other, F joiner, materialized store) const;
  /// The table as a user wrote it, for errors: its store's name in quotes, or for a
  /// suppressed table the suppress call and the table it suppresses.
  std::string described() const { return suppressed_of_.empty() ? "'" + store_ + "'" : suppressed_of_; }

  std::shared_ptr<detail::graph_builder> g_;
  std::size_t node_;
  std::string store_;
  std::optional<std::chrono::milliseconds> window_grace_;
  std::optional<std::size_t> update_node_;
  detail::table_store_kind store_kind_;
  /// Set by suppress(): "the suppressed table suppress(...) of 'store'", for errors.
  std::string suppressed_of_;
  /// Set by suppress(): the buffer stores of the suppressions over the table kept in store_,
  /// outermost first; lookups read them before store_ (detail::table_getter).
  std::vector<std::string> suppression_buffers_;
};

/// A table every instance reads in full (customer rates, rules); joined by a key selector.
template <class K, class V>
class global_table {
 public:
  explicit global_table(std::string store) : store_(std::move(store)) {}
  const std::string& store_name() const noexcept { return store_; }

 private:
  std::string store_;
};

template <class K, class V>
class kstream {
 public:
  using key_type = K;
  using value_type = V;

  kstream(std::shared_ptr<detail::graph_builder> g, std::size_t node, bool repartition)
      : g_(std::move(g)), node_(node), repartition_(repartition) {}

  /// Keeps records for which predicate(key, value) is true.
  template <class F>
  kstream filter(F predicate) const {
    static_assert(std::is_invocable_r_v<bool, F&, const K&, const V&>,
                  "filter: the predicate must be callable as bool(const K& key, const V& value)");
    return then<K, V>("KSTREAM-FILTER", detail::filter_node<K, V, F, true>(std::move(predicate)), repartition_);
  }

  /// Drops records for which predicate(key, value) is true.
  template <class F>
  kstream filter_not(F predicate) const {
    static_assert(std::is_invocable_r_v<bool, F&, const K&, const V&>,
                  "filter_not: the predicate must be callable as bool(const K& key, const V& value)");
    return then<K, V>("KSTREAM-FILTER", detail::filter_node<K, V, F, false>(std::move(predicate)), repartition_);
  }

  /// New value per record: mapper(value) or mapper(key, value).
  template <class F>
  auto map_values(F mapper) const {
    constexpr bool by_value = std::is_invocable_v<F&, const V&>;
    constexpr bool by_key_value = std::is_invocable_v<F&, const K&, const V&>;
    static_assert(by_value || by_key_value,
                  "map_values: the mapper must be callable as V2(const V& value) or V2(const K& key, const V& value)");
    using V2 = std::remove_cvref_t<typename std::conditional_t<by_key_value, std::invoke_result<F&, const K&, const V&>,
                                                               std::invoke_result<F&, const V&>>::type>;
    return then<K, V2>("KSTREAM-MAPVALUES", detail::map_values_node<K, V, V2, F>(std::move(mapper)), repartition_);
  }

  /// New key and value per record: mapper(key, value) -> std::pair<K2, V2>. Marks the
  /// stream for repartitioning before a stateful operation.
  template <class F>
  auto map(F mapper) const {
    static_assert(std::is_invocable_v<F&, const K&, const V&>,
                  "map: the mapper must be callable as std::pair<K2, V2>(const K& key, const V& value)");
    using P = std::remove_cvref_t<std::invoke_result_t<F&, const K&, const V&>>;
    using K2 = std::remove_cvref_t<typename P::first_type>;
    using V2 = std::remove_cvref_t<typename P::second_type>;
    return then<K2, V2>("KSTREAM-MAP", detail::map_node<K, V, K2, V2, F>(std::move(mapper)), true);
  }

  /// New key per record: selector(key, value) -> K2. Marks the stream for repartitioning.
  template <class F>
  auto select_key(F selector) const {
    static_assert(std::is_invocable_v<F&, const K&, const V&>,
                  "select_key: the selector must be callable as K2(const K& key, const V& value)");
    using K2 = std::remove_cvref_t<std::invoke_result_t<F&, const K&, const V&>>;
    return then<K2, V>("KSTREAM-KEY-SELECT", detail::select_key_node<K, V, K2, F>(std::move(selector)), true);
  }

  /// Zero or more records per record: mapper(key, value) -> a range of std::pair<K2, V2>.
  template <class F>
  auto flat_map(F mapper) const {
    static_assert(std::is_invocable_v<F&, const K&, const V&>,
                  "flat_map: the mapper must be callable as Range<std::pair<K2, V2>>(const K& key, const V& value)");
    using R = std::remove_cvref_t<std::invoke_result_t<F&, const K&, const V&>>;
    static_assert(detail::iterable<R>,
                  "flat_map: the mapper must return a range (e.g. std::vector) of std::pair<K2, V2>");
    using P = std::remove_cvref_t<detail::iterable_value_t<R>>;
    using K2 = std::remove_cvref_t<typename P::first_type>;
    using V2 = std::remove_cvref_t<typename P::second_type>;
    return then<K2, V2>("KSTREAM-FLATMAP", detail::flat_map_node<K, V, K2, V2, F>(std::move(mapper)), true);
  }

  /// Zero or more values per record: mapper(value) or mapper(key, value) -> a range of V2.
  template <class F>
  auto flat_map_values(F mapper) const {
    constexpr bool by_value = std::is_invocable_v<F&, const V&>;
    constexpr bool by_key_value = std::is_invocable_v<F&, const K&, const V&>;
    static_assert(by_value || by_key_value,
                  "flat_map_values: the mapper must be callable as Range<V2>(const V& value) or "
                  "Range<V2>(const K& key, const V& value)");
    using R = std::remove_cvref_t<typename std::conditional_t<by_key_value, std::invoke_result<F&, const K&, const V&>,
                                                              std::invoke_result<F&, const V&>>::type>;
    static_assert(detail::iterable<R>, "flat_map_values: the mapper must return a range (e.g. std::vector) of values");
    using V2 = std::remove_cvref_t<detail::iterable_value_t<R>>;
    return then<K, V2>("KSTREAM-FLATMAPVALUES", detail::flat_map_values_node<K, V, V2, F>(std::move(mapper)),
                       repartition_);
  }

  /// Calls action(key, value) for each record and passes it on unchanged.
  template <class F>
  kstream peek(F action) const {
    static_assert(std::is_invocable_v<F&, const K&, const V&>,
                  "peek: the action must be callable as void(const K& key, const V& value)");
    return then<K, V>("KSTREAM-PEEK", detail::peek_node<K, V, F>(std::move(action)), repartition_);
  }

  /// Routes each record to the first branch whose predicate holds (see splitter).
  class splitter {
   public:
    splitter(kstream parent, std::size_t split_node) : parent_(std::move(parent)), split_(split_node) { refresh(); }
    /// A branch named `name` taking records for which predicate(key, value) holds.
    template <class F>
    kstream branch(const std::string& name, F predicate) {
      static_assert(std::is_invocable_r_v<bool, F&, const K&, const V&>,
                    "branch: the predicate must be callable as bool(const K& key, const V& value)");
      branches_.emplace_back(name, std::function<bool(const K&, const V&)>(std::move(predicate)));
      refresh();
      return outlet(name);
    }
    /// The branch taking records no predicate matched; without it they are dropped.
    kstream default_branch(const std::string& name = "default") {
      default_ = name;
      refresh();
      return outlet(name);
    }

   private:
    kstream outlet(const std::string& name) {
      auto& g = *parent_.g_;
      std::string node_name = g.nodes[split_].name + "-" + name;
      auto idx = g.add({.name = node_name,
                        .kind = detail::node_kind::processor,
                        .parents = {split_},
                        .factory = detail::factory_of(detail::pass_node<K, V>())});
      return kstream(parent_.g_, idx, parent_.repartition_);
    }
    void refresh() {
      auto& g = *parent_.g_;
      auto prefix = g.nodes[split_].name + "-";
      auto branches = branches_;
      auto def = default_.empty() ? std::string() : prefix + default_;
      g.nodes[split_].factory = [branches, def, prefix]() -> std::unique_ptr<detail::node> {
        auto n = std::make_unique<detail::split_node<K, V>>();
        for (auto& [name, p] : branches) n->add_branch(prefix + name, p);
        n->set_default(def);
        return n;
      };
    }
    kstream parent_;
    std::size_t split_;
    std::vector<std::pair<std::string, std::function<bool(const K&, const V&)>>> branches_;
    std::string default_;
  };

  splitter split() const {
    auto& g = *g_;
    auto idx = g.add({.name = g.name("KSTREAM-BRANCH"), .kind = detail::node_kind::processor, .parents = {node_}});
    splitter s(*this, idx);
    return s;
  }

  /// One stream of the records of both.
  kstream merge(const kstream& other) const {
    auto& g = *g_;
    auto idx = g.add_processor("KSTREAM-MERGE", node_, detail::factory_of(detail::pass_node<K, V>()));
    g.nodes[idx].parents.push_back(other.node_);
    return kstream(g_, idx, repartition_ || other.repartition_);
  }

  /// Groups by the current key (repartitions first if an earlier operation changed keys).
  kgrouped_stream<K, V> group_by_key() const { return kgrouped_stream<K, V>(g_, node_, repartition_); }

  /// Groups by a new key: selector(key, value) -> K2; always repartitions.
  template <class F>
  auto group_by(F selector) const {
    auto s = select_key(std::move(selector));
    using K2 = typename decltype(s)::key_type;
    return kgrouped_stream<K2, V>(g_, s.node_, true);
  }

  /// Writes records to `topic` with the given serdes (default: default_serde).
  template <class KS = detail::topic_serde_t<K>, class VS = detail::topic_serde_t<V>>
  void to(const std::string& topic) const {
    g_->add_sink(node_, topic, detail::factory_of(detail::sink_node<K, V, KS, VS>(topic, false)));
  }

  /// Runs a user processor: supplier() -> std::unique_ptr<P>, P derived from
  /// sluice::processor<K, V, KOut, VOut>, once per task, with access to `stores`. Each of
  /// `stores` is either a `materialized{...}`, which declares the store and connects it in
  /// one step (the usual case: a store used by this processor alone), or the name of a store
  /// declared with streams_builder::add_state_store (a store shared by several processors),
  /// or a table / global table whose store the processor reads.
  template <class Supplier, class... Stores>
  auto process(Supplier supplier, const Stores&... stores) const {
    static_assert(processor_supplier<Supplier>,
                  "process: expected a supplier callable as std::unique_ptr<P>() where P derives from "
                  "sluice::processor<K, V, KOut, VOut>");
    using P = supplied_processor_t<Supplier>;
    static_assert(std::is_same_v<typename P::key_in, K> && std::is_same_v<typename P::value_in, V>,
                  "process: the processor's input types (KIn, VIn) must equal the stream's key and value types");
    using KOut = typename P::key_out;
    using VOut = typename P::value_out;
    std::vector<std::string> names;
    (add_store_ref(names, stores), ...);
    auto& g = *g_;
    auto idx = g.add({.name = g.name("KSTREAM-PROCESSOR"),
                      .kind = detail::node_kind::processor,
                      .stores = names,
                      .parents = {node_},
                      .factory = [supplier]() mutable -> std::unique_ptr<detail::node> {
                        return std::make_unique<detail::processor_node<P>>(supplier());
                      }});
    return kstream<KOut, VOut>(g_, idx, repartition_);
  }

  /// Inner join with a table on the record key: joiner(value, table_value) -> VR. The
  /// joiner sees the value the table's store holds (V of a table<K, V>(topic, ...)).
  template <class VU, class F>
  auto join(const ktable<K, VU>& table, F joiner) const {
    using VT = typename detail::unwrap_optional<VU>::type;
    static_assert(std::is_invocable_v<F&, const V&, const VT&>,
                  "join: the joiner must be callable as VR(const V& value, const VT& table_value)");
    using VR = std::remove_cvref_t<std::invoke_result_t<F&, const V&, const VT&>>;
    auto s = repartitioned(table.store_name() + "-join");
    return s.template then<K, VR>("KSTREAM-JOIN",
                                  detail::table_join_node<K, V, VT, VR, F, false>(
                                      table.store_name(), table.suppression_buffers_, std::move(joiner)),
                                  false, table_stores(table));
  }

  /// Left join with a table: joiner(value, std::optional<VT>) -> VR; every record passes.
  template <class VU, class F>
  auto left_join(const ktable<K, VU>& table, F joiner) const {
    using VT = typename detail::unwrap_optional<VU>::type;
    static_assert(std::is_invocable_v<F&, const V&, const std::optional<VT>&>,
                  "left_join: the joiner must be callable as VR(const V& value, const std::optional<VT>& table_value)");
    using VR = std::remove_cvref_t<std::invoke_result_t<F&, const V&, const std::optional<VT>&>>;
    auto s = repartitioned(table.store_name() + "-join");
    return s.template then<K, VR>("KSTREAM-LEFTJOIN",
                                  detail::table_join_node<K, V, VT, VR, F, true>(
                                      table.store_name(), table.suppression_buffers_, std::move(joiner)),
                                  false, table_stores(table));
  }

  /// Inner join with a global table: key_selector(key, value) -> KG, joiner(value, VG) -> VR.
  template <class KG, class VG, class KF, class F>
  auto join(const global_table<KG, VG>& table, KF key_selector, F joiner) const {
    static_assert(std::is_invocable_r_v<KG, KF&, const K&, const V&>,
                  "join: the key selector must be callable as KG(const K& key, const V& value)");
    static_assert(std::is_invocable_v<F&, const V&, const VG&>,
                  "join: the joiner must be callable as VR(const V& value, const VG& table_value)");
    using VR = std::remove_cvref_t<std::invoke_result_t<F&, const V&, const VG&>>;
    return then<K, VR>("KSTREAM-GLOBALJOIN",
                       detail::global_join_node<K, V, KG, VG, VR, KF, F, false>(
                           table.store_name(), std::move(key_selector), std::move(joiner)),
                       repartition_);
  }

  /// Left join with a global table: joiner(value, std::optional<VG>) -> VR.
  template <class KG, class VG, class KF, class F>
  auto left_join(const global_table<KG, VG>& table, KF key_selector, F joiner) const {
    static_assert(std::is_invocable_r_v<KG, KF&, const K&, const V&>,
                  "left_join: the key selector must be callable as KG(const K& key, const V& value)");
    static_assert(std::is_invocable_v<F&, const V&, const std::optional<VG>&>,
                  "left_join: the joiner must be callable as VR(const V& value, const std::optional<VG>& table_value)");
    using VR = std::remove_cvref_t<std::invoke_result_t<F&, const V&, const std::optional<VG>&>>;
    return then<K, VR>("KSTREAM-GLOBALLEFTJOIN",
                       detail::global_join_node<K, V, KG, VG, VR, KF, F, true>(
                           table.store_name(), std::move(key_selector), std::move(joiner)),
                       repartition_);
  }

  /// Stream–stream joins within join_windows, as Kafka Streams 3.9's KStream#join /
  /// leftJoin / outerJoin with JoinWindows: each record joins the other stream's records of
  /// its key within the windows' time difference; left and outer joins emit a record that
  /// found no match, with nullopt for the other side, once its window closes (stream time
  /// passes its time + time difference + grace). Both streams must be co-partitioned (each is
  /// repartitioned first if an earlier operation changed keys). Each stream is kept in a
  /// window store, and left/outer joins' unmatched records in a shared one, named as Kafka
  /// Streams names them: generated (`KSTREAM-JOINTHIS-<n>-store`, ...), or from `name` as
  /// StreamJoined.withStoreName(name) does (`<name>-this-join-store`, ...).
  /// The joiner takes this stream's value first (defined in sluice/stream_joins.hpp, which
  /// sluice/sluice.hpp includes; see docs/time-and-windows.md, "Stream–stream joins"):
  ///   join:       VR(const V& value, const VO& other_value)
  ///   left_join:  VR(const V& value, const std::optional<VO>& other_value)
  ///   outer_join: VR(const std::optional<V>& value, const std::optional<VO>& other_value)
  template <class VO, class F>
  auto join(const kstream<K, VO>& other, F joiner, const join_windows& windows, std::string name = {}) const;
  template <class VO, class F>
  auto left_join(const kstream<K, VO>& other, F joiner, const join_windows& windows, std::string name = {}) const;
  template <class VO, class F>
  auto outer_join(const kstream<K, VO>& other, F joiner, const join_windows& windows, std::string name = {}) const;

  /// The stream, repartitioned through "<application.id>-<name>-repartition" when an
  /// earlier operation changed keys; unchanged otherwise.
  kstream repartitioned(const std::string& name) const {
    if (!repartition_) return *this;
    // The graph keeps the name; detail::topology_access::resolve_topic() makes it the topic.
    auto src = g_->add_repartition(
        node_, name,
        detail::factory_of(detail::sink_node<K, V, detail::topic_serde_t<K>, detail::topic_serde_t<V>>(name, true)),
        detail::factory_of(detail::source_node<K, V, detail::topic_serde_t<K>, detail::topic_serde_t<V>>()));
    return kstream(g_, src, false);
  }

  /// The stream, repartitioned through "<application.id>-<name>-repartition" so that
  /// records with equal partition_key(key, value) meet in one task: each goes to the
  /// partition murmur2 of those bytes picks (as the Java producer picks one for a key),
  /// with its key, value, headers and timestamp unchanged. For a stateful step keyed by
  /// something the record key does not determine (the throttle by JSON fields), as Kafka
  /// Streams' repartition() with a StreamPartitioner. partition_key returns bytes
  /// (std::string or std::string_view valid until its next call); what it throws is a
  /// processing error of the record.
  template <class F>
  kstream repartition_by(const std::string& name, F partition_key) const {
    static_assert(std::is_convertible_v<std::invoke_result_t<F&, const K&, const V&>, std::string_view>,
                  "repartition_by: the partition key must be callable as std::string_view(const K& key, const V& "
                  "value) (std::string works too)");
    // The graph keeps the name; detail::topology_access::resolve_topic() makes it the topic.
    auto src = g_->add_repartition(
        node_, name,
        detail::factory_of(detail::partitioned_sink_node<K, V, detail::topic_serde_t<K>, detail::topic_serde_t<V>, F>(
            name, std::move(partition_key))),
        detail::factory_of(detail::source_node<K, V, detail::topic_serde_t<K>, detail::topic_serde_t<V>>()));
    // Partitioned by the computed key, not by the record key: a later key-based stateful
    // step (an aggregation, repartitioned()) goes through a repartition topic again.
    return kstream(g_, src, true);
  }

  std::size_t node_index() const noexcept { return node_; }

 private:
  template <class, class>
  friend class kstream;
  template <class, class>
  friend class kgrouped_stream;
  friend class streams_builder;

  template <detail::stream_join_kind Kind, class VO, class F>
  auto stream_joined(const kstream<K, VO>& other, F joiner, const join_windows& windows, std::string name) const;

  template <class K2, class V2, class N>
  kstream<K2, V2> then(std::string_view kind, N prototype, bool repartition,
                       std::vector<std::string> stores = {}) const {
    auto idx = g_->add_processor(kind, node_, detail::factory_of(std::move(prototype)), std::move(stores));
    return kstream<K2, V2>(g_, idx, repartition);
  }

  void add_store_ref(std::vector<std::string>& names, const materialized& store) const {
    auto spec = detail::store_spec_for(store);
    spec.make_store = store.make_store;
    g_->add_store(std::move(spec));
    names.push_back(store.name);
  }
  static void add_store_ref(std::vector<std::string>& names, const std::string& n) { names.push_back(n); }
  static void add_store_ref(std::vector<std::string>& names, const char* n) { names.emplace_back(n); }
  template <class KG, class VG>
  static void add_store_ref(std::vector<std::string>& names, const global_table<KG, VG>& t) {
    names.push_back(t.store_name());
  }
  template <class KT, class VT>
  static void add_store_ref(std::vector<std::string>& names, const ktable<KT, VT>& t) {
    names.push_back(t.store_name());
  }
  /// The stores a lookup of `t` reads: its store and, when suppressed, its buffers.
  template <class VT>
  static std::vector<std::string> table_stores(const ktable<K, VT>& t) {
    std::vector<std::string> names{t.store_name()};
    names.insert(names.end(), t.suppression_buffers_.begin(), t.suppression_buffers_.end());
    return names;
  }

  std::shared_ptr<detail::graph_builder> g_;
  std::size_t node_;
  bool repartition_;
};

template <class K, class V>
template <class A, class N>
ktable<K, A> kgrouped_stream<K, V>::stateful(N prototype, materialized store) {
  kstream<K, V> in(g_, node_, repartition_);
  in = in.repartitioned(store.name);
  auto idx = g_->add_aggregation(in.node_index(), store, detail::make_timestamped_store_codec<K, A>(),
                                 detail::factory_of(std::move(prototype)));
  return ktable<K, A>(g_, idx, store.name);
}

/// Builds a topology with the DSL; see the banner above.
class streams_builder {
 public:
  streams_builder() : g_(std::make_shared<detail::graph_builder>()) {}

  /// A stream of `topic`. Keys and values decode with KS and VS (default_serde: strings
  /// raw, integers big-endian, described structs as JSON). A null key or value decodes
  /// only into a std::optional type; otherwise it is a deserialization error.
  template <class K, class V, class KS = detail::topic_serde_t<K>, class VS = detail::topic_serde_t<V>>
  kstream<K, V> stream(const std::string& topic) {
    return stream<K, V, KS, VS>(std::vector<std::string>{topic});
  }
  template <class K, class V, class KS = detail::topic_serde_t<K>, class VS = detail::topic_serde_t<V>>
  kstream<K, V> stream(std::vector<std::string> topics) {
    return stream<K, V, KS, VS>(std::move(topics), detail::record_timestamp{});
  }

  /// A stream of `topic` whose records' timestamps come from `extractor(key, value,
  /// record_timestamp) -> std::int64_t` (milliseconds since the epoch), Kafka Streams'
  /// TimestampExtractor: stream time, stream-time punctuation, windows and output
  /// timestamps follow it. An extractor that throws or returns a negative time makes the
  /// record a deserialization error (deserialization.error.handler decides; counted in
  /// sluice_records_skipped_total): it never enters the topology.
  template <class K, class V, class KS = detail::topic_serde_t<K>, class VS = detail::topic_serde_t<V>, class X>
  kstream<K, V> stream(const std::string& topic, X extractor) {
    return stream<K, V, KS, VS>(std::vector<std::string>{topic}, std::move(extractor));
  }
  template <class K, class V, class KS = detail::topic_serde_t<K>, class VS = detail::topic_serde_t<V>, class X>
  kstream<K, V> stream(std::vector<std::string> topics, X extractor) {
    static_assert(std::is_invocable_r_v<std::int64_t, X&, const K&, const V&, std::int64_t>,
                  "stream: the timestamp extractor must be callable as std::int64_t(const K& key, const V& value, "
                  "std::int64_t record_timestamp)");
    auto idx = g_->add_source("KSTREAM-SOURCE", std::move(topics),
                              detail::factory_of(detail::source_node<K, V, KS, VS, X>(std::move(extractor))));
    return kstream<K, V>(g_, idx, false);
  }

  /// A table of `topic`: the latest value per key, in the store `store` (a null value
  /// deletes the key). Co-partitioned with the streams it joins. Its updates are
  /// std::optional<V>, as a table join's: to_stream() forwards a deletion as std::nullopt
  /// (a null value, a tombstone, on an output topic), as Kafka Streams' toStream() forwards
  /// it as a null value. Joins see the values the store holds (V). The store keeps each
  /// value with its record's timestamp, as Kafka Streams' KTableSource (an out-of-order
  /// update replaces a later one, timestamp included): a table–table join stamps a result
  /// with the later of its update's and the other side's stored timestamp.
  template <class K, class V, class KS = detail::topic_serde_t<K>, class VS = detail::topic_serde_t<V>>
  ktable<K, std::optional<V>> table(const std::string& topic, materialized store) {
    return table<K, V, KS, VS>(topic, std::move(store), detail::record_timestamp{});
  }
  /// A table whose records' timestamps come from `extractor(key, value, record_timestamp)`
  /// (see stream(topic, extractor)); a tombstone keeps its record timestamp.
  template <class K, class V, class KS = detail::topic_serde_t<K>, class VS = detail::topic_serde_t<V>, class X>
  ktable<K, std::optional<V>> table(const std::string& topic, materialized store, X extractor) {
    static_assert(std::is_invocable_r_v<std::int64_t, X&, const K&, const V&, std::int64_t>,
                  "table: the timestamp extractor must be callable as std::int64_t(const K& key, const V& value, "
                  "std::int64_t record_timestamp)");
    auto src = g_->add_source("KTABLE-SOURCE", {topic},
                              detail::factory_of(detail::table_source<K, V, KS, VS>(std::move(extractor))));
    auto spec = detail::store_spec_for(store);
    spec.codec = detail::make_timestamped_store_codec<K, V>();
    spec.format = detail::value_format::timestamped;  // each value with its record's timestamp (table_node)
    g_->add_store(std::move(spec));
    auto idx = g_->add_processor("KTABLE-MATERIALIZE", src, detail::factory_of(detail::table_node<K, V>(store.name)),
                                 {store.name});
    return ktable<K, std::optional<V>>(g_, idx, store.name, std::nullopt, src);
  }
  template <class K, class V, class KS = detail::topic_serde_t<K>, class VS = detail::topic_serde_t<V>>
  ktable<K, std::optional<V>> table(const std::string& topic, std::string store) {
    return table<K, V, KS, VS>(topic, materialized{.name = std::move(store)});
  }

  /// A global table of `topic`: every instance reads all its partitions before processing
  /// and follows it afterwards. Values keep the topic's bytes; each record is decoded as K
  /// and V when it is read from the topic, and one that does not decode goes to the
  /// deserialization handler then (fail stops the job naming topic, partition, offset and
  /// key; log_and_continue and dead_letter skip it and count it), so lookups always decode.
  template <class K, class V>
  global_table<K, V> global_table(const std::string& topic, std::string store = {}) {
    if (store.empty()) store = topic + "-global";
    // The store keeps the topic's bytes: its codec (for /stores/... queries) decodes them as
    // lookups do, with default_serde.
    g_->add_store({.name = store,
                   .backend = store_backend::memory,
                   .logged = false,
                   .global = true,
                   .source_topic = topic,
                   .codec = detail::make_store_codec<K, V, default_serde<K>, default_serde<V>>(),
                   .check_record = [](std::string_view key, std::string_view value) {
                     (void)default_serde<K>::deserialize(key);
                     (void)default_serde<V>::deserialize(value);
                   }});
    return sluice::global_table<K, V>(store);
  }

  /// Adds a store for processors to use (Processor API); name it in process(..., "name").
  void add_state_store(materialized store) {
    auto spec = detail::store_spec_for(store);
    spec.make_store = store.make_store;
    g_->add_store(std::move(spec));
  }

  /// Adds a read-only endpoint to the instance HTTP server (on when application.server is
  /// set): GET `pattern` (literal segments and `{name}` placeholders, see sluice/http.hpp)
  /// answered by `fn` on the server's handler threads. A malformed pattern, or one that
  /// clashes with another (the built-in /metrics, /health, /ready, /topology, /stores/...
  /// included), stops the app at start with its name.
  void add_endpoint(std::string pattern, http::handler fn) {
    g_->endpoints.push_back({std::move(pattern), std::move(fn)});
  }

  /// Freezes the graph. Throws sluice::error(errc::invalid_topology) when it cannot run
  /// (a store used but never declared, a node without a factory, no source).
  topology build() const;

 private:
  std::shared_ptr<detail::graph_builder> g_;
};

}  // namespace sluice
