// Configuration pass-through: every librdkafka property reaches librdkafka; failures name
// the key, the value and librdkafka's reason.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kafka/admin.hpp"
#include "kafka/config.hpp"
#include "kafka/consumer.hpp"
#include "kafka/producer.hpp"
#include "sluice/error.hpp"

namespace sluice::kafka {
namespace {

using ::testing::HasSubstr;

producer_options transactional(std::string id) {
  producer_options o;
  o.mode = producer_mode::transactional;
  o.transactional_id = std::move(id);
  return o;
}

template <class F>
sluice::error error_of(F&& f) {
  try {
    f();
  } catch (const sluice::error& e) {
    return e;
  }
  ADD_FAILURE() << "no sluice::error thrown";
  return sluice::error(errc::ok, "");
}

TEST(kafka_config, unknown_key_is_invalid_config_naming_the_key) {
  const auto e = error_of([] { make_conf({{"bootstrap.servers", "127.0.0.1:1"}, {"no.such.property", "1"}}); });
  EXPECT_EQ(e.code(), errc::invalid_config);
  EXPECT_THAT(e.what(), HasSubstr("no.such.property"));
  EXPECT_THAT(e.what(), HasSubstr("No such configuration property"));
}

TEST(kafka_config, malformed_value_names_key_and_value) {
  const auto e = error_of([] { producer p({{"bootstrap.servers", "127.0.0.1:1"}, {"linger.ms", "soon"}}); });
  EXPECT_EQ(e.code(), errc::invalid_config);
  EXPECT_THAT(e.what(), HasSubstr("'linger.ms'='soon'"));
}

TEST(kafka_config, secret_values_are_not_echoed) {
  const auto e = error_of([] { make_conf({{"ssl.key.password", "hunter2"}, {"sasl.password.nope", "x"}}); });
  EXPECT_EQ(e.code(), errc::invalid_config);
  EXPECT_THAT(e.what(), HasSubstr("sasl.password.nope"));
  EXPECT_THAT(e.what(), ::testing::Not(HasSubstr("hunter2")));
}

TEST(kafka_config, valid_properties_reach_librdkafka) {
  auto conf = make_conf({{"linger.ms", "7"}, {"client.id", "sluice-test"}, {"queue.buffering.max.messages", "1234"}});
  char value[64];
  std::size_t size = sizeof value;
  ASSERT_EQ(rd_kafka_conf_get(conf.get(), "linger.ms", value, &size), RD_KAFKA_CONF_OK);
  EXPECT_STREQ(value, "7");
  size = sizeof value;
  ASSERT_EQ(rd_kafka_conf_get(conf.get(), "queue.buffering.max.messages", value, &size), RD_KAFKA_CONF_OK);
  EXPECT_STREQ(value, "1234");
  // And clients accept them (no broker is contacted to construct one).
  producer p({{"bootstrap.servers", "127.0.0.1:1"}, {"linger.ms", "7"}, {"client.id", "sluice-test"}});
  EXPECT_THAT(p.name(), HasSubstr("sluice-test"));
  consumer c({{"bootstrap.servers", "127.0.0.1:1"}, {"group.id", "g"}, {"fetch.wait.max.ms", "50"}});
  EXPECT_THAT(c.name(), HasSubstr("rdkafka"));
}

std::string property(rd_kafka_t* rk, const char* key) {
  char value[256];
  std::size_t size = sizeof value;
  if (rd_kafka_conf_get(rd_kafka_conf(rk), key, value, &size) != RD_KAFKA_CONF_OK) return "<unset>";
  return value;
}

TEST(kafka_config, producer_defaults_to_java_partitioning_and_idempotence) {
  producer p(config_map{{"bootstrap.servers", "127.0.0.1:1"}});
  EXPECT_EQ(property(p.native(), "partitioner"), "murmur2_random");
  EXPECT_EQ(property(p.native(), "enable.idempotence"), "true");
  producer explicit_partitioner(config_map{{"bootstrap.servers", "127.0.0.1:1"}, {"partitioner", "fnv1a"}});
  EXPECT_EQ(property(explicit_partitioner.native(), "partitioner"), "fnv1a");
}

TEST(kafka_config, consumer_defaults_to_manual_commits_unless_overridden) {
  consumer c(config_map{{"bootstrap.servers", "127.0.0.1:1"}, {"group.id", "g"}});
  EXPECT_EQ(property(c.native(), "enable.auto.commit"), "false");
  EXPECT_EQ(property(c.native(), "enable.auto.offset.store"), "false");
  EXPECT_EQ(property(c.native(), "partition.assignment.strategy"), "range");
  consumer o({{"bootstrap.servers", "127.0.0.1:1"},
              {"group.id", "g"},
              {"enable.auto.commit", "true"},
              {"partition.assignment.strategy", "cooperative-sticky"}});
  EXPECT_EQ(property(o.native(), "enable.auto.commit"), "true");
  EXPECT_EQ(property(o.native(), "partition.assignment.strategy"), "cooperative-sticky");
}

TEST(kafka_config, producer_rejects_disabling_idempotence) {
  const auto e = error_of([] { producer p(config_map{{"enable.idempotence", "false"}}); });
  EXPECT_EQ(e.code(), errc::invalid_config);
  EXPECT_THAT(e.what(), HasSubstr("enable.idempotence"));
}

TEST(kafka_config, transactional_producer_needs_an_id) {
  const auto e = error_of([] { producer p(config_map{}, transactional("")); });
  EXPECT_EQ(e.code(), errc::invalid_config);
  EXPECT_THAT(e.what(), HasSubstr("transactional"));
  const auto e2 = error_of([] { producer p(config_map{{"transactional.id", "t"}}); });
  EXPECT_EQ(e2.code(), errc::invalid_config);
}

TEST(kafka_config, subscribe_without_group_id_is_invalid_config) {
  consumer c(config_map{{"bootstrap.servers", "127.0.0.1:1"}});
  const auto e = error_of([&] { c.subscribe({"t"}, nullptr); });
  EXPECT_EQ(e.code(), errc::invalid_config);
  EXPECT_THAT(e.what(), HasSubstr("group.id"));
}

}  // namespace
}  // namespace sluice::kafka
