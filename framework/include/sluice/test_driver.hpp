// sluice::testing::topology_test_driver: runs a topology in-process with no broker and no
// threads, so teams unit-test their topologies in milliseconds.
//
//   sluice::testing::topology_test_driver driver(my_topology());
//   auto in = driver.input_topic<std::string, order>("orders");
//   auto out = driver.output_topic<std::string, large_order>("large-orders");
//   in.pipe("o1", order{...}, /*timestamp=*/1000);
//   EXPECT_EQ(out.read_value().customer, "c1");
//
// The same tasks, processors, stores (in-memory unless options.rocksdb_stores), serdes,
// punctuators and error handlers run as in production; the driver only replaces Kafka:
// piped records go straight to the task of their partition, every record a task sends is
// kept per topic (outputs, changelogs, dead letters, repartition topics) and records sent
// to a topic the topology reads (repartition topics) are processed in turn. Stream-time
// punctuators fire from record timestamps; wall-clock ones only on advance_wall_clock().
// processing.guarantee applies as in a job (stores hold writes until the commit under
// exactly_once, processor_context::exactly_once() says it); every commit succeeds.
//
// Paused input (processor_context::pause_input_until, e.g. sluice::topologies::pace):
// records piped to (or produced for) a task whose input is paused are held in a per-task
// queue, in order, as Kafka would keep them unread; the record that caused the pause has
// completed. advance_wall_clock() moves the clock through every time within the step at
// which a paused task with held records may resume (running wall-clock punctuators there)
// and feeds it held records until it pauses again, so they come out at the pace set, each
// processed at the wall-clock time it would be in production.
//
// Threading: single-threaded; everything happens inside pipe() and advance_wall_clock().
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sluice/client.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/dsl_nodes.hpp"
#include "sluice/metrics.hpp"
#include "sluice/queries.hpp"
#include "sluice/record.hpp"
#include "sluice/store.hpp"
#include "sluice/topology.hpp"

namespace sluice::testing {

struct driver_options {
  /// Partitions of every topic; records are placed by murmur2 of the key bytes, as the
  /// Java producer places them. Default: 1.
  int partitions = 1;
  /// Run RocksDB stores as RocksDB (in a temporary state dir) instead of in memory.
  /// Default: false (in-memory, faster).
  bool rocksdb_stores = false;
  /// The wall clock at start, in ms since the epoch. Default: 0.
  std::int64_t start_wall_clock_ms = 0;
  /// Commit every task's stores after this many processed records (and at every
  /// advance_wall_clock()), as a stream thread commits once per interval. Tests keep 1, so
  /// queries() see every record at once; benchmarks of a hot path raise it so RocksDB stores
  /// pay one write batch per many records, as in a job. Must be at least 1.
  /// Default: 1.
  std::size_t commit_every_records = 1;
  /// A registry to report metrics into instead of the driver's own; it must outlive the
  /// driver. To read what the tasks leave behind once the driver is gone (the gauges a
  /// processor's close() retires, as a task leaving an instance does).
  /// Default: nullptr (the driver's own, metrics()).
  metrics_registry* metrics = nullptr;
};

class topology_test_driver;

/// Pipes typed records into one topic.
template <class K, class V>
class test_input_topic {
 public:
  test_input_topic(topology_test_driver& d, std::string topic) : driver_(&d), topic_(std::move(topic)) {}
  /// Processes one record now. The timestamp defaults to the last one piped + 1 ms
  /// (starting at 0). partition -1 places it by key.
  void pipe(const K& key, const V& value, std::optional<std::int64_t> timestamp = std::nullopt,
            const sluice::headers& headers = {}, std::int32_t partition = -1);
  /// Pipes many (key, value) pairs with automatic timestamps.
  void pipe_all(const std::vector<std::pair<K, V>>& records) {
    for (const auto& [k, v] : records) pipe(k, v);
  }

 private:
  topology_test_driver* driver_;
  std::string topic_;
  std::string key_buf_, value_buf_;
};

/// Reads typed records a topology sent to one topic, oldest first; reading consumes them.
template <class K, class V>
class test_output_topic {
 public:
  test_output_topic(topology_test_driver& d, std::string topic) : driver_(&d), topic_(std::move(topic)) {}
  /// The next record; throws std::out_of_range when there is none.
  record<K, V> read();
  K read_key() { return read().key; }
  V read_value() { return read().value; }
  std::vector<record<K, V>> read_all() {
    std::vector<record<K, V>> out;
    while (!empty()) out.push_back(read());
    return out;
  }
  /// The latest value per key among the unread records (a table's view); consumes them.
  std::map<K, V> read_key_values_to_map() {
    std::map<K, V> out;
    while (!empty()) {
      auto r = read();
      out[r.key] = r.value;
    }
    return out;
  }
  bool empty() const;
  std::size_t size() const;

 private:
  topology_test_driver* driver_;
  std::string topic_;
};

class topology_test_driver {
 public:
  /// application.id defaults to "test-driver"; processing handlers and every other sluice
  /// key apply as in production.
  explicit topology_test_driver(topology t, config c = {}, driver_options options = {});
  ~topology_test_driver();
  topology_test_driver(const topology_test_driver&) = delete;
  topology_test_driver& operator=(const topology_test_driver&) = delete;

  template <class K, class V>
  test_input_topic<K, V> input_topic(const std::string& topic) {
    return test_input_topic<K, V>(*this, topic);
  }
  /// Throws sluice::error(errc::invalid_topology) when the topology never writes `topic`
  /// (no sink, changelog, repartition or dead-letter topic of that name), listing those it does.
  template <class K, class V>
  test_output_topic<K, V> output_topic(const std::string& topic) {
    check_written_topic(topic);
    return test_output_topic<K, V>(*this, topic);
  }

  /// Moves the wall clock and runs the wall-clock punctuators that became due; releases
  /// records held for tasks whose input pause ended, stopping at each such time on the way
  /// (see "Paused input" above).
  void advance_wall_clock(std::chrono::milliseconds by);
  std::int64_t wall_clock_ms() const noexcept;

  /// A typed handle to the store `name` of the task on `partition`, to inspect or
  /// pre-populate (writes go to the changelog as in production).
  template <class K, class V, class KS = default_state_serde<K>, class VS = default_state_serde<V>>
  key_value_store<K, V, KS, VS> store(const std::string& name, std::int32_t partition = 0) {
    auto [binding, context] = store_binding(name, partition);
    return detail::store_handle_factory::make<key_value_store<K, V, KS, VS>>(binding, context);
  }

  /// The store `name` of the task on `partition` through the typed handle H of its kind
  /// (see processor_context::state_store), e.g. a ranked index's query view.
  template <class H>
  H state_store(const std::string& name, std::int32_t partition = 0) {
    auto [binding, context] = store_binding(name, partition);
    return detail::store_handle_factory::make<H>(binding, context);
  }

  /// The stores of every partition's task through the read path an app's queries() take
  /// (sluice/queries.hpp), so code written against an app (a topology's read-only views) runs
  /// in tests unchanged. Queries run at once on the calling thread, on the state committed
  /// after the last record; writes through a handle are refused as in an app.
  interactive_queries& queries() noexcept;

  /// Bytes-level access, for tests of serdes and dead letters.
  void pipe_raw(const std::string& topic, const std::optional<std::string_view>& key,
                const std::optional<std::string_view>& value, std::int64_t timestamp,
                const sluice::headers& headers = {}, std::int32_t partition = -1);
  /// Unread records of `topic` (any topic: outputs, changelogs, the dead-letter topic).
  std::deque<raw_message>& records(const std::string& topic);
  /// The full names of topics that received records, e.g. "<app>-<store>-changelog".
  std::vector<std::string> topics() const;
  const std::string& application_id() const noexcept;
  metrics_registry& metrics() noexcept;
  std::int64_t last_timestamp() const noexcept;
  /// See output_topic.
  void check_written_topic(const std::string& topic) const;

 private:
  template <class, class>
  friend class test_output_topic;
  // Out of line, so that each test_output_topic<K, V> holds only its decoding.
  /// Removes and returns the oldest unread record of `topic`; throws std::out_of_range when none is left.
  raw_message take_record(const std::string& topic);
  /// Throws serialization_error: `part` ("key" or "value") of `m`, read from `topic`, did not decode.
  [[noreturn]] static void throw_undecodable(const std::string& topic, const raw_message& m, const char* part,
                                             const serialization_error& cause);
  std::pair<detail::store_binding, detail::task_context*> store_binding(const std::string& name,
                                                                        std::int32_t partition);
  struct impl;
  std::unique_ptr<impl> impl_;
};

template <class K, class V>
void test_input_topic<K, V>::pipe(const K& key, const V& value, std::optional<std::int64_t> timestamp,
                                  const sluice::headers& headers, std::int32_t partition) {
  auto k = detail::encode_field<detail::topic_serde_t<K>, K>(key, key_buf_);
  auto v = detail::encode_field<detail::topic_serde_t<V>, V>(value, value_buf_);
  driver_->pipe_raw(topic_, k, v, timestamp.value_or(driver_->last_timestamp() + 1), headers, partition);
}

template <class K, class V>
record<K, V> test_output_topic<K, V>::read() {
  raw_message m = driver_->take_record(topic_);
  std::optional<std::string_view> k, v;
  if (m.key) k = std::string_view(*m.key);
  if (m.value) v = std::string_view(*m.value);
  const char* part = "key";
  try {
    auto key = detail::decode_field<detail::topic_serde_t<K>, K>(k, "key");
    part = "value";
    return record<K, V>{std::move(key), detail::decode_field<detail::topic_serde_t<V>, V>(v, "value"), m.timestamp,
                        m.headers};
  } catch (const serialization_error& e) {
    driver_->throw_undecodable(topic_, m, part, e);
  }
}

template <class K, class V>
bool test_output_topic<K, V>::empty() const {
  return driver_->records(topic_).empty();
}

template <class K, class V>
std::size_t test_output_topic<K, V>::size() const {
  return driver_->records(topic_).size();
}

}  // namespace sluice::testing
