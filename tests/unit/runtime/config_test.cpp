// sluice::config: properties parsing, overrides, validation and the per-client split.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "error_of.hpp"
#include "kafka/config.hpp"
#include "sluice/app.hpp"
#include "sluice/builder.hpp"
#include "sluice/config.hpp"
#include "sluice/error.hpp"

using sluice::test::error_of;

namespace {

/// An app over a one-step topology ("in" -> "out") with `c` (on the embedded cluster unless
/// `c` names brokers).
sluice::app app_with(sluice::config c) {
  sluice::streams_builder b;
  b.stream<std::string, std::string>("in").to("out");
  if (!c.contains("bootstrap.servers")) c.set("bootstrap.servers", "embedded");
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
  auto msg =
      error_of([] { sluice::config::from_string("a=1\n=nokey\n", "job.properties"); }, sluice::errc::invalid_config);
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
}

TEST(config, bootstrap_servers_has_no_silent_default) {
  sluice::config c;
  c.set("application.id", "a");
  auto e = error_of([&] { (void)c.bootstrap_servers(); }, sluice::errc::invalid_config);
  EXPECT_NE(e.find("'bootstrap.servers' is not set"), std::string::npos) << e;
  EXPECT_NE(e.find("'embedded'"), std::string::npos) << e;
  c.set("bootstrap.servers", "embedded");
  EXPECT_TRUE(c.embedded());
  c.set("bootstrap.servers", "broker-1:9092");
  EXPECT_FALSE(c.embedded());
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

// A job that must not stop on a bad record declares the handler again with its own default:
// --help says so, and the command line applies it unless the file or --set chose.
TEST(config, a_job_gives_a_sluice_key_its_own_default_shown_by_help_and_applied_by_the_command_line) {
  static constexpr sluice::config_key keys[] = {{"processing.error.handler", "dead_letter", "this job: dead_letter"}};
  sluice::config::declare_keys(keys);
  const char* bare[] = {"job"};
  EXPECT_EQ(*sluice::config::from_args(1, bare).settings.get("processing.error.handler"), "dead_letter");
  const char* chosen[] = {"job", "--set", "processing.error.handler=fail"};
  EXPECT_EQ(*sluice::config::from_args(3, chosen).settings.get("processing.error.handler"), "fail");
  const char* help[] = {"job", "--help"};
  const auto text = sluice::config::from_args(2, help).help;
  EXPECT_NE(text.find("processing.error.handler (default: dead_letter)\n      this job: dead_letter"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("processing.error.handler (default: fail)"), std::string::npos) << text;
  EXPECT_EQ(text.find("job keys:"), std::string::npos) << text;  // it is a sluice key, listed once
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
  eos.set("application.id", "orders")
      .set("processing.guarantee", "exactly_once")
      .set("isolation.level", "read_uncommitted");
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

// Issue 12, finding 8: numbers the runtime cannot honour were accepted (poll.ms up to 2^50,
// used as a 32-bit int: 2147483648 busy-polled, 30000 made SIGTERM take 22 s).
TEST(config, numeric_keys_are_limited_to_what_the_runtime_honours) {
  struct bad_value {
    const char* key;
    const char* value;
    const char* allowed;
  };
  const bad_value cases[] = {
      {"poll.ms", "30000", "an integer from 0 to 10000 (a stream thread notices shutdown"},
      {"poll.ms", "2147483648", "an integer from 0 to 10000"},
      {"poll.ms", "-1", "an integer from 0 to 10000"},
      {"commit.interval.ms", "2147483648", "an integer from 0 to 2147483647"},
      {"restore.log.interval.ms", "0", "an integer from 1 to 2147483647"},
      {"restore.log.interval.ms", "1125899906842624", "an integer from 1 to 2147483647"},
      {"task.timeout.ms", "-1", "an integer from 0 to 2147483647"},
      {"task.timeout.ms", "2147483648", "an integer from 0 to 2147483647"},
      {"max.poll.records", "1000001", "an integer from 1 to 1000000"},
      {"num.stream.threads", "257", "an integer from 1 to 256"},
      {"state.memory.budget.bytes", "1099511627777", "an integer from 8388608 to 1099511627776"},
      {"replication.factor", "32768", "an integer from -1 to 32767"},
  };
  for (const auto& c : cases) {
    sluice::config cfg;
    cfg.set("application.id", "a").set(c.key, c.value);
    auto msg = error_of([&] { cfg.validate_numbers(); }, sluice::errc::invalid_config);
    EXPECT_NE(msg.find(std::string("'") + c.key + "' has value '" + c.value + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.allowed), std::string::npos) << msg;
  }
  // get_ms of a sluice key keeps to the key's range whatever the caller allows.
  auto msg = error_of([] { sluice::config{}.set("poll.ms", "30000").get_ms("poll.ms"); }, sluice::errc::invalid_config);
  EXPECT_NE(msg.find("from 0 to 10000"), std::string::npos) << msg;
}

TEST(config, the_app_refuses_a_numeric_key_out_of_its_range_before_connecting) {
  sluice::config cfg;
  cfg.set("application.id", "a").set("bootstrap.servers", "127.0.0.1:1").set("poll.ms", "30000");
  auto msg = refusal_of(cfg);
  EXPECT_NE(msg.find("'poll.ms' has value '30000'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("from 0 to 10000"), std::string::npos) << msg;
}

TEST(config, numeric_keys_at_the_ends_of_their_ranges_are_accepted) {
  sluice::config cfg;
  cfg.set("application.id", "a")
      .set("poll.ms", "10000")
      .set("commit.interval.ms", "2147483647")
      .set("restore.log.interval.ms", "1")
      .set("task.timeout.ms", "2147483647")
      .set("max.poll.records", "1000000")
      .set("num.stream.threads", "256")
      .set("state.memory.budget.bytes", "8388608")
      .set("replication.factor", "-1");
  EXPECT_NO_THROW(cfg.validate_numbers());
  EXPECT_EQ(cfg.get_ms("poll.ms").count(), 10000);
  EXPECT_NO_THROW(sluice::config{}.set("application.id", "a").validate_numbers());  // the defaults
}

TEST(config, an_exactly_once_commit_interval_the_broker_would_refuse_as_a_transaction_timeout_is_refused) {
  sluice::config cfg;
  cfg.set("application.id", "a").set("processing.guarantee", "exactly_once").set("commit.interval.ms", "450001");
  auto msg = error_of([&] { cfg.commit_interval(); }, sluice::errc::invalid_config);
  EXPECT_NE(msg.find("at most 450000 under exactly_once"), std::string::npos) << msg;
  EXPECT_NE(msg.find("producer.transaction.timeout.ms"), std::string::npos) << msg;
  EXPECT_NE(refusal_of(cfg).find("commit.interval.ms"), std::string::npos);
  cfg.set("commit.interval.ms", "450000");
  EXPECT_EQ(cfg.commit_interval().count(), 450000);
  // With an explicit transaction timeout the user answers for it.
  cfg.set("commit.interval.ms", "600000").set("producer.transaction.timeout.ms", "1200000");
  EXPECT_EQ(cfg.commit_interval().count(), 600000);
  // At least once has no transaction.
  cfg.set("processing.guarantee", "at_least_once").set("commit.interval.ms", "3600000");
  EXPECT_EQ(cfg.commit_interval().count(), 3600000);
}

TEST(config, the_transaction_timeout_is_twice_the_commit_interval_and_at_least_10_s_unless_set) {
  sluice::config cfg;
  cfg.set("application.id", "a").set("processing.guarantee", "exactly_once");
  EXPECT_EQ(cfg.transaction_timeout().count(), 10000);
  cfg.set("commit.interval.ms", "7000");
  EXPECT_EQ(cfg.transaction_timeout().count(), 14000);
  cfg.set("producer.transaction.timeout.ms", "3000");
  EXPECT_EQ(cfg.transaction_timeout().count(), 3000);
  cfg.set("producer.transaction.timeout.ms", "3 s");
  auto msg = error_of([&] { cfg.transaction_timeout(); }, sluice::errc::invalid_config);
  EXPECT_NE(msg.find("producer.transaction.timeout.ms"), std::string::npos) << msg;
  EXPECT_NE(msg.find("a positive number of milliseconds"), std::string::npos) << msg;
}

TEST(config, a_misspelt_sluice_key_gets_did_you_mean_not_a_librdkafka_error) {
  sluice::config c;
  c.set("application.id", "a").set("procesing.guarantee", "exactly_once");
  auto msg = refusal_of(c);
  EXPECT_NE(msg.find("unknown configuration key 'procesing.guarantee'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'processing.guarantee'?"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("librdkafka rejected"), std::string::npos) << msg;
}

TEST(config, every_sluice_key_misspelt_by_one_letter_gets_did_you_mean_it_and_never_a_librdkafka_error) {
  // The misspelling issue 16 names, then one letter dropped or changed in every sluice key:
  // each refused by sluice before librdkafka sees it, with the key meant.
  std::vector<std::pair<std::string, std::string>> typos = {{"processing.guarentee", "processing.guarantee"}};
  for (const auto& k : sluice::config::known_keys()) {
    const std::string key(k.name);
    if (key == "bootstrap.servers") continue;  // librdkafka's key too
    const auto middle = key.size() / 2;
    typos.emplace_back(key.substr(0, middle) + key.substr(middle + 1), key);
    std::string changed = key;
    changed[middle] = changed[middle] == 'q' ? 'z' : 'q';
    typos.emplace_back(changed, key);
  }
  int checked = 0;
  for (const auto& [typo, meant] : typos) {
    if (sluice::config::is_sluice_key(typo) || sluice::kafka::is_librdkafka_property(typo)) continue;
    sluice::config c;
    c.set("application.id", "a").set(typo, "1");
    auto msg = refusal_of(c);
    EXPECT_NE(msg.find("unknown configuration key '" + typo + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("did you mean '" + meant + "'?"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("librdkafka rejected"), std::string::npos) << msg;
    ++checked;
  }
  EXPECT_GT(checked, 20);
}

TEST(config, a_misspelt_librdkafka_key_gets_did_you_mean_with_its_client_prefix_kept) {
  sluice::config c;
  c.set("application.id", "a").set("consumer.sesion.timeout.ms", "30000");
  auto msg = refusal_of(c);
  EXPECT_NE(msg.find("'consumer.sesion.timeout.ms'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'session.timeout.ms'?"), std::string::npos) << msg;
}

TEST(config, a_key_far_from_every_known_one_is_refused_without_a_guess) {
  sluice::config c;
  c.set("application.id", "a").set("zzzz.qqqq.wwww", "1");
  auto msg = refusal_of(c);
  EXPECT_NE(msg.find("unknown configuration key 'zzzz.qqqq.wwww'"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("did you mean"), std::string::npos) << msg;
}

TEST(config, librdkafka_keys_bare_and_prefixed_and_topic_level_are_accepted) {
  sluice::config c;
  c.set("application.id", "a")
      .set("linger.ms", "5")
      .set("producer.compression.type", "lz4")
      .set("consumer.fetch.max.bytes", "1048576");
  EXPECT_NO_THROW(app_with(c));
}

TEST(config, a_list_is_split_at_commas_and_trimmed_and_blank_is_empty) {
  sluice::config c;
  c.set("fields", " workflow ,\trecipient,tenant ");
  EXPECT_EQ(c.get_list("fields", "advice"), (std::vector<std::string>{"workflow", "recipient", "tenant"}));
  c.set("fields", "one");
  EXPECT_EQ(c.get_list("fields", "advice"), (std::vector<std::string>{"one"}));
  c.set("fields", " \t ");
  EXPECT_TRUE(c.get_list("fields", "advice").empty());
  EXPECT_TRUE(c.get_list("absent.key", "advice").empty());
}

TEST(config, an_empty_list_item_is_refused_naming_key_value_and_advice) {
  for (const char* value : {"a,,b", "a,", ",a", "a, ,b"}) {
    sluice::config c;
    c.set("throttle.key.fields", value);
    auto msg = error_of([&] { c.get_list("throttle.key.fields", "use a comma-separated list of field names"); },
                        sluice::errc::invalid_config);
    EXPECT_NE(msg.find("'throttle.key.fields'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::string("'") + value + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("empty item; use a comma-separated list of field names"), std::string::npos) << msg;
  }
}
