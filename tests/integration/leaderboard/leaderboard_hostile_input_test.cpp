// The sluice-leaderboard job (a child process) against the hostile corpus
// (tests/support/hostile_corpus.hpp) under each error-handler policy, on the real broker
// (issue 12). Every record is accounted for: a record the job can take is an effort on the
// board and writes exactly one update; any other goes to the dead-letter topic with its reason
// (dead_letter) or is skipped, logged and counted in /metrics (log_and_continue); under `fail`
// the job stops at the first one, naming the policy. The evidence is the group's committed
// offsets at the input's end, the topics read read_committed to their end and the job's
// counters, never a pause.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "broker_env.hpp"
#include "hostile_corpus.hpp"
#include "http_client.hpp"
#include "job_fixture.hpp"
#include "text.hpp"
#include "sluice/sluice.hpp"

using namespace std::chrono_literals;
using sluice::test::job_process;

namespace {

using sluice::test::file_text;
using sluice::test::header_text;

/// The sum of `family`'s samples whose labels contain `label`, in Prometheus text.
double metric_sum(const std::string& text, const std::string& family, const std::string& label) {
  double sum = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with(family + "{") && line.find(label) != std::string::npos)
      sum += std::stod(line.substr(line.rfind(' ') + 1));
  return sum;
}

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// The segment every corpus record claims (its `segment_id`); the job takes a record only
/// when its key is that segment.
constexpr const char* segment = "k";

class leaderboard_hostile_corpus : public sluice::test::job_fixture, public ::testing::WithParamInterface<const char*> {
 protected:
  void SetUp() override {
    job_fixture::SetUp();
    if (work_.empty()) return;
    app_id_ = sluice::test::unique_name("lb-hostile");
    input_ = sluice::test::unique_name("lb-hostile-in");
    updates_ = sluice::test::unique_name("lb-hostile-updates");
    dead_letter_ = app_id_ + "-dlq";
    sluice::topic_admin admin(cfg_);
    admin.create_topic(input_, 1);  // one partition: `fail` stops at a known record
    admin.create_topic(updates_, 1);
  }

  std::string app_id_, input_, updates_, dead_letter_;
};

}  // namespace

TEST_P(leaderboard_hostile_corpus, every_record_is_accounted_for) {
  SLUICE_REQUIRE_BROKER();
  const std::string policy = GetParam();
  // The effort id first: the corpus makes it unique per record, so each record the job takes
  // is a new effort. Each such record gets a user of its own below, so it writes one update.
  auto corpus = sluice::test::hostile_corpus({{"effort_id", R"("e")"},
                                              {"segment_id", "\"" + std::string(segment) + "\""},
                                              {"user_id", R"("u")"},
                                              {"elapsed_ms", "600000"},
                                              {"started_at_ms", "1700000000000"},
                                              {"version", "1"}});
  // What the job must take: a readable JSON object of the effort fields whose record key is
  // the segment it names (a null or empty key is a processing error, like any other).
  std::vector<bool> takes(corpus.size());
  sluice::topic_writer writer(cfg_);
  std::optional<std::size_t> first_refused;
  std::size_t refused = 0;
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    auto& r = corpus[i];
    takes[i] = r.readable && r.key == segment;
    if (r.readable && r.value) {
      const auto at = r.value->find(R"("user_id":"u")");
      ASSERT_NE(at, std::string::npos) << r.name;
      r.value->replace(at, 13, "\"user_id\":\"u" + std::to_string(i) + "\"");
    }
    if (!takes[i]) {
      ++refused;
      if (!first_refused) first_refused = i;
    }
    std::optional<std::string_view> k, v;
    if (r.key) k = *r.key;
    if (r.value) v = *r.value;
    writer.send_raw(input_, k, v, now_ms(), {{"corpus.item", std::to_string(i)}}, 0);
  }
  writer.flush();
  ASSERT_GT(refused, 0u);
  ASSERT_LT(refused, corpus.size());

  const auto port = sluice::test::free_port();
  auto& job = start_job(SLUICE_LEADERBOARD_BIN, {{"application.id", app_id_},
                                                 {"input.topic", input_},
                                                 {"updates.topic", updates_},
                                                 {"processing.error.handler", policy},
                                                 {"commit.interval.ms", "100"},
                                                 {"consumer.session.timeout.ms", "6000"},
                                                 {"instance.id", "a"},
                                                 {"application.server", "127.0.0.1:" + std::to_string(port)}});

  auto item_of = [](const sluice::raw_message& m) { return std::stoul(header_text(m, "corpus.item")); };
  // An update names its user u<item>: the record it came from.
  auto update_item = [](const sluice::raw_message& m) -> std::optional<std::size_t> {
    const std::string v = m.value.value_or("");
    const std::string needle = R"("user_id":"u)";
    auto at = v.find(needle);
    if (at == std::string::npos) return std::nullopt;
    return std::stoul(v.substr(at + needle.size()));
  };
  if (policy == "fail") {
    auto st = job.wait_exit(120s);
    ASSERT_TRUE(st.has_value()) << "the job runs on under processing.error.handler=fail";
    EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 1) << sluice::test::describe_exit(st);
    auto log = file_text(job.log());
    EXPECT_NE(log.find("processing error on record " + input_ + "[0]@" + std::to_string(*first_refused)),
              std::string::npos)
        << log;
    EXPECT_NE(log.find("processing.error.handler=fail stops the job"), std::string::npos) << log;
    for (const auto& m : read_all({updates_})) {
      auto i = update_item(m);
      ASSERT_TRUE(i.has_value()) << m.value.value_or("<null>");
      EXPECT_LT(*i, *first_refused) << "an update past the stop";
    }
    return;
  }

  expect_consumed(job, app_id_, {{input_, 1}});
  ASSERT_FALSE(HasFatalFailure());
  // Every record is settled (committed): the counters are final.
  const std::string metrics = sluice::test::http_get(port, "/metrics").body;
  const auto label = std::string("reason=\"processing\"");
  const bool dead_letters = policy == "dead_letter";  // the topic exists only then
  // Dead-lettered records are a subset of the skipped ones (docs/operations.md).
  EXPECT_EQ(metric_sum(metrics, "sluice_records_skipped_total", label), double(refused)) << metrics;
  EXPECT_EQ(metric_sum(metrics, "sluice_records_dead_lettered_total", label), dead_letters ? double(refused) : 0.0)
      << metrics;
  EXPECT_EQ(metric_sum(metrics, "sluice_leaderboard_applied_total", ""), double(corpus.size() - refused)) << metrics;
  stop_cleanly(job);
  std::map<std::size_t, int> updated, dead;
  for (const auto& m : read_all({updates_})) {
    auto i = update_item(m);
    ASSERT_TRUE(i.has_value()) << m.value.value_or("<null>");
    ++updated[*i];
    EXPECT_EQ(m.key, segment);
    EXPECT_NE(m.value->find(R"("previous":null)"), std::string::npos) << *m.value;
  }
  for (const auto& m : dead_letters ? read_all({dead_letter_}) : std::vector<sluice::raw_message>{}) {
    auto i = item_of(m);
    ++dead[i];
    EXPECT_EQ(header_text(m, "sluice.error.kind"), "processing") << corpus[i].name;
    EXPECT_NE(header_text(m, "sluice.error.message").find("leaderboard: "), std::string::npos)
        << corpus[i].name << ": " << header_text(m, "sluice.error.message");
    EXPECT_EQ(header_text(m, "sluice.source.offset"), std::to_string(i)) << corpus[i].name;
  }
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    if (takes[i]) {
      EXPECT_EQ(updated[i], 1) << corpus[i].name << ": a record the job takes writes one update";
      EXPECT_EQ(dead[i], 0) << corpus[i].name;
    } else {
      EXPECT_EQ(updated[i], 0) << corpus[i].name << ": a refused record writes nothing";
      EXPECT_EQ(dead[i], dead_letters ? 1 : 0) << corpus[i].name;
    }
  }
  if (policy == "log_and_continue") {
    // The first ten skips are logged one by one with the running count (then every 1,000th;
    // the counter above has them all).
    auto log = file_text(job.log());
    const auto logged = std::min<std::size_t>(refused, 10);
    EXPECT_NE(log.find("(processing error, " + std::to_string(logged) + " so far)"), std::string::npos) << log;
    EXPECT_EQ(log.find("(processing error, " + std::to_string(logged + 1) + " so far)"), std::string::npos) << log;
  }
}

INSTANTIATE_TEST_SUITE_P(policies, leaderboard_hostile_corpus,
                         ::testing::Values("fail", "log_and_continue", "dead_letter"),
                         [](const auto& info) { return std::string(info.param); });
