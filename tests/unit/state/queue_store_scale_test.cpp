// The queue store at scale, RocksDB only: 10,000,000 consumed entries and a head read that
// is still one seek with nothing skipped. Its own binary because it writes 10 M entries
// (about 30 s of CPU); the behaviour is asserted with RocksDB's counters, never timing
// (bench/ has the timing).
#include <gtest/gtest.h>

#include <rocksdb/perf_context.h>
#include <rocksdb/perf_level.h>

#include <memory>
#include <optional>
#include <string>

#include "sluice/state/queue_store.hpp"
#include "sluice/state/rocksdb_store.hpp"
#include "state_test_util.hpp"

namespace sluice::state {
namespace {

/// RocksDB's internal counters for what a read stepped over.
struct skipped {
  std::uint64_t keys = 0;
  std::uint64_t deletes = 0;
};

template <class F>
skipped count_skipped(F&& read) {
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kEnableCount);
  rocksdb::get_perf_context()->Reset();
  read();
  const auto* pc = rocksdb::get_perf_context();
  skipped s{pc->internal_key_skipped_count, pc->internal_delete_skipped_count};
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
  return s;
}

// The pathology of seed 001: a queue whose consumed entries leave a tombstone each gets
// slower to read with every entry consumed. Here 10,000,000 entries go through one queue
// (committed to RocksDB in rounds, flushed to SST files on the way) and the head is still
// found with one seek and nothing skipped.
TEST(queue_store_scale, head_read_after_ten_million_pops_uses_bounded_operations) {
  test::temp_dir dir;
  rocksdb_environment env({.memory_budget_bytes = std::size_t{64} << 20});
  auto q = std::make_unique<queue_store>(
      open_rocksdb_store({.name = "queues", .directory = dir.path(), .read_cache_bytes = 0}, env), nullptr);
  constexpr std::uint64_t total = 10'000'000;
  constexpr std::uint64_t round = 100'000;
  std::uint64_t next = 0;
  std::int64_t offset = 0;
  const std::string value(8, 'v');
  while (next < total) {
    for (std::uint64_t i = 0; i < round; ++i, ++next) {
      q->append("c-42", {0, next}, value, 1);
    }
    q->commit(changelog_offset(++offset));
    ASSERT_EQ(q->pop("c-42", round, 2), round);
    q->commit(changelog_offset(++offset));
    if (next % (20 * round) == 0) q->flush();
  }
  q->flush();
  q->append("c-42", {0, next}, "head", 3);
  q->append("c-42", {0, next + 1}, "second", 3);
  q->commit(changelog_offset(++offset));
  EXPECT_EQ(q->size("c-42"), 2u);
  std::optional<queue_entry> head;
  const auto s = count_skipped([&] { head = q->front("c-42"); });
  ASSERT_TRUE(head.has_value());
  EXPECT_EQ(head->value, "head");
  EXPECT_LE(s.keys, 2u);
  EXPECT_EQ(s.deletes, 0u);
  // Even a scan of the queue's whole key space from its very first key sees no tombstone:
  // the consumed entries went as range deletes.
  std::size_t live = 0;
  const auto scan = count_skipped([&] {
    for (auto it = q->storage().prefix(std::string("e")); it.valid(); it.next()) ++live;
  });
  EXPECT_EQ(live, 2u);
  EXPECT_EQ(scan.deletes, 0u);
}

}  // namespace
}  // namespace sluice::state
