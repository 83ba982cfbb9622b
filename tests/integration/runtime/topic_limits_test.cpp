// An output topic whose max.message.bytes is below the producer's batch size: a broker
// refuses a whole batch larger than the topic's limit, so before sluice capped its batches
// every record of such a batch failed, the small ones too (401 records of 1 KB to a topic
// limited to 20,000 bytes: none arrived; under log_and_continue all were skipped, under
// exactly-once the job stopped). Now only a record larger than the limit fails, alone.
//
// That record is caught before it is produced (issue 12): under exactly-once the broker's
// refusal failed the transaction, and the rewound job failed it again on every restart. It is
// a processing error of its input, under processing.error.handler; a dead-letter copy too
// large for the dead-letter topic's own max.message.bytes is cut to fit it.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "broker_env.hpp"
#include "group_offsets.hpp"
#include "scratch_dir.hpp"
#include "text.hpp"
#include "sluice/app.hpp"
#include "sluice/builder.hpp"
#include "sluice/client.hpp"

namespace {

using sluice::test::header_text;

using namespace std::chrono_literals;

struct limited_topic_run {
  std::size_t delivered = 0;
  bool big_delivered = false;
  std::string delivered_values;  ///< the first byte of each delivered value, in order
  std::vector<sluice::raw_message> dead_letters;
  sluice::app_state state = sluice::app_state::created;
  std::string error;
};

enum class big_record { without, with };

struct limited_topic_options {
  std::string guarantee = "at_least_once";
  big_record big = big_record::without;
  std::string processing_handler = "fail";
  /// max.message.bytes of the dead-letter topic, created before the app when set.
  std::optional<int> dead_letter_max_message_bytes;
};

/// Passes 200 records of 1 KB, optionally one of 50 KB, then 200 more of 1 KB through to a
/// topic limited to 20,000 bytes; returns what a read_committed reader finds there once
/// the app has committed its input to the end (or stopped).
limited_topic_run pass_through_to_a_limited_topic(const limited_topic_options& options) {
  auto app_id = sluice::test::unique_name("limited");
  sluice::config c;
  c.set("bootstrap.servers", sluice::test::broker_bootstrap());
  c.set("application.id", app_id);
  c.set("state.dir", sluice::test::scratch_path("limited-state").string());
  c.set("commit.interval.ms", "200");
  c.set("processing.guarantee", options.guarantee);
  c.set("production.error.handler", "log_and_continue");
  c.set("processing.error.handler", options.processing_handler);
  const auto in = app_id + "-in", out = app_id + "-out";
  sluice::topic_admin admin(c);
  admin.create_topic(in, 1);
  admin.create_topic(out, 1, {{"max.message.bytes", "20000"}});
  if (options.dead_letter_max_message_bytes)
    admin.create_topic(app_id + "-dlq", 1,
                       {{"max.message.bytes", std::to_string(*options.dead_letter_max_message_bytes)}});
  {
    sluice::topic_writer w(c);
    for (int i = 0; i < 200; ++i) w.send_raw(in, std::string_view("small"), std::string(1000, 'a'));
    if (options.big == big_record::with) w.send_raw(in, std::string_view("big"), std::string(50000, 'b'));
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
    run.delivered_values += m.value && !m.value->empty() ? m.value->front() : '-';
  }
  if (options.processing_handler == "dead_letter") {
    sluice::topic_reader dead(c, {app_id + "-dlq"}, sluice::isolation::read_committed);
    run.dead_letters = dead.read_to_end(60s);
  }
  app.close();
  return run;
}

TEST(topic_limits, small_records_reach_a_topic_whose_limit_is_below_the_batch_size_under_exactly_once) {
  SLUICE_REQUIRE_BROKER();
  auto run = pass_through_to_a_limited_topic({.guarantee = "exactly_once"});
  EXPECT_NE(run.state, sluice::app_state::error) << run.error;
  EXPECT_EQ(run.delivered, 400u);
}

TEST(topic_limits, only_the_record_over_the_limit_is_skipped_under_at_least_once_and_log_and_continue) {
  SLUICE_REQUIRE_BROKER();
  auto run = pass_through_to_a_limited_topic({.big = big_record::with, .processing_handler = "log_and_continue"});
  EXPECT_NE(run.state, sluice::app_state::error) << run.error;
  EXPECT_EQ(run.delivered, 400u);
  EXPECT_FALSE(run.big_delivered);
}

// Under exactly-once the 50 KB record failed the transaction at the broker, and the job
// rewound and failed it again on every retry until task.timeout.ms, then stopped; the 400
// small records never arrived. Now it is dead-lettered whole and the others arrive once each.
TEST(topic_limits, a_record_over_its_topics_limit_under_exactly_once_is_dead_lettered_and_the_others_arrive_exactly) {
  SLUICE_REQUIRE_BROKER();
  auto run = pass_through_to_a_limited_topic(
      {.guarantee = "exactly_once", .big = big_record::with, .processing_handler = "dead_letter"});
  EXPECT_NE(run.state, sluice::app_state::error) << run.error;
  EXPECT_EQ(run.delivered_values, std::string(200, 'a') + std::string(200, 'c')) << "each small record once, in order";
  ASSERT_EQ(run.dead_letters.size(), 1u);
  const auto& dead = run.dead_letters[0];
  EXPECT_EQ(dead.key, "big");
  EXPECT_EQ(dead.value, std::string(50000, 'b')) << "the dead-letter topic takes it whole";
  const auto message = header_text(dead, "sluice.error.message");
  EXPECT_NE(message.find("exceeds the limit of 19939 bytes set by max.message.bytes (20000) of topic"),
            std::string::npos)
      << message;
  EXPECT_EQ(header_text(dead, "sluice.truncated"), "");
}

// The dead-letter topic's own max.message.bytes (described at start) sizes the cut: the copy
// fits it in one send, with the reason.
TEST(topic_limits, a_dead_letter_copy_over_the_dead_letter_topics_limit_is_cut_to_it_under_exactly_once) {
  SLUICE_REQUIRE_BROKER();
  auto run = pass_through_to_a_limited_topic({.guarantee = "exactly_once",
                                              .big = big_record::with,
                                              .processing_handler = "dead_letter",
                                              .dead_letter_max_message_bytes = 30000});
  EXPECT_NE(run.state, sluice::app_state::error) << run.error;
  EXPECT_EQ(run.delivered_values, std::string(200, 'a') + std::string(200, 'c'));
  ASSERT_EQ(run.dead_letters.size(), 1u);
  const auto& dead = run.dead_letters[0];
  EXPECT_EQ(dead.key, "big");
  ASSERT_TRUE(dead.value.has_value());
  EXPECT_GT(dead.value->size(), 25000u) << "the value takes what the headers leave";
  EXPECT_LT(dead.value->size(), 30000u);
  EXPECT_EQ(*dead.value, std::string(dead.value->size(), 'b'));
  EXPECT_EQ(header_text(dead, "sluice.original.value.bytes"), "50000");
  const auto note = header_text(dead, "sluice.truncated");
  EXPECT_NE(note.find("exceeds max.message.bytes (30000) of topic"), std::string::npos) << note;
}

}  // namespace
