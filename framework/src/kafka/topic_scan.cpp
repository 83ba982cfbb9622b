#include "kafka/topic_scan.hpp"

#include <algorithm>

namespace sluice::kafka {

namespace {
using namespace std::chrono_literals;

/// How long the watermarks asked before the assignment (topic_scan::learn_ends) may take.
constexpr auto watermarks_timeout = 5s;

config_map scan_config(config_map config) {
  config.erase("group.id");
  config.erase("group.instance.id");
  config["enable.partition.eof"] = "true";
  // The scan starts at each partition's log start as the constructor learned it: if
  // retention moved it since, the first record left is the beginning.
  config["auto.offset.reset"] = "earliest";
  return config;
}
}  // namespace

topic_scan::topic_scan(config_map config, const std::vector<topic_partition>& partitions)
    : consumer_(scan_config(std::move(config))) {
  for (const auto& tp : partitions)
    if (end_.emplace(std::pair{tp.topic, tp.partition}, -1).second) ++not_at_end_;
  consumer_.on_partition_eof([this](std::string_view topic, std::int32_t partition, std::int64_t offset) {
    note_end(topic, partition, offset);
  });
  consumer_.assign(learn_ends(partitions));
}

void topic_scan::note_end(std::string_view topic, std::int32_t partition, std::int64_t offset) {
  auto it = end_.find(std::pair{std::string(topic), partition});
  if (it == end_.end()) return;
  if (it->second < 0) --not_at_end_;
  it->second = std::max(it->second, offset);
}

std::vector<topic_partition_offset> topic_scan::learn_ends(const std::vector<topic_partition>& partitions) {
  // Assigned at offset_beginning, each partition asks for its log start on its own, and one
  // whose leader the client does not know yet waits for librdkafka 2.0.2's 500 ms
  // offset-query timer; a fetch naming only the partitions ready so far, all at their end,
  // is held by the broker for fetch.wait.max.ms (500 ms) while the others wait for it; an
  // empty partition reports its end only after such a fetch. An empty global table took
  // 1.6 s to catch up, one of 1,000 records 0.6-1.1 s (bench/README.md, "Global table
  // bootstrap"). Asked first, the watermarks teach the client the leaders, every partition
  // is assigned at its log start so all are fetched together, and the empty ones are at
  // their end now. If the broker does not answer, the partitions start at offset_beginning.
  std::vector<topic_partition_offset> assign;
  assign.reserve(partitions.size());
  for (const auto& tp : partitions) assign.push_back({tp.topic, tp.partition, offset_beginning});
  if (partitions.empty()) return assign;
  try {
    const auto bounds = consumer_.watermarks(partitions, watermarks_timeout);
    for (std::size_t i = 0; i < partitions.size(); ++i) {
      assign[i].offset = bounds[i].first;
      if (bounds[i].first >= bounds[i].second) note_end(partitions[i].topic, partitions[i].partition, bounds[i].second);
    }
  } catch (const std::exception&) {
    // Not fatal: the scan is only slower to start and to see the empty partitions' ends.
  }
  return assign;
}

void topic_scan::end_if_caught_up(end_map::iterator it, std::int64_t next) {
  // The end report of a partition read to its end comes only with a fetch answered empty,
  // which the broker holds for fetch.wait.max.ms (500 ms): the high watermark that came
  // with the records says it sooner. A transaction's marker after the last record leaves
  // `next` one short of it; the end report decides then.
  if (it->second >= 0) return;
  const auto high = consumer_.cached_high_watermark(it->first.first, it->first.second);
  if (!high || next < *high) return;
  it->second = next;
  --not_at_end_;
}

bool topic_scan::poll_batch(std::vector<message>& out, std::size_t max, std::chrono::milliseconds timeout) {
  const bool any = consumer_.poll_batch(out, max, timeout);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const auto& m = out[i];
    auto it = end_.find(std::pair{m.topic, m.partition});
    if (it == end_.end()) continue;
    if (it->second >= 0 && m.offset >= it->second) {
      it->second = -1;  // a record past the reported end: more may follow
      ++not_at_end_;
    }
    // Once per run of one partition's records: the last of the run decides.
    if (i + 1 == out.size() || out[i + 1].partition != m.partition || out[i + 1].topic != m.topic)
      end_if_caught_up(it, m.offset + 1);
  }
  return any;
}

bool topic_scan::poll_lent(std::size_t max, std::chrono::milliseconds timeout,
                           const std::function<void(std::span<const raw_view>)>& apply) {
  return consumer_.poll_lent(max, timeout, [&](std::span<const raw_view> run) {
    // A run is one partition's records in offset order: its last one decides, as in poll_batch.
    run_partition_.first.assign(run.back().topic);
    run_partition_.second = run.back().partition;
    auto it = end_.find(run_partition_);
    if (it != end_.end() && it->second >= 0 && run.back().offset >= it->second) {
      it->second = -1;
      ++not_at_end_;
    }
    if (it != end_.end()) end_if_caught_up(it, run.back().offset + 1);
    apply(run);
  });
}

std::vector<topic_partition> all_partitions(const std::vector<std::pair<std::string, int>>& counts) {
  std::vector<topic_partition> out;
  for (const auto& [topic, count] : counts)
    for (int p = 0; p < count; ++p) out.push_back({topic, p});
  return out;
}

}  // namespace sluice::kafka
