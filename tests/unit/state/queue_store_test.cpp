// The queue store on both backends: FIFO order by sequence, idempotent appends, the set of
// non-empty queues, commit/abort, changelog replay, a randomized run against a deque model,
// and (RocksDB) that consumed entries leave nothing for head reads to step over.
#include <gtest/gtest.h>

#include <rocksdb/perf_context.h>
#include <rocksdb/perf_level.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sluice/state/queue_store.hpp"
#include "sluice/state/rocksdb_store.hpp"
#include "forwarding_store.hpp"
#include "recording_changelog.hpp"
#include "state_test_util.hpp"

namespace sluice::state {
namespace {

using test::temp_dir;

rocksdb_environment& shared_environment() {
  static rocksdb_environment env({.memory_budget_bytes = std::size_t{64} << 20});
  return env;
}

struct backend {
  std::string name;
  std::function<std::unique_ptr<kv_store>(const store_options&)> open;
};

void PrintTo(const backend& b, std::ostream* os) { *os << b.name; }

using test::logged;
using test::recording_changelog;

/// Restores `store` from what reached `log`, in batches of `batch_size` records.
void replay_into(const recording_changelog& log, queue_store& store, std::size_t batch_size) {
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < log.records().size(); i += batch_size) {
    const auto batch = log.restore_batch(i, batch_size);
    offset += static_cast<std::int64_t>(batch.size());
    store.restore(batch, changelog_offset(offset));
  }
}

std::vector<std::string> values(const std::vector<queue_entry>& entries) {
  std::vector<std::string> out;
  for (const auto& e : entries) out.push_back(e.value);
  return out;
}

class queue_store_conformance : public ::testing::TestWithParam<backend> {
 protected:
  std::unique_ptr<queue_store> open(std::string name = "queues", recording_changelog* changelog = nullptr) {
    store_options o{.name = std::move(name), .directory = dir_.path()};
    return std::make_unique<queue_store>(GetParam().open(o), changelog);
  }

  std::vector<std::string> peek_values(queue_store& q, std::string_view queue, std::size_t n = 1000) {
    std::vector<queue_entry> out;
    q.peek(queue, n, out);
    return values(out);
  }

  void commit(queue_store& q, recording_changelog& log) {
    q.commit(changelog_offset(++offset_));
    log.commit();
  }

  temp_dir dir_;
  std::int64_t offset_ = 0;
};

TEST_P(queue_store_conformance, entries_come_out_in_sequence_order) {
  auto q = open();
  q->append("c-1", {0, 30}, "third", 1);
  q->append("c-1", {0, 10}, "first", 1);
  q->append("c-1", {0, 20}, "second", 1);
  q->append("c-1", {1, 0}, "fourth", 1);  // high before low
  EXPECT_EQ(peek_values(*q, "c-1"), (std::vector<std::string>{"first", "second", "third", "fourth"}));
  EXPECT_EQ(peek_values(*q, "c-1", 2), (std::vector<std::string>{"first", "second"}));
  EXPECT_EQ(q->size("c-1"), 4u);
  EXPECT_EQ(q->pop("c-1", 2, 2), 2u);
  EXPECT_EQ(q->front("c-1")->value, "third");
  EXPECT_EQ(q->front("c-1")->sequence, (queue_sequence{0, 30}));
  EXPECT_EQ(q->head("c-1"), (queue_sequence{0, 21}));
  EXPECT_EQ(q->size("c-1"), 2u);
  EXPECT_EQ(q->pop("c-1", 10, 3), 2u);
  EXPECT_EQ(q->size("c-1"), 0u);
  EXPECT_EQ(q->front("c-1"), std::nullopt);
  EXPECT_EQ(q->pop("c-1", 1, 3), 0u);
  q->commit(changelog_offset(1));
  EXPECT_EQ(q->committed_offset(), changelog_offset(1));
  EXPECT_TRUE(peek_values(*q, "c-1").empty());
}

TEST_P(queue_store_conformance, appending_an_entry_again_changes_nothing) {
  auto q = open();
  EXPECT_EQ(q->append("c", {0, 1}, "a", 1), append_result::appended);
  EXPECT_EQ(q->append("c", {0, 2}, "b", 1), append_result::appended);
  EXPECT_EQ(q->append("c", {0, 2}, "b", 1), append_result::already_queued);
  EXPECT_EQ(q->size("c"), 2u);
  q->commit(changelog_offset(1));
  EXPECT_EQ(q->append("c", {0, 1}, "a", 2), append_result::already_queued);
  q->pop("c", 1, 2);
  EXPECT_EQ(q->append("c", {0, 1}, "a", 2), append_result::already_consumed);
  EXPECT_EQ(q->append("c", {0, 0}, "older", 2), append_result::already_consumed);
  EXPECT_EQ(peek_values(*q, "c"), (std::vector<std::string>{"b"}));
  q->pop("c", 1, 3);
  q->commit(changelog_offset(2));
  // Empty again, the cursor still recognises consumed entries.
  EXPECT_EQ(q->append("c", {0, 2}, "b", 3), append_result::already_consumed);
  EXPECT_EQ(q->append("c", {0, 3}, "c", 3), append_result::appended);
}

TEST_P(queue_store_conformance, queues_with_related_names_stay_apart) {
  auto q = open();
  const std::string with_nul("a\0", 2);
  q->append("a", {0, 1}, "a1", 1);
  q->append("ab", {0, 1}, "ab1", 1);
  q->append(with_nul, {0, 1}, "nul1", 1);
  q->append("", {0, 1}, "empty1", 1);
  q->append("a", {0, 2}, "a2", 1);
  EXPECT_EQ(peek_values(*q, "a"), (std::vector<std::string>{"a1", "a2"}));
  EXPECT_EQ(peek_values(*q, "ab"), (std::vector<std::string>{"ab1"}));
  EXPECT_EQ(peek_values(*q, with_nul), (std::vector<std::string>{"nul1"}));
  EXPECT_EQ(peek_values(*q, ""), (std::vector<std::string>{"empty1"}));
  q->pop("a", 5, 2);
  EXPECT_EQ(peek_values(*q, "ab"), (std::vector<std::string>{"ab1"}));
  EXPECT_EQ(peek_values(*q, with_nul), (std::vector<std::string>{"nul1"}));
  q->commit(changelog_offset(1));
  EXPECT_EQ(peek_values(*q, "ab"), (std::vector<std::string>{"ab1"}));
  EXPECT_EQ(peek_values(*q, with_nul), (std::vector<std::string>{"nul1"}));
  EXPECT_EQ(peek_values(*q, ""), (std::vector<std::string>{"empty1"}));
}

TEST_P(queue_store_conformance, non_empty_queues_lists_exactly_the_queues_with_entries) {
  auto q = open();
  using names = std::set<std::string, std::less<>>;
  EXPECT_TRUE(q->non_empty_queues().empty());
  q->append("x", {0, 1}, "1", 1);
  q->append("y", {0, 1}, "1", 1);
  q->append("y", {0, 2}, "2", 1);
  EXPECT_EQ(q->non_empty_queues(), (names{"x", "y"}));
  q->pop("x", 1, 1);
  EXPECT_EQ(q->non_empty_queues(), (names{"y"}));
  q->commit(changelog_offset(1));
  q->pop("y", 2, 2);
  q->append("z", {0, 1}, "1", 2);
  EXPECT_EQ(q->non_empty_queues(), (names{"z"}));
  q->abort();  // back to the committed state: y holds two entries, z nothing
  EXPECT_EQ(q->non_empty_queues(), (names{"y"}));
  EXPECT_EQ(q->size("y"), 2u);
  EXPECT_EQ(q->size("z"), 0u);
  EXPECT_EQ(peek_values(*q, "y"), (std::vector<std::string>{"1", "2"}));
}

TEST_P(queue_store_conformance, the_changelog_rebuilds_every_queue) {
  recording_changelog log(logged::at_commit);
  {
    auto q = open("queues", &log);
    for (std::uint64_t i = 0; i < 50; ++i) {
      q->append("q" + std::to_string(i % 5), {0, i}, "v" + std::to_string(i), 100 + i);
    }
    commit(*q, log);
    q->pop("q0", 3, 200);
    q->pop("q1", 10, 200);                     // empties q1
    q->append("q2", {0, 7}, "replayed", 200);  // already queued: logs nothing
    q->append("q2", {0, 3}, "late", 200);      // below the tail, not queued before: appended
    commit(*q, log);
    q->pop("q2", 4, 300);
    q->abort();  // never happened
    log.abort();
    q->pop("q3", 2, 300);
    commit(*q, log);
  }
  for (std::size_t batch : {std::size_t{1}, std::size_t{7}, std::size_t{1000}}) {
    auto r = open("restored-" + std::to_string(batch));
    replay_into(log, *r, batch);
    EXPECT_EQ(r->committed_offset(), changelog_offset(static_cast<std::int64_t>(log.records().size())));
    EXPECT_EQ(r->non_empty_queues(), (std::set<std::string, std::less<>>{"q0", "q2", "q3", "q4"}));
    EXPECT_EQ(peek_values(*r, "q0"), (std::vector<std::string>{"v15", "v20", "v25", "v30", "v35", "v40", "v45"}));
    EXPECT_TRUE(peek_values(*r, "q1").empty());
    EXPECT_EQ(r->size("q2"), 11u);
    EXPECT_EQ(peek_values(*r, "q2", 2), (std::vector<std::string>{"v2", "late"}));
    EXPECT_EQ(r->size("q3"), 8u);
    EXPECT_EQ(r->front("q3")->value, "v13");
    EXPECT_EQ(r->append("q0", {0, 5}, "again", 1), append_result::already_consumed);
    EXPECT_EQ(r->append("q0", {0, 25}, "again", 1), append_result::already_queued);
    // Nothing of a consumed entry is left in the underlying store.
    for (auto it = r->storage().all(); it.valid(); it.next()) {
      EXPECT_NE(it.key(), queue_entry_key("q0", {0, 0}));
      EXPECT_NE(it.key(), queue_entry_key("q1", {0, 46}));
    }
  }
  // The changelog carries a tombstone for every consumed entry (compaction drops them).
  std::size_t tombstones = 0;
  for (const auto& r : log.records()) tombstones += r.value ? 0 : 1;
  EXPECT_EQ(tombstones, 3u + 10u + 2u);
}

// Random appends (new, duplicate and already consumed sequences), pops, peeks, commits,
// aborts over a handful of queues against a std::deque per queue; at the end a store
// restored from the changelog must agree too.
TEST_P(queue_store_conformance, randomized_operations_agree_with_a_deque_model) {
  recording_changelog log(logged::at_commit);
  auto q = open("queues", &log);
  struct model_queue {
    std::deque<std::pair<queue_sequence, std::string>> entries;
    queue_sequence next{0, 0};
    queue_sequence head{0, 0};
  };
  std::map<std::string, model_queue> committed;
  std::map<std::string, model_queue> model;
  std::mt19937 rng(11);
  const std::vector<std::string> names{"a", "b", "ab", "c-42", std::string("\xff", 1)};
  std::vector<queue_entry> peeked;
  for (int step = 0; step < 6000; ++step) {
    const auto& name = names[rng() % names.size()];
    auto& m = model[name];
    const auto op = rng() % 100;
    if (op < 40) {
      // Sequences grow by random steps, sometimes into high.
      queue_sequence s = m.next;
      s.low += 1 + rng() % 3;
      if (rng() % 50 == 0) s = {s.high + 1, rng() % 4};
      const std::string v = "v" + std::to_string(step);
      ASSERT_EQ(q->append(name, s, v, step), append_result::appended) << "step " << step;
      m.entries.emplace_back(s, v);
      m.next = s;
    } else if (op < 48) {
      if (!m.entries.empty()) {
        const auto& e = m.entries[rng() % m.entries.size()];
        ASSERT_EQ(q->append(name, e.first, "dup", step), append_result::already_queued);
      } else if (m.head > queue_sequence{0, 0}) {
        ASSERT_EQ(q->append(name, {0, 0}, "old", step), append_result::already_consumed);
      }
    } else if (op < 70) {
      const std::size_t n = rng() % 4;
      const std::size_t expected = std::min(n, m.entries.size());
      ASSERT_EQ(q->pop(name, n, step), expected) << "step " << step;
      for (std::size_t i = 0; i < expected; ++i) {
        m.head = m.entries.front().first.successor();
        m.entries.pop_front();
      }
    } else if (op < 85) {
      const std::size_t n = rng() % 5;
      q->peek(name, n, peeked);
      ASSERT_EQ(peeked.size(), std::min(n, m.entries.size())) << "step " << step;
      for (std::size_t i = 0; i < peeked.size(); ++i) {
        ASSERT_EQ(peeked[i].sequence, m.entries[i].first) << "step " << step;
        ASSERT_EQ(peeked[i].value, m.entries[i].second) << "step " << step;
      }
      ASSERT_EQ(q->size(name), m.entries.size());
    } else if (op < 95) {
      commit(*q, log);
      committed = model;
    } else {
      q->abort();
      log.abort();
      model = committed;
    }
    std::set<std::string, std::less<>> non_empty;
    for (const auto& [k, v] : model) {
      if (!v.entries.empty()) non_empty.insert(k);
    }
    ASSERT_EQ(q->non_empty_queues(), non_empty) << "step " << step;
  }
  commit(*q, log);
  auto r = open("restored");
  replay_into(log, *r, 97);
  for (const auto& [name, m] : model) {
    r->peek(name, 100000, peeked);
    ASSERT_EQ(peeked.size(), m.entries.size()) << name;
    for (std::size_t i = 0; i < peeked.size(); ++i) {
      EXPECT_EQ(peeked[i].sequence, m.entries[i].first);
      EXPECT_EQ(peeked[i].value, m.entries[i].second);
    }
    EXPECT_EQ(r->head(name), m.head) << name;
  }
}

auto backend_name = [](const ::testing::TestParamInfo<backend>& info) { return info.param.name; };
INSTANTIATE_TEST_SUITE_P(
    stores, queue_store_conformance,
    ::testing::Values(backend{"rocksdb",
                              [](const store_options& o) { return open_rocksdb_store(o, shared_environment()); }},
                      backend{"memory", [](const store_options& o) { return open_memory_store(o); }}),
    backend_name);

/// RocksDB's internal counters for what a read stepped over.
struct skipped {
  std::uint64_t keys = 0;
  std::uint64_t deletes = 0;
  std::uint64_t range_reseeks = 0;
};

template <class F>
skipped count_skipped(F&& read) {
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kEnableCount);
  rocksdb::get_perf_context()->Reset();
  read();
  const auto* pc = rocksdb::get_perf_context();
  skipped s{pc->internal_key_skipped_count, pc->internal_delete_skipped_count, pc->internal_range_del_reseek_count};
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
  return s;
}

class queue_store_rocksdb : public ::testing::Test {
 protected:
  std::unique_ptr<queue_store> open(std::string name, recording_changelog* log = nullptr) {
    store_options o{.name = std::move(name), .directory = dir_.path(), .read_cache_bytes = 0};
    return std::make_unique<queue_store>(open_rocksdb_store(o, shared_environment()), log);
  }
  temp_dir dir_;
};

TEST_F(queue_store_rocksdb, restore_leaves_no_point_tombstones_in_front_of_a_head) {
  recording_changelog log(logged::at_commit);
  {
    auto q = open("queues", &log);
    for (std::uint64_t i = 0; i < 2000; ++i) q->append("c", {0, i}, "v", 1);
    q->commit(changelog_offset(1));
    log.commit();
    q->pop("c", 1990, 2);
    q->commit(changelog_offset(2));
    log.commit();
  }
  auto r = open("restored");
  replay_into(log, *r, 500);  // pops split over batches: tombstones arrive after their meta
  r->flush();
  std::size_t live = 0;
  const auto s = count_skipped([&] {
    for (auto it = r->storage().prefix(std::string("e")); it.valid(); it.next()) ++live;
  });
  EXPECT_EQ(live, 10u);
  EXPECT_EQ(s.deletes, 0u);
  EXPECT_EQ(r->front("c")->sequence, (queue_sequence{0, 1990}));
}

/// An in-memory kv_store that records the compactions asked of it.
class compaction_recording_store final : public test::forwarding_store {
 public:
  struct request {
    std::string from, to;
    compaction_mode mode;
  };
  explicit compaction_recording_store(std::vector<request>* requests)
      : forwarding_store(open_memory_store({.name = "q"})), requests_(requests) {}
  void compact_range(std::string_view from, std::string_view to, compaction_mode mode) override {
    requests_->push_back({std::string(from), std::string(to), mode});
  }

 private:
  std::vector<request>* requests_;
};

TEST(queue_store_compaction, asks_for_a_background_compaction_of_its_entries_every_n_committed_pops) {
  std::vector<compaction_recording_store::request> requests;
  queue_store q(std::make_unique<compaction_recording_store>(&requests), nullptr, {.compact_after_consumed = 10});
  for (std::uint64_t i = 0; i < 40; ++i) q.append(i % 2 == 0 ? "a" : "b", {0, i}, "v", 0);
  q.commit(changelog_offset(1));
  q.pop("a", 6, 0);
  q.commit(changelog_offset(2));
  EXPECT_TRUE(requests.empty()) << "6 consumed of 10";
  q.pop("a", 5, 0);
  q.pop("b", 9, 0);  // aborted: consumes nothing
  q.abort();
  EXPECT_TRUE(requests.empty()) << "aborted pops count for nothing";
  q.pop("a", 5, 0);
  q.commit(changelog_offset(3));
  ASSERT_EQ(requests.size(), 1u) << "11 consumed";
  EXPECT_EQ(requests[0].from, "e");
  EXPECT_EQ(requests[0].to, "n");
  EXPECT_EQ(requests[0].mode, compaction_mode::background);
  EXPECT_LE(requests[0].from, queue_entry_key("a", {0, 0}));
  EXPECT_GT(requests[0].to, queue_entry_key("b", {UINT64_MAX, UINT64_MAX}));
  EXPECT_GT(requests[0].to, std::string("m") + std::string(300, '\xff')) << "meta records too";
  q.pop("b", 9, 0);
  q.commit(changelog_offset(4));
  EXPECT_EQ(requests.size(), 1u) << "9 consumed since the compaction";
  EXPECT_EQ(q.size("a"), 9u);
  EXPECT_EQ(q.size("b"), 11u);
}

TEST(queue_store_compaction, never_asks_when_turned_off) {
  std::vector<compaction_recording_store::request> requests;
  queue_store q(std::make_unique<compaction_recording_store>(&requests), nullptr, {.compact_after_consumed = 0});
  for (std::uint64_t i = 0; i < 100; ++i) q.append("a", {0, i}, "v", 0);
  q.commit(changelog_offset(1));
  q.pop("a", 100, 0);
  q.commit(changelog_offset(2));
  EXPECT_TRUE(requests.empty());
}

}  // namespace
}  // namespace sluice::state
