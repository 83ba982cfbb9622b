// Shared by the kafka unit and integration tests: a deterministic record set, producing
// it, consuming it back through a consumer group, and checking it arrived intact.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kafka/consumer.hpp"
#include "kafka/producer.hpp"

namespace sluice::kafka::test {

struct expected_record {
  std::string key;
  std::string value;  // unique per record: "value-<index>"
  std::int64_t timestamp;
  sluice::headers headers;
};

/// `n` records over `keys` distinct keys, each with three headers (one null-valued).
inline std::vector<expected_record> make_records(int n, int keys) {
  std::vector<expected_record> out;
  out.reserve(static_cast<std::size_t>(n));
  const std::int64_t base = 1'700'000'000'000;
  for (int i = 0; i < n; ++i) {
    expected_record r;
    r.key = "key-" + std::to_string(i % keys);
    r.value = "value-" + std::to_string(i);
    r.timestamp = base + i;
    r.headers.add("seq", std::to_string(i));
    r.headers.add("null-header", std::nullopt);
    r.headers.add("seq", "repeat-" + std::to_string(i));
    out.push_back(std::move(r));
  }
  return out;
}

/// Writes `n` records to one partition of `topic` through a producer of its own and flushes:
/// key "k", values the decimals `first`, `first + 1`, ..., timestamp 0.
inline void write_numbered(const std::string& bootstrap, const std::string& topic, std::int32_t partition, int n,
                           int first = 0) {
  producer p(config_map{{"bootstrap.servers", bootstrap}});
  for (int i = first; i < first + n; ++i)
    p.produce(topic, partition, std::string_view("k"), std::string_view(std::to_string(i)), 0, {});
  p.flush(std::chrono::seconds(10));
}

/// Produces every record (partitioner chooses) and flushes; asserts all were delivered.
inline void produce_all(producer& p, const std::string& topic, const std::vector<expected_record>& records,
                        std::atomic<int>& delivered, std::atomic<int>& failed) {
  for (const auto& r : records)
    p.produce(topic, any_partition, std::string_view(r.key), std::string_view(r.value), r.timestamp, r.headers);
  p.flush(std::chrono::seconds(30));
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(delivered.load(), static_cast<int>(records.size()));
}

/// Subscribes with `config` (must carry group.id) and reads until `n` records arrived or
/// `deadline` passed, then commits what it read and closes.
inline std::vector<message> consume_group(const config_map& config, const std::string& topic, std::size_t n,
                                          std::chrono::seconds deadline) {
  struct listener : rebalance_listener {
    std::set<topic_partition> assigned;
    void on_assigned(const std::vector<topic_partition>& parts) override {
      assigned.insert(parts.begin(), parts.end());
    }
    void on_revoked(const std::vector<topic_partition>&) override {}
  } rebalances;
  consumer c(config);
  c.subscribe({topic}, &rebalances);
  std::vector<message> all;
  std::vector<message> batch;
  std::map<topic_partition, std::int64_t> next_offsets;
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (all.size() < n && std::chrono::steady_clock::now() < end) {
    if (!c.poll_batch(batch, 500, std::chrono::milliseconds(200))) continue;
    for (auto& m : batch) {
      next_offsets[{m.topic, m.partition}] = m.offset + 1;
      all.push_back(m);
    }
  }
  // A little longer, to catch duplicates.
  c.poll_batch(batch, 500, std::chrono::milliseconds(300));
  for (auto& m : batch) all.push_back(m);
  EXPECT_FALSE(rebalances.assigned.empty());
  std::vector<topic_partition_offset> commit;
  for (const auto& [tp, off] : next_offsets) commit.push_back({tp.topic, tp.partition, off});
  c.commit(commit);
  std::vector<topic_partition> parts;
  for (const auto& [tp, off] : next_offsets) parts.push_back(tp);
  EXPECT_EQ(c.committed(parts, std::chrono::seconds(10)), commit);
  c.close();
  return all;
}

/// Every expected record arrived exactly once, intact, and per key in production order.
inline void expect_exactly_once_in_order(const std::vector<expected_record>& expected,
                                         const std::vector<message>& got) {
  ASSERT_EQ(got.size(), expected.size());
  std::map<std::string, const expected_record*> by_value;
  for (const auto& r : expected) by_value[r.value] = &r;
  std::set<std::string> seen;
  std::map<std::string, std::int64_t> last_ts_of_key;  // timestamps grow with production order
  std::map<std::string, std::int32_t> partition_of_key;
  for (const auto& m : got) {
    ASSERT_TRUE(m.value.has_value());
    auto it = by_value.find(*m.value);
    ASSERT_NE(it, by_value.end()) << "unexpected value " << *m.value;
    ASSERT_TRUE(seen.insert(*m.value).second) << "duplicate " << *m.value;
    const auto& r = *it->second;
    ASSERT_TRUE(m.key.has_value());
    EXPECT_EQ(*m.key, r.key);
    EXPECT_EQ(m.timestamp, r.timestamp);
    EXPECT_EQ(m.headers, r.headers);
    auto [pit, fresh] = partition_of_key.try_emplace(r.key, m.partition);
    EXPECT_EQ(pit->second, m.partition) << "key " << r.key << " in two partitions";
    if (!fresh) {
      EXPECT_GT(r.timestamp, last_ts_of_key[r.key]) << "key " << r.key << " out of order";
    }
    last_ts_of_key[r.key] = r.timestamp;
  }
}

}  // namespace sluice::kafka::test
