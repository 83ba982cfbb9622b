// The sluice-leaderboard job against a real broker, checked against a reference model written
// here (no sluice code in it): keep the latest version of every effort; drop deleted ones;
// per (segment, board, user) the live effort first by (elapsed_ms, started_at_ms, effort_id).
// The events (random efforts on 4 partitions, several versions each sent out of order,
// duplicates, deletes, a late update after a delete) go to the job as a child process; the
// boards the job holds are read back from its updates topic (read_committed): the last
// `current` of each (segment, board, user) is its entry. They must equal the model's, after a
// clean run and after SIGKILL restarts under exactly-once.
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
#include <tuple>
#include <vector>

#include "broker_env.hpp"
#include "job_process.hpp"
#include "sluice/sluice.hpp"

using namespace std::chrono_literals;
using sluice::test::job_process;
using json = nlohmann::json;

namespace {

using steady = std::chrono::steady_clock;

constexpr int segments = 200;
constexpr int users = 2000;

struct event {
  std::string effort, segment, user;
  std::int64_t elapsed = 0, started = 0, version = 0;
  bool deleted = false;
  std::string gender;  // empty: no attribute
};

/// (segment, board, user) -> (effort, elapsed, started)
using boards_map = std::map<std::tuple<std::string, std::string, std::string>,
                            std::tuple<std::string, std::int64_t, std::int64_t>>;

/// The definition: latest version per effort, live efforts only, best per user and board.
boards_map reference_boards(const std::vector<event>& events) {
  std::map<std::string, const event*> latest;
  for (const auto& e : events) {
    auto& l = latest[e.effort];
    if (l == nullptr || e.version > l->version) l = &e;
  }
  boards_map out;
  for (const auto& [id, e] : latest) {
    if (e->deleted) continue;
    std::vector<std::string> on{"overall"};
    if (!e->gender.empty()) on.push_back("gender=" + e->gender);
    for (const auto& b : on) {
      auto key = std::tuple{e->segment, b, e->user};
      auto candidate = std::tuple{e->elapsed, e->started, e->effort};
      auto it = out.find(key);
      if (it == out.end() ||
          candidate < std::tuple{std::get<1>(it->second), std::get<2>(it->second), std::get<0>(it->second)})
        out[key] = {e->effort, e->elapsed, e->started};
    }
  }
  return out;
}

class leaderboard_integration : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sluice::test::broker_bootstrap().empty()) return;
    auto seed = std::random_device{}();
    if (const char* s = std::getenv("SLUICE_TEST_SEED")) seed = static_cast<unsigned>(std::stoul(s));
    rng_.seed(seed);
    work_ = std::filesystem::temp_directory_path() / sluice::test::unique_name("sluice-leaderboard-it");
    std::filesystem::create_directories(work_);
    std::cout << "seed " << seed << " (SLUICE_TEST_SEED reproduces it), work dir " << work_ << "\n";
    cfg_.set("bootstrap.servers", sluice::test::broker_bootstrap());
    app_id_ = sluice::test::unique_name("lb-it");
    input_ = sluice::test::unique_name("lb-efforts");
    updates_ = sluice::test::unique_name("lb-updates");
    sluice::topic_admin admin(cfg_);
    admin.create_topic(input_, 4);
    admin.create_topic(updates_, 4);
    writer_ = std::make_unique<sluice::topic_writer>(cfg_);
    generate(200'000);
  }

  void TearDown() override {
    jobs_.clear();
    if (work_.empty()) return;
    if (HasFailure() || std::getenv("SLUICE_KEEP_LOGS")) {
      for (const auto& log : logs_)
        std::cout << "---- last lines of " << log << " ----\n" << sluice::test::last_lines(log, 25) << "\n";
      std::cout << "logs and state kept in " << work_ << "\n";
    } else {
      std::error_code ec;
      std::filesystem::remove_all(work_, ec);
    }
  }

  /// At least `n` events: efforts with 1-4 versions each sent in a shuffled order (out of
  /// order), ~8 % of them ending deleted (some deletes sent before older updates), ~5 %
  /// duplicates; events of different efforts interleaved at random.
  void generate(std::size_t n) {
    std::uniform_int_distribution<int> seg(0, segments - 1), usr(0, users - 1), pct(0, 99), elapsed(60, 900);
    std::vector<std::vector<event>> per_effort;
    std::size_t total = 0;
    for (int id = 0; total < n; ++id) {
      std::vector<event> versions;
      event base{"e" + std::to_string(id), "s" + std::to_string(seg(rng_)), "u" + std::to_string(usr(rng_))};
      const int count = 1 + pct(rng_) % 4;
      for (int v = 1; v <= count; ++v) {
        event e = base;
        e.version = v;
        e.elapsed = elapsed(rng_) * 1000;  // whole seconds: ties are common
        e.started = 1'700'000'000'000 + pct(rng_) * 1000;
        if (pct(rng_) < 60) e.gender = pct(rng_) < 50 ? "F" : "M";
        versions.push_back(e);
      }
      if (pct(rng_) < 8) {
        event d = versions.back();
        d.version = count + 1;
        d.deleted = true;
        versions.push_back(d);
      }
      std::shuffle(versions.begin(), versions.end(), rng_);
      if (pct(rng_) < 5) versions.push_back(versions[static_cast<std::size_t>(pct(rng_)) % versions.size()]);
      total += versions.size();
      per_effort.push_back(std::move(versions));
    }
    // Interleave: repeatedly take the next event of a random effort that has some left.
    std::vector<std::size_t> next(per_effort.size(), 0), open(per_effort.size());
    for (std::size_t i = 0; i < open.size(); ++i) open[i] = i;
    while (!open.empty()) {
      std::size_t pick = std::uniform_int_distribution<std::size_t>(0, open.size() - 1)(rng_);
      auto e = open[pick];
      events_.push_back(per_effort[e][next[e]++]);
      if (next[e] == per_effort[e].size()) {
        open[pick] = open.back();
        open.pop_back();
      }
    }
    expected_ = reference_boards(events_);
    std::cout << events_.size() << " events, " << per_effort.size() << " efforts, model: " << expected_.size()
              << " board entries\n";
  }

  void feed(std::size_t n) {
    auto end = std::min(events_.size(), fed_ + n);
    for (; fed_ < end; ++fed_) {
      const auto& e = events_[fed_];
      json j = {{"effort_id", e.effort}, {"segment_id", e.segment}, {"user_id", e.user},
                {"elapsed_ms", e.elapsed}, {"started_at_ms", e.started}, {"version", e.version}};
      if (e.deleted) j["deleted"] = true;
      if (!e.gender.empty()) j["attributes"] = {{"gender", e.gender}};
      writer_->send_raw(input_, e.segment, j.dump());
    }
    writer_->flush();
  }

  job_process& start_job(const std::string& guarantee) {
    auto log = work_ / ("run" + std::to_string(logs_.size()) + ".log");
    logs_.push_back(log);
    std::vector<std::string> args = {SLUICE_LEADERBOARD_BIN};
    auto set = [&](const std::string& k, const std::string& v) {
      args.push_back("--set");
      args.push_back(k + "=" + v);
    };
    set("bootstrap.servers", sluice::test::broker_bootstrap());
    set("application.id", app_id_);
    set("input.topic", input_);
    set("updates.topic", updates_);
    set("leaderboard.boards", "gender");
    set("state.dir", (work_ / "state").string());
    set("processing.guarantee", guarantee);
    set("commit.interval.ms", "100");
    set("consumer.session.timeout.ms", "6000");
    set("instance.id", "a");
    jobs_.push_back(std::make_unique<job_process>(args, log));
    return *jobs_.back();
  }

  /// Applies update records to `boards` (the last `current` per key wins; null removes).
  static void apply_updates(const std::vector<sluice::raw_message>& batch, boards_map& boards) {
    for (const auto& m : batch) {
      auto j = json::parse(m.value.value_or(""), nullptr, /*allow_exceptions=*/false);
      if (!j.is_object() || !j.contains("current")) {
        ADD_FAILURE() << "unexpected update: " << m.value.value_or("<null>");
        continue;
      }
      auto key = std::tuple{j["segment_id"].get<std::string>(), j["board"].get<std::string>(),
                            j["user_id"].get<std::string>()};
      const auto& c = j["current"];
      if (c.is_null()) boards.erase(key);
      else boards[key] = {c["effort_id"].get<std::string>(), c["elapsed_ms"].get<std::int64_t>(),
                          c["started_at_ms"].get<std::int64_t>()};
    }
  }

  /// Polls the updates until the boards equal the model (the evidence that the job is done),
  /// the job exits, or `timeout` passes.
  bool wait_for_model(sluice::topic_reader& reader, boards_map& boards, job_process& job,
                      std::chrono::seconds timeout) {
    auto deadline = steady::now() + timeout;
    while (boards != expected_) {
      if (steady::now() > deadline) {
        ADD_FAILURE() << "after " << timeout.count() << " s the job's boards have " << boards.size()
                      << " entries, the model " << expected_.size();
        return false;
      }
      if (!job.running()) {
        ADD_FAILURE() << job.log() << ": the job " << sluice::test::describe_exit(job.wait_exit(0ms));
        return false;
      }
      apply_updates(reader.poll(200ms), boards);
    }
    return true;
  }

  void stop_cleanly(job_process& job) {
    job.signal(SIGTERM);
    auto st = job.wait_exit(60s);
    EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << job.log() << ": " << sluice::test::describe_exit(st);
  }

  /// Reads the whole updates topic read_committed from the start and compares entry by entry.
  void expect_model_boards() {
    sluice::topic_reader reader(cfg_, {updates_}, /*read_committed=*/true);
    boards_map boards;
    apply_updates(reader.read_to_end(120s), boards);
    int shown = 0;
    for (const auto& [key, want] : expected_) {
      auto it = boards.find(key);
      if ((it == boards.end() || it->second != want) && ++shown <= 10)
        ADD_FAILURE() << std::get<0>(key) << "/" << std::get<1>(key) << "/" << std::get<2>(key) << ": job has "
                      << (it == boards.end() ? "no entry" : std::get<0>(it->second)) << ", model "
                      << std::get<0>(want);
    }
    for (const auto& [key, got] : boards)
      if (!expected_.contains(key) && ++shown <= 10)
        ADD_FAILURE() << std::get<0>(key) << "/" << std::get<1>(key) << "/" << std::get<2>(key)
                      << ": the job has an entry the model does not";
    EXPECT_EQ(boards.size(), expected_.size());
    EXPECT_EQ(shown, 0) << "entries that differ from the reference model";
  }

  sluice::config cfg_;
  std::mt19937 rng_;
  std::filesystem::path work_;
  std::string app_id_, input_, updates_;
  std::unique_ptr<sluice::topic_writer> writer_;
  std::vector<event> events_;
  boards_map expected_;
  std::size_t fed_ = 0;
  std::vector<std::unique_ptr<job_process>> jobs_;
  std::vector<std::filesystem::path> logs_;
};

}  // namespace

TEST_F(leaderboard_integration, job_converges_to_the_boards_of_an_independent_reference_model) {
  SLUICE_REQUIRE_BROKER();
  auto& job = start_job("at_least_once");
  feed(events_.size());
  sluice::topic_reader progress(cfg_, {updates_}, /*read_committed=*/true);
  boards_map boards;
  ASSERT_TRUE(wait_for_model(progress, boards, job, 240s));
  stop_cleanly(job);
  expect_model_boards();
}

// Exactly-once with SIGKILLs while the job processes: each run is killed at a random moment
// after it committed some updates (an open transaction, uncommitted store writes), input
// keeps arriving, and the restarted job restores its stores (the ranked index included)
// from their changelogs. The committed updates must still give the model's boards.
TEST_F(leaderboard_integration, boards_match_the_model_across_sigkill_restarts_under_exactly_once) {
  SLUICE_REQUIRE_BROKER();
  constexpr int kills = 3;
  feed(30'000);
  sluice::topic_reader progress(cfg_, {updates_}, /*read_committed=*/true);
  boards_map boards;
  std::uniform_int_distribution<int> delay_ms(200, 1500);
  for (int round = 0; round < kills; ++round) {
    auto& job = start_job("exactly_once");
    auto deadline = steady::now() + 90s;
    std::size_t read = 0;
    while (read == 0 && job.running() && steady::now() < deadline) {
      if (fed_ < events_.size()) feed(1000);
      auto batch = progress.poll(100ms);
      read += batch.size();
      apply_updates(batch, boards);
    }
    ASSERT_GT(read, 0u) << "round " << round << ": no committed update within 90 s ("
                        << sluice::test::describe_exit(job.wait_exit(0ms)) << ")";
    auto kill_at = steady::now() + std::chrono::milliseconds(delay_ms(rng_));
    while (steady::now() < kill_at) {
      if (fed_ < events_.size()) feed(1000);
      apply_updates(progress.poll(50ms), boards);
    }
    ASSERT_TRUE(job.running()) << "round " << round << ": the job " << sluice::test::describe_exit(job.wait_exit(0ms));
    job.signal(SIGKILL);
    auto st = job.wait_exit(30s);
    ASSERT_TRUE(st && WIFSIGNALED(*st) && WTERMSIG(*st) == SIGKILL) << sluice::test::describe_exit(st);
    std::cout << "round " << round << ": killed, " << fed_ << " events fed\n";
  }
  feed(events_.size());
  auto& last = start_job("exactly_once");
  ASSERT_TRUE(wait_for_model(progress, boards, last, 240s));
  stop_cleanly(last);
  expect_model_boards();
}
