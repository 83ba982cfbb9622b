// A job on the embedded cluster says nothing alarming about its brokers: librdkafka's "No
// `bootstrap.servers` configured" notice (true only of the mock cluster's own hosting
// handle) never reaches the log, while the job reads a stream, a table and a global table
// whose topics the embedded cluster creates.
//
// Its own executable: the capture must be librdkafka's logger before any client exists in
// the process.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <unistd.h>

#include "kafka/config.hpp"
#include "log_capture.hpp"
#include "sluice/sluice.hpp"

namespace {

constexpr std::string_view no_bootstrap_notice = "No `bootstrap.servers` configured";

}  // namespace

TEST(embedded_log, a_job_on_the_embedded_cluster_logs_no_missing_bootstrap_servers_notice) {
  sluice::test::log_capture log("rdkafka");  // librdkafka's lines through sluice's bridge
  const std::string tag = std::to_string(::getpid());
  const std::string orders = "orders-" + tag, prices = "prices-" + tag, customers = "customers-" + tag;
  sluice::streams_builder b;
  auto price_table = b.table<std::string, std::int64_t>(prices, "prices");
  auto customer_table = b.global_table<std::string, std::string>(customers);
  b.stream<std::string, std::int64_t>(orders)
      .left_join(price_table,
                 [](std::int64_t qty, const std::optional<std::int64_t>& p) { return qty * p.value_or(0); })
      .left_join(
          customer_table, [](const std::string& k, std::int64_t) { return k; },
          [](std::int64_t total, const std::optional<std::string>&) { return total; })
      .to("totals-" + tag);
  const auto state_dir = std::filesystem::temp_directory_path() / ("embedded-log-" + tag);
  sluice::config cfg;
  cfg.set("application.id", "embedded-log-" + tag)
      .set("bootstrap.servers", "embedded")
      .set("state.dir", state_dir.string());
  sluice::topic_admin admin(cfg);
  {
    sluice::app app(b.build(), cfg);
    app.start();
    // Every topic the topology reads was created: the stream's, the table's, the global table's.
    EXPECT_EQ(admin.partition_count(orders), 4);
    EXPECT_EQ(admin.partition_count(prices), 4);
    EXPECT_EQ(admin.partition_count(customers), 4);
    app.close();
  }
  std::filesystem::remove_all(state_dir);
  EXPECT_FALSE(log.contains(no_bootstrap_notice));

  // The capture sees librdkafka's notices: a client without bootstrap.servers logs it.
  auto unconfigured = sluice::kafka::new_handle(RD_KAFKA_PRODUCER, sluice::kafka::make_conf({}));
  EXPECT_TRUE(log.contains(no_bootstrap_notice));
}
