// An independent reference model of the leaderboard's definition
// (topologies/leaderboard/README.md), written from the definition alone with no sluice code
// in it, and the effort events the job tests feed it (the integration test, the fault suite):
//   keep the latest version of every effort; drop deleted ones; per (segment, board, user) the
//   live effort first by (elapsed_ms, started_at_ms, effort_id); boards `overall` and
//   `gender=<value>` (the job runs with leaderboard.boards=gender).
//
//   auto events = sluice::test::leaderboard_events(200'000, rng, {.segments = 200, .users = 2000});
//   auto boards = sluice::test::leaderboard_reference(events);   // what the job must end with
//
// Threading: plain functions and values.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace sluice::test {

/// One effort event as the job reads it (key = segment).
struct leaderboard_event {
  std::string effort, segment, user;
  std::int64_t elapsed = 0, started = 0, version = 0;
  bool deleted = false;
  std::string gender;  // empty: no attribute
};

/// (segment, board, user) -> (effort, elapsed, started): every entry of every board.
using leaderboard_entries =
    std::map<std::tuple<std::string, std::string, std::string>, std::tuple<std::string, std::int64_t, std::int64_t>>;

/// The definition: latest version per effort, live efforts only, best per user and board.
inline leaderboard_entries leaderboard_reference(const std::vector<leaderboard_event>& events) {
  std::map<std::string, const leaderboard_event*> latest;
  for (const auto& e : events) {
    auto& l = latest[e.effort];
    if (l == nullptr || e.version > l->version) l = &e;
  }
  leaderboard_entries out;
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

/// An entry of a board of the model in order, with its competition rank.
struct leaderboard_ranked_entry {
  std::string user, effort;
  std::int64_t elapsed = 0, started = 0;
  std::uint64_t rank = 0;
};
/// (segment, board) -> entries in board order.
using leaderboard_ranked_boards = std::map<std::pair<std::string, std::string>, std::vector<leaderboard_ranked_entry>>;

/// Every board of `entries` in order, with competition ranks (ties share a rank, the next skips).
inline leaderboard_ranked_boards leaderboard_ranked(const leaderboard_entries& entries) {
  leaderboard_ranked_boards out;
  for (const auto& [key, v] : entries)
    out[{std::get<0>(key), std::get<1>(key)}].push_back(
        {std::get<2>(key), std::get<0>(v), std::get<1>(v), std::get<2>(v)});
  for (auto& [board, list] : out) {
    std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
      return std::tie(a.elapsed, a.started, a.effort) < std::tie(b.elapsed, b.started, b.effort);
    });
    for (std::size_t i = 0; i < list.size(); ++i)
      list[i].rank = i > 0 && list[i].elapsed == list[i - 1].elapsed ? list[i - 1].rank : i + 1;
  }
  return out;
}

/// How many segments and users the generated efforts spread over.
struct leaderboard_population {
  int segments = 200;
  int users = 2000;
};

/// At least `n` events: efforts with 1-4 versions each sent in a shuffled order (out of
/// order), ~8 % of them ending deleted (some deletes sent before older updates), ~5 %
/// duplicates; events of different efforts interleaved at random. Effort ids are
/// `<prefix>e<number>`.
inline std::vector<leaderboard_event> leaderboard_events(std::size_t n, std::mt19937& rng,
                                                         leaderboard_population population = {},
                                                         const std::string& prefix = {}) {
  std::uniform_int_distribution<int> seg(0, population.segments - 1), usr(0, population.users - 1), pct(0, 99),
      elapsed(60, 900);
  std::vector<std::vector<leaderboard_event>> per_effort;
  std::size_t total = 0;
  for (int id = 0; total < n; ++id) {
    std::vector<leaderboard_event> versions;
    leaderboard_event base{prefix + "e" + std::to_string(id), "s" + std::to_string(seg(rng)),
                           "u" + std::to_string(usr(rng))};
    const int count = 1 + pct(rng) % 4;
    for (int v = 1; v <= count; ++v) {
      leaderboard_event e = base;
      e.version = v;
      e.elapsed = elapsed(rng) * 1000;  // whole seconds: ties are common
      e.started = 1'700'000'000'000 + pct(rng) * 1000;
      if (pct(rng) < 60) e.gender = pct(rng) < 50 ? "F" : "M";
      versions.push_back(e);
    }
    if (pct(rng) < 8) {
      leaderboard_event d = versions.back();
      d.version = count + 1;
      d.deleted = true;
      versions.push_back(d);
    }
    std::shuffle(versions.begin(), versions.end(), rng);
    if (pct(rng) < 5) versions.push_back(versions[static_cast<std::size_t>(pct(rng)) % versions.size()]);
    total += versions.size();
    per_effort.push_back(std::move(versions));
  }
  // Interleave: repeatedly take the next event of a random effort that has some left.
  std::vector<leaderboard_event> events;
  events.reserve(total);
  std::vector<std::size_t> next(per_effort.size(), 0), open(per_effort.size());
  for (std::size_t i = 0; i < open.size(); ++i) open[i] = i;
  while (!open.empty()) {
    std::size_t pick = std::uniform_int_distribution<std::size_t>(0, open.size() - 1)(rng);
    auto e = open[pick];
    events.push_back(per_effort[e][next[e]++]);
    if (next[e] == per_effort[e].size()) {
      open[pick] = open.back();
      open.pop_back();
    }
  }
  return events;
}

}  // namespace sluice::test
