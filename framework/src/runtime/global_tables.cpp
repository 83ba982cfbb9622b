// Global tables: catch-up and follow.
#include "runtime/global_tables.hpp"

#include <spdlog/spdlog.h>

#include <mutex>

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

void global_table_store::apply(std::string_view key, const std::optional<std::string>& value) {
  std::unique_lock lock(mutex_);
  auto it = entries_.find(key);
  if (!value) {
    if (it != entries_.end()) entries_.erase(it);
  } else if (it != entries_.end()) {
    it->second = *value;
  } else {
    entries_.emplace(std::string(key), *value);
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

global_tables::global_tables(const topology& topo, kafka::config_map consumer_config, kafka::admin& admin,
                             metrics_registry& metrics)
    : applied_(metrics.get_counter("sluice_global_records_applied_total")) {
  std::vector<kafka::topic_partition_offset> assign;
  for (const auto& spec : topo.stores()) {
    if (!spec.global) continue;
    auto count = admin.partition_count(spec.source_topic, 30s);
    if (!count)
      throw error(errc::invalid_topology, "global table topic '" + spec.source_topic +
                                              "' does not exist; create it before starting the job");
    auto store = std::make_unique<global_table_store>(*count);
    by_topic_[spec.source_topic] = store.get();
    stores_[spec.name] = std::move(store);
    for (int p = 0; p < *count; ++p) {
      assign.push_back({spec.source_topic, p, kafka::offset_beginning});
      at_end_[{spec.source_topic, p}] = false;
    }
  }
  if (stores_.empty()) return;
  consumer_config.erase("group.id");
  consumer_config.erase("group.instance.id");
  consumer_config["enable.partition.eof"] = "true";
  consumer_ = std::make_unique<kafka::consumer>(consumer_config);
  consumer_->on_partition_eof([this](std::string_view topic, std::int32_t partition, std::int64_t) {
    at_end_[{std::string(topic), partition}] = true;
  });
  consumer_->assign(assign);
}

global_tables::~global_tables() { stop(); }

void global_tables::apply_batch() {
  for (const auto& m : batch_) {
    auto it = by_topic_.find(m.topic);
    if (it == by_topic_.end() || !m.key) continue;
    it->second->apply(*m.key, m.value);
    applied_.add();
  }
}

void global_tables::catch_up() {
  if (!consumer_) return;
  auto started = std::chrono::steady_clock::now();
  auto last_log = started;
  std::uint64_t total = 0;
  for (;;) {
    bool all = true;
    for (auto& [tp, end] : at_end_) all = all && end;
    if (all) break;
    consumer_->poll_batch(batch_, 10000, 100ms);
    apply_batch();
    total += batch_.size();
    if (std::chrono::steady_clock::now() - last_log > 5s) {
      last_log = std::chrono::steady_clock::now();
      spdlog::info("global tables: caught up {} records so far", total);
    }
  }
  spdlog::info("global tables: caught up {} records in {} ms", total,
               std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count());
}

void global_tables::start_following() {
  if (!consumer_) return;
  thread_ = std::thread([this] {
    try {
      while (!stop_.load()) {
        consumer_->poll_batch(batch_, 10000, 100ms);
        apply_batch();
      }
    } catch (const std::exception& e) {
      spdlog::error("global table thread stops: {}", e.what());
    }
  });
}

void global_tables::stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  if (consumer_) consumer_->close();
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
