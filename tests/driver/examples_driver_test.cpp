// The examples' topologies, tested as their teams would test them.
#include <gtest/gtest.h>

#include "pipeline/topology.hpp"
#include "sluice/test_driver.hpp"
#include "word_count/topology.hpp"

using sluice::testing::topology_test_driver;

TEST(examples, pipeline_filters_large_orders_and_counts_per_customer) {
  topology_test_driver d(examples::pipeline_topology(), {}, {.partitions = 4});
  auto in = d.input_topic<std::string, examples::order>("orders");
  in.pipe("o1", {"o1", "ada", 25000});
  in.pipe("o2", {"o2", "bob", 500});
  in.pipe("o3", {"o3", "ada", 10000});
  auto large = d.output_topic<std::string, examples::large_order>("large-orders").read_all();
  ASSERT_EQ(large.size(), 2u);
  EXPECT_EQ(large[0].value.customer, "ada");
  EXPECT_DOUBLE_EQ(large[0].value.amount, 250.0);
  auto counts = d.output_topic<std::string, std::int64_t>("orders-per-customer").read_key_values_to_map();
  EXPECT_EQ(counts["ada"], 2);
  EXPECT_EQ(counts["bob"], 1);
}

TEST(examples, word_count_counts_words_case_insensitively) {
  topology_test_driver d(examples::word_count_topology());
  auto in = d.input_topic<std::optional<std::string>, std::string>("lines");
  in.pipe(std::nullopt, "The cat and the hat");
  in.pipe(std::nullopt, "THE end");
  auto counts = d.output_topic<std::string, std::int64_t>("word-counts").read_key_values_to_map();
  EXPECT_EQ(counts["the"], 3);
  EXPECT_EQ(counts["cat"], 1);
  EXPECT_EQ(counts["end"], 1);
  EXPECT_EQ((*d.store<std::string, std::int64_t>("word-counts").get("the")), 3);
}
