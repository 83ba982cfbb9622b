// The nodes behind the DSL's operations. Each is a small typed_node holding the user's
// function by value; the builder wraps it in a factory so every task gets its own copy.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "sluice/detail/internal_topics.hpp"
#include "sluice/detail/node.hpp"
#include "sluice/detail/suppression_buffer.hpp"
#include "sluice/error.hpp"
#include "sluice/record.hpp"
#include "sluice/serde/serde.hpp"
#include "sluice/state/big_endian.hpp"
#include "sluice/store.hpp"

namespace sluice {
template <class K>
struct windowed;
template <class K>
struct session_windowed;
}  // namespace sluice

namespace sluice::detail {

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};
template <class T>
inline constexpr bool is_optional_v = is_optional<T>::value;

template <class T>
struct unwrap_optional {
  using type = T;
};
template <class T>
struct unwrap_optional<std::optional<T>> {
  using type = T;
};

/// The serde that encodes T, or T's payload when T is std::optional (null = absent).
template <class T>
using topic_serde_t = default_serde<typename unwrap_optional<T>::type>;

/// Throws serialization_error: a null `what` (key or value) for a type that is not std::optional.
[[noreturn]] void throw_null_field(const char* what);

/// Decodes a Kafka key or value; null bytes are valid only for std::optional types.
template <class S, class T>
T decode_field(const std::optional<std::string_view>& bytes, const char* what) {
  if constexpr (is_optional_v<T>) {
    if (!bytes) return std::nullopt;
    return S::deserialize(*bytes);
  } else {
    if (!bytes) throw_null_field(what);
    return S::deserialize(*bytes);
  }
}

/// Encodes into `buf`; returns nullopt for an empty optional (Kafka null).
template <class S, class T>
std::optional<std::string_view> encode_field(const T& value, std::string& buf) {
  if constexpr (is_optional_v<T>) {
    if (!value) return std::nullopt;
    S::serialize(*value, buf);
  } else {
    S::serialize(value, buf);
  }
  return std::string_view(buf);
}

/// Kafka's murmur2 hash, as its Java producer computes it for keyed records.
std::uint32_t murmur2(std::string_view data) noexcept;
/// The partition the Java producer (and librdkafka's murmur2_random) picks for `key`
/// among `partitions`: murmur2(key) & 0x7fffffff, modulo the count.
std::int32_t murmur2_partition(std::string_view key, std::int32_t partitions) noexcept;

/// A record read from Kafka did not decode: the deserialization handler decides, not the
/// processing handler.
class deserialization_failure : public serialization_error {
 public:
  using serialization_error::serialization_error;
};

// A source's failures, built out of line (framework/src/dsl/topology.cpp) so that each
// source_node instantiation holds only the calls.
/// Throws deserialization_failure("<prefix><cause.what()>").
[[noreturn]] void throw_deserialization_failure(const char* prefix, const std::exception& cause);
/// Throws deserialization_failure for a negative timestamp `ts`: the record's own
/// (`extracted` false) or a timestamp extractor's from record timestamp `record_ts`.
[[noreturn]] void throw_negative_timestamp(std::int64_t ts, std::int64_t record_ts, bool extracted);

/// Base of the nodes that emit records of another type than they take. emit() assigns into
/// one reused output record rather than building a new one, so key, value and header storage
/// keep their capacity and a node stops allocating once its buffers have grown (as
/// source_node does). Children get it by pointer during the call only; a graph has no
/// cycles, so a node is never re-entered while its output is in flight.
template <class K, class V, class KOut, class VOut>
class emitting_node : public typed_node<K, V> {
 protected:
  template <class KA, class VA>
  void emit(KA&& key, VA&& value, const record<K, V>& in) {
    emit(std::forward<KA>(key), std::forward<VA>(value), in, in.timestamp);
  }
  /// The same at `timestamp` (an aggregation's: its aggregate's, Kafka Streams' newTimestamp).
  template <class KA, class VA>
  void emit(KA&& key, VA&& value, const record<K, V>& in, std::int64_t timestamp) {
    out_.key = std::forward<KA>(key);
    out_.value = std::forward<VA>(value);
    out_.timestamp = timestamp;
    out_.headers = in.headers;
    this->forward_erased(&out_);
  }

 private:
  record<KOut, VOut> out_;
};

/// The default timestamp extractor: the record's own timestamp (the producer's CreateTime or
/// the broker's LogAppendTime), as Kafka Streams' FailOnInvalidTimestamp.
struct record_timestamp {
  template <class K, class V>
  std::int64_t operator()(const K&, const V&, std::int64_t record_timestamp) const noexcept {
    return record_timestamp;
  }
};

/// A table's extractor over std::optional values: a tombstone (null value) keeps its record
/// timestamp, a value goes to the user's extractor(key, value, record timestamp).
template <class X>
struct table_timestamp {
  X extract;
  template <class K, class V>
  std::int64_t operator()(const K& key, const std::optional<V>& value, std::int64_t record_timestamp) {
    if (!value) return record_timestamp;
    return std::invoke(extract, key, *value, record_timestamp);
  }
};

/// Reads a source topic: decodes key and value, extracts the timestamp (X: record_timestamp
/// or the source's extractor), then forwards. A failing extractor or a negative timestamp is
/// a deserialization failure of the record: it never enters the topology, never moves
/// stream time, and goes to the deserialization handler (counted like an undecodable one).
template <class K, class V, class KS, class VS, class X = record_timestamp>
class source_node final : public node {
 public:
  source_node() = default;
  explicit source_node(X extract) : extract_(std::move(extract)) {}
  std::int64_t decode_raw(const raw_record& raw) override {
    try {
      record_.key = decode_field<KS, K>(raw.key, "key");
    } catch (const serialization_error& e) {
      throw_deserialization_failure("key: ", e);
    }
    try {
      record_.value = decode_field<VS, V>(raw.value, "value");
    } catch (const serialization_error& e) {
      throw_deserialization_failure("value: ", e);
    }
    std::int64_t ts;
    try {
      ts = std::invoke(extract_, std::as_const(record_.key), std::as_const(record_.value), raw.timestamp);
    } catch (const std::exception& e) {
      throw_deserialization_failure("the timestamp extractor threw: ", e);
    }
    if (ts < 0) throw_negative_timestamp(ts, raw.timestamp, !std::is_same_v<X, record_timestamp>);
    record_.timestamp = ts;
    if (raw.headers)
      record_.headers = *raw.headers;
    else
      record_.headers.clear();
    return ts;
  }
  void forward_decoded() override { forward_erased(&record_); }
  bool extracts_timestamp() const noexcept override { return !std::is_same_v<X, record_timestamp>; }
  void process(const void* r) override { forward_erased(r); }

 private:
  X extract_{};
  record<K, V> record_;  // reused: no allocation per record once capacities settle
};

/// The source node of a table over std::optional<V> values, with its extractor.
template <class K, class V, class KS, class VS, class X>
auto table_source(X extractor) {
  if constexpr (std::is_same_v<X, record_timestamp>)
    return source_node<K, std::optional<V>, KS, VS>();
  else
    return source_node<K, std::optional<V>, KS, VS, table_timestamp<X>>(table_timestamp<X>{std::move(extractor)});
}

/// Bytes after the key in a windowed key's topic layout: the window start
/// (TimeWindowedSerializer), or the session's end and start (SessionWindowedSerializer).
template <class K>
inline constexpr std::size_t window_suffix_bytes = 0;
template <class K>
inline constexpr std::size_t window_suffix_bytes<windowed<K>> = 8;
template <class K>
inline constexpr std::size_t window_suffix_bytes<session_windowed<K>> = 16;

/// What a sink does whatever its key and value types, compiled once in the library
/// (framework/src/dsl/topology.cpp): it keeps the topic (an internal one's full name
/// "<application.id>-<name>-repartition" from init on) and the encoding buffers, and sends.
class sink_base : public node {
 public:
  void init(task_context& task) override;
  ~sink_base() override;

 protected:
  sink_base(std::string topic, bool internal);
  sink_base(const sink_base& other);
  /// Sends the encoded record to the topic; partition -1 = the partitioner's.
  void send(const std::optional<std::string_view>& key, const std::optional<std::string_view>& value,
            std::int64_t timestamp, const sluice::headers& headers, std::int32_t partition);
  /// The partition murmur2 of `key` picks among the topic's partitions (learned once).
  std::int32_t partition_of(std::string_view key);
  bool internal() const noexcept { return internal_; }

  std::string key_buf_, value_buf_;

 private:
  std::string topic_;
  bool internal_;
  std::int32_t partitions_ = 0;  // of topic_, learned at the first partition_of
};

template <class K, class V, class KS, class VS>
class sink_node final : public sink_base {
 public:
  sink_node(std::string topic, bool internal) : sink_base(std::move(topic), internal) {}
  void process(const void* record) override {
    const auto& r = *static_cast<const sluice::record<K, V>*>(record);
    auto k = encode_field<KS, K>(r.key, key_buf_);
    auto v = encode_field<VS, V>(r.value, value_buf_);
    std::int32_t partition = -1;
    if constexpr (windowed_key_) {
      // Kafka Streams' WindowedStreamPartitioner: murmur2 of the key without its window, so
      // every window of a key lands in the key's partition (and where a Java job puts it).
      if (!internal() && k && k->size() >= suffix_) partition = partition_of(k->substr(0, k->size() - suffix_));
    }
    send(k, v, r.timestamp, r.headers, partition);
  }

 private:
  static constexpr std::size_t suffix_ = window_suffix_bytes<K>;
  static constexpr bool windowed_key_ = suffix_ != 0;
};

/// Writes to an internal repartition topic at the partition that murmur2 of
/// partition_key(key, value) picks among the task's partition count (the repartition
/// topic's), keeping key, value, headers and timestamp (kstream::repartition_by).
template <class K, class V, class KS, class VS, class F>
class partitioned_sink_node final : public sink_base {
 public:
  partitioned_sink_node(std::string topic, F partition_key)
      : sink_base(std::move(topic), true), partition_key_(std::move(partition_key)) {}
  void process(const void* record) override {
    const auto& r = *static_cast<const sluice::record<K, V>*>(record);
    const auto& by = std::invoke(partition_key_, r.key, r.value);  // a returned std::string lives to the end
    const auto partition = murmur2_partition(std::string_view(by), this->context_->partition_count());
    auto k = encode_field<KS, K>(r.key, key_buf_);
    auto v = encode_field<VS, V>(r.value, value_buf_);
    send(k, v, r.timestamp, r.headers, partition);
  }

 private:
  F partition_key_;
};

template <class K, class V, class F, bool Keep>
class filter_node final : public typed_node<K, V> {
 public:
  explicit filter_node(F f) : f_(std::move(f)) {}
  void on_record(const record<K, V>& r) override {
    if (static_cast<bool>(std::invoke(f_, r.key, r.value)) == Keep) this->forward_erased(&r);
  }

 private:
  F f_;
};

template <class K, class V, class F>
class peek_node final : public typed_node<K, V> {
 public:
  explicit peek_node(F f) : f_(std::move(f)) {}
  void on_record(const record<K, V>& r) override {
    std::invoke(f_, r.key, r.value);
    this->forward_erased(&r);
  }

 private:
  F f_;
};

template <class K, class V, class V2, class F>
class map_values_node final : public emitting_node<K, V, K, V2> {
 public:
  explicit map_values_node(F f) : f_(std::move(f)) {}
  void on_record(const record<K, V>& r) override { this->emit(r.key, call(r), r); }

 private:
  V2 call(const record<K, V>& r) {
    if constexpr (std::is_invocable_v<F&, const K&, const V&>)
      return std::invoke(f_, r.key, r.value);
    else
      return std::invoke(f_, r.value);
  }
  F f_;
};

template <class K, class V, class K2, class V2, class F>
class map_node final : public emitting_node<K, V, K2, V2> {
 public:
  explicit map_node(F f) : f_(std::move(f)) {}
  void on_record(const record<K, V>& r) override {
    auto [k, v] = std::invoke(f_, r.key, r.value);
    this->emit(std::move(k), std::move(v), r);
  }

 private:
  F f_;
};

template <class K, class V, class K2, class F>
class select_key_node final : public emitting_node<K, V, K2, V> {
 public:
  explicit select_key_node(F f) : f_(std::move(f)) {}
  void on_record(const record<K, V>& r) override { this->emit(std::invoke(f_, r.key, r.value), r.value, r); }

 private:
  F f_;
};

template <class K, class V, class K2, class V2, class F>
class flat_map_node final : public emitting_node<K, V, K2, V2> {
 public:
  explicit flat_map_node(F f) : f_(std::move(f)) {}
  void on_record(const record<K, V>& r) override {
    for (auto&& [k, v] : std::invoke(f_, r.key, r.value)) this->emit(std::move(k), std::move(v), r);
  }

 private:
  F f_;
};

template <class K, class V, class V2, class F>
class flat_map_values_node final : public emitting_node<K, V, K, V2> {
 public:
  explicit flat_map_values_node(F f) : f_(std::move(f)) {}
  void on_record(const record<K, V>& r) override {
    for (auto&& v : call(r)) this->emit(r.key, std::move(v), r);
  }

 private:
  decltype(auto) call(const record<K, V>& r) {
    if constexpr (std::is_invocable_v<F&, const K&, const V&>)
      return std::invoke(f_, r.key, r.value);
    else
      return std::invoke(f_, r.value);
  }
  F f_;
};

/// split(): the first branch whose predicate holds gets the record; else the default.
template <class K, class V>
class split_node final : public typed_node<K, V> {
 public:
  using predicate = std::function<bool(const K&, const V&)>;
  void add_branch(std::string name, predicate p) { branches_.emplace_back(std::move(name), std::move(p)); }
  void set_default(std::string name) { default_ = std::move(name); }
  void on_record(const record<K, V>& r) override {
    for (auto& [name, p] : branches_)
      if (p(r.key, r.value)) return this->forward_erased(&r, name);
    if (!default_.empty()) this->forward_erased(&r, default_);
  }

 private:
  std::vector<std::pair<std::string, predicate>> branches_;
  std::string default_;
};

/// A key-value store kept with timestamps (value_format::timestamped), as the nodes that
/// write one use it (aggregations, tables read from a topic, table–table join results): each
/// key's value with the timestamp of its latest update, Kafka Streams' TimestampedKeyValueStore.
/// Stored as 8 bytes big-endian timestamp, then the value in its state serde; logged as the
/// value alone, with the timestamp as the changelog record's (a deletion's too). One per node
/// and task.
template <class K, class V>
class timestamped_store {
 public:
  void init(task_context& task, const std::string& name) {
    const auto binding = task.store(name);
    store_ = kv_store_of(binding);  // first: a store of another kind is named as such
    if (binding.format != value_format::timestamped)
      throw error(errc::invalid_topology, "store '" + name +
                                              "' does not keep timestamps, which its processor needs (a bug in how "
                                              "the topology was built)");
    changelog_ = binding.changelog;
  }
  /// The value of `key`, if any, and the timestamp of its latest update.
  std::optional<V> get(const K& key, std::int64_t& timestamp) {
    default_state_serde<K>::serialize(key, key_buf_);
    if (!store_->get(key_buf_, value_buf_)) return std::nullopt;
    timestamp = static_cast<std::int64_t>(state::read_u64(value_buf_));
    return default_state_serde<V>::deserialize(std::string_view(value_buf_).substr(8));
  }
  /// Whether `key` has a value (nothing decoded).
  bool contains(const K& key) {
    default_state_serde<K>::serialize(key, key_buf_);
    return store_->get(key_buf_, value_buf_);
  }
  /// The value of `key`, if any, without its timestamp.
  std::optional<V> get(const K& key) {
    std::int64_t ignored = 0;
    return get(key, ignored);
  }
  void put(const K& key, const V& value, std::int64_t timestamp) {
    default_state_serde<K>::serialize(key, key_buf_);
    default_state_serde<V>::serialize(value, scratch_);
    value_buf_.clear();
    state::append_u64(value_buf_, static_cast<std::uint64_t>(timestamp));
    value_buf_.append(scratch_);
    store_->put(key_buf_, value_buf_);
    if (changelog_) changelog_->log(key_buf_, std::string_view(scratch_), timestamp);
  }
  /// Deletes `key`; the changelog's tombstone carries `timestamp`.
  void remove(const K& key, std::int64_t timestamp) {
    default_state_serde<K>::serialize(key, key_buf_);
    store_->remove(key_buf_);
    if (changelog_) changelog_->log(key_buf_, std::nullopt, timestamp);
  }

 private:
  state::kv_store* store_ = nullptr;
  changelog_writer* changelog_ = nullptr;
  std::string key_buf_, value_buf_, scratch_;
};

/// Folds each record into the aggregate stored under its key and emits the new aggregate,
/// stamped as Kafka Streams' KStreamAggregate / KStreamReduce stamp it: a new key's with the
/// record's timestamp, a stored one's with the later of the record's and the aggregate's (an
/// out-of-order record never moves a key's aggregate back in time). A new key's aggregate
/// starts from init(), which is also its prior value (the old value of Kafka Streams'
/// KStreamAggregate), so a suppression of this table keeps it for a key it holds back and
/// never emitted.
template <class K, class V, class A, class Init, class Agg>
class aggregate_node final : public emitting_node<K, V, K, A>, public prior_value_keeper<A> {
 public:
  aggregate_node(std::string store, Init init, Agg agg)
      : store_name_(std::move(store)), init_(std::move(init)), agg_(std::move(agg)) {}
  void init(task_context& task) override {
    node::init(task);
    store_.init(task, store_name_);
  }
  void on_record(const record<K, V>& r) override {
    std::int64_t timestamp = r.timestamp;
    auto current = store_.get(r.key, timestamp);
    if (current) timestamp = std::max(timestamp, r.timestamp);
    A agg = current ? std::move(*current) : std::invoke(init_);
    if (this->sends_prior_values()) this->set_prior(agg);
    A next = std::invoke(agg_, r.key, r.value, std::move(agg));
    store_.put(r.key, next, timestamp);
    this->emit(r.key, std::move(next), r, timestamp);
  }

 private:
  std::string store_name_;
  Init init_;
  Agg agg_;
  timestamped_store<K, A> store_;
};

/// count(): adds one to the count stored under each record's key and emits the new count,
/// as aggregate_node does with 0 and n + 1, stamped as aggregate_node stamps. Its body needs
/// the record's key, timestamp and headers only, so it depends on the key type alone
/// (count_node<K, V> hands them over): compiled once per key type, and for string keys once
/// in the library. A new key's prior value is the count's initial 0, as aggregate_node's
/// (Kafka Streams' KStreamAggregate).
template <class K>
class counting_node : public node, public prior_value_keeper<std::int64_t> {
 public:
  explicit counting_node(std::string store) : store_name_(std::move(store)) {}
  void init(task_context& task) override {
    node::init(task);
    store_.init(task, store_name_);
  }

 protected:
  void count(const K& key, std::int64_t record_timestamp, const sluice::headers& headers) {
    std::int64_t timestamp = record_timestamp;
    auto current = store_.get(key, timestamp);
    if (current) timestamp = std::max(timestamp, record_timestamp);
    const std::int64_t n = current ? *current : 0;
    if (this->sends_prior_values()) this->set_prior(n);
    const std::int64_t next = n + 1;
    store_.put(key, next, timestamp);
    out_.key = key;
    out_.value = next;
    out_.timestamp = timestamp;
    out_.headers = headers;
    this->forward_erased(&out_);
  }

 private:
  std::string store_name_;
  timestamped_store<K, std::int64_t> store_;
  record<K, std::int64_t> out_;  // reused, as emitting_node's
};

template <class K, class V>
class count_node final : public counting_node<K> {
 public:
  using counting_node<K>::counting_node;
  void process(const void* record) override {
    const auto& r = *static_cast<const sluice::record<K, V>*>(record);
    this->count(r.key, r.timestamp, r.headers);
  }
};

/// Combines each value with the stored one per key (the first value starts it), stamped as
/// aggregate_node stamps. A new key's prior value is none (Kafka Streams' KStreamReduce has
/// no initializer).
template <class K, class V, class F>
class reduce_node final : public emitting_node<K, V, K, V>, public prior_value_keeper<V> {
 public:
  reduce_node(std::string store, F f) : store_name_(std::move(store)), f_(std::move(f)) {}
  void init(task_context& task) override {
    node::init(task);
    store_.init(task, store_name_);
  }
  void on_record(const record<K, V>& r) override {
    std::int64_t timestamp = r.timestamp;
    auto current = store_.get(r.key, timestamp);
    if (current) timestamp = std::max(timestamp, r.timestamp);
    V next = current ? std::invoke(f_, *current, r.value) : r.value;
    store_.put(r.key, next, timestamp);
    if (this->sends_prior_values()) this->set_prior(std::move(current));
    this->emit(r.key, std::move(next), r, timestamp);
  }

 private:
  std::string store_name_;
  F f_;
  timestamped_store<K, V> store_;
};

/// Materializes a table topic into its store; a null value deletes the key. Each value is
/// kept with its record's timestamp (value_format::timestamped), as Kafka Streams' KTableSource
/// keeps it in a TimestampedKeyValueStore: the record's own, also when it is older than the
/// value it replaces (an out-of-order update is applied, not merged in time).
template <class K, class V>
class table_node final : public typed_node<K, std::optional<V>>, public prior_value_keeper<V> {
 public:
  explicit table_node(std::string store) : store_name_(std::move(store)) {}
  void init(task_context& task) override {
    node::init(task);
    store_.init(task, store_name_);
  }
  /// Applies the update to the store, then forwards it, a deletion too (as Kafka Streams'
  /// KTableSource forwards a tombstone, also for a key the table did not hold).
  void on_record(const record<K, std::optional<V>>& r) override {
    if (this->sends_prior_values()) this->set_prior(store_.get(r.key));
    if (r.value)
      store_.put(r.key, *r.value, r.timestamp);
    else
      store_.remove(r.key, r.timestamp);
    this->forward_erased(&r);
  }

 private:
  std::string store_name_;
  timestamped_store<K, V> store_;
};

/// How a join reads a table's current value for a key (Kafka Streams' value getters). The
/// key-value getter reads a table kept in a key-value store (a table read from a topic, an
/// aggregation, a join's result: all keep timestamps, value_format::timestamped) by key,
/// with the timestamp of the value's latest update, as Kafka Streams' getters return a
/// ValueAndTimestamp.
template <class K, class V>
class key_value_getter {
 public:
  void init(task_context& task, const std::string& store) { store_.init(task, store); }
  /// The value of `key`, if any; raises `timestamp` to the value's.
  std::optional<V> get(const K& key, std::int64_t& timestamp) {
    std::int64_t stored = timestamp;
    auto v = store_.get(key, stored);
    if (v) timestamp = std::max(timestamp, stored);
    return v;
  }

 private:
  timestamped_store<K, V> store_;
};

/// A table's getter as a join sees the table, as Kafka Streams' suppressed value getter: for
/// a suppressed table (`buffers`: its suppressions' buffer stores, outermost first; several
/// when a suppressed table is suppressed again), a key a suppression holds back answers with
/// its prior value, the value that suppression last emitted for it (for a key it never
/// emitted, what the aggregation passed as the key's old value: a count's 0, none for a
/// reduce or a table read from a topic), so a
/// lookup sees what downstream has seen, not the buffered update; any other key reads the
/// table underneath through Base (key_value_getter or a windowed table's getter). A value
/// from a buffer leaves `timestamp` as it is (Kafka Streams' unknown timestamp). With no
/// buffers it is Base.
template <class K, class V, class Base>
class table_getter {
 public:
  explicit table_getter(std::vector<std::string> buffers = {}) : buffer_names_(std::move(buffers)) {}
  void init(task_context& task, const std::string& store) {
    base_.init(task, store);
    buffers_.clear();
    for (const auto& name : buffer_names_) buffers_.emplace_back(name).init(task);
  }
  std::optional<V> get(const K& key, std::int64_t& timestamp) {
    if (!buffers_.empty()) {
      key_bytes_.clear();
      default_serde<K>::serialize(key, key_bytes_);
      for (auto& buffer : buffers_)
        if (auto prior = buffer.prior_value(key_bytes_)) return std::move(*prior);
    }
    return base_.get(key, timestamp);
  }

 private:
  std::vector<std::string> buffer_names_;
  Base base_;
  std::vector<suppression_buffer_view<V>> buffers_;
  std::string key_bytes_;
};

/// Stream-table join: looks the record's key up in the table (through its getter, so a
/// suppressed table answers with what it has emitted).
template <class K, class V, class VT, class VR, class F, bool Left>
class table_join_node final : public emitting_node<K, V, K, VR> {
 public:
  table_join_node(std::string store, std::vector<std::string> buffers, F f)
      : store_name_(std::move(store)), table_(std::move(buffers)), f_(std::move(f)) {}
  void init(task_context& task) override {
    node::init(task);
    table_.init(task, store_name_);
  }
  void on_record(const record<K, V>& r) override {
    std::int64_t timestamp = r.timestamp;
    auto t = table_.get(r.key, timestamp);
    if constexpr (Left) {
      this->emit(r.key, std::invoke(f_, r.value, t), r);
    } else {
      if (!t) return;
      this->emit(r.key, std::invoke(f_, r.value, *t), r);
    }
  }

 private:
  std::string store_name_;
  table_getter<K, VT, key_value_getter<K, VT>> table_;
  F f_;
};

/// Stream-global-table join: maps the record to the table's key, looks it up.
template <class K, class V, class KG, class VG, class VR, class KF, class F, bool Left>
class global_join_node final : public emitting_node<K, V, K, VR> {
 public:
  global_join_node(std::string store, KF kf, F f)
      : store_name_(std::move(store)), kf_(std::move(kf)), f_(std::move(f)) {}
  void init(task_context& task) override {
    node::init(task);
    view_.emplace(task.global_store(store_name_));
  }
  void on_record(const record<K, V>& r) override {
    auto t = view_->get(std::invoke(kf_, r.key, r.value));
    if constexpr (Left) {
      this->emit(r.key, std::invoke(f_, r.value, t), r);
    } else {
      if (!t) return;
      this->emit(r.key, std::invoke(f_, r.value, *t), r);
    }
  }

 private:
  std::string store_name_;
  KF kf_;
  F f_;
  std::optional<global_store_view<KG, VG>> view_;
};

/// A node that only passes records on (merge points, branch outlets, repartition sources).
template <class K, class V>
class pass_node final : public typed_node<K, V> {
 public:
  void on_record(const record<K, V>& r) override { this->forward_erased(&r); }
};

// The nodes of the commonest types (string keys; string or 64-bit integer values) are
// compiled once, in framework/src/dsl/common_nodes.cpp, not in every unit that uses them.
extern template class source_node<std::string, std::string, string_serde, string_serde>;
extern template class source_node<std::optional<std::string>, std::string, string_serde, string_serde>;
extern template class source_node<std::string, std::int64_t, string_serde, int64_serde>;
extern template class sink_node<std::string, std::string, string_serde, string_serde>;
extern template class sink_node<std::string, std::int64_t, string_serde, int64_serde>;
extern template class counting_node<std::string>;

}  // namespace sluice::detail
