// One behaviour suite for ranked_index over both kv_store backends (RocksDB and in-memory):
// queries, competition ranks, commit/abort, restore from its own changelog, memory
// eviction, and a randomized run against a sorted-vector model.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "sluice/state/kv_store.hpp"
#include "sluice/state/ranked_index.hpp"
#include "sluice/state/rocksdb_store.hpp"
#include "forwarding_store.hpp"
#include "recording_changelog.hpp"
#include "state_test_util.hpp"

namespace sluice::state {
namespace {

using test::manual_clock;
using test::temp_dir;

rocksdb_environment& shared_environment() {
  static rocksdb_environment env({.memory_budget_bytes = std::size_t{32} << 20});
  return env;
}

struct backend {
  std::string name;
  std::function<std::unique_ptr<kv_store>(const store_options&)> open;
};
void PrintTo(const backend& b, std::ostream* os) { *os << b.name; }

/// A kv_store that forwards to another and counts the scans opened on it: evidence that a
/// query read no range of the store.
class scan_counting_store final : public test::forwarding_store {
 public:
  using forwarding_store::forwarding_store;
  int* scans = nullptr;

 protected:
  kv_iterator make_range(std::string_view f, std::string_view t, direction d) override {
    ++*scans;
    return forwarding_store::make_range(f, t, d);
  }
  kv_iterator make_prefix(std::string_view p, direction d) override {
    ++*scans;
    return forwarding_store::make_prefix(p, d);
  }
  kv_iterator make_all(direction d) override {
    ++*scans;
    return forwarding_store::make_all(d);
  }
};

std::string be32(std::uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[i] = static_cast<char>((v >> (24 - 8 * i)) & 0xff);
  return s;
}

std::vector<std::string> members_of(const std::vector<ranked_member>& v) {
  std::vector<std::string> out;
  for (const auto& m : v) out.push_back(m.member);
  return out;
}

class ranked_index_conformance : public ::testing::TestWithParam<backend> {
 protected:
  std::unique_ptr<ranked_index> open(changelog_sink* sink = nullptr, ranked_index_options o = {},
                                     std::string name = "board", memory_budget* memory = nullptr) {
    store_options so;
    so.name = std::move(name);
    so.directory = dir_.path();
    so.now_ms = clock_.fn();
    if (!o.now_ms) o.now_ms = clock_.fn();
    return open_ranked_index(GetParam().open(so), sink, memory ? *memory : memory_, std::move(o));
  }

  temp_dir dir_;
  manual_clock clock_;
  memory_budget memory_{std::size_t{1} << 30};
};

TEST_P(ranked_index_conformance, orders_members_by_score_then_member) {
  auto idx = open();
  idx->upsert("s1", "carol", be32(300), 1);
  idx->upsert("s1", "alice", be32(100), 1);
  idx->upsert("s1", "dave", be32(200), 1);
  idx->upsert("s1", "bob", be32(200), 1);
  idx->upsert("s2", "erin", be32(1), 1);
  EXPECT_EQ(members_of(idx->range("s1", 0, 10)), (std::vector<std::string>{"alice", "bob", "dave", "carol"}));
  EXPECT_EQ(idx->count("s1"), 4u);
  EXPECT_EQ(idx->count("s2"), 1u);
  EXPECT_EQ(idx->count("absent"), 0u);
  EXPECT_EQ(idx->score("s1", "dave"), be32(200));
  EXPECT_EQ(idx->score("s1", "erin"), std::nullopt);
  EXPECT_EQ(idx->position("s1", "alice"), 0u);
  EXPECT_EQ(idx->position("s1", "dave"), 2u);
  EXPECT_EQ(idx->position("s1", "carol"), 3u);
  EXPECT_EQ(idx->position("s1", "zed"), std::nullopt);
  auto page = idx->range("s1", 1, 2);
  ASSERT_EQ(page.size(), 2u);
  EXPECT_EQ(page[0], (ranked_member{"bob", be32(200), 1}));
  EXPECT_EQ(page[1], (ranked_member{"dave", be32(200), 2}));
  EXPECT_TRUE(idx->range("s1", 4, 10).empty());
  EXPECT_TRUE(idx->range("s1", 0, 0).empty());
}

TEST_P(ranked_index_conformance, count_below_a_primary_score_gives_competition_ranks) {
  auto idx = open();
  // Scores: 4-byte primary (elapsed) + 4-byte tie-breaker; ties on the primary share a rank.
  idx->upsert("b", "u1", be32(10) + be32(5), 1);
  idx->upsert("b", "u2", be32(20) + be32(1), 1);
  idx->upsert("b", "u3", be32(20) + be32(9), 1);
  idx->upsert("b", "u4", be32(30) + be32(0), 1);
  auto rank = [&](const std::string& user) {
    auto s = idx->score("b", user);
    return idx->count_below("b", s->substr(0, 4)) + 1;
  };
  EXPECT_EQ(rank("u1"), 1u);
  EXPECT_EQ(rank("u2"), 2u);
  EXPECT_EQ(rank("u3"), 2u);
  EXPECT_EQ(rank("u4"), 4u);
  EXPECT_EQ(idx->count_below("b", be32(25)), 3u);
  EXPECT_EQ(idx->count_below("b", be32(99)), 4u);
  EXPECT_EQ(idx->count_below("b", ""), 0u);
}

TEST_P(ranked_index_conformance, upsert_moves_a_member_and_remove_takes_it_out) {
  auto idx = open();
  for (int i = 0; i < 10; ++i) idx->upsert("b", "m" + std::to_string(i), be32(static_cast<std::uint32_t>(i * 10)), 1);
  idx->upsert("b", "m9", be32(5), 2);  // from last to second
  EXPECT_EQ(idx->position("b", "m9"), 1u);
  EXPECT_EQ(idx->position("b", "m1"), 2u);
  EXPECT_TRUE(idx->remove("b", "m0", 3));
  EXPECT_FALSE(idx->remove("b", "m0", 3));
  EXPECT_EQ(idx->position("b", "m9"), 0u);
  EXPECT_EQ(idx->count("b"), 9u);
  EXPECT_EQ(idx->score("b", "m0"), std::nullopt);
}

TEST_P(ranked_index_conformance, around_returns_n_either_side_clipped_to_the_index) {
  auto idx = open();
  for (int i = 0; i < 10; ++i) idx->upsert("b", "m" + std::to_string(i), be32(static_cast<std::uint32_t>(i)), 1);
  EXPECT_EQ(members_of(idx->around("b", "m5", 2)), (std::vector<std::string>{"m3", "m4", "m5", "m6", "m7"}));
  EXPECT_EQ(members_of(idx->around("b", "m1", 3)), (std::vector<std::string>{"m0", "m1", "m2", "m3", "m4"}));
  EXPECT_EQ(members_of(idx->around("b", "m9", 1)), (std::vector<std::string>{"m8", "m9"}));
  EXPECT_EQ(members_of(idx->around("b", "m4", 0)), (std::vector<std::string>{"m4"}));
  EXPECT_TRUE(idx->around("b", "nobody", 3).empty());
  EXPECT_EQ(idx->around("b", "m5", 2).front().position, 3u);
}

TEST_P(ranked_index_conformance, logs_every_write_as_a_key_value_changelog_record) {
  test::recording_changelog sink;
  auto idx = open(&sink);
  idx->upsert("b", "u1", "x", 100);
  idx->upsert("b", "u1", "x", 101);  // unchanged score: no write
  idx->upsert("b", "u1", "y", 102);
  idx->remove("b", "u1", 103);
  idx->remove("b", "u1", 104);  // absent: no write
  ASSERT_EQ(sink.records().size(), 3u);
  std::string key;
  ranked_index::encode_key("b", "u1", key);
  EXPECT_EQ(sink.records()[0].key, key);
  EXPECT_EQ(sink.records()[0].value, "x");
  EXPECT_EQ(sink.records()[0].timestamp, 100);
  EXPECT_EQ(sink.records()[1].value, "y");
  EXPECT_EQ(sink.records()[2].value, std::nullopt);
  EXPECT_EQ(sink.records()[2].timestamp, 103);
  EXPECT_EQ(ranked_index::index_of_key(key), "b");
}

TEST_P(ranked_index_conformance, index_keys_of_any_bytes_never_collide) {
  auto idx = open();
  // ("ab", "c") and ("a", "bc") must be different entries; so must an index with a NUL.
  idx->upsert("ab", "c", "1", 1);
  idx->upsert("a", "bc", "2", 1);
  idx->upsert(std::string("a\0", 2), "x", "3", 1);
  const std::string long_index(300, 'i');  // a two-byte length varint
  idx->upsert(long_index, "m", "4", 1);
  EXPECT_EQ(idx->count("ab"), 1u);
  EXPECT_EQ(idx->count("a"), 1u);
  EXPECT_EQ(idx->count(std::string("a\0", 2)), 1u);
  EXPECT_EQ(idx->count(long_index), 1u);
  EXPECT_EQ(idx->range("a", 0, 5).at(0).member, "bc");
  std::string key;
  ranked_index::encode_key(long_index, "m", key);
  EXPECT_EQ(ranked_index::index_of_key(key), long_index);
  EXPECT_EQ(ranked_index::index_of_key("\x05"
                                       "ab"),
            std::nullopt);
}

TEST_P(ranked_index_conformance, abort_rolls_back_ranks_and_commit_keeps_them) {
  auto idx = open();
  idx->upsert("b", "u1", be32(10), 1);
  idx->upsert("b", "u2", be32(20), 1);
  idx->commit(changelog_offset(2));
  EXPECT_EQ(idx->committed_offset(), changelog_offset(2));
  idx->upsert("b", "u3", be32(5), 2);
  idx->upsert("b", "u1", be32(30), 2);
  idx->remove("b", "u2", 2);
  EXPECT_EQ(members_of(idx->range("b", 0, 10)), (std::vector<std::string>{"u3", "u1"}));  // read-your-writes
  EXPECT_GT(idx->pending_bytes(), 0u);
  idx->abort();
  EXPECT_EQ(idx->pending_bytes(), 0u);
  EXPECT_EQ(members_of(idx->range("b", 0, 10)), (std::vector<std::string>{"u1", "u2"}));
  EXPECT_EQ(idx->position("b", "u2"), 1u);
  EXPECT_EQ(idx->score("b", "u3"), std::nullopt);
  idx->upsert("b", "u4", be32(1), 3);
  idx->commit(changelog_offset(4));
  idx->abort();  // nothing pending: nothing changes
  EXPECT_EQ(members_of(idx->range("b", 0, 10)), (std::vector<std::string>{"u4", "u1", "u2"}));
}

TEST_P(ranked_index_conformance, restore_from_the_changelog_rebuilds_identical_ranks) {
  test::recording_changelog sink;
  std::mt19937 rng(7);
  auto original = open(&sink, {}, "original");
  for (int i = 0; i < 3000; ++i) {
    std::string index = "i" + std::to_string(rng() % 3);
    std::string member = "m" + std::to_string(rng() % 400);
    if (rng() % 5 == 0)
      original->remove(index, member, i);
    else
      original->upsert(index, member, be32(rng() % 500), i);
  }
  original->commit(changelog_offset(static_cast<std::int64_t>(sink.records().size())));

  auto restored = open(nullptr, {}, "restored");
  const auto batch = sink.restore_batch();
  // Two batches, the second restored after the first was queried (its lists must refresh).
  const auto half = batch.size() / 2;
  restored->restore(std::span(batch).first(half), changelog_offset(static_cast<std::int64_t>(half)));
  (void)restored->count("i0");
  restored->restore(std::span(batch).subspan(half), changelog_offset(static_cast<std::int64_t>(batch.size())));
  EXPECT_EQ(restored->committed_offset(), changelog_offset(static_cast<std::int64_t>(batch.size())));
  for (std::string index : {"i0", "i1", "i2"}) {
    EXPECT_EQ(restored->count(index), original->count(index));
    EXPECT_EQ(restored->range(index, 0, 1000), original->range(index, 0, 1000)) << index;
    for (int m = 0; m < 400; m += 37) {
      std::string member = "m" + std::to_string(m);
      EXPECT_EQ(restored->position(index, member), original->position(index, member));
    }
  }
}

// A ranked index restored from its changelog starts what its flush would wait for as the
// key-value store under it does: over RocksDB restored from empty, the last chunk goes to the
// store's thread (begin_flush() false until it is ingested), so the runtime can read other
// changelogs meanwhile; the ranks after the flush are the original's.
TEST_P(ranked_index_conformance, begin_flush_after_a_restore_starts_the_stores_last_chunk_in_the_background) {
  test::recording_changelog sink;
  auto original = open(&sink, {}, "original");
  for (int i = 0; i < 2000; ++i)
    original->upsert("i" + std::to_string(i % 3), "m" + std::to_string(i), be32(i % 97), i);
  original->commit(changelog_offset(static_cast<std::int64_t>(sink.records().size())));

  auto restored = open(nullptr, {}, "restored");
  const auto batch = sink.restore_batch();
  restored->restore(batch, changelog_offset(static_cast<std::int64_t>(batch.size())));
  const bool ready_at_once = restored->begin_flush();
  EXPECT_EQ(ready_at_once, GetParam().name != "rocksdb");  // memory: flush() has nothing to wait for
  while (!restored->begin_flush()) std::this_thread::yield();
  restored->flush();
  for (std::string index : {"i0", "i1", "i2"})
    EXPECT_EQ(restored->range(index, 0, 1000), original->range(index, 0, 1000)) << index;
}

TEST_P(ranked_index_conformance, reopening_a_durable_store_gives_the_same_ranks) {
  if (GetParam().name != "rocksdb") GTEST_SKIP() << "the in-memory store starts empty on every open";
  {
    auto idx = open();
    for (int i = 0; i < 500; ++i)
      idx->upsert("b", "m" + std::to_string(i), be32(static_cast<std::uint32_t>(i % 50)), 1);
    idx->commit(changelog_offset(500));
  }
  auto idx = open();
  EXPECT_EQ(idx->committed_offset(), changelog_offset(500));
  EXPECT_EQ(idx->count("b"), 500u);
  EXPECT_EQ(idx->position("b", "m0"), 0u);
  EXPECT_EQ(idx->position("b", "m1"), 10u);  // after the ten members of score 0
  EXPECT_EQ(idx->count_below("b", be32(1)), 10u);
}

TEST_P(ranked_index_conformance, queries_on_a_loaded_index_open_no_scan_of_the_store) {
  int scans = 0;
  store_options so{.name = "counted", .directory = dir_.path(), .now_ms = clock_.fn()};
  auto counting = std::make_unique<scan_counting_store>(GetParam().open(so));
  counting->scans = &scans;
  ranked_index idx(std::move(counting), nullptr, memory_, {.now_ms = clock_.fn()});
  for (int i = 0; i < 5000; ++i)
    idx.upsert("b", "m" + std::to_string(i), be32(static_cast<std::uint32_t>(i * 7 % 1000)), 1);
  EXPECT_EQ(idx.count("b"), 5000u);  // the one load
  EXPECT_EQ(scans, 1);
  for (int i = 0; i < 1000; ++i) {
    const std::string m = "m" + std::to_string(i * 5);
    (void)idx.position("b", m);
    (void)idx.around("b", m, 3);
    (void)idx.range("b", static_cast<std::uint64_t>(i * 5), 10);
    (void)idx.count_below("b", be32(static_cast<std::uint32_t>(i)));
    idx.upsert("b", m, be32(static_cast<std::uint32_t>(i)), 2);
    idx.remove("b", "m" + std::to_string(i * 5 + 1), 2);
  }
  idx.commit(changelog_offset(1));
  EXPECT_EQ(scans, 1);
  EXPECT_EQ(idx.count("b"), 4000u);
}

TEST_P(ranked_index_conformance, memory_budget_drops_least_recently_used_indexes_and_rebuilds_them) {
  memory_budget small(64 << 10);
  auto idx = open(nullptr, {.idle_eviction = std::chrono::milliseconds(0)}, "board", &small);
  for (int i = 0; i < 40; ++i)
    for (int m = 0; m < 100; ++m)
      idx->upsert("i" + std::to_string(i), "m" + std::to_string(m), be32(static_cast<std::uint32_t>((m * 31) % 100)),
                  1);
  for (int i = 0; i < 40; ++i) {
    ASSERT_EQ(idx->count("i" + std::to_string(i)), 100u);
    EXPECT_LE(idx->memory_bytes(), std::size_t{64} << 10);
    EXPECT_EQ(small.used_bytes(), idx->memory_bytes());  // the store's lists are what it charges
  }
  EXPECT_LT(idx->loaded_indexes(), 40u);
  EXPECT_GT(idx->loaded_indexes(), 0u);
  EXPECT_GT(small.releases(), 0u);
  // A dropped index answers the same after its rebuild.
  EXPECT_EQ(idx->position("i0", "m0"), 0u);
  EXPECT_EQ(idx->position("i0", "m1"), 31u);
  idx->close();
  EXPECT_EQ(small.used_bytes(), 0u);
}

TEST_P(ranked_index_conformance, stores_sharing_a_budget_give_up_their_least_recently_used_lists_first) {
  // Two stores (two tasks) on one budget: the lists used longest ago go first, whichever
  // store holds them, and every rank is the same after the rebuild.
  auto fill = [](ranked_index& idx, const std::string& index) {
    for (int m = 0; m < 100; ++m)
      idx.upsert(index, "m" + std::to_string(m), be32(static_cast<std::uint32_t>((m * 31) % 100)), 1);
  };
  // A budget of 5.5 lists: a's four fit, a's and b's eight do not, b's four do.
  std::size_t one_list = 0;
  {
    auto probe = open(nullptr, {}, "probe");
    fill(*probe, "p");
    (void)probe->count("p");
    one_list = probe->memory_bytes();
  }
  memory_budget shared(one_list * 11 / 2);
  auto a = open(nullptr, {.idle_eviction = std::chrono::milliseconds(0)}, "board-a", &shared);
  auto b = open(nullptr, {.idle_eviction = std::chrono::milliseconds(0)}, "board-b", &shared);
  for (int i = 0; i < 4; ++i) fill(*a, "a" + std::to_string(i));
  for (int i = 0; i < 4; ++i) (void)a->count("a" + std::to_string(i));
  const std::size_t a_loaded = a->memory_bytes();
  ASSERT_EQ(a->loaded_indexes(), 4u);
  ASSERT_LT(a_loaded, shared.limit_bytes());
  // b's lists push the total over the limit: a's (older) lists leave memory before b's.
  for (int i = 0; i < 4; ++i) fill(*b, "b" + std::to_string(i));
  for (int i = 0; i < 4; ++i) (void)b->count("b" + std::to_string(i));
  EXPECT_GT(shared.releases(), 0u);
  EXPECT_LT(a->loaded_indexes(), 4u);
  EXPECT_EQ(b->loaded_indexes(), 4u);
  EXPECT_LE(shared.used_bytes(), shared.limit_bytes());
  EXPECT_EQ(shared.used_bytes(), a->memory_bytes() + b->memory_bytes());
  for (int i = 0; i < 4; ++i) {
    for (auto* idx : {a.get(), b.get()}) {
      const std::string index = (idx == a.get() ? "a" : "b") + std::to_string(i);
      EXPECT_EQ(idx->position(index, "m0"), 0u) << index;
      EXPECT_EQ(idx->position(index, "m1"), 31u) << index;
      EXPECT_EQ(idx->count_below(index, be32(50)), 50u) << index;
    }
  }
  a->close();
  b->close();
  EXPECT_EQ(shared.used_bytes(), 0u);
}

TEST_P(ranked_index_conformance, stores_on_several_threads_share_one_budget_and_keep_exact_positions) {
  // Four tasks' stores, one thread each, on a budget that holds a fraction of their lists:
  // lists are dropped across threads while the others work, and every answer stays exact.
  memory_budget shared(96 << 10);
  constexpr int threads = 4, indexes = 6, members = 150, rounds = 1500;
  std::vector<std::unique_ptr<ranked_index>> stores;
  for (int t = 0; t < threads; ++t)
    stores.push_back(
        open(nullptr, {.idle_eviction = std::chrono::milliseconds(0)}, "board-" + std::to_string(t), &shared));
  std::vector<std::thread> workers;
  std::vector<int> mismatches(threads, 0);
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      auto& idx = *stores[static_cast<std::size_t>(t)];
      std::mt19937 rng(static_cast<unsigned>(t + 1));
      std::map<std::string, std::map<std::string, std::uint32_t>> scores;  // index -> member -> score
      for (int r = 0; r < rounds; ++r) {
        const std::string index = "i" + std::to_string(rng() % indexes);
        const std::string member = "m" + std::to_string(rng() % members);
        const auto score = static_cast<std::uint32_t>(rng() % 1000);
        idx.upsert(index, member, be32(score), r);
        scores[index][member] = score;
        // The expected position: members with a smaller (score, member).
        const std::string probe = "m" + std::to_string(rng() % members);
        auto& s = scores[index];
        auto it = s.find(probe);
        auto got = idx.position(index, probe);
        if (it == s.end()) {
          mismatches[static_cast<std::size_t>(t)] += got.has_value();
          continue;
        }
        std::uint64_t want = 0;
        for (const auto& [m, v] : s) want += (v < it->second || (v == it->second && m < probe)) ? 1 : 0;
        mismatches[static_cast<std::size_t>(t)] += got != want;
        if (r % 100 == 99) idx.commit(changelog_offset(r));
      }
    });
  }
  for (auto& w : workers) w.join();
  for (int t = 0; t < threads; ++t) EXPECT_EQ(mismatches[static_cast<std::size_t>(t)], 0) << "thread " << t;
  EXPECT_GT(shared.releases(), 0u);
  std::size_t sum = 0;
  for (auto& s : stores) sum += s->memory_bytes();
  EXPECT_EQ(shared.used_bytes(), sum);
  for (auto& s : stores) s->close();
  EXPECT_EQ(shared.used_bytes(), 0u);
}

TEST_P(ranked_index_conformance, idle_indexes_leave_memory_at_commit) {
  auto idx = open(nullptr, {.idle_eviction = std::chrono::milliseconds(60'000)});
  idx->upsert("old", "m", "1", 1);
  idx->upsert("new", "m", "1", 1);
  (void)idx->count("old");
  clock_.advance(50'000);
  (void)idx->count("new");
  EXPECT_EQ(idx->loaded_indexes(), 2u);
  clock_.advance(20'000);
  idx->commit(changelog_offset(1));
  EXPECT_EQ(idx->loaded_indexes(), 1u);  // "old" idle for 70 s, "new" for 20 s
  EXPECT_EQ(idx->count("old"), 1u);      // rebuilt on demand
  EXPECT_EQ(idx->loaded_indexes(), 2u);
  clock_.advance(100'000);
  idx->commit(changelog_offset(2));
  EXPECT_EQ(idx->loaded_indexes(), 0u);
  EXPECT_EQ(idx->memory_bytes(), 0u);
}

/// The model: per index, the committed and the current sorted vectors of (score, member).
struct sorted_model {
  using list = std::vector<std::pair<std::string, std::string>>;
  std::map<std::string, list> current, committed;

  static auto find_member(list& l, const std::string& member) {
    return std::find_if(l.begin(), l.end(), [&](const auto& e) { return e.second == member; });
  }
  void upsert(const std::string& index, const std::string& member, const std::string& score) {
    auto& l = current[index];
    if (auto it = find_member(l, member); it != l.end()) l.erase(it);
    l.insert(std::lower_bound(l.begin(), l.end(), std::pair{score, member}), {score, member});
  }
  bool remove(const std::string& index, const std::string& member) {
    auto& l = current[index];
    auto it = find_member(l, member);
    if (it == l.end()) return false;
    l.erase(it);
    return true;
  }
  std::optional<std::uint64_t> position(const std::string& index, const std::string& member) {
    auto& l = current[index];
    auto it = find_member(l, member);
    if (it == l.end()) return std::nullopt;
    return static_cast<std::uint64_t>(it - l.begin());
  }
  std::vector<ranked_member> range(const std::string& index, std::uint64_t offset, std::uint64_t limit) {
    std::vector<ranked_member> out;
    auto& l = current[index];
    for (std::uint64_t p = offset; p < l.size() && p < offset + limit; ++p) out.push_back({l[p].second, l[p].first, p});
    return out;
  }
  std::uint64_t count_below(const std::string& index, const std::string& bound) {
    auto& l = current[index];
    return static_cast<std::uint64_t>(
        std::partition_point(l.begin(), l.end(), [&](const auto& e) { return e.first < bound; }) - l.begin());
  }
};

TEST_P(ranked_index_conformance, random_operations_agree_with_a_sorted_vector_model) {
  // Few distinct scores (many ties), a few indexes, commits and aborts, idle evictions and
  // rebuilds now and then: 100,000 operations, every answer compared with the model.
  auto idx = open(nullptr, {.idle_eviction = std::chrono::milliseconds(1000)});
  sorted_model model;
  std::mt19937_64 rng(20261122);
  auto pick = [&](std::uint64_t n) { return rng() % n; };
  std::int64_t offset = 0;
  constexpr int operations = 100'000;
  for (int op = 0; op < operations; ++op) {
    const std::string index = "idx" + std::to_string(pick(5));
    const std::string member = "user" + std::to_string(pick(index == "idx0" ? 2000 : 200));
    const auto roll = pick(100);
    SCOPED_TRACE("operation " + std::to_string(op));
    if (roll < 45) {
      std::string score = be32(static_cast<std::uint32_t>(pick(200))) + std::string(1, static_cast<char>(pick(256)));
      idx->upsert(index, member, score, op);
      model.upsert(index, member, score);
    } else if (roll < 60) {
      ASSERT_EQ(idx->remove(index, member, op), model.remove(index, member));
    } else if (roll < 70) {
      ASSERT_EQ(idx->position(index, member), model.position(index, member));
    } else if (roll < 77) {
      auto off = pick(model.current[index].size() + 5);
      auto lim = pick(12);
      ASSERT_EQ(idx->range(index, off, lim), model.range(index, off, lim));
    } else if (roll < 83) {
      auto n = pick(4);
      auto p = model.position(index, member);
      auto expected = p ? model.range(index, *p >= n ? *p - n : 0, *p + n + 1 - (*p >= n ? *p - n : 0))
                        : std::vector<ranked_member>{};
      ASSERT_EQ(idx->around(index, member, n), expected);
    } else if (roll < 89) {
      auto bound = be32(static_cast<std::uint32_t>(pick(210)));
      ASSERT_EQ(idx->count_below(index, bound), model.count_below(index, bound));
    } else if (roll < 93) {
      ASSERT_EQ(idx->count(index), model.current[index].size());
    } else if (roll < 99) {
      if (pick(20) == 0) clock_.advance(2000);  // every loaded index is idle: dropped, rebuilt on use
      idx->commit(changelog_offset(++offset));
      model.committed = model.current;
    } else {
      idx->abort();
      model.current = model.committed;
    }
  }
  for (auto& [index, l] : model.current)
    ASSERT_EQ(idx->range(index, 0, l.size() + 1), model.range(index, 0, l.size() + 1));
}

TEST_P(ranked_index_conformance, positions_stay_exact_across_many_block_splits_and_merges) {
  // 30,000 members (about a hundred blocks of the in-memory list), then two thirds removed
  // (blocks empty and merge): every position, page and count_below checked against a sort.
  auto idx = open();
  std::mt19937 rng(3);
  std::vector<std::pair<std::string, std::string>> model;  // (score, member)
  for (int i = 0; i < 30'000; ++i) {
    std::string member = "m" + std::to_string(i);
    std::string score = be32(rng() % 5000);
    idx->upsert("big", member, score, 1);
    model.emplace_back(score, member);
  }
  (void)idx->count("big");
  auto check = [&] {
    std::sort(model.begin(), model.end());
    ASSERT_EQ(idx->count("big"), model.size());
    for (std::size_t p = 0; p < model.size(); p += 97) {
      ASSERT_EQ(idx->position("big", model[p].second), p);
      auto page = idx->range("big", p, 3);
      ASSERT_EQ(page.at(0).member, model[p].second);
      auto below = static_cast<std::uint64_t>(
          std::lower_bound(model.begin(), model.end(), std::pair{model[p].first, std::string()}) - model.begin());
      ASSERT_EQ(idx->count_below("big", model[p].first), below);
    }
  };
  check();
  std::shuffle(model.begin(), model.end(), rng);
  for (std::size_t i = 0; i < 20'000; ++i) ASSERT_TRUE(idx->remove("big", model[i].second, 2));
  model.erase(model.begin(), model.begin() + 20'000);
  check();
}

INSTANTIATE_TEST_SUITE_P(
    backends, ranked_index_conformance,
    ::testing::Values(backend{"rocksdb",
                              [](const store_options& o) { return open_rocksdb_store(o, shared_environment()); }},
                      backend{"memory", [](const store_options& o) { return open_memory_store(o); }}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace sluice::state
