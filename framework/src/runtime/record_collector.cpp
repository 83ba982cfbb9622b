// The stream thread's producer: sends, delivery tracking, transactions.
#include "runtime/record_collector.hpp"

#include <spdlog/spdlog.h>

#include "runtime/sliced_wait.hpp"

namespace sluice::runtime {

using namespace std::chrono_literals;

record_collector::record_collector(kafka::config_map producer_config, processing_guarantee guarantee,
                                   std::string transactional_id, error_policy on_production_error,
                                   metrics_registry& metrics, std::string thread_label,
                                   std::function<bool()> stop_requested)
    : config_(std::move(producer_config)),
      guarantee_(guarantee),
      transactional_id_(std::move(transactional_id)),
      on_error_(on_production_error),
      statistics_(metrics, thread_label, client_kind::producer),
      stop_requested_(std::move(stop_requested)),
      sent_(metrics.get_counter("sluice_records_sent_total", thread_label)),
      failed_(metrics.get_counter("sluice_production_errors_total", thread_label)) {
  make_producer();
}

void record_collector::make_producer() {
  kafka::producer_options options;
  if (guarantee_ == processing_guarantee::exactly_once) {
    options.mode = kafka::producer_mode::transactional;
    options.transactional_id = transactional_id_;
  }
  options.on_statistics = [this](std::string_view json) { statistics_.on_statistics(json); };
  producer_ =
      std::make_unique<kafka::producer>(config_, options, [this](const kafka::delivery_report& r) { on_delivery(r); });
  ++producer_incarnation_;
  if (guarantee_ == processing_guarantee::exactly_once) init_transactions();
  producer_ready_at_ = std::chrono::steady_clock::now();
  in_transaction_ = false;
}

void record_collector::init_transactions() {
  // A slice that runs out reports the last retriable error librdkafka met
  // (CONCURRENT_TRANSACTIONS, or its own timeout); the next call resumes the init or begins
  // it again.
  wait_in_slices(60s, stop_requested_,
                 [this](std::chrono::milliseconds slice) { producer_->init_transactions(slice); });
}

void record_collector::recreate() {
  producer_.reset();
  outputs_in_flight_ = 0;  // the old producer's reports are served or discarded with it
  reset_changelog_offsets();
  first_failure_.reset();
  make_producer();
}

void record_collector::on_delivery(const kafka::delivery_report& r) {
  if (r.opaque == nullptr) --outputs_in_flight_;
  if (r.ok()) {
    // Only changelog records carry a slot: the offsets the stores' commits record.
    if (r.opaque == nullptr || r.offset < 0) return;
    auto& next = *static_cast<std::int64_t*>(r.opaque);
    next = std::max(next, r.offset + 1);
    return;
  }
  failed_.add();
  if (on_error_ == error_policy::fail || guarantee_ == processing_guarantee::exactly_once) {
    if (!first_failure_) first_failure_ = r.to_error();
  } else {
    spdlog::warn("production to '{}' failed and the record is skipped (production.error.handler=log_and_continue): {}",
                 r.topic, r.to_error().what());
  }
}

void record_collector::ensure_transaction() {
  if (guarantee_ != processing_guarantee::exactly_once || in_transaction_) return;
  producer_->begin_transaction();
  in_transaction_ = true;
}

void record_collector::send(std::string_view topic, std::int32_t partition, const std::optional<std::string_view>& key,
                            const std::optional<std::string_view>& value, std::int64_t timestamp,
                            const sluice::headers& headers) {
  ensure_transaction();
  producer_->produce(topic, partition, key, value, timestamp, headers);
  ++outputs_in_flight_;
  sent_.add();
}

void record_collector::send_changelog(std::string_view topic, std::int32_t partition, std::string_view key,
                                      const std::optional<std::string_view>& value, std::int64_t timestamp) {
  auto& slot = changelog_slot(topic, partition);
  // The emissions this write may count reach their partitions first (see the declaration).
  if (guarantee_ == processing_guarantee::at_least_once && outputs_in_flight_ > 0) flush();
  ensure_transaction();
  producer_->produce(topic, partition, key, value, timestamp, no_headers_, &slot);
  sent_.add();
}

std::int64_t& record_collector::changelog_slot(std::string_view topic, std::int32_t partition) {
  if (last_slot_ != nullptr && partition == last_partition_ && topic == last_topic_) return *last_slot_;
  if (partition < 0)
    throw sluice::error(errc::invalid_topology,
                        "changelog record for '" + std::string(topic) +
                            "' without a partition; a store's changelog partition is its task's");
  auto it = delivered_.find(topic);
  if (it == delivered_.end())
    it = delivered_.emplace(std::string(topic), std::vector<std::unique_ptr<std::int64_t>>{}).first;
  auto& slots = it->second;
  const auto p = static_cast<std::size_t>(partition);
  if (p >= slots.size()) slots.resize(p + 1);
  if (!slots[p]) slots[p] = std::make_unique<std::int64_t>(-1);
  last_topic_ = it->first;
  last_partition_ = partition;
  last_slot_ = slots[p].get();
  return *last_slot_;
}

void record_collector::reset_changelog_offsets() noexcept {
  for (auto& [topic, slots] : delivered_)
    for (auto& slot : slots)
      if (slot) *slot = -1;
}

void record_collector::flush() {
  producer_->flush(120s);
  if (first_failure_) {
    auto e = *first_failure_;
    first_failure_.reset();
    throw e;
  }
}

void record_collector::commit_transaction(const std::vector<kafka::topic_partition_offset>& offsets,
                                          const kafka::consumer_group_metadata& group) {
  ensure_transaction();
  // The offsets' two round trips (AddOffsetsToTxn, TxnOffsetCommit) while the interval's last
  // records are still being delivered, not after: nothing of the transaction is visible
  // before its EndTxn, and a delivery that fails makes flush() throw, the transaction
  // (offsets included) then aborted.
  if (!offsets.empty()) producer_->send_offsets_to_transaction(offsets, group, 60s);
  flush();
  producer_->commit_transaction(60s);
  in_transaction_ = false;
}

void record_collector::abort_transaction() {
  if (!in_transaction_) return;
  in_transaction_ = false;
  try {
    producer_->abort_transaction(30s);
  } catch (const std::exception& e) {
    spdlog::warn("aborting the transaction failed ({}); the producer will be recreated", e.what());
  }
}

std::optional<state::changelog_offset> record_collector::next_changelog_offset(const std::string& topic,
                                                                               std::int32_t partition) const {
  auto it = delivered_.find(topic);
  if (it == delivered_.end() || partition < 0) return std::nullopt;
  const auto p = static_cast<std::size_t>(partition);
  if (p >= it->second.size() || !it->second[p] || *it->second[p] < 0) return std::nullopt;
  return state::changelog_offset(*it->second[p]);
}

}  // namespace sluice::runtime
