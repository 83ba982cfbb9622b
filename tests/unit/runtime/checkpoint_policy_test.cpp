// state_manager's checkpoint policy on RocksDB stores: a store is checkpointed once both its
// changelog tail and its unflushed entries pass the bound, so a store writing new keys is
// flushed by its tail while one rewriting a few keys in place is not (its flushes would
// write those few entries and leave every key to be inserted again). And the early-commit
// policy under exactly-once: an open transaction commits early only past the thread's floor
// or its share of the changelog.
#include <gtest/gtest.h>

#include <rocksdb/options.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "runtime/record_collector.hpp"
#include "runtime/state_manager.hpp"
#include "runtime/stream_task.hpp"
#include "runtime/stream_thread.hpp"
#include "sluice/builder.hpp"
#include "sluice/state/rocksdb_store.hpp"

namespace sluice::runtime {
namespace {

namespace fs = std::filesystem;

class discarding_sender final : public record_sender {
 public:
  void send(std::string_view, std::int32_t, const std::optional<std::string_view>&,
            const std::optional<std::string_view>&, std::int64_t, const sluice::headers&) override {}
};

enum class memtable_updates { in_place, new_versions };

/// One task (0_0) of a topology counting "in" into the RocksDB store "s", exactly-once (writes
/// held until commit), in a fresh state directory.
struct checkpoint_fixture {
  explicit checkpoint_fixture(memtable_updates updates) {
    state_dir = fs::temp_directory_path() / ("sluice-checkpoint-" + std::to_string(std::random_device{}()));
    materialized m{.name = "s"};
    if (updates == memtable_updates::in_place) {
      m.rocksdb_options = [](rocksdb::Options& o) {
        o.inplace_update_support = true;
        o.allow_concurrent_memtable_write = false;
      };
    }
    streams_builder b;
    b.stream<std::string, std::string>("in").group_by_key().count(m).to_stream().to("out");
    topo = b.build();
    services.topo = &topo;
    services.application_id = "cp";
    services.guarantee = processing_guarantee::exactly_once;
    services.state_dir = state_dir;
    services.rocksdb = &env;
    services.wall_clock_ms = [] { return std::int64_t{0}; };
    stores = std::make_unique<state_manager>(task_id{0, 0}, services, sender, clock);
  }
  ~checkpoint_fixture() {
    stores.reset();
    std::error_code ec;
    fs::remove_all(state_dir, ec);
  }

  /// Writes keys k0 .. k<keys - 1> into the open transaction and its changelog, as the
  /// count's node does.
  void write(int keys) {
    auto* s = stores->find("s");
    auto& kv = dynamic_cast<state::kv_store&>(*s->store);
    for (int k = 0; k < keys; ++k) {
      auto key = "k" + std::to_string(k);
      std::string value(8, static_cast<char>('a' + commits % 26));
      kv.put(key, value);
      s->changelog->log(key, std::string_view(value), 0);
    }
  }

  /// One commit writing `keys` keys (k0, k1, ...) and moving the changelog by as many records.
  void commit_writes(int keys) {
    write(keys);
    position += keys;
    ++commits;
    stores->commit([&](const std::string&, std::int32_t) { return state::changelog_offset(position); });
  }

  fs::path state_dir;
  state::rocksdb_environment env{{.memory_budget_bytes = std::size_t{64} << 20}};
  topology topo;
  task_services services;
  discarding_sender sender;
  std::shared_ptr<std::atomic<std::int64_t>> clock = std::make_shared<std::atomic<std::int64_t>>(0);
  std::unique_ptr<state_manager> stores;
  std::int64_t position = 0;
  int commits = 0;
};

constexpr double fraction = 0.04;
constexpr std::int64_t min_records = 1000;

TEST(checkpoint_policy, a_store_rewriting_few_keys_in_place_is_not_checkpointed_by_its_tail) {
  checkpoint_fixture f(memtable_updates::in_place);
  // 100 commits of the same 200 keys: a tail of 20,000 records over 200 unflushed entries.
  for (int i = 0; i < 100; ++i) f.commit_writes(200);
  EXPECT_EQ(f.stores->find("s")->store->unflushed_entries(), 200u);
  EXPECT_FALSE(f.stores->checkpoint_due(fraction, min_records));
}

TEST(checkpoint_policy, a_store_rewriting_keys_as_new_versions_is_checkpointed_past_the_bound) {
  checkpoint_fixture f(memtable_updates::new_versions);
  // The same writes: every commit adds a version per key, so the entries follow the tail.
  for (int i = 0; i < 5; ++i) f.commit_writes(200);
  EXPECT_FALSE(f.stores->checkpoint_due(fraction, min_records));  // 1,000 records: at the bound
  f.commit_writes(200);
  EXPECT_EQ(f.stores->find("s")->store->unflushed_entries(), 1200u);
  EXPECT_TRUE(f.stores->checkpoint_due(fraction, min_records));
  f.stores->checkpoint();
  EXPECT_EQ(f.stores->find("s")->store->unflushed_entries(), 0u);
  EXPECT_FALSE(f.stores->checkpoint_due(fraction, min_records));
}

TEST(checkpoint_policy, a_store_writing_new_keys_in_place_is_checkpointed_past_the_bound) {
  checkpoint_fixture f(memtable_updates::in_place);
  f.commit_writes(1000);
  EXPECT_FALSE(f.stores->checkpoint_due(fraction, min_records));
  f.commit_writes(1001);  // 1,001 keys: one new
  EXPECT_EQ(f.stores->find("s")->store->unflushed_entries(), 1001u);
  EXPECT_TRUE(f.stores->checkpoint_due(fraction, min_records));
}

TEST(checkpoint_policy, a_young_stores_open_transaction_commits_early_only_past_the_floor) {
  checkpoint_fixture f(memtable_updates::new_versions);
  const auto floor = thread_settings{}.early_commit_min_records;
  ASSERT_GT(floor, min_records);  // a transaction costs more than a flush of a small memtable
  // A young store (empty changelog): the floor is the bound, not 4 % of nothing.
  f.write(static_cast<int>(floor));
  EXPECT_FALSE(f.stores->commit_due(fraction, floor));
  f.write(static_cast<int>(floor) + 1);  // one more key: one more changelog record in the commit
  EXPECT_TRUE(f.stores->commit_due(fraction, floor));
}

TEST(checkpoint_policy, a_grown_stores_open_transaction_commits_early_past_its_share_of_the_changelog) {
  checkpoint_fixture f(memtable_updates::new_versions);
  const std::int64_t floor = 100;
  f.commit_writes(50000);  // 4 % of 50,000 = 2,000 records, above the floor
  f.write(2000);
  EXPECT_FALSE(f.stores->commit_due(fraction, floor));
  f.write(2001);
  EXPECT_TRUE(f.stores->commit_due(fraction, floor));
}

}  // namespace
}  // namespace sluice::runtime
