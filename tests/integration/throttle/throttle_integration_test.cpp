// The sluice-throttle job against a real broker, checked against the reference model of the
// throttle's definition in tests/support/throttle_model.hpp (no sluice code in the model):
//   effective time t = max(record timestamp, effective time of the key's previous record);
//   a record passes iff fewer than `limit` records of its key passed with effective time in
//   (t - window, t].
// The job runs as a child process (posix_spawn) with per-workflow rules from a rules topic,
// the throttle key from the JSON fields workflow,recipient and a throttled topic. Every
// record carries a unique id; the test compares, id by id, what went to the output topic
// and to the throttled topic with the model's decisions. Records of one throttle key share
// a record key, hence a partition, so the job sees them in produce order, as the model does.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "broker_env.hpp"
#include "job_fixture.hpp"
#include "job_process.hpp"
#include "throttle_model.hpp"
#include "test_seed.hpp"
#include "sluice/sluice.hpp"

using namespace std::chrono_literals;
using sluice::test::job_process;

namespace {

using steady = std::chrono::steady_clock;

constexpr std::int64_t default_window_ms = 5000;
constexpr std::int64_t default_limit = 3;
constexpr int workflows = 20;
constexpr int recipients = 50;  // 20 x 50 = 1,000 throttle keys

using rule = sluice::test::throttle_rule;

/// One input record as generated.
struct input_record {
  int id;
  int workflow;
  int recipient;
  std::int64_t timestamp;
};

std::string workflow_name(int w) { return "wf" + std::to_string(w); }
std::string recipient_name(int r) { return "user" + std::to_string(r); }

/// What the job emitted for one id.
struct observed {
  int passed = 0;
  int throttled = 0;
  std::string reason;  // the sluice-throttle-reason header of a throttled copy
};

class throttle_integration : public sluice::test::job_fixture {
 protected:
  void SetUp() override {
    job_fixture::SetUp();  // the work directory and cfg_'s bootstrap.servers
    if (work_.empty()) return;
    sluice::test::seed_test_rng(rng_, work_);
    app_id_ = sluice::test::unique_name("thr-it");
    input_ = sluice::test::unique_name("thr-in");
    output_ = sluice::test::unique_name("thr-out");
    throttled_ = sluice::test::unique_name("thr-throttled");
    rules_topic_ = sluice::test::unique_name("thr-rules");
    sluice::topic_admin admin(cfg_);
    admin.create_topic(input_, 4);
    admin.create_topic(output_, 4);
    admin.create_topic(throttled_, 4);
    admin.create_topic(rules_topic_, 1, sluice::cleanup_policy::compact);
    writer_ = std::make_unique<sluice::topic_writer>(cfg_);
    write_rules();
    generate(200'000);
  }

  /// Rules for most workflows (random windows 1 s .. 60 s and limits 1 .. 20), some with a
  /// field left out, one out of range (falls back to the defaults), some workflows without.
  void write_rules() {
    const std::int64_t windows[] = {1000, 2000, 5000, 10000, 30000, 60000};
    const std::int64_t limits[] = {1, 2, 3, 5, 10, 20};
    std::uniform_int_distribution<int> pick(0, 5);
    for (int w = 0; w < workflows; ++w) {
      rule r{default_window_ms, default_limit};
      std::string json;
      if (w % 5 == 4) {
        // no rule: defaults
      } else if (w == 3) {
        json = R"({"window_ms": 500, "limit": 2})";  // window below 1 s: invalid, defaults apply
      } else if (w == 7) {
        r.limit = 8;
        json = R"({"limit": 8})";  // window left out: the job's window
      } else if (w == 11) {
        r.window_ms = 20000;
        json = R"({"window_ms": 20000})";  // limit left out: the job's limit
      } else {
        r = {windows[pick(rng_)], limits[pick(rng_)]};
        json = nlohmann::json{{"window_ms", r.window_ms}, {"limit", r.limit}}.dump();
      }
      rules_[w] = r;
      if (!json.empty()) writer_->send_raw(rules_topic_, workflow_name(w), json);
    }
    writer_->flush();
  }

  /// `n` records over the 1,000 keys (half of them on 50 hot keys), timestamps spread over
  /// 100 s ending at the wall clock, a fifth of them late by up to 8 s.
  void generate(int n) {
    auto now_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    const std::int64_t span_ms = 100'000, base = now_ms - span_ms;
    std::uniform_int_distribution<int> any_key(0, workflows * recipients - 1), hot_key(0, 49), coin(0, 9),
        late(0, 8000);
    records_.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      int key = coin(rng_) < 5 ? any_key(rng_) : hot_key(rng_) * 19;  // 50 hot keys, over every workflow
      std::int64_t ts = base + span_ms * i / n;
      if (coin(rng_) < 2) ts -= late(rng_);
      records_.push_back({i, key % workflows, key / workflows, ts});
    }
    sluice::test::throttle_model<int> model;
    expected_passed_.resize(records_.size());
    for (const auto& r : records_)
      expected_passed_[static_cast<std::size_t>(r.id)] =
          model.offer(r.workflow * recipients + r.recipient, r.timestamp, rules_.at(r.workflow));
    auto passes = std::count(expected_passed_.begin(), expected_passed_.end(), true);
    std::cout << n << " records, model: " << passes << " pass, " << (n - passes) << " throttled\n";
  }

  /// Sends records_[fed_, fed_ + n) and flushes.
  void feed(std::size_t n) {
    auto end = std::min(records_.size(), fed_ + n);
    for (; fed_ < end; ++fed_) {
      const auto& r = records_[fed_];
      auto wf = workflow_name(r.workflow), rc = recipient_name(r.recipient);
      auto value = R"({"id":)" + std::to_string(r.id) + R"(,"workflow":")" + wf + R"(","recipient":")" + rc +
                   R"(","body":"hello"})";
      writer_->send_raw(input_, wf + "/" + rc, value, r.timestamp);
    }
    writer_->flush();
  }

  job_process& start_job(const std::string& guarantee) {
    return job_fixture::start_job(SLUICE_THROTTLE_BIN, {{"application.id", app_id_},
                                                        {"input.topic", input_},
                                                        {"output.topic", output_},
                                                        {"throttled.topic", throttled_},
                                                        {"throttle.window.ms", std::to_string(default_window_ms)},
                                                        {"throttle.limit", std::to_string(default_limit)},
                                                        {"throttle.key.fields", "workflow,recipient"},
                                                        {"throttle.rules.topic", rules_topic_},
                                                        {"throttle.rules.max.window.ms", "60000"},
                                                        {"processing.guarantee", guarantee},
                                                        {"commit.interval.ms", "100"},
                                                        {"consumer.session.timeout.ms", "6000"},
                                                        {"instance.id", "a"}});
  }

  /// Adds read records to `seen` (by id) and returns how many.
  static std::size_t collect(const std::vector<sluice::raw_message>& batch, const std::string& throttled_topic,
                             std::map<int, observed>& seen) {
    for (const auto& m : batch) {
      if (!m.value) {
        ADD_FAILURE() << "a record without a value in " << m.topic;
        continue;
      }
      auto j = nlohmann::json::parse(*m.value, nullptr, /*allow_exceptions=*/false);
      if (!j.is_object() || !j.contains("id")) {
        ADD_FAILURE() << "unexpected value in " << m.topic << ": " << *m.value;
        continue;
      }
      auto& o = seen[j["id"].get<int>()];
      if (m.topic == throttled_topic) {
        ++o.throttled;
        for (const auto& [k, v] : m.headers)
          if (k == "sluice-throttle-reason") o.reason = v.value_or("");
      } else {
        ++o.passed;
      }
    }
    return batch.size();
  }

  /// Polls `reader` until `total` records were read, the job exits, or `timeout` passes.
  bool wait_for_all(sluice::topic_reader& reader, std::map<int, observed>& seen, std::size_t& count, std::size_t total,
                    job_process& job, std::chrono::seconds timeout) {
    auto deadline = steady::now() + timeout;
    while (count < total) {
      if (steady::now() > deadline) {
        ADD_FAILURE() << "after " << timeout.count() << " s only " << count << " of " << total << " decisions";
        return false;
      }
      if (!job.running()) {
        ADD_FAILURE() << job.log() << ": the job " << sluice::test::describe_exit(job.wait_exit(0ms));
        return false;
      }
      count += collect(reader.poll(200ms), throttled_, seen);
    }
    return true;
  }

  /// Reads both outputs read_committed to their end and checks every id against the model:
  /// exactly one copy, in the output topic iff the model passes it, and a throttled copy's
  /// header names the key and the rule the model used.
  void expect_reference_decisions() {
    sluice::topic_reader reader(cfg_, {output_, throttled_}, sluice::isolation::read_committed);
    std::map<int, observed> seen;
    collect(reader.read_to_end(120s), throttled_, seen);
    int wrong = 0, missing = 0, duplicated = 0, bad_reason = 0;
    std::size_t passed = 0;
    for (const auto& r : records_) {
      auto it = seen.find(r.id);
      bool want_pass = expected_passed_[static_cast<std::size_t>(r.id)];
      if (it == seen.end()) {
        if (++missing <= 5) ADD_FAILURE() << "record " << r.id << " is in neither output";
        continue;
      }
      const auto& o = it->second;
      if (o.passed + o.throttled != 1) {
        if (++duplicated <= 5)
          ADD_FAILURE() << "record " << r.id << ": " << o.passed << " passed and " << o.throttled
                        << " throttled copies";
        continue;
      }
      passed += static_cast<std::size_t>(o.passed);
      if ((o.passed == 1) != want_pass) {
        if (++wrong <= 10)
          ADD_FAILURE() << "record " << r.id << " (" << workflow_name(r.workflow) << "," << recipient_name(r.recipient)
                        << ", ts " << r.timestamp << "): job " << (o.passed ? "passed" : "throttled") << " it, model "
                        << (want_pass ? "passes" : "throttles") << " it";
        continue;
      }
      if (o.throttled) {
        const auto& rl = rules_.at(r.workflow);
        auto h = nlohmann::json::parse(o.reason, nullptr, false);
        bool ok =
            h.is_object() && h.value("key", "") == workflow_name(r.workflow) + "," + recipient_name(r.recipient) &&
            h.value("limit", std::int64_t{-1}) == rl.limit && h.value("window_ms", std::int64_t{-1}) == rl.window_ms;
        if (!ok && ++bad_reason <= 5) ADD_FAILURE() << "record " << r.id << ": header '" << o.reason << "'";
      }
    }
    EXPECT_EQ(seen.size(), records_.size()) << "ids read (an id never fed would be a bug)";
    EXPECT_EQ(missing, 0);
    EXPECT_EQ(duplicated, 0);
    EXPECT_EQ(wrong, 0) << "decisions that differ from the reference model";
    EXPECT_EQ(bad_reason, 0) << "throttled records whose sluice-throttle-reason header is wrong";
    auto want = static_cast<std::size_t>(std::count(expected_passed_.begin(), expected_passed_.end(), true));
    EXPECT_EQ(passed, want);
    std::cout << passed << " passed, " << (records_.size() - passed) << " throttled, as the model says\n";
  }

  std::mt19937 rng_;
  std::string app_id_, input_, output_, throttled_, rules_topic_;
  std::unique_ptr<sluice::topic_writer> writer_;
  std::map<int, rule> rules_;
  std::vector<input_record> records_;
  std::vector<bool> expected_passed_;
  std::size_t fed_ = 0;
};

}  // namespace

TEST_F(throttle_integration, job_matches_an_independent_reference_model) {
  SLUICE_REQUIRE_BROKER();
  auto& job = start_job("at_least_once");
  feed(records_.size());
  sluice::topic_reader progress(cfg_, {output_, throttled_}, sluice::isolation::read_committed);
  std::map<int, observed> seen;
  std::size_t count = 0;
  ASSERT_TRUE(wait_for_all(progress, seen, count, records_.size(), job, 150s));
  stop_cleanly(job);
  expect_reference_decisions();
}

// Exactly-once with SIGKILLs while the job processes: each run is killed at a random
// moment after it produced output (an open transaction, uncommitted store writes), input
// keeps arriving, and the restarted job restores its store from the changelog. The
// committed output must still be exactly the model's decisions, each record once.
TEST_F(throttle_integration, decisions_are_identical_across_sigkill_restarts_under_exactly_once) {
  SLUICE_REQUIRE_BROKER();
  constexpr int kills = 4;
  feed(40'000);
  sluice::topic_reader progress(cfg_, {output_, throttled_}, sluice::isolation::read_committed);
  std::map<int, observed> seen;
  std::size_t count = 0;
  std::uniform_int_distribution<int> delay_ms(200, 1500);
  int kills_while_processing = 0;
  for (int round = 0; round < kills; ++round) {
    auto& job = start_job("exactly_once");
    auto before = count;
    auto deadline = steady::now() + 90s;
    while (count == before && job.running() && steady::now() < deadline) {
      if (fed_ < records_.size()) feed(500);
      count += collect(progress.poll(100ms), throttled_, seen);
    }
    ASSERT_GT(count, before) << "round " << round << ": no committed output within 90 s ("
                             << sluice::test::describe_exit(job.wait_exit(0ms)) << ")";
    auto kill_at = steady::now() + std::chrono::milliseconds(delay_ms(rng_));
    auto at_start = count;
    while (steady::now() < kill_at) {
      if (fed_ < records_.size()) feed(500);
      count += collect(progress.poll(50ms), throttled_, seen);
    }
    ASSERT_TRUE(job.running()) << "round " << round << ": the job " << sluice::test::describe_exit(job.wait_exit(0ms));
    if (count > at_start) ++kills_while_processing;
    job.signal(SIGKILL);
    auto st = job.wait_exit(30s);
    ASSERT_TRUE(st && WIFSIGNALED(*st) && WTERMSIG(*st) == SIGKILL) << sluice::test::describe_exit(st);
    std::cout << "round " << round << ": killed after " << count << " committed decisions, " << fed_ << " fed\n";
  }
  EXPECT_GE(kills_while_processing, 3) << "kills that landed while the job was processing";
  feed(records_.size());
  auto& last = start_job("exactly_once");
  ASSERT_TRUE(wait_for_all(progress, seen, count, records_.size(), last, 150s));
  stop_cleanly(last);
  expect_reference_decisions();
}
