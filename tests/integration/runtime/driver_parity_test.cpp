// The same topology and input through the TopologyTestDriver and through the real broker
// give the same outputs: the driver runs production code, not a model of it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <tuple>

#include "broker_env.hpp"
#include "scratch_dir.hpp"
#include "pipeline/topology.hpp"
#include "sluice/sluice.hpp"
#include "sluice/test_driver.hpp"

using namespace std::chrono_literals;

namespace {
using output = std::tuple<std::string, std::string, std::string, std::int64_t>;  // topic, key, value, timestamp

// Count updates carry the timestamp of the order that caused them. Which order of one
// customer is counted third depends on how the four input partitions interleave in the
// repartition topic, which differs between a broker and the driver (as in Kafka Streams);
// the updates themselves (customer, 1..N) must be identical, so timestamps of the count
// topic are left out of the comparison.
std::vector<output> sorted(std::vector<output> v, const std::string& counts_topic) {
  for (auto& o : v)
    if (std::get<0>(o) == counts_topic) std::get<3>(o) = 0;
  std::sort(v.begin(), v.end());
  return v;
}
}  // namespace

TEST(driver_parity, pipeline_outputs_are_equal_in_the_driver_and_on_the_broker) {
  SLUICE_REQUIRE_BROKER();
  auto app_id = sluice::test::unique_name("parity");
  sluice::config cfg;
  cfg.set("bootstrap.servers", sluice::test::broker_bootstrap());
  cfg.set("application.id", app_id);
  cfg.set("commit.interval.ms", "200");
  cfg.set("state.dir", sluice::test::scratch_path("parity-state").string());
  examples::pipeline_topics topics{sluice::test::unique_name("orders"), sluice::test::unique_name("large"),
                                   sluice::test::unique_name("counts")};
  sluice::topic_admin admin(cfg);
  for (const auto& t : {topics.orders, topics.large_orders, topics.counts}) admin.create_topic(t, 4);

  std::mt19937 rng(3);
  std::vector<examples::order> orders;
  for (int i = 0; i < 3000; ++i)
    orders.push_back({app_id + "-o" + std::to_string(i), "c" + std::to_string(rng() % 40),
                      static_cast<std::int64_t>(rng() % 20000)});

  // Through the driver, with the broker's partition count.
  std::vector<output> expected;
  {
    sluice::testing::topology_test_driver d(examples::pipeline_topology(topics), {}, {.partitions = 4});
    auto in = d.input_topic<std::string, examples::order>(topics.orders);
    std::int64_t ts = 1700000000000;
    for (auto& o : orders) in.pipe(o.id, o, ts++);
    for (const auto& t : {topics.large_orders, topics.counts})
      for (auto& m : d.records(t)) expected.emplace_back(t, *m.key, *m.value, m.timestamp);
  }

  // Through the broker.
  {
    sluice::topic_writer w(cfg);
    std::int64_t ts = 1700000000000;
    for (auto& o : orders) w.send(topics.orders, o.id, o, ts++);
    w.flush();
  }
  sluice::topic_reader large(cfg, {topics.large_orders}), counts(cfg, {topics.counts});
  sluice::app app(examples::pipeline_topology(topics), cfg);
  app.start();
  std::vector<output> got;
  std::size_t want_large = 0, want_counts = 0;
  for (auto& e : expected) (std::get<0>(e) == topics.large_orders ? want_large : want_counts)++;
  for (auto& m : large.read_at_least(want_large, 120s))
    got.emplace_back(topics.large_orders, *m.key, *m.value, m.timestamp);
  for (auto& m : counts.read_at_least(want_counts, 120s))
    got.emplace_back(topics.counts, *m.key, *m.value, m.timestamp);
  app.close();
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_EQ(sorted(got, topics.counts), sorted(expected, topics.counts));
}
