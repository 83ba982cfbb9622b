// Global tables: every instance reads every partition of a global table's topic into a
// local store, catches up before any task processes, and follows the topic afterwards on
// a thread of its own. Stream threads read the stores concurrently (shared lock).
//
// Each record is decoded as the table's types when it is read (store_spec::check_record);
// one that does not decode goes to the deserialization handler there, naming the table's
// topic, partition, offset and key. The following thread rides out retriable errors (broker
// outages, leader moves: it backs off and polls again, counted in
// sluice_global_table_retries_total); a fatal one stops it, sets sluice_global_table_failed
// to 1 and reports the message through on_fatal (the app goes to its error state, /health
// answers 503 with the reason), never leaving the app running on tables that stopped moving.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "kafka/admin.hpp"
#include "sluice/config.hpp"
#include "kafka/topic_scan.hpp"
#include "runtime/running_total.hpp"
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
  void apply(std::string_view key, const std::optional<std::string_view>& value);
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

/// Whether the global table record `m` is applied: true when it decodes as `spec`'s types.
/// One that does not goes to `policy`: fail throws sluice::error(errc::serialization) naming
/// the topic, partition, offset and key; log_and_continue and dead_letter skip it, add it to
/// `skipped` and log it naming the same. Under dead_letter nothing is dead-lettered (the
/// global tables' thread has no producer), and the log line says "not dead-lettered".
/// Shared by the runtime (records lent by the consumer) and the test driver.
bool accept_global_record(const detail::store_spec& spec, const raw_view& m, error_policy policy, counter& skipped);

class global_tables {
 public:
  /// `on_fatal` is called once, from the following thread, with the message of the error
  /// that stopped it.
  global_tables(const topology& topo, kafka::config_map consumer_config, kafka::admin& admin, metrics_registry& metrics,
                error_policy deserialization_policy, std::function<void(const std::string&)> on_fatal);
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
  /// Applies one run of records of one partition, lent by topic_scan::poll_lent; returns
  /// how many it read.
  std::size_t apply_run(std::span<const raw_view> run);
  /// One poll of the scan: up to 10,000 records applied; returns how many were read.
  std::size_t poll_and_apply();

  struct table {
    global_table_store* store;
    const detail::store_spec* spec;
  };

  std::map<std::string, std::unique_ptr<global_table_store>> stores_;  // by store name
  std::map<std::string, table, std::less<>> by_topic_;
  std::unique_ptr<kafka::topic_scan> scan_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  counter& applied_;
  counter& skipped_;
  counter& retries_;
  running_total_feed fetch_wakes_;  // the scan's wake-ups: sluice_fetch_wakes_total{consumer="global"}
  gauge& failed_;
  error_policy policy_;
  std::function<void(const std::string&)> on_fatal_;
};

}  // namespace sluice::runtime
