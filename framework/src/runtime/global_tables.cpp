// Global tables: catch-up and follow.
#include "runtime/global_tables.hpp"

#include <spdlog/spdlog.h>

#include <mutex>

#include "runtime/error_classification.hpp"
#include "sluice/error.hpp"

namespace sluice::runtime {

using namespace std::chrono_literals;

bool global_table_store::get(std::string_view key, std::string& out) const {
  std::shared_lock lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  out = it->second;
  return true;
}

void global_table_store::apply(std::string_view key, const std::optional<std::string_view>& value) {
  std::unique_lock lock(mutex_);
  auto it = entries_.find(key);
  if (!value) {
    if (it != entries_.end()) entries_.erase(it);
  } else if (it != entries_.end()) {
    it->second.assign(*value);
  } else {
    entries_.emplace(std::string(key), std::string(*value));
  }
}

void global_table_store::scan(std::optional<std::string_view> from,
                              const std::function<bool(std::string_view, std::string_view)>& visit) const {
  std::shared_lock lock(mutex_);
  for (auto it = from ? entries_.lower_bound(*from) : entries_.begin(); it != entries_.end(); ++it)
    if (!visit(it->first, it->second)) return;
}

std::size_t global_table_store::size() const {
  std::shared_lock lock(mutex_);
  return entries_.size();
}

bool accept_global_record(const detail::store_spec& spec, const raw_view& m, error_policy policy, counter& skipped) {
  if (!spec.check_record || !m.key || !m.value) return true;
  try {
    spec.check_record(*m.key, *m.value);
    return true;
  } catch (const std::exception& e) {
    const std::string where = "of global table '" + spec.name + "' at " + std::string(m.topic) + "[" +
                              std::to_string(m.partition) + "]@" + std::to_string(m.offset) + " with key " +
                              printable_key(m.key);
    if (policy == error_policy::fail)
      throw error(errc::serialization,
                  "deserialization error on the record " + where + ": " + e.what() +
                      " (deserialization.error.handler=fail stops the job; fix the table topic's record, or set "
                      "the handler to log_and_continue to skip such records)");
    skipped.add();
    const auto n = skipped.value();
    // Under dead_letter too: the global tables' thread has no producer, so the log says the
    // record was not dead-lettered rather than let the handler's name suggest it was.
    const std::string_view not_sent = policy == error_policy::dead_letter
                                          ? "; not dead-lettered: global table records are read without a producer"
                                          : "";
    if (n <= 10 || n % 1000 == 0)
      spdlog::warn("global tables: skipped the record {} ({} so far; lookups of that key see the previous value{}): {}",
                   where, n, not_sent, e.what());
    return false;
  }
}

global_tables::global_tables(const topology& topo, kafka::config_map consumer_config, kafka::admin& admin,
                             metrics_registry& metrics, error_policy deserialization_policy,
                             std::function<void(const std::string&)> on_fatal)
    : applied_(metrics.get_counter("sluice_global_records_applied_total")),
      skipped_(metrics.get_counter("sluice_records_skipped_total", "global=\"true\"")),
      retries_(metrics.get_counter("sluice_global_table_retries_total")),
      fetch_wakes_(metrics.get_counter("sluice_fetch_wakes_total", "consumer=\"global\"")),
      failed_(metrics.get_gauge("sluice_global_table_failed")),
      policy_(deserialization_policy),
      on_fatal_(std::move(on_fatal)) {
  std::vector<std::pair<std::string, int>> counts;
  for (const auto& spec : detail::topology_access::stores(topo)) {
    if (!spec.global) continue;
    auto count = admin.partition_count(spec.source_topic, 30s);
    if (!count)
      throw error(errc::invalid_topology,
                  "global table topic '" + spec.source_topic + "' does not exist; create it before starting the job");
    auto store = std::make_unique<global_table_store>(*count);
    by_topic_[spec.source_topic] = {store.get(), &spec};
    stores_[spec.name] = std::move(store);
    counts.emplace_back(spec.source_topic, *count);
  }
  if (stores_.empty()) return;
  scan_ = std::make_unique<kafka::topic_scan>(std::move(consumer_config), kafka::all_partitions(counts));
}

global_tables::~global_tables() { stop(); }

std::size_t global_tables::apply_run(std::span<const raw_view> run) {
  // A run is one partition's: one topic, one table.
  auto it = by_topic_.find(run.front().topic);
  if (it == by_topic_.end()) return run.size();
  auto& [store, spec] = it->second;
  for (const auto& m : run) {
    if (!m.key) continue;
    if (!accept_global_record(*spec, m, policy_, skipped_)) continue;
    store->apply(*m.key, m.value);
    applied_.add();
  }
  return run.size();
}

std::size_t global_tables::poll_and_apply() {
  std::size_t read = 0;
  scan_->poll_lent(10000, 100ms, [&](std::span<const raw_view> run) { read += apply_run(run); });
  fetch_wakes_.observe(scan_->fetch_wakes());
  return read;
}

void global_tables::catch_up() {
  if (!scan_) return;
  auto started = std::chrono::steady_clock::now();
  auto last_log = started;
  std::uint64_t total = 0;
  while (!scan_->at_end()) {
    total += poll_and_apply();
    if (std::chrono::steady_clock::now() - last_log > 5s) {
      last_log = std::chrono::steady_clock::now();
      spdlog::info("global tables: caught up {} records so far", total);
    }
  }
  spdlog::info(
      "global tables: caught up {} records in {} ms", total,
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count());
}

void global_tables::start_following() {
  if (!scan_) return;
  thread_ = std::thread([this] {
    constexpr std::chrono::milliseconds first_backoff = 100ms, max_backoff = 5s;
    auto backoff = first_backoff;
    bool retrying = false;
    while (!stop_.load()) {
      try {
        poll_and_apply();
        if (retrying) spdlog::info("global tables: following again after retriable errors");
        retrying = false;
        backoff = first_backoff;
      } catch (const std::exception& e) {
        if (classify_failure(e) == failure_kind::retriable) {
          retries_.add();
          if (!retrying || retries_.value() % 100 == 0)
            spdlog::warn("global tables: retriable error, polling again in {} ms: {}", backoff.count(), e.what());
          retrying = true;
          for (auto waited = 0ms; waited < backoff && !stop_.load(); waited += 50ms) std::this_thread::sleep_for(50ms);
          backoff = std::min<std::chrono::milliseconds>(backoff * 2, max_backoff);
          continue;
        }
        failed_.set(1);
        const std::string message = std::string("the global table thread stopped: ") + e.what();
        spdlog::error("{}", message);
        if (on_fatal_) on_fatal_(message);
        return;
      }
    }
  });
}

void global_tables::stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  if (scan_) scan_->close();
}

std::map<std::string, const global_table_store*, std::less<>> global_tables::stores() const {
  std::map<std::string, const global_table_store*, std::less<>> out;
  for (const auto& [name, store] : stores_) out.emplace(name, store.get());
  return out;
}

std::map<std::string, const detail::global_view*> global_tables::views() const {
  std::map<std::string, const detail::global_view*> out;
  for (const auto& [name, store] : stores_) out[name] = store.get();
  return out;
}

}  // namespace sluice::runtime
