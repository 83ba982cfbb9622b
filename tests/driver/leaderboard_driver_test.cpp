// The leaderboard topology through the TopologyTestDriver: the issue's cases one by one, and
// random event sets in 20 shuffled orders against a reference model written here (latest
// version per effort, best per user by sorting, competition ranks by counting; no sluice code).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "error_of.hpp"
#include "sluice/http.hpp"
#include "sluice/ranked_index_store.hpp"
#include "sluice/sluice.hpp"
#include "sluice/test_driver.hpp"
#include "sluice/topologies/leaderboard.hpp"

using sluice::testing::topology_test_driver;
using sluice::topologies::board_entry;
using sluice::topologies::leaderboard_options;
using json = nlohmann::json;

namespace {

struct effort {
  std::string id, segment, user;
  std::int64_t elapsed = 0, started = 0, version = 1;
  bool deleted = false;
  std::map<std::string, std::string> attributes{};
};

std::string to_json(const effort& e) {
  json j = {{"effort_id", e.id},       {"segment_id", e.segment},    {"user_id", e.user},
            {"elapsed_ms", e.elapsed}, {"started_at_ms", e.started}, {"version", e.version}};
  if (e.deleted) j["deleted"] = true;
  if (!e.attributes.empty()) j["attributes"] = e.attributes;
  return j.dump();
}

struct harness {
  explicit harness(leaderboard_options o = {}, int partitions = 1, bool rocksdb = false) : options(std::move(o)) {
    sluice::config c;
    c.set("processing.error.handler", "dead_letter");
    c.set("deserialization.error.handler", "dead_letter");
    this->partitions = partitions;
    driver = std::make_unique<topology_test_driver>(
        sluice::topologies::leaderboard_job_topology("efforts", "leaderboard-updates", options), std::move(c),
        sluice::testing::driver_options{.partitions = partitions, .rocksdb_stores = rocksdb});
  }

  void pipe(const effort& e) { driver->pipe_raw("efforts", e.segment, to_json(e), ++time); }
  void pipe_raw(std::optional<std::string> key, std::optional<std::string> value) {
    std::optional<std::string_view> k, v;
    if (key) k = *key;
    if (value) v = *value;
    driver->pipe_raw("efforts", k, v, ++time);
  }

  sluice::topologies::leaderboard_view view(std::int32_t partition = 0) {
    auto handle = driver->state_store<sluice::ranked_index_store>(options.board_store, partition);
    return sluice::topologies::leaderboard_view(handle.index());
  }

  std::vector<json> updates() {
    std::vector<json> out;
    auto& q = driver->records("leaderboard-updates");
    while (!q.empty()) {
      out.push_back(json::parse(*q.front().value));
      q.pop_front();
    }
    return out;
  }

  /// (user, effort, elapsed, rank) of a whole board, in order.
  /// The partition whose task holds `segment`'s boards (the one with entries), 0 if none.
  std::int32_t partition_of(const std::string& segment) {
    for (std::int32_t p = 0; p < partitions; ++p)
      if (view(p).size(segment, "overall") > 0) return p;
    return 0;
  }

  std::vector<std::tuple<std::string, std::string, std::int64_t, std::uint64_t>> board(const std::string& segment,
                                                                                       const std::string& b) {
    std::vector<std::tuple<std::string, std::string, std::int64_t, std::uint64_t>> out;
    for (const auto& e : view(partition_of(segment)).top(segment, b, 0, 1'000'000).entries)
      out.emplace_back(e.user_id, e.effort_id, e.elapsed_ms, e.rank);
    return out;
  }

  leaderboard_options options;
  int partitions = 1;
  std::unique_ptr<topology_test_driver> driver;
  std::int64_t time = 1'700'000'000'000;
};

json entry(const std::string& effort_id, std::int64_t elapsed, std::int64_t started, std::uint64_t rank) {
  return {{"effort_id", effort_id}, {"elapsed_ms", elapsed}, {"started_at_ms", started}, {"rank", rank}};
}

TEST(leaderboard, job_topology_refuses_to_read_its_own_updates_naming_the_setting) {
  auto msg = sluice::test::error_of([] { sluice::topologies::leaderboard_job_topology("efforts", "efforts", {}); },
                                    sluice::errc::invalid_topology);
  EXPECT_NE(msg.find("updates.topic 'efforts' is also input.topic"), std::string::npos) << msg;
  EXPECT_NO_THROW(sluice::topologies::leaderboard_job_topology("efforts", "", {}));
}

TEST(leaderboard, worked_example_ties_share_a_rank_and_the_next_rank_skips) {
  harness h;
  h.pipe({"e1", "s1", "alice", 612000, 1000});
  h.pipe({"e2", "s1", "bob", 598000, 2000});
  h.pipe({"e3", "s1", "carol", 612000, 500});  // ties alice; started earlier, so listed first
  h.pipe({"e4", "s1", "dave", 640000, 3000});
  auto v = h.view();
  auto page = v.top("s1", "overall", 0, 10);
  EXPECT_EQ(page.total, 4u);
  ASSERT_EQ(page.entries.size(), 4u);
  EXPECT_EQ(page.entries[0], (board_entry{"bob", "e2", 598000, 2000, 1}));
  EXPECT_EQ(page.entries[1], (board_entry{"carol", "e3", 612000, 500, 2}));
  EXPECT_EQ(page.entries[2], (board_entry{"alice", "e1", 612000, 1000, 2}));
  EXPECT_EQ(page.entries[3], (board_entry{"dave", "e4", 640000, 3000, 4}));
  EXPECT_EQ(v.entry("s1", "overall", "alice")->rank, 2u);
  EXPECT_EQ(v.entry("s1", "overall", "nobody"), std::nullopt);
  EXPECT_EQ(v.size("s1", "overall"), 4u);
  EXPECT_EQ(v.size("s2", "overall"), 0u);
  // A page starting inside a tie keeps the tie's rank.
  auto second = v.top("s1", "overall", 2, 2);
  ASSERT_EQ(second.entries.size(), 2u);
  EXPECT_EQ(second.entries[0].rank, 2u);
  EXPECT_EQ(second.entries[1].rank, 4u);
  auto near = v.around("s1", "overall", "carol", 1);
  ASSERT_EQ(near.size(), 3u);
  EXPECT_EQ(near[0].user_id, "bob");
  EXPECT_EQ(near[2].user_id, "alice");

  auto updates = h.updates();
  ASSERT_EQ(updates.size(), 4u);  // one per new entry; others whose rank shifted get none
  EXPECT_EQ(updates[0].dump(), json::parse(R"({"segment_id":"s1","board":"overall","user_id":"alice",
      "previous":null,"current":{"effort_id":"e1","elapsed_ms":612000,"started_at_ms":1000,"rank":1}})")
                                   .dump());
  EXPECT_EQ(updates[2]["current"], entry("e3", 612000, 500, 2));
  EXPECT_EQ(updates[3]["current"]["rank"], 4);
}

TEST(leaderboard, the_readme_worked_example_gives_the_documented_boards_and_updates) {
  leaderboard_options o;
  o.boards = {"gender"};
  harness h(o);
  h.pipe({"e1", "s1", "alice", 612000, 1000, 1, false, {{"gender", "F"}}});
  h.pipe({"e2", "s1", "bob", 598000, 2000, 1, false, {{"gender", "M"}}});
  h.pipe({"e3", "s1", "carol", 612000, 500, 1, false, {{"gender", "F"}}});
  h.pipe({"e4", "s1", "dave", 640000, 3000, 1});
  using rows = decltype(h.board("", ""));
  EXPECT_EQ(h.board("s1", "overall"), (rows{{"bob", "e2", 598000, 1},
                                            {"carol", "e3", 612000, 2},
                                            {"alice", "e1", 612000, 2},
                                            {"dave", "e4", 640000, 4}}));
  EXPECT_EQ(h.board("s1", "gender=F"), (rows{{"carol", "e3", 612000, 1}, {"alice", "e1", 612000, 1}}));
  (void)h.updates();
  h.pipe({"e5", "s1", "alice", 650000, 4000, 1, false, {{"gender", "F"}}});
  h.pipe({"e1", "s1", "alice", 612000, 1000, 1, false, {{"gender", "F"}}});
  EXPECT_TRUE(h.updates().empty());
  h.pipe({"e1", "s1", "alice", 612000, 1000, 2, true});
  auto updates = h.updates();
  ASSERT_EQ(updates.size(), 2u);
  std::map<std::string, json> by_board;
  for (auto& u : updates) by_board[u["board"]] = u;
  EXPECT_EQ(by_board["overall"]["previous"], entry("e1", 612000, 1000, 2));
  EXPECT_EQ(by_board["overall"]["current"], entry("e5", 650000, 4000, 4));
  EXPECT_EQ(by_board["gender=F"]["previous"]["rank"], 1);
  EXPECT_EQ(by_board["gender=F"]["current"]["rank"], 2);
  EXPECT_EQ(h.view().entry("s1", "overall", "dave")->rank, 3u);
}

TEST(leaderboard, update_records_keep_the_documented_field_order) {
  harness h;
  h.pipe({"e1", "s1", "u1", 100, 1});
  auto& q = h.driver->records("leaderboard-updates");
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(*q.front().key, "s1");
  EXPECT_EQ(*q.front().value, R"({"segment_id":"s1","board":"overall","user_id":"u1","previous":null,)"
                              R"("current":{"effort_id":"e1","elapsed_ms":100,"started_at_ms":1,"rank":1}})");
}

TEST(leaderboard, out_of_order_versions_keep_the_latest_and_count_the_stale) {
  harness h;
  h.pipe({"e1", "s1", "u1", 500, 1, 3});
  h.pipe({"e1", "s1", "u1", 400, 1, 1});  // older: ignored
  h.pipe({"e1", "s1", "u1", 450, 1, 2});  // older: ignored
  EXPECT_EQ(h.view().entry("s1", "overall", "u1")->elapsed_ms, 500);
  h.pipe({"e1", "s1", "u1", 300, 1, 4});
  EXPECT_EQ(h.view().entry("s1", "overall", "u1")->elapsed_ms, 300);
  EXPECT_EQ(h.updates().size(), 2u);
  EXPECT_EQ(h.driver->metrics().get_counter("sluice_leaderboard_stale_total", "task=\"0_0\"").value(), 2u);
}

TEST(leaderboard, duplicates_change_nothing_and_produce_no_update) {
  harness h;
  effort e{"e1", "s1", "u1", 500, 1, 1};
  h.pipe(e);
  h.pipe(e);
  h.pipe(e);
  EXPECT_EQ(h.updates().size(), 1u);
  EXPECT_EQ(h.view().size("s1", "overall"), 1u);
}

TEST(leaderboard, deleting_the_best_effort_falls_back_to_the_next_best) {
  harness h;
  h.pipe({"e1", "s1", "u1", 500, 1});
  h.pipe({"e2", "s1", "u1", 600, 2});
  h.pipe({"e3", "s1", "u1", 700, 3});
  h.pipe({"e9", "s1", "u2", 550, 4});
  EXPECT_EQ(h.view().entry("s1", "overall", "u1")->effort_id, "e1");
  (void)h.updates();
  h.pipe({"e1", "s1", "u1", 500, 1, 2, true});
  auto u1 = h.view().entry("s1", "overall", "u1");
  ASSERT_TRUE(u1);
  EXPECT_EQ(u1->effort_id, "e2");
  EXPECT_EQ(u1->rank, 2u);
  auto updates = h.updates();
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0]["previous"], entry("e1", 500, 1, 1));
  EXPECT_EQ(updates[0]["current"], entry("e2", 600, 2, 2));
  // Deleting the remaining efforts takes the user off the board.
  h.pipe({"e2", "s1", "u1", 600, 2, 2, true});
  h.pipe({"e3", "s1", "u1", 700, 3, 2, true});
  EXPECT_EQ(h.view().entry("s1", "overall", "u1"), std::nullopt);
  updates = h.updates();
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_TRUE(updates[1]["current"].is_null());
  EXPECT_EQ(updates[1]["previous"]["effort_id"], "e3");
  EXPECT_EQ(h.view().size("s1", "overall"), 1u);
}

TEST(leaderboard, a_late_update_after_a_delete_does_not_revive_the_effort) {
  harness h;
  h.pipe({"e1", "s1", "u1", 500, 1, 5, true});  // the delete arrives first
  h.pipe({"e1", "s1", "u1", 500, 1, 4});        // then an older update
  EXPECT_EQ(h.view().size("s1", "overall"), 0u);
  EXPECT_TRUE(h.updates().empty());
  h.pipe({"e1", "s1", "u1", 450, 1, 6});  // a newer version does bring it back
  EXPECT_EQ(h.view().entry("s1", "overall", "u1")->elapsed_ms, 450);
}

TEST(leaderboard, a_deleted_version_is_forgotten_after_the_tombstone_retention_of_stream_time) {
  leaderboard_options o;
  o.tombstone_retention = std::chrono::milliseconds(60'000);
  harness h(o);
  h.pipe({"e1", "s1", "u1", 500, 1, 5, true});
  h.time += 30'000;
  h.pipe({"e1", "s1", "u1", 500, 1, 4});  // within the retention: stale
  EXPECT_EQ(h.view().size("s1", "overall"), 0u);
  h.time += 60'000;
  h.pipe({"e9", "s2", "u2", 700, 1});     // stream time moves past the retention
  h.pipe({"e1", "s1", "u1", 500, 1, 3});  // the tombstone is gone: this version applies
  EXPECT_EQ(h.view().entry("s1", "overall", "u1")->effort_id, "e1");
}

TEST(leaderboard, attribute_boards_hold_the_efforts_carrying_the_attribute) {
  leaderboard_options o;
  o.boards = {"gender", "age_group"};
  harness h(o);
  h.pipe({"e1", "s1", "ann", 500, 1, 1, false, {{"gender", "F"}, {"age_group", "25-34"}}});
  h.pipe({"e2", "s1", "bo", 400, 1, 1, false, {{"gender", "M"}, {"age_group", "25-34"}, {"ignored", "x"}}});
  h.pipe({"e3", "s1", "cy", 450, 1, 1, false, {{"gender", "F"}}});
  h.pipe({"e4", "s1", "di", 300, 1});  // no attributes: overall only
  auto v = h.view();
  EXPECT_EQ(v.size("s1", "overall"), 4u);
  using rows = decltype(h.board("", ""));
  EXPECT_EQ(h.board("s1", "gender=F"), (rows{{"cy", "e3", 450, 1}, {"ann", "e1", 500, 2}}));
  EXPECT_EQ(h.board("s1", "gender=M"), (rows{{"bo", "e2", 400, 1}}));
  EXPECT_EQ(h.board("s1", "age_group=25-34"), (rows{{"bo", "e2", 400, 1}, {"ann", "e1", 500, 2}}));
  EXPECT_EQ(v.size("s1", "ignored=x"), 0u);
  EXPECT_EQ(v.entry("s1", "overall", "ann")->rank, 4u);
}

TEST(leaderboard, an_effort_changing_boards_leaves_the_old_and_joins_the_new) {
  leaderboard_options o;
  o.boards = {"gender"};
  harness h(o);
  h.pipe({"e1", "s1", "u1", 500, 1, 1, false, {{"gender", "F"}}});
  (void)h.updates();
  h.pipe({"e1", "s1", "u1", 480, 1, 2, false, {{"gender", "M"}}});
  EXPECT_EQ(h.view().size("s1", "gender=F"), 0u);
  EXPECT_EQ(h.view().entry("s1", "gender=M", "u1")->elapsed_ms, 480);
  auto updates = h.updates();
  ASSERT_EQ(updates.size(), 3u);  // gender=F left, gender=M joined, overall improved
  std::map<std::string, json> by_board;
  for (auto& u : updates) by_board[u["board"]] = u;
  EXPECT_TRUE(by_board["gender=F"]["current"].is_null());
  EXPECT_TRUE(by_board["gender=M"]["previous"].is_null());
  EXPECT_EQ(by_board["overall"]["previous"]["elapsed_ms"], 500);
  EXPECT_EQ(by_board["overall"]["current"]["elapsed_ms"], 480);
}

/// The specification as a reference: from the latest version of every effort, the boards.
class reference_model {
 public:
  explicit reference_model(std::vector<std::string> attributes) : attributes_(std::move(attributes)) {}

  void offer(const effort& e) {
    auto it = latest_.find(e.id);
    if (it != latest_.end() && it->second.version >= e.version) return;
    latest_[e.id] = e;
  }

  using row = std::tuple<std::string, std::string, std::int64_t, std::uint64_t>;
  std::map<std::pair<std::string, std::string>, std::vector<row>> boards() const {
    // best per (segment, board, user): min by (elapsed, started, effort id)
    std::map<std::tuple<std::string, std::string, std::string>, std::tuple<std::int64_t, std::int64_t, std::string>>
        best;
    for (const auto& [id, e] : latest_) {
      if (e.deleted) continue;
      std::vector<std::string> on{"overall"};
      for (const auto& a : attributes_)
        if (auto at = e.attributes.find(a); at != e.attributes.end()) on.push_back(a + "=" + at->second);
      for (const auto& b : on) {
        auto key = std::tuple{e.segment, b, e.user};
        auto candidate = std::tuple{e.elapsed, e.started, e.id};
        auto cur = best.find(key);
        if (cur == best.end() || candidate < cur->second) best[key] = candidate;
      }
    }
    std::map<std::pair<std::string, std::string>,
             std::vector<std::tuple<std::int64_t, std::int64_t, std::string, std::string>>>
        sorted;
    for (const auto& [k, v] : best)
      sorted[{std::get<0>(k), std::get<1>(k)}].emplace_back(std::get<0>(v), std::get<1>(v), std::get<2>(v),
                                                            std::get<2>(k));
    std::map<std::pair<std::string, std::string>, std::vector<row>> out;
    for (auto& [board, list] : sorted) {
      std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
        return std::tie(std::get<0>(a), std::get<1>(a), std::get<2>(a)) <
               std::tie(std::get<0>(b), std::get<1>(b), std::get<2>(b));
      });
      for (const auto& [elapsed, started, id, user] : list) {
        std::uint64_t faster = 0;
        for (const auto& other : list) faster += std::get<0>(other) < elapsed ? 1 : 0;
        out[board].emplace_back(user, id, elapsed, faster + 1);
      }
    }
    return out;
  }

 private:
  std::vector<std::string> attributes_;
  std::map<std::string, effort> latest_;
};

TEST(leaderboard, twenty_shuffles_of_the_same_events_give_identical_boards_equal_to_the_model) {
  leaderboard_options o;
  o.boards = {"gender"};
  std::mt19937 rng(14);
  std::vector<effort> events;
  for (int i = 0; i < 150; ++i) {
    effort base{"e" + std::to_string(i),
                "s" + std::to_string(rng() % 3),
                "u" + std::to_string(rng() % 25),
                static_cast<std::int64_t>(1000 + rng() % 40 * 10),
                static_cast<std::int64_t>(rng() % 5),
                1};
    const int versions = 1 + static_cast<int>(rng() % 3);
    for (int v = 1; v <= versions; ++v) {
      effort e = base;
      e.version = v;
      e.elapsed = static_cast<std::int64_t>(1000 + rng() % 40 * 10);  // ties are common
      if (rng() % 2) e.attributes["gender"] = rng() % 2 ? "F" : "M";
      e.deleted = v == versions && rng() % 5 == 0;
      events.push_back(e);
      if (rng() % 6 == 0) events.push_back(e);  // a duplicate
    }
  }
  reference_model model(o.boards);
  for (const auto& e : events) model.offer(e);
  const auto expected = model.boards();
  ASSERT_GT(expected.size(), 6u);

  std::optional<std::map<std::pair<std::string, std::string>, std::vector<reference_model::row>>> first;
  for (int round = 0; round < 20; ++round) {
    std::shuffle(events.begin(), events.end(), rng);
    // The last rounds run on RocksDB stores over four partitions (segments spread over tasks).
    const bool spread = round >= 18;
    harness h(o, spread ? 4 : 1, spread);
    for (const auto& e : events) h.pipe(e);
    std::map<std::pair<std::string, std::string>, std::vector<reference_model::row>> got;
    for (const auto& [board, rows] : expected) got[board] = h.board(board.first, board.second);
    for (std::string s : {"s0", "s1", "s2"}) {
      for (std::string b : {"overall", "gender=F", "gender=M"}) {
        if (!expected.contains({s, b})) {
          EXPECT_EQ(h.view(h.partition_of(s)).size(s, b), 0u) << s << " " << b;
        }
      }
    }
    EXPECT_EQ(got, expected) << "round " << round;
    if (!first) first = got;
    EXPECT_EQ(got, *first);
  }
}

// The read-only view of the issue, as a running app gives it (leaderboard_queries over
// queries()): each segment is answered by the task whose partition its id falls in, and the
// answers are those of that task's ranked index.
// The boards' rank lists count against state.memory.budget.bytes (state/README.md, "Memory
// budget"): 8 MiB leaves 4 MiB for the lists of the process, less than 12 segments' boards of
// 2,000 users (overall and gender=F/M: about 4.8 MB). Boards leave memory least recently used
// first, and every rank is the same after their rebuild.
TEST(leaderboard, boards_beyond_the_memory_budget_leave_memory_and_rank_the_same_after_their_rebuild) {
  constexpr int segments = 12, users = 2000;
  sluice::config c;
  c.set("state.memory.budget.bytes", "8388608");
  const leaderboard_options o{.boards = {"gender"}};
  topology_test_driver driver(sluice::topologies::leaderboard_job_topology("efforts", "", o), std::move(c),
                              sluice::testing::driver_options{.partitions = 1});
  // In segment s, user u's elapsed time is 600 s + ((u * 7919 + s) % 2000) s: all distinct, so
  // u's overall rank is 1 + (u * 7919 + s) % 2000.
  auto slot = [](int s, int u) { return (u * 7919 + s) % users; };
  std::int64_t t = 1'700'000'000'000;
  for (int s = 0; s < segments; ++s)
    for (int u = 0; u < users; ++u) {
      effort e{"e" + std::to_string(s) + "-" + std::to_string(u), "s" + std::to_string(s), "u" + std::to_string(u),
               600000 + std::int64_t{slot(s, u)} * 1000, u};
      e.attributes = {{"gender", u % 2 == 0 ? "F" : "M"}};
      driver.pipe_raw("efforts", e.segment, to_json(e), ++t);
    }
  auto handle = driver.state_store<sluice::ranked_index_store>(o.board_store, 0);
  auto& index = handle.index();
  sluice::topologies::leaderboard_view view(index);
  for (int s = 0; s < segments; ++s) ASSERT_EQ(view.size("s" + std::to_string(s), "overall"), std::uint64_t{users});
  EXPECT_LT(index.loaded_indexes(), std::size_t{segments * 3}) << "every board still in memory";
  EXPECT_LE(index.memory_bytes(), std::size_t{4} << 20) << "the lists hold more than their share of the budget";
  for (int s = 0; s < segments; ++s) {
    const std::string segment = "s" + std::to_string(s);
    for (int u = 0; u < users; u += 97) {
      auto overall = view.entry(segment, "overall", "u" + std::to_string(u));
      ASSERT_TRUE(overall.has_value()) << segment << " u" << u;
      EXPECT_EQ(overall->rank, std::uint64_t(slot(s, u)) + 1) << segment << " u" << u;
      std::uint64_t faster_same_gender = 0;
      for (int v = u % 2; v < users; v += 2) faster_same_gender += slot(s, v) < slot(s, u) ? 1 : 0;
      auto gendered = view.entry(segment, u % 2 == 0 ? "gender=F" : "gender=M", "u" + std::to_string(u));
      ASSERT_TRUE(gendered.has_value()) << segment << " u" << u;
      EXPECT_EQ(gendered->rank, faster_same_gender + 1) << segment << " u" << u;
    }
  }
}

TEST(leaderboard, queries_answer_each_segment_from_the_task_owning_it_with_ranks_pages_and_neighbours) {
  harness h({.boards = {"gender"}}, 4);
  // Per segment: u0 600 s, u1 601 s, u2 602 s, u3 600 s, u4 601 s (started at u); u0..u2 carry gender F.
  for (int s = 0; s < 8; ++s)
    for (int u = 0; u < 5; ++u) {
      effort e{"e" + std::to_string(s) + "-" + std::to_string(u), "s" + std::to_string(s), "u" + std::to_string(u),
               600000 + (u % 3) * 1000, u};
      if (u < 3) e.attributes = {{"gender", "F"}};
      h.pipe(e);
    }
  sluice::topologies::leaderboard_queries boards(h.driver->queries(), h.options.board_store);
  std::set<std::int32_t> partitions_used;
  for (int s = 0; s < 8; ++s) {
    const std::string segment = "s" + std::to_string(s);
    const auto p = boards.partition_of(segment);
    partitions_used.insert(p);
    EXPECT_EQ(p, h.partition_of(segment)) << segment;
    EXPECT_EQ(boards.size(segment, "overall"), 5u);
    EXPECT_EQ(boards.size(segment, "gender=F"), 3u);

    auto page = boards.top(segment, "overall", 1, 3);
    EXPECT_EQ(page.total, 5u);
    const std::string id = "e" + std::to_string(s) + "-";
    EXPECT_EQ(page.entries,
              (std::vector<board_entry>{
                  {"u3", id + "3", 600000, 3, 1}, {"u1", id + "1", 601000, 1, 3}, {"u4", id + "4", 601000, 4, 3}}))
        << segment;
    EXPECT_EQ(boards.entry(segment, "overall", "u4"), (board_entry{"u4", id + "4", 601000, 4, 3}));
    EXPECT_EQ(boards.entry(segment, "gender=F", "u2"), (board_entry{"u2", id + "2", 602000, 2, 3}));
    EXPECT_EQ(boards.entry(segment, "overall", "nobody"), std::nullopt);
    EXPECT_EQ(boards.entry(segment, "gender=M", "u0"), std::nullopt);

    // Neighbours: positions -1..+1 around u1 (position 2), and clipped at the board's top.
    auto around = boards.around(segment, "overall", "u1", 1);
    ASSERT_EQ(around.size(), 3u);
    EXPECT_EQ(around[0].user_id, "u3");
    EXPECT_EQ(around[1].user_id, "u1");
    EXPECT_EQ(around[2].user_id, "u4");
    EXPECT_EQ(around[2].rank, 3u);
    auto top_end = boards.around(segment, "overall", "u0", 2);
    ASSERT_EQ(top_end.size(), 3u);
    EXPECT_EQ(top_end[0].user_id, "u0");
    EXPECT_EQ(top_end[2].user_id, "u1");
    EXPECT_TRUE(boards.around(segment, "overall", "nobody", 2).empty());
    EXPECT_EQ(around, h.view(p).around(segment, "overall", "u1", 1));
  }
  EXPECT_GT(partitions_used.size(), 1u) << "the segments should spread over the tasks";
  EXPECT_EQ(boards.size("no-such-segment", "overall"), 0u);
  EXPECT_EQ(boards.top("no-such-segment", "overall", 0, 10).entries.size(), 0u);

  auto too_many = sluice::test::error_of([&] { boards.top("s0", "overall", 0, 1001); }, sluice::errc::invalid_config);
  EXPECT_NE(too_many.find("limit 1001 is above the maximum 1000"), std::string::npos) << too_many;
  auto too_wide =
      sluice::test::error_of([&] { boards.around("s0", "overall", "u0", 1001); }, sluice::errc::invalid_config);
  EXPECT_NE(too_wide.find("n 1001 is above the maximum 1000"), std::string::npos) << too_wide;
}

/// The driver's stores as one instance of two sees them in its HTTP handlers: partitions in
/// `local` run here, the others on another instance (not_local) or, when in `moving`, are
/// restoring here (unavailable). forward() records what it was asked and answers for the
/// other instance.
class one_instance_of_two final : public sluice::http::store_access {
 public:
  one_instance_of_two(sluice::interactive_queries& all, std::set<std::int32_t> local,
                      std::set<std::int32_t> moving = {})
      : all_(all), local_(std::move(local)), moving_(std::move(moving)) {}

  std::optional<std::int32_t> partition_of(std::string_view store, std::string_view key) const override {
    return all_.partition_of(store, key);
  }
  std::int32_t partitions(std::string_view store) const override { return all_.partitions(store); }
  outcome run_binding(std::string_view store, std::int32_t partition, binding_reader fn,
                      std::chrono::milliseconds timeout, std::string* failure) override {
    if (moving_.contains(partition)) return outcome::unavailable;
    if (!local_.contains(partition)) return outcome::not_local;
    return all_.run_binding(store, partition, std::move(fn), timeout, failure);
  }
  sluice::http::response forward(const sluice::http::request& req, std::string_view store,
                                 std::int32_t partition) override {
    forwarded.emplace_back(std::string(req.target()) + " " + std::string(store) + " " + std::to_string(partition));
    return sluice::http::response::json(200, R"({"from": "the other instance"})");
  }

  std::vector<std::string> forwarded;

 private:
  sluice::interactive_queries& all_;
  std::set<std::int32_t> local_, moving_;
};

/// Calls the endpoint `pattern` of `topo` as the server would after matching `target`.
sluice::http::response call(const sluice::topology& topo, const std::string& pattern,
                            sluice::http::store_access& stores, const std::string& target,
                            sluice::http::request::params path_params, sluice::http::request::params query = {}) {
  for (const auto& r : topo.endpoints())
    if (r.pattern == pattern)
      return r.fn(sluice::http::request(target, std::move(path_params), std::move(query), &stores, target));
  ADD_FAILURE() << "no endpoint " << pattern;
  return {};
}

// The HTTP endpoints of the issue, on the README's worked example, as the owning instance
// answers them: exact JSON (field names and order), 404 with a JSON error, 400 beyond limits.
TEST(leaderboard, http_endpoints_answer_pages_entries_and_neighbours_in_the_documented_json) {
  harness h({.boards = {"gender"}});
  h.pipe({"e1", "s1", "alice", 612000, 1000, 1, false, {{"gender", "F"}}});
  h.pipe({"e2", "s1", "bob", 598000, 2000, 1, false, {{"gender", "M"}}});
  h.pipe({"e3", "s1", "carol", 612000, 500, 1, false, {{"gender", "F"}}});
  h.pipe({"e4", "s1", "dave", 640000, 3000});
  const auto topo = sluice::topologies::leaderboard_job_topology("efforts", "leaderboard-updates", h.options);
  one_instance_of_two stores(h.driver->queries(), {0});
  const std::string page = "/leaderboards/{segment}/{board}", user = page + "/users/{user}", around = user + "/around";

  auto r = call(topo, page, stores, "/leaderboards/s1/overall?offset=1&limit=2",
                {{"segment", "s1"}, {"board", "overall"}}, {{"offset", "1"}, {"limit", "2"}});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(r.body, R"({"segment_id":"s1","board":"overall","total":4,"entries":[)"
                    R"({"rank":2,"user_id":"carol","effort_id":"e3","elapsed_ms":612000,"started_at_ms":500},)"
                    R"({"rank":2,"user_id":"alice","effort_id":"e1","elapsed_ms":612000,"started_at_ms":1000}]})");
  auto first = json::parse(
      call(topo, page, stores, "/leaderboards/s1/gender%3DF", {{"segment", "s1"}, {"board", "gender=F"}}).body);
  EXPECT_EQ(first["total"], 2);
  ASSERT_EQ(first["entries"].size(), 2u);  // limit 10 by default
  EXPECT_EQ(first["entries"][1]["user_id"], "alice");
  EXPECT_EQ(first["entries"][1]["rank"], 1);  // ties carol
  auto unknown =
      json::parse(call(topo, page, stores, "/leaderboards/s9/overall", {{"segment", "s9"}, {"board", "overall"}}).body);
  EXPECT_EQ(unknown["total"], 0);
  EXPECT_TRUE(unknown["entries"].empty());

  r = call(topo, user, stores, "/leaderboards/s1/overall/users/dave",
           {{"segment", "s1"}, {"board", "overall"}, {"user", "dave"}});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"segment_id":"s1","board":"overall","total":4,"entry":)"
                    R"({"rank":4,"user_id":"dave","effort_id":"e4","elapsed_ms":640000,"started_at_ms":3000}})");
  r = call(topo, user, stores, "/leaderboards/s1/overall/users/nobody",
           {{"segment", "s1"}, {"board", "overall"}, {"user", "nobody"}});
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(json::parse(r.body)["error"], "user 'nobody' is not on board 'overall' of segment 's1'");
  r = call(topo, user, stores, "/leaderboards/s9/overall/users/bob",
           {{"segment", "s9"}, {"board", "overall"}, {"user", "bob"}});
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(json::parse(r.body)["error"].get<std::string>().find("segment 's9' has no board 'overall'"),
            std::string::npos)
      << r.body;
  r = call(topo, user, stores, "/leaderboards/s1/gender=M/users/carol",
           {{"segment", "s1"}, {"board", "gender=M"}, {"user", "carol"}});
  EXPECT_EQ(r.status, 404);

  r = call(topo, around, stores, "/leaderboards/s1/overall/users/carol/around?n=1",
           {{"segment", "s1"}, {"board", "overall"}, {"user", "carol"}}, {{"n", "1"}});
  EXPECT_EQ(r.status, 200);
  auto a = json::parse(r.body);
  EXPECT_EQ(a["total"], 4);
  ASSERT_EQ(a["entries"].size(), 3u);
  EXPECT_EQ(a["entries"][0]["user_id"], "bob");
  EXPECT_EQ(a["entries"][1]["user_id"], "carol");
  EXPECT_EQ(a["entries"][2]["user_id"], "alice");
  EXPECT_EQ(a["entries"][2]["rank"], 2);
  a = json::parse(call(topo, around, stores, "/leaderboards/s1/overall/users/dave/around",
                       {{"segment", "s1"}, {"board", "overall"}, {"user", "dave"}})
                      .body);
  EXPECT_EQ(a["entries"].size(), 4u);  // n = 5 by default, clipped at the board's ends
  r = call(topo, around, stores, "/leaderboards/s1/overall/users/nobody/around",
           {{"segment", "s1"}, {"board", "overall"}, {"user", "nobody"}});
  EXPECT_EQ(r.status, 404);

  struct bad {
    std::string pattern;
    sluice::http::request::params query;
    std::string says;
  };
  for (const auto& b :
       std::vector<bad>{{page,
                         {{"limit", "1001"}},
                         "limit 1001 is above the maximum 1000; ask for several pages with offset instead"},
                        {page, {{"limit", "-1"}}, "limit '-1' is not a whole number"},
                        {page, {{"offset", "x"}}, "offset 'x' is not a whole number"},
                        {around, {{"n", "1001"}}, "n 1001 is above the maximum 1000"},
                        {around, {{"n", ""}}, "n '' is not a whole number"}}) {
    r = call(topo, b.pattern, stores, "/leaderboards/s1/overall",
             {{"segment", "s1"}, {"board", "overall"}, {"user", "bob"}}, b.query);
    EXPECT_EQ(r.status, 400) << b.says;
    EXPECT_EQ(json::parse(r.body)["error"], b.says);
  }
  EXPECT_TRUE(stores.forwarded.empty());
}

// A segment whose partition runs on the other instance is forwarded there (the request as
// received, with the partition); one whose partition is restoring or moving here answers 503
// with Retry-After; nothing is answered from a task that does not own the segment.
TEST(leaderboard, http_endpoints_forward_segments_owned_elsewhere_and_answer_503_while_a_partition_moves) {
  harness h({}, 4);
  for (int s = 0; s < 40; ++s) h.pipe({"e" + std::to_string(s), "s" + std::to_string(s), "u1", 600000, 1});
  const auto topo = sluice::topologies::leaderboard_job_topology("efforts", "leaderboard-updates", h.options);
  sluice::topologies::leaderboard_queries boards(h.driver->queries());
  std::string local_segment, remote_segment, moving_segment;
  for (int s = 0; s < 40; ++s) {
    const std::string segment = "s" + std::to_string(s);
    const auto p = boards.partition_of(segment);
    if (p == 0 && local_segment.empty()) local_segment = segment;
    if (p == 1 && remote_segment.empty()) remote_segment = segment;
    if (p == 2 && moving_segment.empty()) moving_segment = segment;
  }
  ASSERT_FALSE(local_segment.empty() || remote_segment.empty() || moving_segment.empty());
  one_instance_of_two stores(h.driver->queries(), {0, 3}, {2});
  const std::string user = "/leaderboards/{segment}/{board}/users/{user}";

  auto target = "/leaderboards/" + local_segment + "/overall/users/u1";
  auto r = call(topo, user, stores, target, {{"segment", local_segment}, {"board", "overall"}, {"user", "u1"}});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["entry"]["effort_id"], "e" + local_segment.substr(1));

  for (const auto& pattern : {std::string("/leaderboards/{segment}/{board}"), user, user + "/around"}) {
    target = "/leaderboards/" + remote_segment + "/overall/users/u1?n=2";
    r = call(topo, pattern, stores, target, {{"segment", remote_segment}, {"board", "overall"}, {"user", "u1"}},
             {{"n", "2"}});
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, R"({"from": "the other instance"})");
    ASSERT_FALSE(stores.forwarded.empty());
    EXPECT_EQ(stores.forwarded.back(), target + " leaderboard-boards 1");

    r = call(topo, pattern, stores, "/leaderboards/" + moving_segment + "/overall/users/u1",
             {{"segment", moving_segment}, {"board", "overall"}, {"user", "u1"}});
    EXPECT_EQ(r.status, 503) << pattern;
    EXPECT_NE(std::find(r.headers.begin(), r.headers.end(), std::pair<std::string, std::string>{"Retry-After", "1"}),
              r.headers.end());
    EXPECT_TRUE(json::parse(r.body).contains("error")) << r.body;
  }
  EXPECT_EQ(stores.forwarded.size(), 3u);
}

TEST(leaderboard, queries_of_a_store_that_is_not_in_the_topology_name_it) {
  harness h;
  h.pipe({"e1", "s1", "u1", 500, 1});
  sluice::topologies::leaderboard_queries boards(h.driver->queries(), "no-such-boards");
  try {
    (void)boards.size("s1", "overall");
    ADD_FAILURE() << "expected sluice::query_error";
  } catch (const sluice::query_error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-boards"), std::string::npos) << e.what();
  }
}

TEST(leaderboard, asking_for_another_kind_of_store_as_a_ranked_index_names_the_store) {
  harness h;
  try {
    (void)h.driver->state_store<sluice::ranked_index_store>(h.options.efforts_store);
    ADD_FAILURE() << "expected sluice::error";
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.code(), sluice::errc::invalid_topology);
    EXPECT_NE(std::string(e.what()).find("leaderboard-efforts"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ranked index"), std::string::npos) << e.what();
  }
}

TEST(leaderboard, malformed_records_go_to_the_dead_letter_topic_with_the_reason_and_the_job_goes_on) {
  harness h;
  h.pipe({"e1", "s1", "u1", 500, 1});
  const std::string dlq = h.driver->application_id() + "-dlq";
  struct bad {
    std::optional<std::string> key, value;
    std::string reason;
  };
  std::vector<bad> cases = {
      {"s1", "not json", "not JSON"},
      {"s1", "[1,2]", "not a JSON object"},
      {"s1", R"({"segment_id":"s1","user_id":"u","elapsed_ms":1,"started_at_ms":1,"version":1})",
       "'effort_id' is missing"},
      {"s1", R"({"effort_id":"e","segment_id":"s1","user_id":"u","elapsed_ms":"1","started_at_ms":1,"version":1})",
       "'elapsed_ms' must be an integer"},
      {"s1", R"({"effort_id":"e","segment_id":"s1","user_id":"u","elapsed_ms":-5,"started_at_ms":1,"version":1})",
       "negative"},
      {"s2", R"({"effort_id":"e","segment_id":"s1","user_id":"u","elapsed_ms":5,"started_at_ms":1,"version":1})",
       "differs from the record key"},
      {"s1", R"({"effort_id":"e1","segment_id":"s1","user_id":"u2","elapsed_ms":5,"started_at_ms":1,"version":2})",
       "may not change user_id"},
      {"s1", std::nullopt, "value is null"},
      {"s1", std::string(100, '[') + std::string(100, ']'), "nests deeper"},
  };
  for (const auto& c : cases) h.pipe_raw(c.key, c.value);
  h.pipe({"e2", "s1", "u3", 400, 1});  // still running
  auto& q = h.driver->records(dlq);
  ASSERT_EQ(q.size(), cases.size());
  for (const auto& c : cases) {
    const auto* message = q.front().headers.last("sluice.error.message");
    ASSERT_NE(message, nullptr);
    EXPECT_NE(message->value_or("").find(c.reason), std::string::npos) << message->value_or("") << " / " << c.reason;
    EXPECT_EQ(q.front().value, c.value);
    q.pop_front();
  }
  EXPECT_EQ(h.view().size("s1", "overall"), 2u);
  EXPECT_EQ(h.view().entry("s1", "overall", "u1")->effort_id, "e1");  // the user change did nothing
}

// An update record carries the ids and the board name: bounded, it always fits a Kafka
// message, so no applied change can lack its update (the change applied, the record
// dead-lettered for its too large update).
TEST(leaderboard, ids_and_board_names_over_16_kib_are_refused_before_anything_is_written) {
  leaderboard_options o;
  o.boards = {"gender"};
  harness h(o);
  const std::string dlq = h.driver->application_id() + "-dlq";
  h.pipe({"e1", "s1", std::string(16385, 'u'), 500, 1});
  effort long_board{"e2", "s1", "u2", 500, 1};
  long_board.attributes["gender"] = std::string(16384, 'G');  // "gender=" makes it 16,391 bytes
  h.pipe(long_board);
  h.pipe({"e3", "s1", std::string(16384, 'u'), 400, 1});  // at the bound: taken
  auto& q = h.driver->records(dlq);
  ASSERT_EQ(q.size(), 2u);
  for (const char* what : {"field 'user_id' is 16385 bytes; at most 16384", "attribute 'gender' is 16391 bytes"}) {
    const auto* message = q.front().headers.last("sluice.error.message");
    ASSERT_NE(message, nullptr);
    EXPECT_NE(message->value_or("").find(what), std::string::npos) << message->value_or("");
    q.pop_front();
  }
  EXPECT_EQ(h.view().size("s1", "overall"), 1u);
  EXPECT_EQ(h.view().size("s1", "gender=" + std::string(16384, 'G')), 0u);
  EXPECT_EQ(h.driver->records("leaderboard-updates").size(), 1u);
}

}  // namespace
