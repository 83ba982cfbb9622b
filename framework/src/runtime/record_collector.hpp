// record_collector: the one producer of a stream thread. Sends sink records, changelog
// writes and dead letters; under exactly-once it owns the thread's transaction. Tracks the
// last delivered offset per changelog partition, so stores can record the offset they reflect.
// Under at-least-once it sends a changelog record only once every output record sent before
// it is delivered (see send_changelog()).
//
// Threading: used by its stream thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
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
  /// Sends one changelog record of a store: as send(), and its delivery moves the changelog
  /// offset the store's next commit records (record_collector::next_changelog_offset).
  /// Under at-least-once the record collector first waits for the delivery of every record
  /// sent before it with send(): callers batch changelog records so that this is rare.
  virtual void send_changelog(std::string_view topic, std::int32_t partition, std::string_view key,
                              const std::optional<std::string_view>& value, std::int64_t timestamp) {
    static const sluice::headers none;
    send(topic, partition, key, value, timestamp, none);
  }
};

class record_collector final : public record_sender {
 public:
  /// Makes the producer (under exactly-once also initializes its transactions, which can
  /// wait up to a minute on the coordinator; `stop_requested`, when given, cuts that wait
  /// short within a second: the last retriable error librdkafka reported for the wait is
  /// thrown, often CONCURRENT_TRANSACTIONS rather than a timeout).
  record_collector(kafka::config_map producer_config, processing_guarantee guarantee, std::string transactional_id,
                   error_policy on_production_error, metrics_registry& metrics, std::string thread_label,
                   std::function<bool()> stop_requested = {});

  /// Sends one record; under exactly-once begins the transaction first if none is open.
  void send(std::string_view topic, std::int32_t partition, const std::optional<std::string_view>& key,
            const std::optional<std::string_view>& value, std::int64_t timestamp,
            const sluice::headers& headers) override;
  /// As send(); its delivery report moves next_changelog_offset(topic, partition).
  ///
  /// At-least-once: when records sent with send() (outputs, repartition records, dead
  /// letters) are not yet delivered, flushes first (and throws a delivery failure as flush()
  /// does), so the changelog record is handed to the producer only after them. Kafka keeps
  /// order per partition only: without this, a changelog write counting an emission (a queue
  /// store's pop, the overflow buffer's customer state) could reach its partition before the
  /// emission reached its own (another leader, a retry), and a crash in between would restore
  /// the write and never emit the record again. Exactly-once needs no wait: the transaction
  /// commits both or neither.
  void send_changelog(std::string_view topic, std::int32_t partition, std::string_view key,
                      const std::optional<std::string_view>& value, std::int64_t timestamp) override;

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
  /// Drops the producer and makes a fresh one (after fencing or an unknown outcome); the
  /// same wait as the constructor's.
  void recreate();
  /// Numbers the producers made (1 for the first); with when the current one became ready
  /// (its init_transactions returned), for telling a twin's fencings from an outage's.
  std::uint64_t producer_incarnation() const noexcept { return producer_incarnation_; }
  std::chrono::steady_clock::time_point producer_ready_at() const noexcept { return producer_ready_at_; }

  /// The next offset after the last delivered record of a changelog partition (sent with
  /// send_changelog()), if any was delivered since the last reset_changelog_offsets().
  std::optional<state::changelog_offset> next_changelog_offset(const std::string& topic, std::int32_t partition) const;
  void reset_changelog_offsets() noexcept;
  /// Serves delivery reports without blocking.
  void poll() { producer_->poll(std::chrono::milliseconds(0)); }

 private:
  void make_producer();
  /// Exactly-once: init_transactions in slices, up to a minute, while no stop is requested.
  void init_transactions();
  void on_delivery(const kafka::delivery_report& report);

  /// The next offset slot of a changelog partition, made on its first record. A slot's
  /// address is the opaque of every changelog record produced to it, so a delivery report
  /// updates it without a lookup, and a report without one (a sink's or a dead letter's
  /// record, most of them) is done at once. Slots live as long as the collector.
  std::int64_t& changelog_slot(std::string_view topic, std::int32_t partition);

  kafka::config_map config_;
  processing_guarantee guarantee_;
  std::string transactional_id_;
  error_policy on_error_;
  client_statistics statistics_;  ///< of every producer it makes
  std::function<bool()> stop_requested_;
  // Before producer_, which flushes on destruction: the delivery reports it serves then still
  // find them.
  // Per changelog topic, per partition: the slot (-1 = none delivered since the last reset).
  std::unordered_map<std::string, std::vector<std::unique_ptr<std::int64_t>>, kafka::string_hash, std::equal_to<>>
      delivered_;
  std::string_view last_topic_;        // key in delivered_ of the last changelog record's topic
  std::int32_t last_partition_ = -1;   // and its partition
  std::int64_t* last_slot_ = nullptr;  // and their slot
  std::optional<sluice::error> first_failure_;
  const sluice::headers no_headers_;  // a changelog record's
  counter& sent_;
  counter& failed_;
  std::unique_ptr<kafka::producer> producer_;
  std::uint64_t producer_incarnation_ = 0;
  std::chrono::steady_clock::time_point producer_ready_at_;
  bool in_transaction_ = false;
  // Records of send() produced and not yet reported, delivered or failed (the reports without
  // a slot): a changelog record waits for them under at-least-once.
  std::int64_t outputs_in_flight_ = 0;
};

}  // namespace sluice::runtime
