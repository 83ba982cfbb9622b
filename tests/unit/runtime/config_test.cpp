// sluice::config: properties parsing, overrides, validation and the per-client split.
#include <gtest/gtest.h>

#include <fstream>

#include "error_of.hpp"

#include "sluice/app.hpp"
#include "sluice/builder.hpp"
#include "sluice/config.hpp"
#include "sluice/error.hpp"

using sluice::test::error_of;

namespace {

/// An app over a one-step topology ("in" -> "out") with `c`.
sluice::app app_with(const sluice::config& c) {
  sluice::streams_builder b;
  b.stream<std::string, std::string>("in").to("out");
  return sluice::app(b.build(), c);
}

/// The message of the invalid_config error that making such an app with `c` throws.
std::string refusal_of(const sluice::config& c) {
  return error_of([&] { app_with(c); }, sluice::errc::invalid_config);
}

}  // namespace

TEST(config, parses_properties_with_comments_separators_and_continuations) {
  auto c = sluice::config::from_string(
      "# a comment\n! another\napplication.id = orders\nbootstrap.servers: b1:9092\n"
      "client.id  spaced\nlong.value=a\\\n   b\n\n");
  EXPECT_EQ(*c.get("application.id"), "orders");
  EXPECT_EQ(*c.get("bootstrap.servers"), "b1:9092");
  EXPECT_EQ(*c.get("client.id"), "spaced");
  EXPECT_EQ(*c.get("long.value"), "ab");
}

TEST(config, malformed_line_names_origin_and_line) {
  auto msg = error_of([] { sluice::config::from_string("a=1\n=nokey\n", "job.properties"); },
                      sluice::errc::invalid_config);
  EXPECT_NE(msg.find("job.properties:2"), std::string::npos) << msg;
}

TEST(config, missing_file_is_an_io_error_naming_the_path) {
  auto msg = error_of([] { sluice::config::from_file("/nonexistent/job.properties"); }, sluice::errc::io);
  EXPECT_NE(msg.find("/nonexistent/job.properties"), std::string::npos);
}

TEST(config, help_is_returned_to_the_caller_with_the_usage_instead_of_exiting) {
  const char* argv[] = {"my-job", "--set", "application.id=x", "--help"};
  auto args = sluice::config::from_args(4, argv, "My job does things.");
  EXPECT_EQ(args.action, sluice::command_line::request::print_help);
  EXPECT_NE(args.help.find("usage: my-job [--config FILE] [--set key=value]..."), std::string::npos) << args.help;
  EXPECT_NE(args.help.find("My job does things."), std::string::npos);
  EXPECT_NE(args.help.find("application.id"), std::string::npos) << "the key reference";
}

TEST(config, set_overrides_win_over_the_file_whatever_the_order) {
  auto path = std::filesystem::temp_directory_path() / ("sluice-config-" + std::to_string(::getpid()) + ".properties");
  std::ofstream(path) << "application.id=from-file\nnum.stream.threads=2\n";
  std::string p = path.string();
  const char* argv[] = {"job", "--set", "application.id=from-set", "--config", p.c_str()};
  auto args = sluice::config::from_args(5, argv);
  std::filesystem::remove(path);
  ASSERT_EQ(args.action, sluice::command_line::request::run);
  const auto& c = args.settings;
  EXPECT_EQ(c.application_id(), "from-set");
  EXPECT_EQ(c.num_stream_threads(), 2);
}

TEST(config, defaults_follow_the_guarantee) {
  sluice::config c;
  c.set("application.id", "a");
  EXPECT_EQ(c.guarantee(), sluice::processing_guarantee::at_least_once);
  EXPECT_EQ(c.commit_interval(), std::chrono::milliseconds(30000));
  c.set("processing.guarantee", "exactly_once");
  EXPECT_EQ(c.commit_interval(), std::chrono::milliseconds(100));
  EXPECT_EQ(c.dead_letter_topic(), "a-dlq");
  EXPECT_TRUE(c.embedded());
}

TEST(config, invalid_values_name_the_key_and_what_is_allowed) {
  sluice::config c;
  c.set("processing.guarantee", "maybe_once").set("num.stream.threads", "zero").set("application.id", "bad id!");
  auto g = error_of([&] { c.guarantee(); }, sluice::errc::invalid_config);
  EXPECT_NE(g.find("processing.guarantee"), std::string::npos);
  EXPECT_NE(g.find("at_least_once or exactly_once"), std::string::npos);
  auto n = error_of([&] { c.num_stream_threads(); }, sluice::errc::invalid_config);
  EXPECT_NE(n.find("num.stream.threads"), std::string::npos);
  auto a = error_of([&] { c.application_id(); }, sluice::errc::invalid_config);
  EXPECT_NE(a.find("letters, digits"), std::string::npos);
}

TEST(config, missing_application_id_says_how_to_set_it) {
  sluice::config c;
  auto msg = error_of([&] { c.application_id(); }, sluice::errc::invalid_config);
  EXPECT_NE(msg.find("--set application.id="), std::string::npos) << msg;
}

TEST(config, client_properties_split_bare_and_prefixed_keys_and_drop_sluice_keys) {
  sluice::config c;
  c.set("application.id", "a")
      .set("bootstrap.servers", "b:1")
      .set("client.id", "shared")
      .set("consumer.fetch.min.bytes", "10")
      .set("producer.linger.ms", "5")
      .set("producer.client.id", "mine");
  auto consumer = c.client_properties("consumer");
  auto producer = c.client_properties("producer");
  EXPECT_EQ(consumer.at("fetch.min.bytes"), "10");
  EXPECT_FALSE(consumer.contains("linger.ms"));
  EXPECT_EQ(consumer.at("client.id"), "shared");
  EXPECT_EQ(producer.at("client.id"), "mine");
  EXPECT_EQ(producer.at("bootstrap.servers"), "b:1");
  EXPECT_FALSE(producer.contains("application.id"));
}

TEST(config, declared_job_keys_have_defaults_and_stay_out_of_librdkafka) {
  static constexpr sluice::config_key keys[] = {{"input.topic", "lines", "where lines come from"}};
  sluice::config::declare_keys(keys);
  sluice::config c;
  EXPECT_EQ(*c.get("input.topic"), "lines");
  c.set("input.topic", "other");
  EXPECT_FALSE(c.client_properties("consumer").contains("input.topic"));
}

TEST(config, unknown_librdkafka_key_is_rejected_when_the_app_is_made) {
  sluice::config c;
  c.set("application.id", "a").set("consumer.no.such.setting", "1");
  auto msg = refusal_of(c);
  EXPECT_NE(msg.find("no.such.setting"), std::string::npos) << msg;
}

TEST(config, dead_letter_is_not_a_production_policy) {
  sluice::config c;
  c.set("application.id", "a").set("production.error.handler", "dead_letter");
  refusal_of(c);
}

TEST(config, consumer_settings_the_runtime_owns_are_refused_with_what_to_do) {
  auto refused = [&](const char* key, const char* value) {
    sluice::config c;
    c.set("application.id", "orders").set(key, value);
    auto msg = refusal_of(c);
    std::string bare = key;
    if (bare.starts_with("consumer.")) bare = bare.substr(9);
    EXPECT_NE(msg.find("'" + bare + "'"), std::string::npos) << msg;
    return msg;
  };
  EXPECT_NE(refused("group.id", "other").find("application.id=other"), std::string::npos);
  EXPECT_NE(refused("consumer.group.id", "other").find("remove group.id"), std::string::npos);
  EXPECT_NE(refused("enable.auto.commit", "true").find("commits input offsets itself"), std::string::npos);
  refused("consumer.enable.auto.offset.store", "true");
  EXPECT_NE(refused("partition.assignment.strategy", "cooperative-sticky").find("range"), std::string::npos);

  // What the runtime would set anyway is accepted.
  sluice::config same;
  same.set("application.id", "orders").set("group.id", "orders").set("enable.auto.commit", "false");
  EXPECT_NO_THROW(app_with(same));

  sluice::config eos;
  eos.set("application.id", "orders").set("processing.guarantee", "exactly_once").set("isolation.level", "read_uncommitted");
  refusal_of(eos);
}

TEST(config, a_state_memory_budget_too_small_for_rocksdb_is_refused_before_start) {
  sluice::config c;
  c.set("application.id", "a").set("state.memory.budget.bytes", "1048576");
  auto msg = refusal_of(c);
  EXPECT_NE(msg.find("state.memory.budget.bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("8388608"), std::string::npos) << msg;
}

TEST(config, replication_factor_of_internal_topics_is_the_broker_default_or_positive) {
  for (const char* bad : {"0", "-2", "three"}) {
    sluice::config c;
    c.set("application.id", "a").set("replication.factor", bad);
    auto msg = refusal_of(c);
    EXPECT_NE(msg.find("replication.factor"), std::string::npos) << msg;
  }
  for (const char* ok : {"-1", "1", "3"}) {
    sluice::config c;
    c.set("application.id", "a").set("replication.factor", ok);
    EXPECT_NO_THROW(app_with(c));
  }
}
