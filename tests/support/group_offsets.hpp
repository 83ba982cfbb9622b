// Evidence that a job consumed everything: its consumer group's committed offsets against
// what its input partitions hold. For integration tests; links sluice_kafka.
//
// A partition counts as consumed when the group committed its end offset, or when no record
// readable read_committed lies at or after the committed offset: a topic written in
// transactions (a repartition topic under exactly_once) ends in commit markers, which a
// committed "last record + 1" never passes.
//
// Threading: one call at a time per object (each call makes its own consumers).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kafka/consumer.hpp"

namespace sluice::test {

/// Per partition of `topic`: its first and end offsets, what `group` committed (negative =
/// nothing), and whether every record in it has been consumed.
struct partition_progress {
  std::int32_t partition = 0;
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::int64_t committed = -1;
  bool consumed = false;
};

/// True when `topic`[partition] holds no record readable read_committed at or after `from`
/// (only transaction markers, or nothing).
inline bool nothing_readable_from(const std::string& bootstrap, const std::string& topic, std::int32_t partition,
                                  std::int64_t from) {
  kafka::consumer c(
      {{"bootstrap.servers", bootstrap}, {"isolation.level", "read_committed"}, {"enable.partition.eof", "true"}});
  bool eof = false;
  c.on_partition_eof([&](std::string_view, std::int32_t, std::int64_t) { eof = true; });
  c.assign({{topic, partition, from}});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!eof && std::chrono::steady_clock::now() < deadline)
    if (c.poll(std::chrono::milliseconds(100))) return false;
  return eof;
}

/// The committed offsets of `group` on partitions 0..partitions-1 of `topic`, their first
/// and end offsets, and whether each is consumed; read without joining the group.
inline std::vector<partition_progress> group_progress(const std::string& bootstrap, const std::string& group,
                                                      const std::string& topic, std::int32_t partitions) {
  kafka::consumer c({{"bootstrap.servers", bootstrap}, {"group.id", group}});
  std::vector<kafka::topic_partition> parts;
  for (std::int32_t p = 0; p < partitions; ++p) parts.push_back({topic, p});
  auto committed = c.committed(parts, std::chrono::seconds(30));
  std::vector<partition_progress> out;
  for (const auto& tp : committed) {
    auto [low, high] = c.watermarks(topic, tp.partition, std::chrono::seconds(30));
    partition_progress p{tp.partition, low, high, tp.offset, false};
    p.consumed = p.committed >= p.end || p.start == p.end ||
                 nothing_readable_from(bootstrap, topic, p.partition, std::max(p.committed, p.start));
    out.push_back(p);
  }
  return out;
}

/// True when every partition in `progress` is consumed.
inline bool group_at_end(const std::vector<partition_progress>& progress) {
  for (const auto& p : progress)
    if (!p.consumed) return false;
  return !progress.empty();
}

}  // namespace sluice::test
