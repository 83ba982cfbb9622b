// The metrics registry: lock-free updates, locked registration and snapshots.
#include "sluice/metrics.hpp"

#include <bit>
#include <sstream>

namespace sluice {

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
  if (!slot) slot = std::make_unique<gauge>();
  return *slot;
}

histogram& metrics_registry::get_histogram(const std::string& name, const std::string& labels) {
  std::lock_guard lock(mutex_);
  auto& slot = histograms_[{name, labels}];
  if (!slot) slot = std::make_unique<histogram>();
  return *slot;
}

std::vector<metric_sample> metrics_registry::snapshot() const {
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

std::string metrics_registry::prometheus_text() const {
  std::ostringstream out;
  std::string last;
  for (const auto& s : snapshot()) {
    if (s.name != last) {
      out << "# TYPE " << s.name << (s.name.ends_with("_total") ? " counter" : " gauge") << "\n";
      last = s.name;
    }
    out << s.name;
    if (!s.labels.empty()) out << "{" << s.labels << "}";
    out << " " << s.value << "\n";
  }
  return out.str();
}

}  // namespace sluice
