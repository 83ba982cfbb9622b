// The type-erased runtime graph. The typed DSL and Processor API compile down to these
// nodes once, when the topology is built; at run time a record crosses a node boundary as
// `const void*` to a record<K, V> whose types the builder checked, so topology size never
// drives template depth and there is one virtual call per node per record.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/record.hpp"
#include "sluice/state/kv_store.hpp"
#include "sluice/state/state_store.hpp"

namespace sluice {

class metrics_registry;

/// When a punctuator fires: as stream time (record timestamps) or wall-clock time passes.
enum class punctuation_type { stream_time, wall_clock };

/// Where a store keeps its entries: RocksDB on disk under state.dir (default), or memory
/// (rebuilt from the changelog on every start).
enum class store_backend { rocksdb, memory };

/// Handle to a scheduled punctuator; cancel() stops it. Cheap to copy; cancelling twice is fine.
class cancellable {
 public:
  cancellable() = default;
  explicit cancellable(std::shared_ptr<bool> cancelled) : cancelled_(std::move(cancelled)) {}
  void cancel() noexcept {
    if (cancelled_) *cancelled_ = true;
  }

 private:
  std::shared_ptr<bool> cancelled_;
};

}  // namespace sluice

namespace sluice::detail {

/// A record as read from Kafka, before deserialization: views valid during the call.
struct raw_record {
  std::optional<std::string_view> key;
  std::optional<std::string_view> value;
  std::int64_t timestamp = 0;
  const sluice::headers* headers = nullptr;
};

/// Receives changelog writes of a logged store; implemented by the runtime.
using changelog_writer = state::changelog_sink;

/// A global store as processors see it: read-only and safe to read from any thread while
/// the instance's global thread applies updates from the table's topic.
class global_view {
 public:
  virtual ~global_view() = default;
  /// Copies the value of `key` into `out`; false when absent.
  virtual bool get(std::string_view key, std::string& out) const = 0;
};

/// How a key-value store's values are laid out. `timestamped`: each value is the 8-byte
/// big-endian timestamp of its latest update, then the value's bytes (Kafka Streams'
/// TimestampedKeyValueStore), as every DSL table keeps its values (a table read from a topic,
/// a non-windowed aggregation, a table–table join's result: detail::timestamped_store); its
/// changelog records hold the value's bytes alone, with that timestamp as the record's
/// timestamp (the changelog reader puts it back in front when it restores). A plain
/// key_value_store handle reads and writes such a store's values without their timestamps.
/// The state manager opens a store with its spec's format, which a RocksDB store records:
/// a store found holding the other layout is wiped and restored from its changelog
/// (state::store_options::format).
using value_format = state::value_format;

/// A store as a task hands it to a processor: the store (of whatever kind its spec's
/// factory made) plus its changelog (null when logging is off for the store). Typed handles
/// (key_value_store, a topology's own kinds) check the kind once, when they are made.
struct store_binding {
  state::state_store* store = nullptr;
  changelog_writer* changelog = nullptr;
  value_format format = value_format::plain;
};

/// The key-value store behind `binding`; throws sluice::error(errc::invalid_topology) naming
/// the store when it is of another kind.
state::kv_store* kv_store_of(const store_binding& binding);

[[noreturn]] void throw_wrong_store_kind(const state::state_store* store, std::string_view kind);

/// The store behind `binding` as kind S (a state_store subclass); throws
/// sluice::error(errc::invalid_topology) naming the store and `kind` when it is another kind.
/// For typed handles of store kinds.
template <class S>
S* store_of_kind(const store_binding& binding, std::string_view kind) {
  if (auto* s = dynamic_cast<S*>(binding.store)) return s;
  throw_wrong_store_kind(binding.store, kind);
}

/// Makes the typed handle H of a store kind from the task's binding: the one place that
/// calls a handle's (store_binding, task_context*) constructor, so a handle may keep that
/// constructor private (key_value_store does) and befriend this struct.
struct store_handle_factory {
  template <class H, class Context>
  static H make(store_binding binding, Context* context) {
    return H(binding, context);
  }
};

/// What a task offers the nodes it runs. Implemented by the runtime's stream task and by
/// the test driver; one instance per task, used by the task's thread only.
class task_context {
 public:
  virtual ~task_context() = default;
  virtual const record_metadata& metadata() const = 0;
  virtual std::int64_t stream_time() const = 0;
  virtual std::int64_t wall_clock_ms() const = 0;
  virtual std::string_view task_id() const = 0;
  virtual std::int32_t partition() const = 0;
  /// How many partitions (= tasks) the task's sub-topology has across the whole job.
  virtual std::int32_t partition_count() const = 0;
  virtual std::string_view application_id() const = 0;
  /// True under processing.guarantee=exactly_once.
  virtual bool exactly_once() const = 0;
  /// Stops feeding this task input records until the wall clock reaches `wall_clock_ms`
  /// (a later call may extend the pause, never shorten it). The record being processed, if
  /// any, completes as usual (its offset counts as processed); the records after it stay in
  /// Kafka (the stream thread pauses and seeks back the task's partitions; the test driver
  /// holds them in a queue), so nothing piles up in memory. Punctuators keep running.
  virtual void pause_input_until(std::int64_t wall_clock_ms) = 0;
  /// The store named `name`; throws sluice::error(errc::invalid_topology) when the
  /// calling node did not declare it.
  virtual store_binding store(std::string_view name) = 0;
  virtual cancellable schedule(std::chrono::milliseconds interval, punctuation_type type,
                               std::function<void(std::int64_t)> callback) = 0;
  virtual void request_commit() = 0;
  /// Runs `callback` on the task's thread at the start of each of the task's commits, before
  /// its stores' changelog writes go out: what it writes to the task's stores is part of
  /// that commit. Kept until the task closes.
  virtual void before_commit(std::function<void()> callback) = 0;
  /// How many partitions output topic `topic` (a sink's, not internal) has; fixed for the
  /// job's lifetime. Throws sluice::error when the topology does not write `topic`.
  virtual std::int32_t output_partitions(std::string_view topic) const = 0;
  /// Sends serialized bytes to a topic (sinks, dead letters). partition -1 = partitioner.
  virtual void send(std::string_view topic, const std::optional<std::string_view>& key,
                    const std::optional<std::string_view>& value, std::int64_t timestamp,
                    const sluice::headers& headers, std::int32_t partition = -1) = 0;
  /// Global stores, read-only, shared by every task of the instance.
  virtual const global_view& global_store(std::string_view name) = 0;
  /// The app's metrics registry (the test driver's in tests); register at init, not per record.
  virtual metrics_registry& metrics() = 0;
};

/// One node of a task's graph. Sources get raw bytes in two steps: decode_raw (deserialize,
/// extract the timestamp) then forward_decoded, so the task advances stream time between the
/// two; every other node gets a `const record<K, V>*` of its declared input type through
/// process.
class node {
 public:
  virtual ~node() = default;
  virtual void init(task_context& context) { context_ = &context; }
  virtual void process(const void* record) = 0;
  /// Sources: decodes `raw` and returns the record's timestamp (its timestamp extractor's,
  /// or the record's own). Throws deserialization_failure when the key or value does not
  /// decode or the timestamp is negative or cannot be extracted.
  virtual std::int64_t decode_raw(const raw_record& raw) { return raw.timestamp; }
  /// Sources: whether decode_raw's timestamp comes from a timestamp extractor rather than the
  /// record's own (a task orders co-partitioned records by it, so it must decode to know it).
  virtual bool extracts_timestamp() const noexcept { return false; }
  /// Sources: passes the record decode_raw() made to the children.
  virtual void forward_decoded() {}
  virtual void close() {}

  /// Wiring, done by the task when it instantiates the graph.
  void add_child(node* child, std::string name) {
    children_.push_back(child);
    child_names_.push_back(std::move(name));
    child->parents_.push_back(this);
  }
  const std::vector<std::string>& child_names() const noexcept { return child_names_; }
  /// The nodes that forward to this one, in wiring order (set before init).
  const std::vector<node*>& parents() const noexcept { return parents_; }

  /// Passes the record to every child, or to the child named `to`.
  void forward_erased(const void* record, std::string_view to = {}) {
    if (to.empty()) {
      for (node* c : children_) c->process(record);
      return;
    }
    for (std::size_t i = 0; i < children_.size(); ++i)
      if (child_names_[i] == to) return children_[i]->process(record);
    throw_unknown_child(to);
  }
  [[noreturn]] void throw_unknown_child(std::string_view to) const;

 protected:
  task_context* context_ = nullptr;

 private:
  std::vector<node*> children_;
  std::vector<std::string> child_names_;
  std::vector<node*> parents_;
};

/// A node that keeps a table (a table's materialization, an aggregation, a join's merge, a
/// suppression) and can tell a child, while it forwards an update, the value the update's
/// key had in the table before it (Kafka Streams' old values, enabled per table by
/// sendOldValues). V is the table's stored value type (nullopt: the key was absent). For a
/// key or window an update creates, it is what Kafka Streams' processor passes as the old
/// value: the initializer's value for a count or aggregate (windowed or not; a sliding
/// window's per KStreamSlidingWindowAggregate), nullopt for a reduce, a session, a table.
/// Off by default: a node reads the prior value only after send_prior_values(), which a
/// child calls in its init (ktable::suppress's node, to remember what it last emitted).
/// Used by the task's thread only, like every node.
template <class V>
class prior_value_source {
 public:
  /// From now on, prior_value() answers for each update forwarded.
  virtual void send_prior_values() = 0;
  /// During a forward: the key's value before the update being forwarded.
  virtual const std::optional<V>& prior_value() const noexcept = 0;

 protected:
  ~prior_value_source() = default;
};

/// The prior_value_source every table node is: it keeps the prior value a node sets before
/// each forward. The node reads a prior value only when sends_prior_values() (a child asked),
/// and sets it with set_prior before forwarding the update it belongs to.
template <class V>
class prior_value_keeper : public prior_value_source<V> {
 public:
  void send_prior_values() final { send_prior_ = true; }
  const std::optional<V>& prior_value() const noexcept final { return prior_; }

 protected:
  ~prior_value_keeper() = default;
  /// Whether a child asked for prior values (off by default).
  bool sends_prior_values() const noexcept { return send_prior_; }
  /// The prior value of the update forwarded next.
  void set_prior(std::optional<V> value) { prior_ = std::move(value); }

 private:
  bool send_prior_ = false;
  std::optional<V> prior_;
};

/// Base of nodes whose input is record<K, V>: casts once, calls a typed function.
template <class K, class V>
class typed_node : public node {
 public:
  void process(const void* record) final { on_record(*static_cast<const sluice::record<K, V>*>(record)); }
  virtual void on_record(const sluice::record<K, V>& record) = 0;
};

enum class node_kind { source, processor, sink };

/// A node as the topology describes it; the factory makes one instance per task.
struct node_spec {
  std::string name;
  node_kind kind = node_kind::processor;
  std::vector<std::string> topics;   ///< source topics, or the sink's topic
  std::vector<std::string> stores;   ///< stores the node may use
  std::vector<std::size_t> parents;  ///< indices into topology::nodes
  std::function<std::unique_ptr<node>()> factory;
  bool internal_topic = false;  ///< the topic is a repartition topic this job owns
};

using sluice::store_backend;

/// Builds a store kind over the key-value storage the runtime opened for it (RocksDB or
/// in-memory, per the store's backend). `changelog` is where the kind logs its writes (null
/// when the store is not logged); its changelog records are ordinary key/value records of
/// `storage`'s keys, so commit, abort, restore and tail-only replay work for every kind.
/// The runtime calls it once per task and store, on the task's thread.
using store_factory = std::function<std::unique_ptr<state::state_store>(std::unique_ptr<state::kv_store> storage,
                                                                        state::changelog_sink* changelog)>;

struct store_codec;  // detail/store_codec.hpp

/// A state store as declared on the topology.
struct store_spec {
  std::string name;
  store_backend backend = store_backend::rocksdb;
  bool logged = true;                            ///< write a changelog topic
  std::chrono::milliseconds ttl{0};              ///< 0 = entries never expire
  bool global = false;                           ///< read in full by every instance
  std::string source_topic;                      ///< global stores: the topic they follow
  state::rocksdb_config_setter rocksdb_options;  ///< expert hook (store_options::configure_rocksdb)
  store_factory make_store;                      ///< empty: the key-value store itself
  bool log_every_write = false;                  ///< materialized::log_every_write
  /// > 0: the changelog topic is created `compact,delete` with this retention.ms (window
  /// stores: their retention + 1 day, as Kafka Streams); 0: `compact` only.
  std::chrono::milliseconds changelog_retention{0};
  std::shared_ptr<const store_codec> codec;   ///< key/value types for queries; null: untyped (Processor API)
  value_format format = value_format::plain;  ///< key-value stores: how values are laid out
  /// Global stores: decodes a record of the table's topic (key, non-null value) as lookups
  /// will, throwing when it does not decode, so a bad value is refused when it is read from
  /// the topic, not blamed on the stream record that later looks it up. Empty: no check.
  std::function<void(std::string_view key, std::string_view value)> check_record;
};

}  // namespace sluice::detail
