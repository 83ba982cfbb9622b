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
