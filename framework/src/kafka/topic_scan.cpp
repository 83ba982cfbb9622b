#include "kafka/topic_scan.hpp"

#include <algorithm>

namespace sluice::kafka {

namespace {
using namespace std::chrono_literals;

/// A dry poll with records left wakes the fetcher (consumer::wake_stalled_fetch); its request
/// waits at most this for the broker's answer.
constexpr auto stalled_fetch_wake_timeout = 100ms;

/// How long the watermarks asked before the assignment (topic_scan::learn_ends) may take.
constexpr auto watermarks_timeout = 5s;

config_map scan_config(config_map config) {
  config.erase("group.id");
  config.erase("group.instance.id");
  config["enable.partition.eof"] = "true";
  return config;
}
}  // namespace

topic_scan::topic_scan(config_map config, const std::vector<topic_partition>& partitions)
    : consumer_(scan_config(std::move(config))) {
  std::vector<topic_partition_offset> assign;
  assign.reserve(partitions.size());
  for (const auto& tp : partitions) {
    if (end_.emplace(std::pair{tp.topic, tp.partition}, -1).second) ++not_at_end_;
    assign.push_back({tp.topic, tp.partition, offset_beginning});
  }
  consumer_.on_partition_eof([this](std::string_view topic, std::int32_t partition, std::int64_t offset) {
    note_end(topic, partition, offset);
  });
  if (!partitions.empty()) learn_ends(partitions);
  consumer_.assign(assign);
}

void topic_scan::note_end(std::string_view topic, std::int32_t partition, std::int64_t offset) {
  auto it = end_.find(std::pair{std::string(topic), partition});
  if (it == end_.end()) return;
  if (it->second < 0) --not_at_end_;
  it->second = std::max(it->second, offset);
}

void topic_scan::learn_ends(const std::vector<topic_partition>& partitions) {
  // Before the assignment: a partition assigned at offset_beginning whose leader this client
  // does not know yet waits for librdkafka 2.0.2's 500 ms offset-query timer, and an empty
  // partition reports its end only when the broker answers a fetch, after fetch.wait.max.ms
  // (500 ms): an empty global table took 1.6 s to catch up (bench/README.md, "Global table
  // bootstrap").
  // The watermarks teach the leaders and mark the empty partitions at their end now; the
  // others reach it by the end reports. If the broker does not answer, they all do.
  try {
    const auto bounds = consumer_.watermarks(partitions, watermarks_timeout);
    for (std::size_t i = 0; i < partitions.size(); ++i)
      if (bounds[i].first >= bounds[i].second) note_end(partitions[i].topic, partitions[i].partition, bounds[i].second);
  } catch (const std::exception&) {
    // Not fatal: the partitions' end reports decide, as they do for the non-empty ones.
  }
}

bool topic_scan::poll_batch(std::vector<message>& out, std::size_t max, std::chrono::milliseconds timeout) {
  const bool any = consumer_.poll_batch(out, max, timeout);
  for (const auto& m : out) {
    auto it = end_.find(std::pair{m.topic, m.partition});
    if (it == end_.end() || it->second < 0 || m.offset < it->second) continue;
    it->second = -1;  // a record past the reported end: more may follow
    ++not_at_end_;
  }
  if (!any) consumer_.wake_stalled_fetch(stalled_fetch_wake_timeout);
  return any;
}

bool topic_scan::poll_lent(std::size_t max, std::chrono::milliseconds timeout,
                           const std::function<void(std::span<const lent_message>)>& apply) {
  const bool any = consumer_.poll_lent(max, timeout, [&](std::span<const lent_message> run) {
    // A run is one partition's records in offset order: its last one decides, as in poll_batch.
    run_partition_.first.assign(run.back().topic);
    run_partition_.second = run.back().partition;
    auto it = end_.find(run_partition_);
    if (it != end_.end() && it->second >= 0 && run.back().offset >= it->second) {
      it->second = -1;
      ++not_at_end_;
    }
    apply(run);
  });
  if (!any) consumer_.wake_stalled_fetch(stalled_fetch_wake_timeout);
  return any;
}

std::vector<topic_partition> all_partitions(const std::vector<std::pair<std::string, int>>& counts) {
  std::vector<topic_partition> out;
  for (const auto& [topic, count] : counts)
    for (int p = 0; p < count; ++p) out.push_back({topic, p});
  return out;
}

}  // namespace sluice::kafka
