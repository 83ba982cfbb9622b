// record_collector: the one producer of a stream thread. Sends sink records, changelog
// writes and dead letters; under exactly-once it owns the thread's transaction. Tracks the
// last delivered offset per changelog partition, so stores can record the offset they reflect.
//
// Threading: used by its stream thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kafka/producer.hpp"
#include "runtime/client_statistics.hpp"
#include "sluice/config.hpp"
#include "sluice/metrics.hpp"
#include "sluice/state/changelog_offset.hpp"

namespace sluice::runtime {

/// Sends a task's records somewhere: the thread's record collector, or the test driver.
class record_sender {
 public:
  virtual ~record_sender() = default;
  virtual void send(std::string_view topic, std::int32_t partition, const std::optional<std::string_view>& key,
                    const std::optional<std::string_view>& value, std::int64_t timestamp,
                    const sluice::headers& headers) = 0;
};

class record_collector final : public record_sender {
 public:
  record_collector(kafka::config_map producer_config, processing_guarantee guarantee, std::string transactional_id,
                   error_policy on_production_error, metrics_registry& metrics, std::string thread_label);

  /// Sends one record; under exactly-once begins the transaction first if none is open.
  void send(std::string_view topic, std::int32_t partition, const std::optional<std::string_view>& key,
            const std::optional<std::string_view>& value, std::int64_t timestamp,
            const sluice::headers& headers) override;

  /// Exactly-once: begins a transaction if none is open.
  void ensure_transaction();
  bool transaction_open() const noexcept { return in_transaction_; }

  /// Waits for every outstanding delivery; throws the first delivery failure under the
  /// `fail` production policy (logged and counted under log_and_continue).
  void flush();
  /// Exactly-once: flush, add the consumer offsets, commit the transaction.
  void commit_transaction(const std::vector<kafka::topic_partition_offset>& offsets,
                          const kafka::consumer_group_metadata& group);
  /// Exactly-once: aborts the open transaction if any (best effort; errors are logged).
  void abort_transaction();
  /// Drops the producer and makes a fresh one (after fencing or an unknown outcome).
  void recreate();

  /// The next offset after the last delivered record of a changelog partition, if any was
  /// delivered since the last reset_changelog_offsets().
  std::optional<state::changelog_offset> next_changelog_offset(const std::string& topic, std::int32_t partition) const;
  void reset_changelog_offsets() { delivered_.clear(); }
  /// Serves delivery reports without blocking.
  void poll() { producer_->poll(std::chrono::milliseconds(0)); }

 private:
  void make_producer();
  void on_delivery(const kafka::delivery_report& report);

  kafka::config_map config_;
  processing_guarantee guarantee_;
  std::string transactional_id_;
  error_policy on_error_;
  client_statistics statistics_;  ///< of every producer it makes; before producer_, which flushes on destruction
  std::unique_ptr<kafka::producer> producer_;
  bool in_transaction_ = false;
  // Next offset per topic, indexed by partition (-1 = none delivered yet). Looked up by the
  // delivery report's topic as a string_view: no string is built per delivered record.
  std::unordered_map<std::string, std::vector<std::int64_t>, kafka::string_hash, std::equal_to<>> delivered_;
  std::optional<sluice::error> first_failure_;
  counter& sent_;
  counter& failed_;
};

}  // namespace sluice::runtime
