// record_collector on the in-process mock cluster: the changelog offsets the stores' commits
// record come from the deliveries of changelog records (send_changelog) only; a sink's
// records, most of what a thread produces, leave them alone.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "kafka/mock_cluster.hpp"
#include "runtime/record_collector.hpp"
#include "sluice/metrics.hpp"

namespace sluice::runtime {
namespace {

using state::changelog_offset;

struct collector_fixture {
  collector_fixture() {
    cluster.create_topic("out", 2);
    cluster.create_topic("app-s-changelog", 2);
  }
  kafka::mock_cluster cluster;
  metrics_registry metrics;
  record_collector collector{kafka::config_map{{"bootstrap.servers", cluster.bootstrap_servers()}},
                             processing_guarantee::at_least_once,
                             "",
                             error_policy::fail,
                             metrics,
                             "thread=\"0\""};
  const sluice::headers none;
};

TEST(record_collector, changelog_offsets_come_from_changelog_records_only) {
  collector_fixture f;
  auto& c = f.collector;
  for (int i = 0; i < 3; ++i) c.send("out", 1, std::string_view("k"), std::string_view("v"), 0, f.none);
  c.send_changelog("app-s-changelog", 1, "k", std::string_view("1"), 0);
  c.send_changelog("app-s-changelog", 1, "k", std::string_view("2"), 0);
  c.flush();
  EXPECT_EQ(c.next_changelog_offset("app-s-changelog", 1), changelog_offset(2));
  EXPECT_EQ(c.next_changelog_offset("app-s-changelog", 0), std::nullopt);  // nothing sent there
  EXPECT_EQ(c.next_changelog_offset("out", 1), std::nullopt);              // a sink's topic: no changelog
}

TEST(record_collector, changelog_offsets_start_again_after_a_reset) {
  collector_fixture f;
  auto& c = f.collector;
  c.send_changelog("app-s-changelog", 0, "k", std::string_view("1"), 0);
  c.flush();
  EXPECT_EQ(c.next_changelog_offset("app-s-changelog", 0), changelog_offset(1));
  c.reset_changelog_offsets();
  EXPECT_EQ(c.next_changelog_offset("app-s-changelog", 0), std::nullopt);
  c.send("out", 0, std::string_view("k"), std::string_view("v"), 0, f.none);
  c.send_changelog("app-s-changelog", 0, "k", std::nullopt, 0);  // a tombstone moves it too
  c.send_changelog("app-s-changelog", 1, "j", std::string_view("1"), 0);
  c.flush();
  EXPECT_EQ(c.next_changelog_offset("app-s-changelog", 0), changelog_offset(2));
  EXPECT_EQ(c.next_changelog_offset("app-s-changelog", 1), changelog_offset(1));
  EXPECT_EQ(c.next_changelog_offset("out", 0), std::nullopt);
}

}  // namespace
}  // namespace sluice::runtime
