// The shop's driver tests: each of the topology's four parts against hand-computed results.
// The TopologyTestDriver runs the production code in-process: no broker, milliseconds.
#include <gtest/gtest.h>

#include "shop_topology.hpp"
#include "sluice/test_driver.hpp"

namespace {

using sluice::testing::topology_test_driver;

constexpr std::int64_t minute = 60'000;

struct shop_driver {
  topology_test_driver driver{shop::shop_topology()};
  sluice::testing::test_input_topic<std::string, shop::customer> customers =
      driver.input_topic<std::string, shop::customer>("customers");
  sluice::testing::test_input_topic<std::string, shop::order> orders =
      driver.input_topic<std::string, shop::order>("orders");
};

}  // namespace

TEST(shop, orders_are_enriched_with_their_customers_tier_from_the_global_table) {
  shop_driver s;
  s.customers.pipe("c1", {"Ada", "gold"});
  s.orders.pipe("o1", {"c1", 1250}, 1000);
  s.orders.pipe("o2", {"c9", 300}, 2000);  // no such customer: a left join keeps the order
  auto out = s.driver.output_topic<std::string, shop::enriched_order>("orders-enriched").read_all();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].key, "o1");
  EXPECT_EQ(out[0].value.tier, "gold");
  EXPECT_EQ(out[1].value.tier, "unknown");
}

TEST(shop, totals_per_customer_are_a_struct_valued_aggregate) {
  shop_driver s;
  s.orders.pipe("o1", {"c1", 1000}, 1000);
  s.orders.pipe("o2", {"c2", 500}, 2000);
  s.orders.pipe("o3", {"c1", 250}, 3000);
  auto totals = s.driver.output_topic<std::string, shop::customer_totals>("customer-totals").read_key_values_to_map();
  EXPECT_EQ(totals["c1"].orders, 2);
  EXPECT_EQ(totals["c1"].amount_cents, 1250);
  EXPECT_EQ(totals["c2"].orders, 1);
}

TEST(shop, orders_per_customer_per_minute_is_a_windowed_count) {
  shop_driver s;
  s.orders.pipe("o1", {"c1", 100}, 0 * minute + 5'000);
  s.orders.pipe("o2", {"c1", 100}, 0 * minute + 50'000);
  s.orders.pipe("o3", {"c1", 100}, 1 * minute + 1'000);  // the next minute
  auto out = s.driver.output_topic<sluice::windowed<std::string>, std::int64_t>("orders-per-minute").read_all();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[1].key.window.start, 0);
  EXPECT_EQ(out[1].value, 2);
  EXPECT_EQ(out[2].key.window.start, minute);
  EXPECT_EQ(out[2].value, 1);
}

TEST(shop, the_running_total_follows_a_stream_time_punctuator_on_a_10_s_grid) {
  shop_driver s;
  s.orders.pipe("o1", {"c1", 100}, 1'000);   // first record: the grid point 0 is due, total 100
  s.orders.pipe("o2", {"c1", 200}, 9'000);   // before 10 s: nothing
  s.orders.pipe("o3", {"c1", 300}, 10'000);  // reaches 10 s: processed first, then the punctuator
  auto out = s.driver.output_topic<std::string, std::int64_t>("running-total").read_all();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].value, 100);
  EXPECT_EQ(out[1].value, 600);
  EXPECT_EQ(out[1].timestamp, 10'000);
}
