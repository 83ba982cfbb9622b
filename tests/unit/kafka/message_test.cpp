// Message ownership: keys, values and headers are copied out of librdkafka; null and empty
// stay distinct; poll_batch reuses its elements without leaking old contents.
#include <gtest/gtest.h>

#include <atomic>

#include "kafka/consumer.hpp"
#include "kafka/mock_cluster.hpp"
#include "kafka/producer.hpp"
#include "kafka_test_util.hpp"

namespace sluice::kafka {
namespace {

using namespace std::chrono_literals;

std::vector<message> read_n(consumer& c, std::size_t n) {
  std::vector<message> out;
  const auto end = std::chrono::steady_clock::now() + 10s;
  while (out.size() < n && std::chrono::steady_clock::now() < end)
    if (auto m = c.poll(100ms)) out.push_back(std::move(*m));
  return out;
}

TEST(kafka_message, null_and_empty_stay_distinct_and_outlive_the_client) {
  mock_cluster cluster;
  cluster.create_topic("nulls", 1);
  std::atomic<int> delivered{0};
  {
    producer p({{"bootstrap.servers", cluster.bootstrap_servers()}}, {},
               [&](const delivery_report& r) { delivered += r.ok() ? 1 : 0; });
    sluice::headers h{{"empty", std::string()}, {"null", std::nullopt}, {"k", "v1"}, {"k", "v2"}};
    p.produce("nulls", 0, std::nullopt, std::nullopt, 1000, {});              // null / null
    p.produce("nulls", 0, std::string_view(), std::string_view(), 2000, {});  // empty / empty
    p.produce("nulls", 0, std::string_view("key"), std::string_view("val"), 3000, h);
    p.flush(10s);
  }
  EXPECT_EQ(delivered.load(), 3);

  std::vector<message> got;
  {
    consumer c(config_map{{"bootstrap.servers", cluster.bootstrap_servers()}});  // no group: assign
    c.assign({{"nulls", 0, offset_beginning}});
    got = read_n(c, 3);
  }  // the consumer and all librdkafka memory are gone; `got` must stand alone
  ASSERT_EQ(got.size(), 3u);
  EXPECT_FALSE(got[0].key.has_value());
  EXPECT_FALSE(got[0].value.has_value());
  ASSERT_TRUE(got[1].key.has_value());
  EXPECT_EQ(*got[1].key, "");
  ASSERT_TRUE(got[1].value.has_value());
  EXPECT_EQ(*got[1].value, "");
  EXPECT_EQ(got[2].key, std::optional<std::string>("key"));
  EXPECT_EQ(got[2].value, std::optional<std::string>("val"));
  EXPECT_EQ(got[2].timestamp, 3000);
  EXPECT_EQ(got[2].topic, "nulls");
  EXPECT_EQ(got[2].partition, 0);
  EXPECT_EQ(got[2].offset, 2);
  const sluice::headers want{{"empty", std::string()}, {"null", std::nullopt}, {"k", "v1"}, {"k", "v2"}};
  EXPECT_EQ(got[2].headers, want);
  EXPECT_TRUE(got[0].headers.empty());
}

TEST(kafka_message, poll_batch_reuses_elements_without_stale_fields) {
  mock_cluster cluster;
  cluster.create_topic("reuse", 1);
  {
    producer p(config_map{{"bootstrap.servers", cluster.bootstrap_servers()}});
    p.produce("reuse", 0, std::string_view("a-long-key-to-give-capacity"), std::string_view("v0"), 10,
              {{"h", "x"}, {"h2", "y"}});
    p.produce("reuse", 0, std::nullopt, std::nullopt, 20, {});
    p.flush(10s);
  }
  consumer c(config_map{{"bootstrap.servers", cluster.bootstrap_servers()}});
  c.assign({{"reuse", 0, offset_beginning}});
  std::vector<message> batch;
  const auto end = std::chrono::steady_clock::now() + 10s;
  while (!c.poll_batch(batch, 1, 100ms) && std::chrono::steady_clock::now() < end) {}
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0].key, std::optional<std::string>("a-long-key-to-give-capacity"));
  EXPECT_EQ(batch[0].headers.size(), 2u);
  const auto* storage = batch.data();
  while (!c.poll_batch(batch, 1, 100ms) && std::chrono::steady_clock::now() < end) {}
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch.data(), storage);  // the element was reused, not reallocated
  EXPECT_FALSE(batch[0].key.has_value());
  EXPECT_FALSE(batch[0].value.has_value());
  EXPECT_TRUE(batch[0].headers.empty());
  EXPECT_EQ(batch[0].offset, 1);
  EXPECT_EQ(batch[0].timestamp, 20);
  // Nothing more: the batch shrinks to zero and poll_batch says so.
  EXPECT_FALSE(c.poll_batch(batch, 10, 200ms));
  EXPECT_TRUE(batch.empty());
}

TEST(kafka_message, partition_eof_is_reported_with_the_end_offset) {
  mock_cluster cluster;
  cluster.create_topic("eof", 2);
  test::write_numbered(cluster.bootstrap_servers(), "eof", 1, 3);
  consumer c({{"bootstrap.servers", cluster.bootstrap_servers()}, {"enable.partition.eof", "true"}});
  std::map<std::int32_t, std::int64_t> eofs;
  c.on_partition_eof([&](std::string_view topic, std::int32_t partition, std::int64_t offset) {
    EXPECT_EQ(topic, "eof");
    eofs[partition] = offset;
  });
  c.assign({{"eof", 0, offset_beginning}, {"eof", 1, offset_beginning}});
  std::size_t records = 0;
  const auto end = std::chrono::steady_clock::now() + 10s;
  while (eofs.size() < 2 && std::chrono::steady_clock::now() < end)
    if (c.poll(100ms)) ++records;
  EXPECT_EQ(records, 3u);
  EXPECT_EQ(eofs[0], 0);
  EXPECT_EQ(eofs[1], 3);
  EXPECT_EQ(c.watermarks("eof", 1, 5s), std::make_pair(std::int64_t{0}, std::int64_t{3}));
}

}  // namespace
}  // namespace sluice::kafka
