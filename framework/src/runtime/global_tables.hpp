// Global tables: every instance reads every partition of a global table's topic into a
// local store, catches up before any task processes, and follows the topic afterwards on
// a thread of its own. Stream threads read the stores concurrently (shared lock).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "kafka/admin.hpp"
#include "kafka/consumer.hpp"
#include "sluice/detail/node.hpp"
#include "sluice/metrics.hpp"
#include "sluice/topology.hpp"

namespace sluice::runtime {

/// One global store: the table's latest value bytes per key bytes, in key byte order (the
/// order of the key-value stores' scans, for the /stores/... queries of global tables).
/// Written by the global tables' thread, read by stream threads and HTTP handlers (shared lock).
class global_table_store final : public detail::global_view {
 public:
  /// `partitions`: of the table's topic, so a query answer names the partition of a key.
  explicit global_table_store(std::int32_t partitions) : partitions_(partitions) {}
  bool get(std::string_view key, std::string& out) const override;
  void apply(std::string_view key, const std::optional<std::string>& value);
  std::size_t size() const;
  std::int32_t partitions() const noexcept { return partitions_; }
  /// Calls `visit(key, value)` in key byte order from the first key >= `from` (from the
  /// first key when nullopt) until it returns false or the entries end. Holds the shared
  /// lock throughout: `visit` copies what it keeps and returns quickly.
  void scan(std::optional<std::string_view> from,
            const std::function<bool(std::string_view key, std::string_view value)>& visit) const;

 private:
  const std::int32_t partitions_;
  mutable std::shared_mutex mutex_;
  std::map<std::string, std::string, std::less<>> entries_;
};

class global_tables {
 public:
  global_tables(const topology& topo, kafka::config_map consumer_config, kafka::admin& admin,
                metrics_registry& metrics);
  ~global_tables();
  bool empty() const noexcept { return stores_.empty(); }
  /// Reads every partition up to its current end. Blocks; logs progress.
  void catch_up();
  /// Follows the topics on a background thread until stop().
  void start_following();
  void stop();
  std::map<std::string, const detail::global_view*> views() const;
  /// The stores by name, for interactive queries; they live as long as this object.
  std::map<std::string, const global_table_store*, std::less<>> stores() const;

 private:
  void apply_batch();

  std::map<std::string, std::unique_ptr<global_table_store>> stores_;  // by store name
  std::map<std::string, global_table_store*> by_topic_;
  std::unique_ptr<kafka::consumer> consumer_;
  std::vector<kafka::message> batch_;
  std::map<std::pair<std::string, std::int32_t>, bool> at_end_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  counter& applied_;
};

}  // namespace sluice::runtime
