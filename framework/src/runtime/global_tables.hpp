// Global tables: every instance reads every partition of a global table's topic into a
// local store, catches up before any task processes, and follows the topic afterwards on
// a thread of its own. Stream threads read the stores concurrently (shared lock).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kafka/admin.hpp"
#include "kafka/consumer.hpp"
#include "sluice/detail/node.hpp"
#include "sluice/metrics.hpp"
#include "sluice/topology.hpp"

namespace sluice::runtime {

/// One global store: the table's latest value bytes per key bytes.
class global_table_store final : public detail::global_view {
 public:
  bool get(std::string_view key, std::string& out) const override;
  void apply(std::string_view key, const std::optional<std::string>& value);
  std::size_t size() const;

 private:
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::string, std::string> entries_;
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
