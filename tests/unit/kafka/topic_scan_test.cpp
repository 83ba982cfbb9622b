// kafka::topic_scan: whole topics read from their beginning, and "at the end" decided by
// offsets, so records written after a partition's end make it not at the end again.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "kafka/mock_cluster.hpp"
#include "kafka/producer.hpp"
#include "kafka/topic_scan.hpp"

namespace sluice::kafka {
namespace {

using namespace std::chrono_literals;

void write(const mock_cluster& cluster, std::int32_t partition, int n, int first) {
  producer p(config_map{{"bootstrap.servers", cluster.bootstrap_servers()}});
  for (int i = first; i < first + n; ++i)
    p.produce("scan", partition, std::string_view("k"), std::string_view(std::to_string(i)), 0, {});
  p.flush(10s);
}

/// Polls until the scan is at its end; returns the values read per partition.
std::map<std::int32_t, std::vector<std::string>> read_to_end(topic_scan& scan) {
  std::map<std::int32_t, std::vector<std::string>> out;
  std::vector<message> batch;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!scan.at_end() && std::chrono::steady_clock::now() < deadline) {
    scan.poll_batch(batch, 2, 50ms);  // small batches: ends and records interleave
    for (const auto& m : batch) out[m.partition].push_back(*m.value);
  }
  EXPECT_TRUE(scan.at_end()) << "the scan did not reach the end of every partition";
  return out;
}

TEST(kafka_topic_scan, reads_every_partition_from_its_beginning_to_its_end) {
  mock_cluster cluster;
  cluster.create_topic("scan", 3);
  write(cluster, 0, 5, 0);
  write(cluster, 2, 1, 100);  // partition 1 stays empty
  topic_scan scan({{"bootstrap.servers", cluster.bootstrap_servers()}, {"group.id", "ignored"}},
                  all_partitions({{"scan", 3}}));
  EXPECT_FALSE(scan.at_end());
  auto got = read_to_end(scan);
  EXPECT_EQ(got[0], (std::vector<std::string>{"0", "1", "2", "3", "4"}));
  EXPECT_TRUE(got[1].empty());
  EXPECT_EQ(got[2], (std::vector<std::string>{"100"}));
}

TEST(kafka_topic_scan, records_written_after_the_end_are_read_before_it_is_at_the_end_again) {
  mock_cluster cluster;
  cluster.create_topic("scan", 2);
  write(cluster, 0, 3, 0);
  topic_scan scan({{"bootstrap.servers", cluster.bootstrap_servers()}}, all_partitions({{"scan", 2}}));
  EXPECT_EQ(read_to_end(scan)[0].size(), 3u);
  write(cluster, 1, 4, 10);
  // Partition 1 was reported at its end (offset 0) before; a record at or past that offset
  // makes the scan not at its end until the rest is read.
  std::vector<message> batch;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (batch.empty() && std::chrono::steady_clock::now() < deadline) scan.poll_batch(batch, 1, 50ms);
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(*batch[0].value, "10");
  EXPECT_FALSE(scan.at_end());
  EXPECT_EQ(read_to_end(scan)[1], (std::vector<std::string>{"11", "12", "13"}));
}

TEST(kafka_topic_scan, no_partitions_is_at_the_end) {
  mock_cluster cluster;
  topic_scan scan({{"bootstrap.servers", cluster.bootstrap_servers()}}, {});
  EXPECT_TRUE(scan.at_end());
}

}  // namespace
}  // namespace sluice::kafka
