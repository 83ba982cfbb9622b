// Plain clients for the edges of a job: write records to a topic, read them back, create
// topics. Examples, demos and tests use them to feed and check topologies; they speak the
// same serdes as the DSL and reach the embedded cluster when bootstrap.servers=embedded.
//
// Thread-safety: one object per thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/config.hpp"
#include "sluice/detail/dsl_nodes.hpp"
#include "sluice/record.hpp"

namespace sluice {

/// A record read from a topic, bytes as stored.
struct raw_message {
  std::string topic;
  std::int32_t partition = -1;
  std::int64_t offset = -1;
  std::int64_t timestamp = 0;
  std::optional<std::string> key;
  std::optional<std::string> value;
  sluice::headers headers;
};

/// A topic's cleanup.policy: old segments deleted by retention, or compacted to the latest
/// value per key (what a table's topic wants).
enum class cleanup_policy { delete_old, compact };

/// Which records a topic_reader sees, as Kafka's isolation.level: read_committed hides
/// records of aborted and still open transactions.
enum class isolation { read_committed, read_uncommitted };

/// Creates topics (idempotently) and tells partition counts.
class topic_admin {
 public:
  explicit topic_admin(const config& c);
  ~topic_admin();
  /// Creates `name` unless it exists, with cleanup.policy `policy`.
  void create_topic(const std::string& name, int partitions, cleanup_policy policy = cleanup_policy::delete_old);
  /// Creates `name` unless it exists, with topic configs (e.g. max.message.bytes).
  void create_topic(const std::string& name, int partitions, const std::map<std::string, std::string>& configs);
  std::optional<int> partition_count(const std::string& name);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// Writes records with the Java-compatible partitioner (murmur2 of the key bytes).
class topic_writer {
 public:
  explicit topic_writer(const config& c);
  ~topic_writer();

  void send_raw(const std::string& topic, const std::optional<std::string_view>& key,
                const std::optional<std::string_view>& value, std::int64_t timestamp = 0,
                const sluice::headers& headers = {}, std::int32_t partition = -1);

  /// Typed send with the DSL's default serdes.
  template <class K, class V>
  void send(const std::string& topic, const K& key, const V& value, std::int64_t timestamp = 0,
            const sluice::headers& headers = {}) {
    auto k = detail::encode_field<detail::topic_serde_t<K>, K>(key, key_buf_);
    auto v = detail::encode_field<detail::topic_serde_t<V>, V>(value, value_buf_);
    send_raw(topic, k, v, timestamp, headers);
  }
  /// Waits until everything sent is acknowledged; throws sluice::error on failure.
  void flush(std::chrono::milliseconds timeout = std::chrono::seconds(60));

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
  std::string key_buf_, value_buf_;
};

/// Reads topics from the beginning, without a consumer group.
class topic_reader {
 public:
  topic_reader(const config& c, const std::vector<std::string>& topics, isolation level = isolation::read_committed);
  ~topic_reader();
  /// Records that arrive within `timeout` (stops early once `max` are read).
  std::vector<raw_message> poll(std::chrono::milliseconds timeout, std::size_t max = 100000);
  /// As poll(), but each record is lent to `each` instead of copied (no headers); returns how
  /// many were lent. For readers that count or check millions of records.
  std::size_t poll_views(std::chrono::milliseconds timeout, const std::function<void(const raw_view&)>& each,
                         std::size_t max = 100000);
  /// Reads until `count` records arrived or `timeout` passed.
  std::vector<raw_message> read_at_least(std::size_t count, std::chrono::milliseconds timeout);
  /// Reads until every partition is at its end (as of the call).
  std::vector<raw_message> read_to_end(std::chrono::milliseconds timeout = std::chrono::seconds(60));

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace sluice
