// The sluice-leaderboard job against a real broker, checked against the reference model of
// tests/support/leaderboard_model.hpp (no sluice code in it): keep the latest version of
// every effort; drop deleted ones; per (segment, board, user) the live effort first by
// (elapsed_ms, started_at_ms, effort_id).
// The events (random efforts on 4 partitions, several versions each sent out of order,
// duplicates, deletes, a late update after a delete) go to the job as a child process; the
// boards the job holds are read back from its updates topic (read_committed): the last
// `current` of each (segment, board, user) is its entry. They must equal the model's, after a
// clean run and after SIGKILL restarts under exactly-once. Two instances then answer the HTTP
// endpoints (entries, neighbours, every page of 10 segments) with the model's ranks, whichever
// instance is asked (the other forwards to the owner).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "broker_env.hpp"
#include "group_offsets.hpp"
#include "http_client.hpp"
#include "job_fixture.hpp"
#include "job_process.hpp"
#include "leaderboard_model.hpp"
#include "test_seed.hpp"
#include "sluice/sluice.hpp"

using namespace std::chrono_literals;
using sluice::test::job_process;
using json = nlohmann::json;

namespace {

using steady = std::chrono::steady_clock;

constexpr int segments = 200;
constexpr int users = 2000;

using event = sluice::test::leaderboard_event;
using boards_map = sluice::test::leaderboard_entries;
using model_entry = sluice::test::leaderboard_ranked_entry;

std::string url_encode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~')
      out.push_back(static_cast<char>(c));
    else
      out += {'%', hex[c >> 4], hex[c & 15]};
  }
  return out;
}

/// Whether an HTTP entry equals the model's.
bool same_entry(const json& got, const model_entry& want) {
  return got.is_object() && got.value("user_id", "") == want.user && got.value("effort_id", "") == want.effort &&
         got.value("elapsed_ms", std::int64_t{-1}) == want.elapsed &&
         got.value("started_at_ms", std::int64_t{-1}) == want.started &&
         got.value("rank", std::uint64_t{0}) == want.rank;
}

class leaderboard_integration : public sluice::test::job_fixture {
 protected:
  void SetUp() override {
    job_fixture::SetUp();
    if (work_.empty()) return;
    sluice::test::seed_test_rng(rng_, work_);
    app_id_ = sluice::test::unique_name("lb-it");
    input_ = sluice::test::unique_name("lb-efforts");
    updates_ = sluice::test::unique_name("lb-updates");
    sluice::topic_admin admin(cfg_);
    admin.create_topic(input_, 4);
    admin.create_topic(updates_, 4);
    writer_ = std::make_unique<sluice::topic_writer>(cfg_);
    generate(200'000);
  }

  /// At least `n` events (sluice::test::leaderboard_events: out of order, duplicated,
  /// deleted) and the model's boards for them.
  void generate(std::size_t n) {
    events_ = sluice::test::leaderboard_events(n, rng_, {.segments = segments, .users = users});
    expected_ = sluice::test::leaderboard_reference(events_);
    std::cout << events_.size() << " events, model: " << expected_.size() << " board entries\n";
  }

  void feed(std::size_t n) {
    auto end = std::min(events_.size(), fed_ + n);
    for (; fed_ < end; ++fed_) {
      const auto& e = events_[fed_];
      json j = {{"effort_id", e.effort},   {"segment_id", e.segment},    {"user_id", e.user},
                {"elapsed_ms", e.elapsed}, {"started_at_ms", e.started}, {"version", e.version}};
      if (e.deleted) j["deleted"] = true;
      if (!e.gender.empty()) j["attributes"] = {{"gender", e.gender}};
      writer_->send_raw(input_, e.segment, j.dump());
    }
    writer_->flush();
  }

  job_process& start_job(const std::string& guarantee, const std::string& instance = "a") {
    if (!ports_.contains(instance)) ports_[instance] = sluice::test::free_port();
    return job_fixture::start_job(SLUICE_LEADERBOARD_BIN,
                                  {{"application.id", app_id_},
                                   {"input.topic", input_},
                                   {"updates.topic", updates_},
                                   {"leaderboard.boards", "gender"},
                                   {"state.dir", (work_ / ("state-" + instance)).string()},
                                   {"processing.guarantee", guarantee},
                                   {"commit.interval.ms", "100"},
                                   {"consumer.session.timeout.ms", "6000"},
                                   {"instance.id", instance},
                                   {"application.server", "127.0.0.1:" + std::to_string(ports_[instance])},
                                   {"poll.ms", "10"}});
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
      if (c.is_null())
        boards.erase(key);
      else
        boards[key] = {c["effort_id"].get<std::string>(), c["elapsed_ms"].get<std::int64_t>(),
                       c["started_at_ms"].get<std::int64_t>()};
    }
  }

  /// Polls the updates until the boards equal the model (the evidence that the job is done),
  /// the job exits, or `timeout` passes.
  bool wait_for_model(sluice::topic_reader& reader, boards_map& boards, std::vector<job_process*> jobs,
                      std::chrono::seconds timeout) {
    auto deadline = steady::now() + timeout;
    while (boards != expected_) {
      if (steady::now() > deadline) {
        ADD_FAILURE() << "after " << timeout.count() << " s the job's boards have " << boards.size()
                      << " entries, the model " << expected_.size();
        return false;
      }
      for (auto* job : jobs)
        if (!job->running()) {
          ADD_FAILURE() << job->log() << ": the job " << sluice::test::describe_exit(job->wait_exit(0ms));
          return false;
        }
      apply_updates(reader.poll(200ms), boards);
    }
    return true;
  }

  /// Reads the whole updates topic read_committed from the start and compares entry by entry.
  void expect_model_boards() {
    sluice::topic_reader reader(cfg_, {updates_}, sluice::isolation::read_committed);
    boards_map boards;
    apply_updates(reader.read_to_end(120s), boards);
    int shown = 0;
    for (const auto& [key, want] : expected_) {
      auto it = boards.find(key);
      if ((it == boards.end() || it->second != want) && ++shown <= 10)
        ADD_FAILURE() << std::get<0>(key) << "/" << std::get<1>(key) << "/" << std::get<2>(key) << ": job has "
                      << (it == boards.end() ? "no entry" : std::get<0>(it->second)) << ", model " << std::get<0>(want);
    }
    for (const auto& [key, got] : boards)
      if (!expected_.contains(key) && ++shown <= 10)
        ADD_FAILURE() << std::get<0>(key) << "/" << std::get<1>(key) << "/" << std::get<2>(key)
                      << ": the job has an entry the model does not";
    EXPECT_EQ(boards.size(), expected_.size());
    EXPECT_EQ(shown, 0) << "entries that differ from the reference model";
  }

  /// GET on instance `port`; a 503 (a partition moving, the group settling) is retried for up
  /// to 60 s, as a client told Retry-After would.
  sluice::test::http_reply get(std::uint16_t port, const std::string& target) {
    auto deadline = steady::now() + 60s;
    for (;;) {
      auto r = sluice::test::http_get(port, target);
      if (r.status != 503 || steady::now() > deadline) return r;
      std::this_thread::sleep_for(200ms);
    }
  }

  /// Waits until the job's group committed every input record: the boards the instances
  /// serve (committed state) then hold every event.
  void wait_until_consumed() {
    auto deadline = steady::now() + 120s;
    while (!sluice::test::group_at_end(
        sluice::test::group_progress(sluice::test::broker_bootstrap(), app_id_, input_, 4))) {
      ASSERT_LT(steady::now(), deadline) << "the job's group never committed the input's end";
      std::this_thread::sleep_for(200ms);
    }
  }

  /// Both instances serve: the group is stable with both in it, both ready.
  void wait_until_both_serve() {
    auto deadline = steady::now() + 120s;
    for (;;) {
      auto m = sluice::test::http_get(ports_["a"], "/metadata");
      auto j = json::parse(m.body, nullptr, false);
      bool ready = m.status == 200 && j.is_object() && j["group_state"] == "Stable" && j["instances"].size() == 2;
      for (auto& [name, port] : ports_) ready = ready && sluice::test::http_get(port, "/ready").status == 200;
      if (ready) return;
      ASSERT_LT(steady::now(), deadline) << "the two instances never both served: " << m.body;
      std::this_thread::sleep_for(200ms);
    }
  }

  /// The endpoints of both instances against the model: 1,000 sampled (segment, board, user)
  /// entries and neighbours, every page of 10 segments' boards, the 404s and the 400; the
  /// instance asked alternates, so about half the answers are forwarded to the owner.
  void expect_http_matches_model() {
    const auto model = sluice::test::leaderboard_ranked(expected_);
    std::vector<std::uint16_t> ports;
    for (auto& [name, port] : ports_) ports.push_back(port);
    ASSERT_EQ(ports.size(), 2u);
    std::size_t asked = 0, forwarded = 0, differ = 0;
    auto ask = [&](const std::string& target) {
      auto port = ports[asked++ % ports.size()];
      auto r = get(port, target);
      if (r.header("X-Sluice-Served-By") != "127.0.0.1:" + std::to_string(port)) ++forwarded;
      return r;
    };
    auto path = [](const std::string& segment, const std::string& board) {
      return "/leaderboards/" + url_encode(segment) + "/" + url_encode(board);
    };
    // 1,000 sampled entries, and the neighbours of the first 200.
    std::vector<std::tuple<std::string, std::string, std::size_t>> sample;  // segment, board, position
    for (const auto& [board, entries] : model)
      for (std::size_t i = 0; i < entries.size(); ++i) sample.emplace_back(board.first, board.second, i);
    std::shuffle(sample.begin(), sample.end(), rng_);
    sample.resize(std::min<std::size_t>(sample.size(), 1000));
    for (std::size_t k = 0; k < sample.size(); ++k) {
      const auto& [segment, board, i] = sample[k];
      const auto& entries = model.at({segment, board});
      const auto& want = entries[i];
      auto r = ask(path(segment, board) + "/users/" + url_encode(want.user));
      auto j = json::parse(r.body, nullptr, false);
      if (r.status != 200 || !j.is_object() || j["total"] != entries.size() || j["segment_id"] != segment ||
          j["board"] != board || !same_entry(j["entry"], want)) {
        if (++differ <= 10)
          ADD_FAILURE() << segment << "/" << board << "/" << want.user << ": " << r.status << " " << r.body
                        << "; model: rank " << want.rank << ", effort " << want.effort << ", total " << entries.size();
        continue;
      }
      if (k >= 200) continue;
      constexpr std::size_t n = 3;
      auto around = ask(path(segment, board) + "/users/" + url_encode(want.user) + "/around?n=" + std::to_string(n));
      auto a = json::parse(around.body, nullptr, false);
      const std::size_t from = i >= n ? i - n : 0, to = std::min(entries.size(), i + n + 1);
      bool ok = around.status == 200 && a.is_object() && a["entries"].size() == to - from;
      for (std::size_t x = from; ok && x < to; ++x) ok = same_entry(a["entries"][x - from], entries[x]);
      if (!ok && ++differ <= 10)
        ADD_FAILURE() << "around " << segment << "/" << board << "/" << want.user << ": " << around.status << " "
                      << around.body;
    }
    // Every page (limit 25) of every board of 10 segments.
    std::set<std::string> segments_checked;
    for (const auto& [segment, board, i] : sample) {
      if (segments_checked.size() == 10) break;
      segments_checked.insert(segment);
    }
    std::size_t pages = 0;
    for (const auto& [board_key, entries] : model) {
      if (!segments_checked.contains(board_key.first)) continue;
      for (std::size_t offset = 0; offset < entries.size(); offset += 25) {
        ++pages;
        auto r = ask(path(board_key.first, board_key.second) + "?offset=" + std::to_string(offset) + "&limit=25");
        auto j = json::parse(r.body, nullptr, false);
        const std::size_t count = std::min<std::size_t>(25, entries.size() - offset);
        bool ok = r.status == 200 && j.is_object() && j["total"] == entries.size() && j["entries"].size() == count;
        for (std::size_t x = 0; ok && x < count; ++x) ok = same_entry(j["entries"][x], entries[offset + x]);
        if (!ok && ++differ <= 10)
          ADD_FAILURE() << "page " << board_key.first << "/" << board_key.second << " offset " << offset << ": "
                        << r.status << " " << r.body;
      }
    }
    EXPECT_EQ(differ, 0u) << "answers that differ from the model, of " << asked;
    EXPECT_GT(forwarded, asked / 4) << "the instances should split the segments and forward to each other";
    std::cout << asked << " HTTP answers checked (" << pages << " pages of " << segments_checked.size()
              << " segments), " << forwarded << " forwarded to the owner\n";
    // Refusals, from either instance.
    const auto& [segment, board, i] = sample.front();
    for (auto port : ports) {
      auto missing = get(port, path(segment, board) + "/users/nobody");
      EXPECT_EQ(missing.status, 404) << missing.body;
      EXPECT_NE(missing.body.find("\"error\""), std::string::npos) << missing.body;
      EXPECT_EQ(get(port, path("no-such-segment", "overall") + "/users/u1").status, 404);
      auto too_many = get(port, path(segment, board) + "?limit=1001");
      EXPECT_EQ(too_many.status, 400);
      EXPECT_NE(too_many.body.find("above the maximum 1000"), std::string::npos) << too_many.body;
    }
  }

  std::map<std::string, std::uint16_t> ports_;  // instance -> application.server port
  std::mt19937 rng_;
  std::string app_id_, input_, updates_;
  std::unique_ptr<sluice::topic_writer> writer_;
  std::vector<event> events_;
  boards_map expected_;
  std::size_t fed_ = 0;
};

}  // namespace

TEST_F(leaderboard_integration, two_instances_converge_to_the_reference_model_and_answer_it_over_http) {
  SLUICE_REQUIRE_BROKER();
  auto& a = start_job("at_least_once", "a");
  auto& b = start_job("at_least_once", "b");
  feed(events_.size());
  sluice::topic_reader progress(cfg_, {updates_}, sluice::isolation::read_committed);
  boards_map boards;
  ASSERT_TRUE(wait_for_model(progress, boards, {&a, &b}, 240s));
  wait_until_consumed();
  wait_until_both_serve();
  expect_http_matches_model();
  stop_cleanly(a);
  stop_cleanly(b);
  expect_model_boards();
}

// Exactly-once with SIGKILLs while the job processes: each run is killed at a random moment
// after it committed some updates (an open transaction, uncommitted store writes), input
// keeps arriving, and the restarted job restores its stores (the ranked index included)
// from their changelogs. The committed updates must still give the model's boards, and two
// instances (the killed one restarted on its state, a second restoring from the changelogs)
// answer the model over HTTP.
TEST_F(leaderboard_integration, boards_match_the_model_across_sigkill_restarts_under_exactly_once) {
  SLUICE_REQUIRE_BROKER();
  constexpr int kills = 3;
  feed(30'000);
  sluice::topic_reader progress(cfg_, {updates_}, sluice::isolation::read_committed);
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
  auto& last = start_job("exactly_once", "a");
  auto& second = start_job("exactly_once", "b");
  ASSERT_TRUE(wait_for_model(progress, boards, {&last, &second}, 240s));
  wait_until_consumed();
  wait_until_both_serve();
  expect_http_matches_model();
  stop_cleanly(last);
  stop_cleanly(second);
  expect_model_boards();
}
