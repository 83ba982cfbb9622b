// kafka::topic_scan: whole topics read from their beginning, and "at the end" decided by
// offsets, so records written after a partition's end make it not at the end again; the same
// whether the records are copied (poll_batch) or lent (poll_lent).
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kafka/mock_cluster.hpp"
#include "kafka/producer.hpp"
#include "kafka/topic_scan.hpp"
#include "kafka_test_util.hpp"

namespace sluice::kafka {
namespace {

using namespace std::chrono_literals;

void write(const mock_cluster& cluster, std::int32_t partition, int n, int first) {
  test::write_numbered(cluster.bootstrap_servers(), "scan", partition, n, first);
}

enum class poll_mode { copied, lent };

/// One poll of at most `max` records: (partition, value) of each record read, in order.
std::vector<std::pair<std::int32_t, std::string>> poll(topic_scan& scan, poll_mode mode, std::size_t max) {
  std::vector<std::pair<std::int32_t, std::string>> got;
  if (mode == poll_mode::copied) {
    std::vector<message> batch;
    scan.poll_batch(batch, max, 50ms);
    for (const auto& m : batch) got.emplace_back(m.partition, *m.value);
  } else {
    scan.poll_lent(max, 50ms, [&](std::span<const raw_view> run) {
      for (const auto& m : run) got.emplace_back(m.partition, std::string(*m.value));
    });
  }
  return got;
}

/// Polls until the scan is at its end; returns the values read per partition.
std::map<std::int32_t, std::vector<std::string>> read_to_end(topic_scan& scan, poll_mode mode) {
  std::map<std::int32_t, std::vector<std::string>> out;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!scan.at_end() && std::chrono::steady_clock::now() < deadline)
    for (auto& [partition, value] : poll(scan, mode, 2))  // small batches: ends and records interleave
      out[partition].push_back(std::move(value));
  EXPECT_TRUE(scan.at_end()) << "the scan did not reach the end of every partition";
  return out;
}

class kafka_topic_scan : public ::testing::TestWithParam<poll_mode> {};

TEST_P(kafka_topic_scan, reads_every_partition_from_its_beginning_to_its_end) {
  mock_cluster cluster;
  cluster.create_topic("scan", 3);
  write(cluster, 0, 5, 0);
  write(cluster, 2, 1, 100);  // partition 1 stays empty
  topic_scan scan({{"bootstrap.servers", cluster.bootstrap_servers()}, {"group.id", "ignored"}},
                  all_partitions({{"scan", 3}}));
  EXPECT_FALSE(scan.at_end());
  auto got = read_to_end(scan, GetParam());
  EXPECT_EQ(got[0], (std::vector<std::string>{"0", "1", "2", "3", "4"}));
  EXPECT_TRUE(got[1].empty());
  EXPECT_EQ(got[2], (std::vector<std::string>{"100"}));
}

TEST_P(kafka_topic_scan, records_written_after_the_end_are_read_before_it_is_at_the_end_again) {
  mock_cluster cluster;
  cluster.create_topic("scan", 2);
  write(cluster, 0, 3, 0);
  topic_scan scan({{"bootstrap.servers", cluster.bootstrap_servers()}}, all_partitions({{"scan", 2}}));
  EXPECT_EQ(read_to_end(scan, GetParam())[0].size(), 3u);
  write(cluster, 1, 4, 10);
  // Partition 1 was reported at its end (offset 0) before; a record at or past that offset
  // makes the scan not at its end until the rest is read.
  std::vector<std::pair<std::int32_t, std::string>> first;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (first.empty() && std::chrono::steady_clock::now() < deadline) first = poll(scan, GetParam(), 1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].second, "10");
  EXPECT_FALSE(scan.at_end());
  EXPECT_EQ(read_to_end(scan, GetParam())[1], (std::vector<std::string>{"11", "12", "13"}));
}

TEST_P(kafka_topic_scan, the_poll_returning_a_partitions_last_record_leaves_it_at_the_end) {
  mock_cluster cluster;
  cluster.create_topic("scan", 1);
  write(cluster, 0, 5, 0);
  // The end report would come only with a fetch answered empty, which the broker holds for
  // fetch.wait.max.ms: long here, so that only the high watermark can end the partition.
  topic_scan scan({{"bootstrap.servers", cluster.bootstrap_servers()}, {"fetch.wait.max.ms", "30000"}},
                  all_partitions({{"scan", 1}}));
  std::vector<std::string> got;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (got.size() < 5 && std::chrono::steady_clock::now() < deadline) {
    EXPECT_FALSE(scan.at_end()) << "after " << got.size() << " of 5 records";
    for (auto& [partition, value] : poll(scan, GetParam(), 2)) got.push_back(std::move(value));
  }
  ASSERT_EQ(got.size(), 5u);
  EXPECT_TRUE(scan.at_end()) << "the poll that returned offset 4 saw the high watermark 5";
}

INSTANTIATE_TEST_SUITE_P(modes, kafka_topic_scan, ::testing::Values(poll_mode::copied, poll_mode::lent),
                         [](const ::testing::TestParamInfo<poll_mode>& info) {
                           return info.param == poll_mode::copied ? "copied" : "lent";
                         });

TEST(kafka_topic_scan_empty, partitions_empty_at_the_start_are_at_their_end_before_any_poll) {
  mock_cluster cluster;
  cluster.create_topic("scan", 3);
  write(cluster, 1, 2, 0);
  {
    topic_scan scan({{"bootstrap.servers", cluster.bootstrap_servers()}}, all_partitions({{"scan", 3}}));
    EXPECT_FALSE(scan.at_end()) << "partition 1 holds two records";
  }
  cluster.create_topic("empty", 3);
  topic_scan scan({{"bootstrap.servers", cluster.bootstrap_servers()}}, all_partitions({{"empty", 3}}));
  EXPECT_TRUE(scan.at_end()) << "every partition was empty when the scan began: no fetch to wait for";
}

TEST(kafka_consumer_watermarks, of_many_partitions_are_each_ones_earliest_and_latest_offsets) {
  mock_cluster cluster;
  cluster.create_topic("scan", 2);
  write(cluster, 1, 3, 0);
  consumer c(config_map{{"bootstrap.servers", cluster.bootstrap_servers()}});
  const auto bounds = c.watermarks(std::vector<topic_partition>{{"scan", 1}, {"scan", 0}}, 10s);
  ASSERT_EQ(bounds.size(), 2u);
  EXPECT_EQ(bounds[0], (std::pair<std::int64_t, std::int64_t>{0, 3})) << "in the order asked";
  EXPECT_EQ(bounds[1], (std::pair<std::int64_t, std::int64_t>{0, 0}));
  EXPECT_EQ(bounds[0], c.watermarks("scan", 1, 10s)) << "as the one-partition call answers";
}

TEST(kafka_topic_scan_empty, no_partitions_is_at_the_end) {
  mock_cluster cluster;
  topic_scan scan({{"bootstrap.servers", cluster.bootstrap_servers()}}, {});
  EXPECT_TRUE(scan.at_end());
}

}  // namespace
}  // namespace sluice::kafka
