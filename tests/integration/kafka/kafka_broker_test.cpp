// The librdkafka layer against a real Apache Kafka broker: admin, a keyed round trip
// through a consumer group, Java-compatible partitioning, and transactions.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include "broker_env.hpp"
#include "kafka/admin.hpp"
#include "kafka/consumer.hpp"
#include "kafka/producer.hpp"
#include "kafka_test_util.hpp"

namespace sluice::kafka {
namespace {

using namespace std::chrono_literals;

config_map broker_config() { return {{"bootstrap.servers", sluice::test::broker_bootstrap()}}; }

producer_options transactional(std::string id) {
  producer_options o;
  o.mode = producer_mode::transactional;
  o.transactional_id = std::move(id);
  return o;
}

/// Creates a topic for one test and deletes it when the test ends.
class scoped_topic {
 public:
  scoped_topic(const std::string& prefix, int partitions, config_map configs = {})
      : name_(sluice::test::unique_name(prefix)), admin_(broker_config()) {
    admin_.create_topics({new_topic{name_, partitions, -1, std::move(configs)}}, 30s);
  }
  ~scoped_topic() {
    try {
      admin_.delete_topics({name_}, 30s);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "deleting " << name_ << ": " << e.what();
    }
  }
  const std::string& name() const { return name_; }
  admin& client() { return admin_; }

 private:
  std::string name_;
  admin admin_;
};

TEST(kafka_broker, admin_creates_describes_and_deletes_topics) {
  SLUICE_REQUIRE_BROKER();
  admin a(broker_config());
  const auto plain = sluice::test::unique_name("admin-plain");
  const auto compacted = sluice::test::unique_name("admin-compacted");
  EXPECT_EQ(a.partition_count(plain, 10s), std::nullopt);
  a.create_topics({new_topic{plain, 4, -1, {}}, new_topic{compacted, 2, 1, {{"cleanup.policy", "compact"}}}}, 30s);
  a.create_topics({new_topic{plain, 4, -1, {}}}, 30s);  // already exists: not an error
  EXPECT_EQ(a.partition_count(plain, 10s), 4);
  EXPECT_EQ(a.partition_count(compacted, 10s), 2);
  EXPECT_EQ(a.describe_topic_configs(compacted, 10s).at("cleanup.policy"), "compact");
  EXPECT_EQ(a.describe_topic_configs(plain, 10s).at("cleanup.policy"), "delete");

  a.delete_topics({plain, compacted}, 30s);
  const auto end = std::chrono::steady_clock::now() + 30s;
  while (a.partition_count(plain, 10s) && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(100ms);
  EXPECT_EQ(a.partition_count(plain, 10s), std::nullopt);
}

TEST(kafka_broker, admin_error_names_the_topic) {
  SLUICE_REQUIRE_BROKER();
  admin a(broker_config());
  try {
    a.describe_topic_configs(sluice::test::unique_name("missing"), 10s);
    FAIL() << "describing a missing topic did not throw";
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.code(), errc::kafka);
    EXPECT_EQ(e.kafka().code, RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) << e.what();
    EXPECT_THAT(e.what(), ::testing::HasSubstr("missing"));
  }
  // A creation the broker refuses names the topic; deleting a topic that is gone is not an error.
  const auto refused = sluice::test::unique_name("admin-refused");
  try {
    a.create_topics({new_topic{refused, 1, -1, {{"cleanup.policy", "sometimes"}}}}, 30s);
    FAIL() << "a topic with cleanup.policy=sometimes was created";
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.kafka().code, RD_KAFKA_RESP_ERR_INVALID_CONFIG) << e.what();
    EXPECT_THAT(e.what(), ::testing::HasSubstr("create topic '" + refused + "'"));
  }
  EXPECT_NO_THROW(a.delete_topics({sluice::test::unique_name("never-created")}, 30s));
}

TEST(kafka_broker, ten_thousand_keyed_records_arrive_once_in_key_order_through_a_group) {
  SLUICE_REQUIRE_BROKER();
  scoped_topic topic("roundtrip", 4);
  const auto records = test::make_records(10'000, 250);
  std::atomic<int> delivered{0};
  std::atomic<int> failed{0};
  {
    producer p(broker_config(), {}, [&](const delivery_report& r) { ++(r.ok() ? delivered : failed); });
    test::produce_all(p, topic.name(), records, delivered, failed);
  }
  auto config = broker_config();
  config["group.id"] = sluice::test::unique_name("roundtrip-group");
  config["auto.offset.reset"] = "earliest";
  config["session.timeout.ms"] = "6000";
  const auto got = test::consume_group(config, topic.name(), records.size(), 60s);
  test::expect_exactly_once_in_order(records, got);
}

/// "KEY<TAB>PARTITION" lines from Apache Kafka's own partitioner, via scripts/kafka java.
std::map<std::string, std::int32_t> java_partitions(int count, const std::vector<std::string>& keys) {
  std::string cmd = std::string(SLUICE_SOURCE_DIR) + "/scripts/kafka java " + SLUICE_SOURCE_DIR +
                    "/scripts/java/KafkaProbe.java partition " + std::to_string(count);
  for (const auto& k : keys) cmd += " '" + k + "'";  // keys are [A-Za-z0-9_.:-] only
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), &pclose);
  if (!pipe) return {};
  std::map<std::string, std::int32_t> out;
  char line[512];
  while (std::fgets(line, sizeof line, pipe.get())) {
    std::istringstream in(line);
    std::string key;
    std::int32_t partition = -1;
    if (std::getline(in, key, '\t') && in >> partition) out[key] = partition;
  }
  return out;
}

TEST(kafka_broker, keys_land_on_the_partition_java_producers_choose) {
  SLUICE_REQUIRE_BROKER();
  std::vector<std::string> keys;
  for (int i = 0; i < 200; ++i) {
    switch (i % 4) {
      case 0: keys.push_back("customer-" + std::to_string(i)); break;
      case 1: keys.push_back(std::to_string(i * 7919)); break;
      case 2: keys.push_back("k" + std::to_string(i)); break;
      default: keys.push_back("user_" + std::to_string(i) + ".device:" + std::to_string(i * 31)); break;
    }
  }
  const auto expected = java_partitions(4, keys);
  ASSERT_EQ(expected.size(), keys.size()) << "KafkaProbe did not answer for every key";

  scoped_topic topic("partitioner", 4);
  std::vector<std::int32_t> got(keys.size(), -1);
  {
    producer p(broker_config(), {}, [&](const delivery_report& r) {
      ASSERT_TRUE(r.ok()) << r.to_error().what();
      got[reinterpret_cast<std::uintptr_t>(r.opaque)] = r.partition;
    });
    for (std::size_t i = 0; i < keys.size(); ++i)
      p.produce(topic.name(), any_partition, std::string_view(keys[i]), std::string_view("v"), 0, {},
                reinterpret_cast<void*>(i));
    p.flush(30s);
  }
  std::set<std::int32_t> used;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(got[i], expected.at(keys[i])) << "key " << keys[i];
    used.insert(got[i]);
  }
  EXPECT_EQ(used.size(), 4u);
}

std::vector<message> read_all(const config_map& config, const std::string& topic, int partitions,
                              std::chrono::milliseconds quiet) {
  consumer c(config);
  std::vector<topic_partition_offset> parts;
  for (int p = 0; p < partitions; ++p) parts.push_back({topic, p, offset_beginning});
  c.assign(parts);
  std::vector<message> out;
  std::vector<message> batch;
  auto last = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - last < quiet) {
    if (c.poll_batch(batch, 100, 100ms)) {
      out.insert(out.end(), batch.begin(), batch.end());
      last = std::chrono::steady_clock::now();
    }
  }
  return out;
}

TEST(kafka_broker, committed_transaction_is_visible_and_aborted_one_is_not) {
  SLUICE_REQUIRE_BROKER();
  scoped_topic topic("txn", 2);
  const auto group = sluice::test::unique_name("txn-group");
  {
    producer p(broker_config(), transactional(sluice::test::unique_name("txn-id")));
    p.init_transactions(30s);
    p.begin_transaction();
    for (int i = 0; i < 10; ++i)
      p.produce(topic.name(), any_partition, std::string_view("k" + std::to_string(i)),
                std::string_view("committed-" + std::to_string(i)), 0, {});
    // Offsets of a (pretend) input commit atomically with the outputs.
    p.send_offsets_to_transaction({{topic.name(), 0, 42}}, consumer_group_metadata(group), 30s);
    p.commit_transaction(30s);

    p.begin_transaction();
    for (int i = 0; i < 10; ++i)
      p.produce(topic.name(), any_partition, std::string_view("k" + std::to_string(i)),
                std::string_view("aborted-" + std::to_string(i)), 0, {});
    p.flush(30s);  // the aborted records really reach the log
    p.abort_transaction(30s);
  }

  auto committed_reader = broker_config();
  committed_reader["isolation.level"] = "read_committed";
  const auto visible = read_all(committed_reader, topic.name(), 2, 2s);
  ASSERT_EQ(visible.size(), 10u);
  for (const auto& m : visible) EXPECT_THAT(*m.value, ::testing::StartsWith("committed-"));

  auto uncommitted_reader = broker_config();
  uncommitted_reader["isolation.level"] = "read_uncommitted";
  EXPECT_EQ(read_all(uncommitted_reader, topic.name(), 2, 2s).size(), 20u);

  auto group_config = broker_config();
  group_config["group.id"] = group;
  consumer c(group_config);
  EXPECT_EQ(c.committed({{topic.name(), 0}}, 10s), (std::vector<topic_partition_offset>{{topic.name(), 0, 42}}));
}

TEST(kafka_broker, second_producer_with_same_transactional_id_fences_the_first) {
  SLUICE_REQUIRE_BROKER();
  scoped_topic topic("fence", 1);
  const auto id = sluice::test::unique_name("fence-id");
  producer zombie(broker_config(), transactional(id));
  zombie.init_transactions(30s);
  zombie.begin_transaction();
  zombie.produce(topic.name(), 0, std::string_view("k"), std::string_view("v"), 0, {});
  zombie.flush(30s);

  producer successor(broker_config(), transactional(id));
  successor.init_transactions(30s);  // aborts the zombie's transaction and bumps the epoch

  try {
    zombie.commit_transaction(30s);
    FAIL() << "the fenced producer committed";
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.code(), errc::fenced) << e.what();
    EXPECT_TRUE(e.kafka().fatal) << e.what();
  }
}

}  // namespace
}  // namespace sluice::kafka
