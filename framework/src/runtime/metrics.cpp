// The metrics registry: lock-free updates, locked registration and snapshots.
#include "sluice/metrics.hpp"

#include <bit>
#include <charconv>
#include <string_view>

#include "sluice/serde/json.hpp"

namespace sluice {

std::string prometheus_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  const auto* p = reinterpret_cast<const unsigned char*>(value.data());
  const auto* end = p + value.size();
  while (p != end) {
    const unsigned char c = *p;
    if (c >= 0x80) {
      const std::size_t n = serde_detail::json::utf8_sequence_length(p, end);
      if (n == 0) {
        out += "\xEF\xBF\xBD";
        ++p;
      } else {
        out.append(reinterpret_cast<const char*>(p), n);
        p += n;
      }
      continue;
    }
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += static_cast<char>(c);
    ++p;
  }
  return out;
}

void histogram::record(std::int64_t ms) noexcept {
  std::uint64_t v = ms <= 0 ? 0 : static_cast<std::uint64_t>(ms);
  int b = v == 0 ? 0 : std::bit_width(v);
  if (b >= buckets) b = buckets - 1;
  counts_[b].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(static_cast<std::int64_t>(v), std::memory_order_relaxed);
}

std::int64_t histogram::quantile(double q) const noexcept {
  auto total = count();
  if (total == 0) return 0;
  auto want = static_cast<std::uint64_t>(q * static_cast<double>(total));
  std::uint64_t seen = 0;
  for (int i = 0; i < buckets; ++i) {
    seen += bucket(i);
    if (seen > want || seen == total) return i == 0 ? 0 : (std::int64_t{1} << i) - 1;
  }
  return (std::int64_t{1} << (buckets - 1)) - 1;
}

counter& metrics_registry::get_counter(const std::string& name, const std::string& labels) {
  std::lock_guard lock(mutex_);
  auto& slot = counters_[{name, labels}];
  if (!slot) slot = std::make_unique<counter>();
  return *slot;
}

gauge& metrics_registry::get_gauge(const std::string& name, const std::string& labels) {
  std::lock_guard lock(mutex_);
  auto& slot = gauges_[{name, labels}];
  if (!slot) {
    if (auto it = retired_gauges_.find({name, labels}); it != retired_gauges_.end()) {
      slot = std::move(it->second);
      retired_gauges_.erase(it);
    } else {
      slot = std::make_unique<gauge>();
    }
  }
  return *slot;
}

void metrics_registry::retire_gauge(const std::string& name, const std::string& labels) {
  std::lock_guard lock(mutex_);
  auto it = gauges_.find({name, labels});
  if (it == gauges_.end()) return;
  retired_gauges_[it->first] = std::move(it->second);
  gauges_.erase(it);
}

void metrics_registry::remove_gauge(const std::string& name, const std::string& labels) {
  std::lock_guard lock(mutex_);
  gauges_.erase({name, labels});
  retired_gauges_.erase({name, labels});
}

histogram& metrics_registry::get_histogram(const std::string& name, const std::string& labels) {
  std::lock_guard lock(mutex_);
  auto& slot = histograms_[{name, labels}];
  if (!slot) slot = std::make_unique<histogram>();
  return *slot;
}

void metrics_registry::add_refresh(std::function<void()> refresh) {
  std::lock_guard lock(refresh_mutex_);
  refreshes_.push_back(std::move(refresh));
}

void metrics_registry::refresh() const {
  std::lock_guard lock(refresh_mutex_);
  for (const auto& r : refreshes_) r();
}

std::vector<metric_sample> metrics_registry::snapshot() const {
  refresh();
  std::lock_guard lock(mutex_);
  std::vector<metric_sample> out;
  for (const auto& [key, c] : counters_) out.push_back({key.first, key.second, static_cast<double>(c->value())});
  for (const auto& [key, g] : gauges_) out.push_back({key.first, key.second, static_cast<double>(g->value())});
  for (const auto& [key, h] : histograms_) {
    out.push_back({key.first + "_count", key.second, static_cast<double>(h->count())});
    out.push_back({key.first + "_sum", key.second, static_cast<double>(h->sum())});
    out.push_back({key.first + "_p50", key.second, static_cast<double>(h->quantile(0.5))});
    out.push_back({key.first + "_p99", key.second, static_cast<double>(h->quantile(0.99))});
  }
  return out;
}

double metrics_registry::total(const std::string& name) const {
  double sum = 0;
  for (const auto& s : snapshot())
    if (s.name == name) sum += s.value;
  return sum;
}

void metrics_registry::set_help(const std::string& name, std::string help) {
  std::lock_guard lock(mutex_);
  help_[name] = std::move(help);
}

namespace {

/// What each of sluice's own metrics means (docs/operations.md has the same table).
constexpr std::pair<std::string_view, std::string_view> builtin_help[] = {
    {"sluice_records_processed_total", "Input records a task processed, skipped ones included."},
    {"sluice_records_skipped_total",
     "Records a log_and_continue or dead_letter error handler skipped, by reason (deserialization or processing)."},
    {"sluice_records_dead_lettered_total",
     "Records sent to the dead-letter topic, by reason (deserialization or processing)."},
    {"sluice_enforced_processing_total",
     "Records a task reading several partitions processed while one was empty and caught up, after max.task.idle.ms."},
    {"sluice_end_to_end_latency_seconds", "Wall clock at processing minus the record timestamp, sampled 1 in 64."},
    {"sluice_records_sent_total", "Records produced: outputs, changelogs, repartition topics, dead letters."},
    {"sluice_production_errors_total", "Records whose delivery failed for good."},
    {"sluice_commit_latency_seconds",
     "One commit: producer flush plus offsets (plus the transaction commit under exactly_once)."},
    {"sluice_transaction_aborts_total", "Transactions aborted (fencing, timeouts, unknown outcomes)."},
    {"sluice_records_dead_lettered_truncated_total",
     "Of the dead-lettered records, those sent truncated: the whole copy exceeded the message size limit."},
    {"sluice_task_retries_total",
     "Retriable failures ridden out (each failed attempt, recovery attempts included); see task.timeout.ms."},
    {"sluice_task_recoveries_total", "Recoveries completed: tasks recreated from the committed offsets."},
    {"sluice_redelivered_records_skipped_total",
     "Records the consumer delivered a second time, skipped instead of processed twice."},
    {"sluice_fetch_wakes_total",
     "Times a consumer woke a fetcher librdkafka left asleep while records waited on the broker, by consumer "
     "(group: a stream thread's input; restore: its changelog reads; global: the global tables' scan)."},
    {"sluice_allocator_in_use_bytes", "Memory the process's allocator has handed out and not had back, bytes."},
    {"sluice_allocator_free_bytes",
     "Memory the allocator keeps mapped but free, bytes: resident, in no use, returned to the system every 10 s."},
    {"sluice_state_block_cache_bytes",
     "RocksDB block cache in use by every store of the process, bytes (memtables are charged to it)."},
    {"sluice_state_memtable_bytes", "RocksDB memtables of every store of the process, bytes."},
    {"sluice_state_store_entries",
     "Entries of one store of one task (an estimate: RocksDB's plus pending writes), set every second."},
    {"sluice_state_store_bytes",
     "Bytes of one RocksDB store of one task: its live SST files and memtables, set every second."},
    {"sluice_state_memory_budget_bytes", "state.memory.budget.bytes: the bound of the block cache, bytes."},
    {"sluice_consumer_lag_records",
     "Records between the consumer position and the high watermark of a source partition this instance owns, "
     "set every second."},
    {"sluice_restored_records_total", "Changelog records applied while restoring stores, since the process started."},
    {"sluice_restore_remaining_records", "Changelog records still to restore before the thread's tasks process."},
    {"sluice_restore_done_records",
     "Changelog offsets applied in the thread's current restore (the last one when none runs)."},
    {"sluice_restore_total_records",
     "Changelog offsets the thread's current restore covers (the last one when none runs)."},
    {"sluice_restore_rate_records_per_second", "Records per second of the thread's current restore; 0 when none runs."},
    {"sluice_kafka_broker_rtt_avg_seconds", "librdkafka statistics: average request round-trip time to a broker."},
    {"sluice_kafka_broker_rtt_p99_seconds",
     "librdkafka statistics: 99th percentile request round-trip time to a broker."},
    {"sluice_kafka_broker_outbuf_requests", "librdkafka statistics: requests waiting to be sent to a broker."},
    {"sluice_kafka_broker_waitresp_requests",
     "librdkafka statistics: requests sent to a broker, waiting for a response."},
    {"sluice_kafka_client_queue_messages",
     "librdkafka statistics: messages in the client's queue (a producer's: not yet delivered; a consumer's: "
     "fetched, not yet consumed)."},
    {"sluice_kafka_client_queue_bytes", "librdkafka statistics: bytes of the messages in the client's queue."},
    {"sluice_kafka_client_reply_queue_ops",
     "librdkafka statistics: operations (callbacks, events) waiting to be polled."},
    {"sluice_kafka_consumer_fetch_queue_messages",
     "librdkafka statistics: messages fetched in advance, waiting to be consumed."},
    {"sluice_global_records_applied_total", "Records the global thread applied to global tables."},
    {"sluice_global_table_retries_total",
     "Retriable errors the global thread rode out (it polls again after a backoff)."},
    {"sluice_global_table_failed",
     "1 when the global thread stopped on a fatal error (the app is then in its error state)."},
    {"sluice_http_responses_total", "HTTP responses of the instance server, by status code."},
    {"sluice_http_connections_refused_total",
     "HTTP connections closed on accept because http.max.connections were open."},
    {"sluice_http_requests_timed_out_total",
     "HTTP connections closed because no whole request arrived within http.request.timeout.ms (slow or idle clients)."},
    {"sluice_http_open_connections", "Open connections to the instance HTTP server."},
};

/// The name and scale a metric is exposed with. Prometheus wants base units (promtool
/// refuses "_ms" in a name): a gauge or histogram kept in milliseconds ("<x>_ms") or
/// microseconds ("<x>_us") is exposed as "<x>_seconds", its values divided by `divisor`.
struct exposed_unit {
  std::string name;
  double divisor = 1.0;
};
exposed_unit exposed(const std::string& name) {
  if (name.ends_with("_ms")) return {name.substr(0, name.size() - 3) + "_seconds", 1e3};
  if (name.ends_with("_us")) return {name.substr(0, name.size() - 3) + "_seconds", 1e6};
  return {name, 1.0};
}

void append_number(std::string& out, double v) {
  // Integers exactly, other values in the shortest form that reads back the same.
  char buf[32];
  auto [end, ec] = v == static_cast<double>(static_cast<std::int64_t>(v)) && v > -9e15 && v < 9e15
                       ? std::to_chars(buf, buf + sizeof buf, static_cast<std::int64_t>(v))
                       : std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, ec == std::errc{} ? end : buf);
}

void append_sample(std::string& out, const std::string& name, const std::string& labels, std::string_view extra_label,
                   double value) {
  out += name;
  if (!labels.empty() || !extra_label.empty()) {
    out += '{';
    out += labels;
    if (!labels.empty() && !extra_label.empty()) out += ',';
    out += extra_label;
    out += '}';
  }
  out += ' ';
  append_number(out, value);
  out += '\n';
}

}  // namespace

std::string metrics_registry::prometheus_text() const {
  refresh();
  std::lock_guard lock(mutex_);
  std::string out;
  auto header = [&](const std::string& name, const char* type) {
    std::string help;
    if (auto it = help_.find(name); it != help_.end()) help = it->second;
    for (const auto& [n, h] : builtin_help)
      if (help.empty() && n == name) help = h;
    if (help.empty()) help = "sluice metric " + name + ".";
    for (auto& c : help)
      if (c == '\n') c = ' ';
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  };
  std::string last;
  for (const auto& [key, c] : counters_) {
    if (key.first != last) header(last = key.first, "counter");
    append_sample(out, key.first, key.second, {}, static_cast<double>(c->value()));
  }
  last.clear();
  for (const auto& [key, g] : gauges_) {
    const auto [name, divisor] = exposed(key.first);
    if (name != last) header(last = name, "gauge");
    append_sample(out, name, key.second, {}, static_cast<double>(g->value()) / divisor);
  }
  last.clear();
  for (const auto& [key, h] : histograms_) {
    const auto [name, divisor] = exposed(key.first);
    if (name != last) header(last = name, "histogram");
    // Bucket i holds values whose bit width is i: 0, 1, 2-3, 4-7, ... so its inclusive
    // upper bound is 2^i - 1 ms. Cumulative counts from the buckets themselves, so +Inf and
    // _count agree even while other threads record.
    std::uint64_t cumulative = 0;
    for (int i = 0; i < histogram::buckets; ++i) {
      cumulative += h->bucket(i);
      std::string le = "le=\"";
      append_number(le, static_cast<double>((std::int64_t{1} << i) - 1) / divisor);
      le += '"';
      append_sample(out, name + "_bucket", key.second, le, static_cast<double>(cumulative));
    }
    append_sample(out, name + "_bucket", key.second, "le=\"+Inf\"", static_cast<double>(cumulative));
    append_sample(out, name + "_sum", key.second, {}, static_cast<double>(h->sum()) / divisor);
    append_sample(out, name + "_count", key.second, {}, static_cast<double>(cumulative));
  }
  return out;
}

}  // namespace sluice
