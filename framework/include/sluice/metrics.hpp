// sluice::metrics_registry: counters, gauges and latency histograms of a running app, per
// thread and task, read as a snapshot or as Prometheus text (GET /metrics).
//
// Updating is lock-free (relaxed atomics) so the hot path pays an add; registering a new
// metric takes a lock and happens on assignment, never per record.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace sluice {

/// A monotonically increasing count.
class counter {
 public:
  void add(std::uint64_t n = 1) noexcept { value_.fetch_add(n, std::memory_order_relaxed); }
  std::uint64_t value() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

/// A value that goes up and down (lag, restore progress).
class gauge {
 public:
  void set(std::int64_t v) noexcept { value_.store(v, std::memory_order_relaxed); }
  std::int64_t value() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> value_{0};
};

/// Latencies in milliseconds, in power-of-two buckets (1 ms, 2 ms, 4 ms, ... 2^20 ms).
class histogram {
 public:
  static constexpr int buckets = 22;
  void record(std::int64_t ms) noexcept;
  std::uint64_t count() const noexcept { return count_.load(std::memory_order_relaxed); }
  std::int64_t sum() const noexcept { return sum_.load(std::memory_order_relaxed); }
  /// The upper bound of the bucket holding quantile q (0..1), in ms.
  std::int64_t quantile(double q) const noexcept;
  std::uint64_t bucket(int i) const noexcept { return counts_[i].load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> counts_[buckets] = {};
  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::int64_t> sum_{0};
};

/// `value` written as a Prometheus label value (the text between the quotes of name="..."):
/// backslash, double quote and line feed escaped, and each byte that is not part of
/// well-formed UTF-8 replaced by U+FFFD, as the exposition format is UTF-8 text. For label
/// values taken from data (a record key).
std::string prometheus_label_value(std::string_view value);

/// One named metric with its labels, as a snapshot shows it.
struct metric_sample {
  std::string name;    ///< e.g. "sluice_records_processed_total"
  std::string labels;  ///< e.g. thread="0",task="0_3"
  double value = 0;
};

/// All metrics of one app. Metric objects live as long as the registry; references stay valid
/// (a retired gauge too: it is only hidden).
///
/// Naming: histograms named `*_ms` and gauges named `*_us` are kept in those integer units
/// and exposed in seconds (Prometheus' base unit), e.g. `sluice_kafka_broker_rtt_avg_us` as
/// `sluice_kafka_broker_rtt_avg_seconds`.
///
/// Threading: every member is safe from any thread.
class metrics_registry {
 public:
  counter& get_counter(const std::string& name, const std::string& labels = {});
  /// The gauge of `name` and `labels`; a retired one comes back with its last value.
  gauge& get_gauge(const std::string& name, const std::string& labels = {});
  /// Hides a gauge from snapshots and /metrics until the next get_gauge() of it: a label set
  /// that no longer describes this instance (the lag of a partition that moved elsewhere).
  /// Its object stays alive, so references held elsewhere stay valid.
  void retire_gauge(const std::string& name, const std::string& labels);
  /// Destroys a gauge and its series, for a label set that comes and goes without bound over
  /// a run (a customer among the N largest backlogs): retired, each would stay allocated.
  /// Only for a gauge whose one holder drops its reference first.
  void remove_gauge(const std::string& name, const std::string& labels);
  histogram& get_histogram(const std::string& name, const std::string& labels = {});

  /// Adds a function that snapshot() and prometheus_text() run first, for gauges whose value
  /// is read when asked rather than kept up to date (memory in use). It runs on the reading
  /// thread, outside the registry's lock, so it may call get_gauge; whatever it captures must
  /// outlive the registry's last reader.
  void add_refresh(std::function<void()> refresh);

  /// Every counter and gauge (histograms as _count, _sum and p50/p99) at this moment.
  std::vector<metric_sample> snapshot() const;
  /// Sum of a counter or gauge over all label sets; 0 when absent.
  double total(const std::string& name) const;
  /// Prometheus text exposition format (0.0.4): # HELP and # TYPE per family, counters as
  /// counters, gauges as gauges, histograms with cumulative `le` buckets; histograms named
  /// `*_ms` and gauges named `*_ms` or `*_us` are exposed as `*_seconds` (Prometheus' base
  /// unit), values scaled.
  std::string prometheus_text() const;
  /// The # HELP line of a metric family (e.g. a topology's own counters). Sluice's own
  /// metrics have theirs built in.
  void set_help(const std::string& name, std::string help);

 private:
  void refresh() const;

  mutable std::mutex refresh_mutex_;  // taken before mutex_, never inside it
  std::vector<std::function<void()>> refreshes_;
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, std::unique_ptr<counter>> counters_;
  std::map<std::pair<std::string, std::string>, std::unique_ptr<gauge>> gauges_;
  std::map<std::pair<std::string, std::string>, std::unique_ptr<gauge>> retired_gauges_;
  std::map<std::pair<std::string, std::string>, std::unique_ptr<histogram>> histograms_;
  std::map<std::string, std::string> help_;
};

}  // namespace sluice
