// What a new team meets in its first hour with the TopologyTestDriver: a configuration is
// refused exactly as production refuses it, and reading outputs wrongly says what is wrong.
#include <gtest/gtest.h>

#include "error_of.hpp"
#include "sluice/sluice.hpp"
#include "sluice/test_driver.hpp"

using sluice::test::error_of;

namespace {

sluice::topology orders_to_totals() {
  sluice::streams_builder b;
  b.stream<std::string, std::int64_t>("orders").map_values([](std::int64_t cents) { return cents * 2; }).to("doubled");
  return b.build();
}

}  // namespace

TEST(first_hour, the_driver_refuses_a_misspelt_key_as_production_does_with_did_you_mean) {
  for (const char* typo : {"procesing.guarantee", "processing.guarentee"}) {
    sluice::config c;
    c.set(typo, "exactly_once");
    auto in_driver =
        error_of([&] { sluice::testing::topology_test_driver d(orders_to_totals(), c); }, sluice::errc::invalid_config);
    EXPECT_NE(in_driver.find("did you mean 'processing.guarantee'?"), std::string::npos) << in_driver;
    EXPECT_EQ(in_driver.find("librdkafka rejected"), std::string::npos) << in_driver;

    c.set("application.id", "test-driver").set("bootstrap.servers", "embedded");
    auto in_production = error_of([&] { sluice::app app(orders_to_totals(), c); }, sluice::errc::invalid_config);
    EXPECT_EQ(in_driver, in_production);
  }
}

TEST(first_hour, the_driver_refuses_what_production_refuses_beyond_typos) {
  sluice::config c;
  c.set("poll.ms", "60000");
  auto msg =
      error_of([&] { sluice::testing::topology_test_driver d(orders_to_totals(), c); }, sluice::errc::invalid_config);
  EXPECT_NE(msg.find("poll.ms"), std::string::npos) << msg;
  c = {};
  c.set("consumer.group.id", "someone-else");
  msg = error_of([&] { sluice::testing::topology_test_driver d(orders_to_totals(), c); }, sluice::errc::invalid_config);
  EXPECT_NE(msg.find("group.id"), std::string::npos) << msg;
}

TEST(first_hour, reading_an_output_with_the_wrong_type_names_the_topic_and_the_record) {
  sluice::testing::topology_test_driver d(orders_to_totals());
  d.input_topic<std::string, std::int64_t>("orders").pipe("o2", 200);
  auto as_int32 = d.output_topic<std::string, std::int32_t>("doubled");
  auto msg = error_of([&] { (void)as_int32.read(); }, sluice::errc::serialization);
  EXPECT_NE(msg.find("reading topic 'doubled'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("offset"), std::string::npos) << msg;
  EXPECT_NE(msg.find("value does not decode"), std::string::npos) << msg;
}

TEST(first_hour, reading_a_topic_the_topology_never_writes_says_so_and_lists_those_it_writes) {
  sluice::testing::topology_test_driver d(orders_to_totals());
  auto msg =
      error_of([&] { (void)d.output_topic<std::string, std::int64_t>("dubled"); }, sluice::errc::invalid_topology);
  EXPECT_NE(msg.find("never writes topic 'dubled'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'doubled'"), std::string::npos) << msg;
  EXPECT_NO_THROW(((void)d.output_topic<std::string, std::int64_t>("doubled")));
  EXPECT_NO_THROW(((void)d.output_topic<std::string, std::string>(d.application_id() + "-dlq")));
}

// A job configured with an empty or mistyped topic (`--set output.topic=`, a space, a slash)
// is refused when its topology is built, naming the topic, where the topology uses it and
// Kafka's rule. It used to go to the cluster in a metadata request first (with the broker
// away, the job waited 30 s and then asked whether the broker was reachable).
TEST(first_hour, a_topic_name_kafka_refuses_is_refused_when_the_topology_is_built) {
  const auto refusal = [](const std::string& in, const std::string& out, const std::string& table) {
    sluice::streams_builder b;
    auto s = b.stream<std::string, std::string>(in);
    if (!table.empty()) {
      auto t = b.global_table<std::string, std::string>(table);
      s = s.join(
          t, [](const std::string& k, const std::string&) { return k; },
          [](const std::string& v, const std::string& w) { return v + w; });
    }
    s.to(out);
    return error_of([&] { (void)b.build(); }, sluice::errc::invalid_topology);
  };
  auto msg = refusal("", "out", "");
  EXPECT_NE(msg.find("topic '' (read by node '"), std::string::npos) << msg;
  EXPECT_NE(msg.find("is not a valid Kafka topic name: it is empty"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1 to 249 of a-z, A-Z, 0-9, '.', '_' and '-'"), std::string::npos) << msg;

  msg = refusal("in", "push out", "");
  EXPECT_NE(msg.find("topic 'push out' (written by node '"), std::string::npos) << msg;
  EXPECT_NE(msg.find("it holds ' '"), std::string::npos) << msg;

  msg = refusal("in", "out", "rates/eu");
  EXPECT_NE(msg.find("topic 'rates/eu' (the table of global store '"), std::string::npos) << msg;
  EXPECT_NE(msg.find("it holds '/'"), std::string::npos) << msg;

  EXPECT_NE(refusal("..", "out", "").find("'.' and '..' are reserved"), std::string::npos);
  EXPECT_NE(refusal("in", std::string(250, 'a'), "").find("it is 250 characters long"), std::string::npos);

  // Every legal character, and the longest name, build.
  sluice::streams_builder ok;
  ok.stream<std::string, std::string>("Orders.v2_eu-west").to(std::string(249, 'z'));
  EXPECT_NO_THROW((void)ok.build());
}

// A store's name names its directory under the state dir and its changelog topic: as Kafka
// Streams does, sluice takes only names that follow the topic rule, so "../x" cannot leave
// the state dir and a changelog cannot fail to be created after the job started.
TEST(first_hour, a_store_name_outside_the_topic_rule_is_refused_when_the_topology_is_built) {
  const auto refusal = [](const std::string& store) {
    sluice::streams_builder b;
    b.stream<std::string, std::string>("in").group_by_key().count(store).to_stream().to("out");
    return error_of([&] { (void)b.build(); }, sluice::errc::invalid_topology);
  };
  for (const auto& [store, problem] :
       std::vector<std::pair<std::string, std::string>>{{"../counts", "it holds '/'"},
                                                        {"word counts", "it holds ' '"},
                                                        {"..", "'.' and '..' are reserved"},
                                                        {std::string(250, 's'), "it is 250 characters long"}}) {
    const auto msg = refusal(store);
    EXPECT_NE(msg.find("store '" + store + "' does not have a valid name: " + problem), std::string::npos) << msg;
    EXPECT_NE(msg.find("1 to 249 of a-z, A-Z, 0-9, '.', '_' and '-'"), std::string::npos) << msg;
  }
  sluice::streams_builder ok;
  ok.stream<std::string, std::string>("in").group_by_key().count("Word.counts_v2-eu").to_stream().to("out");
  EXPECT_NO_THROW((void)ok.build());
}
