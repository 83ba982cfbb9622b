// The getting-started example's topology through the TopologyTestDriver
// (docs/getting-started.md walks through this file).
#include <gtest/gtest.h>

#include "getting_started/topology.hpp"
#include "sluice/test_driver.hpp"

using getting_started::page_view;
using sluice::testing::topology_test_driver;
using namespace std::chrono_literals;

TEST(getting_started, drops_bots_counts_per_page_and_reports_once_per_interval) {
  topology_test_driver driver(getting_started::page_views_topology(10s));
  auto views = driver.input_topic<std::string, page_view>("page-views");
  auto counts = driver.output_topic<std::string, std::int64_t>("page-view-counts");

  views.pipe("alice", {"/home", "Mozilla/5.0", 1200});
  views.pipe("bob", {"/home", "Mozilla/5.0", 800});
  views.pipe("crawler", {"/home", "Googlebot/2.1", 5});
  views.pipe("alice", {"/pricing", "Mozilla/5.0", 3000});

  // Counted at once, reported only when the wall-clock punctuator fires.
  auto views_per_page = driver.store<std::string, std::int64_t>("views-per-page");
  EXPECT_EQ(views_per_page.get("/home"), 2);
  EXPECT_TRUE(counts.empty());
  driver.advance_wall_clock(10s);
  auto reported = counts.read_key_values_to_map();
  EXPECT_EQ(reported, (std::map<std::string, std::int64_t>{{"/home", 2}, {"/pricing", 1}}));

  // Nothing changed: nothing to report.
  driver.advance_wall_clock(10s);
  EXPECT_TRUE(counts.empty());
  views.pipe("carol", {"/home", "Mozilla/5.0", 400});
  driver.advance_wall_clock(10s);
  EXPECT_EQ(counts.read_value(), 3);
}

TEST(getting_started, malformed_page_views_go_to_the_dead_letter_topic) {
  sluice::config cfg;
  cfg.set("application.id", "page-views");
  cfg.set("deserialization.error.handler", "dead_letter");
  topology_test_driver driver(getting_started::page_views_topology(10s), cfg, {.partitions = 4});

  driver.pipe_raw("page-views", std::string_view("alice"), std::string_view("{not json"), 1000);
  driver.input_topic<std::string, page_view>("page-views").pipe("alice", {"/docs", "Mozilla/5.0", 700});
  driver.advance_wall_clock(10s);

  auto counts = driver.output_topic<std::string, std::int64_t>("page-view-counts");
  EXPECT_EQ(counts.read_value(), 1);
  auto& dead = driver.records("page-views-dlq");
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(*dead.front().value, "{not json");
  EXPECT_EQ(**dead.front().headers.last("sluice.error.kind"), "deserialization");
}
