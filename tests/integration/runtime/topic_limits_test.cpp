// An output topic whose max.message.bytes is below the producer's batch size: a broker
// refuses a whole batch larger than the topic's limit, so before sluice capped its batches
// every record of such a batch failed, the small ones too (401 records of 1 KB to a topic
// limited to 20,000 bytes: none arrived; under log_and_continue all were skipped, under
// exactly-once the job stopped). Now only a record larger than the limit fails, alone, and
// the production handler decides what becomes of it.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "broker_env.hpp"
#include "group_offsets.hpp"
#include "sluice/app.hpp"
#include "sluice/builder.hpp"
#include "sluice/client.hpp"

namespace {

using namespace std::chrono_literals;

struct limited_topic_run {
  std::size_t delivered = 0;
  bool big_delivered = false;
  sluice::app_state state = sluice::app_state::created;
  std::string error;
};

/// Passes 200 records of 1 KB, optionally one of 50 KB, then 200 more of 1 KB through to a
/// topic limited to 20,000 bytes; returns what a read_committed reader finds there once
/// the app has committed its input to the end (or stopped).
limited_topic_run pass_through_to_a_limited_topic(const std::string& guarantee, bool with_big_record) {
  auto app_id = sluice::test::unique_name("limited");
  sluice::config c;
  c.set("bootstrap.servers", sluice::test::broker_bootstrap());
  c.set("application.id", app_id);
  c.set("state.dir", (std::filesystem::temp_directory_path() / app_id).string());
  c.set("commit.interval.ms", "200");
  c.set("processing.guarantee", guarantee);
  c.set("production.error.handler", "log_and_continue");
  const auto in = app_id + "-in", out = app_id + "-out";
  sluice::topic_admin admin(c);
  admin.create_topic(in, 1);
  admin.create_topic(out, 1, {{"max.message.bytes", "20000"}});
  {
    sluice::topic_writer w(c);
    for (int i = 0; i < 200; ++i) w.send_raw(in, std::string_view("small"), std::string(1000, 'a'));
    if (with_big_record) w.send_raw(in, std::string_view("big"), std::string(50000, 'b'));
    for (int i = 0; i < 200; ++i) w.send_raw(in, std::string_view("small"), std::string(1000, 'c'));
    w.flush();
  }
  sluice::streams_builder b;
  b.stream<std::string, std::string>(in).to(out);
  sluice::app app(b.build(), c);
  app.start();
  // Evidence of the end: the group's committed offset of the input reaches its end (or the app stops).
  for (auto deadline = std::chrono::steady_clock::now() + 120s;
       std::chrono::steady_clock::now() < deadline && app.state() != sluice::app_state::error &&
       !sluice::test::group_at_end(sluice::test::group_progress(sluice::test::broker_bootstrap(), app_id, in, 1));)
    std::this_thread::sleep_for(200ms);
  limited_topic_run run;
  run.state = app.state();
  run.error = app.error_message();
  sluice::topic_reader reader(c, {out}, sluice::isolation::read_committed);
  for (const auto& m : reader.read_to_end(60s)) {
    ++run.delivered;
    run.big_delivered = run.big_delivered || (m.key && *m.key == "big");
  }
  app.close();
  return run;
}

TEST(topic_limits, small_records_reach_a_topic_whose_limit_is_below_the_batch_size_under_exactly_once) {
  SLUICE_REQUIRE_BROKER();
  auto run = pass_through_to_a_limited_topic("exactly_once", /*with_big_record=*/false);
  EXPECT_NE(run.state, sluice::app_state::error) << run.error;
  EXPECT_EQ(run.delivered, 400u);
}

TEST(topic_limits, only_the_record_over_the_limit_is_skipped_under_at_least_once_and_log_and_continue) {
  SLUICE_REQUIRE_BROKER();
  auto run = pass_through_to_a_limited_topic("at_least_once", /*with_big_record=*/true);
  EXPECT_NE(run.state, sluice::app_state::error) << run.error;
  EXPECT_EQ(run.delivered, 400u);
  EXPECT_FALSE(run.big_delivered);
}

}  // namespace
