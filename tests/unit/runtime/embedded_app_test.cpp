// A job on the embedded cluster, as a new team first runs one: bootstrap.servers must be
// asked for, and every topic the topology reads is created there (sources, global tables).
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <string>

#include "kafka/admin.hpp"
#include "kafka/mock_cluster.hpp"
#include "sluice/sluice.hpp"

using namespace std::chrono_literals;

namespace {

std::string unique(const std::string& base) {
  static std::atomic<int> n{0};
  return base + "-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
}

struct names {
  std::string orders = unique("orders"), customers = unique("customers"), enriched = unique("enriched");
};

sluice::topology enrich_orders(const names& t) {
  sluice::streams_builder b;
  auto customers = b.global_table<std::string, std::string>(t.customers);
  b.stream<std::string, std::string>(t.orders)
      .left_join(
          customers, [](const std::string& order, const std::string&) { return order; },
          [](const std::string& customer, const std::optional<std::string>& name) {
            return customer + ":" + name.value_or("unknown");
          })
      .to(t.enriched);
  return b.build();
}

sluice::config job_config(const std::string& app_id) {
  sluice::config c;
  c.set("application.id", app_id);
  c.set("state.dir", (std::filesystem::temp_directory_path() / unique("embedded-app-state")).string());
  c.set("commit.interval.ms", "100");
  return c;
}

}  // namespace

TEST(embedded_app, a_job_without_bootstrap_servers_stops_naming_the_key) {
  names t;
  auto cfg = job_config(unique("no-bootstrap"));
  try {
    sluice::app app(enrich_orders(t), cfg);
    app.start();
    FAIL() << "the app started without bootstrap.servers";
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.code(), sluice::errc::invalid_config);
    EXPECT_NE(std::string(e.what()).find("'bootstrap.servers' is not set"), std::string::npos) << e.what();
  }
}

TEST(embedded_app, creates_the_topics_of_sources_and_global_tables) {
  names t;
  auto cfg = job_config(unique("embedded-join"));
  cfg.set("bootstrap.servers", "embedded");
  sluice::topic_admin admin(cfg);
  ASSERT_FALSE(admin.partition_count(t.customers));
  ASSERT_FALSE(admin.partition_count(t.orders));

  sluice::app app(enrich_orders(t), cfg);
  app.start();
  EXPECT_EQ(admin.partition_count(t.customers), 4);
  EXPECT_EQ(admin.partition_count(t.orders), 4);

  sluice::topic_writer writer(cfg);
  writer.send<std::string, std::string>(t.orders, "o1", "c1");
  writer.flush();
  sluice::topic_reader reader(cfg, {t.enriched});
  auto out = reader.read_at_least(1, 30s);
  app.close();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].value, "c1:unknown");
  EXPECT_EQ(app.state(), sluice::app_state::not_running);
}

TEST(embedded_app, a_windowed_store_changelog_is_compacted_and_deleted_after_retention_plus_a_day) {
  // Kafka Streams' windowed changelogs: compact,delete, retention.ms = the store's retention
  // (window size + grace) + windowstore.changelog.additional.retention.ms (1 day), so the
  // records of windows that left the store leave the topic too.
  const std::string in = unique("clicks");
  sluice::streams_builder b;
  b.stream<std::string, std::string>(in)
      .group_by_key()
      .windowed_by(sluice::time_windows::of_size_and_grace(1min, 10s))
      .count("clicks-per-minute")
      .to_stream()
      .to(unique("clicks-out"));
  b.stream<std::string, std::string>(unique("words")).group_by_key().count("plain-counts");
  const std::string app_id = unique("windowed-changelog");
  auto cfg = job_config(app_id);
  cfg.set("bootstrap.servers", "embedded");
  sluice::app app(b.build(), cfg);
  app.start();
  sluice::kafka::config_map admin_config{{"bootstrap.servers", "embedded"}};
  sluice::kafka::apply_embedded(admin_config);
  sluice::kafka::admin admin(admin_config);
  auto windowed = admin.describe_topic_configs(app_id + "-clicks-per-minute-changelog", 10s);
  auto plain = admin.describe_topic_configs(app_id + "-plain-counts-changelog", 10s);
  app.close();
  EXPECT_EQ(windowed.at("cleanup.policy"), "compact,delete");
  EXPECT_EQ(windowed.at("retention.ms"), std::to_string(70'000 + 86'400'000));
  EXPECT_EQ(plain.at("cleanup.policy"), "compact");
}
