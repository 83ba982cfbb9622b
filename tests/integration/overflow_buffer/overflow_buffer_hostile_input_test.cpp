// The sluice-overflow-buffer job against the hostile corpus (tests/support/hostile_corpus.hpp:
// not JSON, wrong shapes, invalid UTF-8, null keys and values, ~1 MB values, huge numbers,
// deep nesting) under the error-handler policies that keep a job running: it keeps running
// and every record is accounted for — emitted once, or dead-lettered once with its reason,
// or skipped and counted — never lost, never emitted twice. The job reads only the optional
// fields ttl_ms and deliver_at_ms, so which records it refuses is its own business (a
// missing field is fine for it); the accounting is what is checked. The evidence is the
// group's committed offsets at the input's end and the topics read read_committed.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>

#include "hostile_corpus.hpp"
#include "job_fixture.hpp"
#include "text.hpp"
#include "sluice/sluice.hpp"

namespace {

using sluice::test::header_text;

using namespace std::chrono_literals;

class overflow_buffer_hostile : public sluice::test::job_fixture, public ::testing::WithParamInterface<const char*> {};

TEST_P(overflow_buffer_hostile, every_record_of_the_corpus_is_emitted_dead_lettered_or_counted_once) {
  SLUICE_REQUIRE_BROKER();
  const std::string policy = GetParam();
  const auto app_id = sluice::test::unique_name("ovf-hostile");
  const auto input = app_id + "-in", output = app_id + "-out", expired = app_id + "-expired", rates = app_id + "-rates",
             dead_letter = app_id + "-dlq";
  {
    sluice::topic_admin admin(cfg_);
    admin.create_topic(input, 1, {{"max.message.bytes", "2000000"}});
    admin.create_topic(output, 1, {{"max.message.bytes", "2000000"}});
    admin.create_topic(expired, 1);
    admin.create_topic(rates, 1, sluice::cleanup_policy::compact);
    admin.create_topic(dead_letter, 1, {{"max.message.bytes", "2000000"}});
  }
  auto corpus = sluice::test::hostile_corpus({{"note", R"("x")"}});
  {
    sluice::config producer = cfg_;
    producer.set("producer.message.max.bytes", "2000000");
    sluice::topic_writer writer(producer);
    for (std::size_t i = 0; i < corpus.size(); ++i) {
      std::optional<std::string_view> k, v;
      if (corpus[i].key) k = *corpus[i].key;
      if (corpus[i].value) v = *corpus[i].value;
      writer.send_raw(input, k, v, 0, {{"corpus.item", std::to_string(i)}}, 0);
    }
    writer.flush();
  }
  auto& job = start_job(SLUICE_OVERFLOW_BUFFER_BIN, {{"application.id", app_id},
                                                     {"input.topic", input},
                                                     {"output.topic", output},
                                                     {"expired.topic", expired},
                                                     {"rates.topic", rates},
                                                     {"processing.error.handler", policy},
                                                     {"deserialization.error.handler", policy},
                                                     {"producer.message.max.bytes", "2000000"},
                                                     {"overflow.default.rate.per.second", "1000"},
                                                     {"commit.interval.ms", "100"},
                                                     {"consumer.session.timeout.ms", "6000"},
                                                     {"instance.id", "a"}});
  expect_consumed(job, app_id, {{input, 1}});
  ASSERT_FALSE(HasFatalFailure());
  // At rate 1,000/s every record the job takes goes out on the direct path, committed with
  // the input offsets the group reached.
  std::map<std::size_t, int> emitted, dead, lapsed;
  auto item_of = [](const sluice::raw_message& m) { return std::stoul(header_text(m, "corpus.item")); };
  const bool dead_letters = policy == "dead_letter";
  for (const auto& m : read_all(dead_letters ? std::vector<std::string>{output, expired, dead_letter}
                                             : std::vector<std::string>{output, expired})) {
    const auto i = item_of(m);
    if (m.topic == output) ++emitted[i];
    if (m.topic == expired) ++lapsed[i];
    if (m.topic == dead_letter) {
      ++dead[i];
      EXPECT_FALSE(header_text(m, "sluice.error.kind").empty()) << corpus[i].name << ": a dead letter names its kind";
      EXPECT_FALSE(header_text(m, "sluice.error.message").empty()) << corpus[i].name << ": and its reason";
    }
  }
  ASSERT_TRUE(job.running()) << "the job stopped on the corpus: " << sluice::test::last_lines(job.log(), 10);
  stop_cleanly(job);
  std::size_t refused = 0;
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    const int outcomes = emitted[i] + dead[i] + lapsed[i];
    EXPECT_LE(emitted[i], 1) << corpus[i].name << ": emitted twice";
    if (dead_letters) {
      EXPECT_EQ(outcomes, 1) << corpus[i].name << ": not accounted for exactly once";
    }
    if (outcomes == 0) ++refused;
    std::cout << corpus[i].name << ": "
              << (emitted[i]  ? "emitted"
                  : dead[i]   ? "dead-lettered"
                  : lapsed[i] ? "expired"
                              : "skipped")
              << "\n";
  }
  // Issue 12: the 80,000-level value was taken and emitted; it is refused past sluice's JSON
  // nesting limit like any JSON path's.
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    if (corpus[i].name.find("levels of nesting") == std::string::npos) continue;
    EXPECT_EQ(emitted[i], 0) << corpus[i].name << " was emitted";
    if (dead_letters) {
      EXPECT_EQ(dead[i], 1) << corpus[i].name;
    }
  }
  if (!dead_letters) {
    // Each skip is counted: the log's running count reaches the number of refused records.
    const auto log = sluice::test::last_lines(job.log(), 100000);
    ASSERT_GT(refused, 0u) << "the corpus has records no job can read";
    EXPECT_NE(log.find(std::to_string(refused) + " so far)"), std::string::npos) << log;
    EXPECT_EQ(log.find(std::to_string(refused + 1) + " so far)"), std::string::npos) << log;
  }
}

INSTANTIATE_TEST_SUITE_P(policies, overflow_buffer_hostile, ::testing::Values("dead_letter", "log_and_continue"));

}  // namespace
