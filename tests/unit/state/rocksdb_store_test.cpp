// RocksDB-specific behaviour: durability across reopen, what reaches disk before commit,
// crash consistency of data and offset, the shared environment, corrupt stores.
#include <gtest/gtest.h>
#include <rocksdb/statistics.h>

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/perf_context.h>
#include <rocksdb/perf_level.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "rocksdb_internals.hpp"
#include "sluice/state/rocksdb_store.hpp"
#include "sluice/state/task_directory.hpp"
#include "state_test_util.hpp"

namespace sluice::state {
namespace {

using test::temp_dir;

std::vector<std::pair<std::string, std::string>> drain(kv_iterator it) {
  std::vector<std::pair<std::string, std::string>> out;
  for (; it.valid(); it.next()) {
    out.emplace_back(std::string(it.key()), std::string(it.value()));
  }
  return out;
}

class rocksdb_store_test : public ::testing::Test {
 protected:
  store_options options(std::string name = "counts") { return {.name = std::move(name), .directory = dir_.path()}; }
  std::unique_ptr<kv_store> open(const store_options& o) { return open_rocksdb_store(o, env_); }

  rocksdb_environment env_{{.memory_budget_bytes = std::size_t{32} << 20}};
  temp_dir dir_;
};

TEST_F(rocksdb_store_test, reopen_keeps_data_and_committed_offset) {
  {
    auto s = open(options());
    EXPECT_EQ(s->committed_offset(), std::nullopt);
    s->put("a", "1");
    s->put("b", "2");
    s->commit(changelog_offset(17));
  }
  auto s = open(options());
  EXPECT_EQ(s->committed_offset(), changelog_offset(17));
  EXPECT_EQ(s->get("a"), "1");
  EXPECT_EQ(s->get("b"), "2");
}

TEST_F(rocksdb_store_test, hold_until_commit_writes_nothing_before_commit) {
  auto o = options();
  o.mode = write_mode::hold_until_commit;
  o.write_through_threshold_bytes = 16;  // ignored in this mode
  {
    auto s = open(o);
    for (int i = 0; i < 100; ++i) s->put("k" + std::to_string(i), "value");
    s->flush();  // flushes committed data only: there is none
  }              // closed without commit
  auto s = open(o);
  EXPECT_EQ(s->committed_offset(), std::nullopt);
  EXPECT_FALSE(s->all().valid());
}

TEST_F(rocksdb_store_test, write_through_flushes_early_but_records_the_offset_only_at_commit) {
  auto o = options();
  o.mode = write_mode::write_through;
  o.write_through_threshold_bytes = 1024;
  {
    auto s = open(o);
    for (int i = 0; i < 100; ++i) s->put("k" + std::to_string(i), std::string(100, 'v'));
  }  // closed without commit: early-applied writes stay, the offset was never written
  {
    auto s = open(o);
    EXPECT_EQ(s->committed_offset(), std::nullopt);
    EXPECT_EQ(s->get("k0"), std::string(100, 'v'));
    s->put("last", "x");
    s->commit(changelog_offset(100));
  }
  auto s = open(o);
  EXPECT_EQ(s->committed_offset(), changelog_offset(100));
  EXPECT_EQ(s->get("last"), "x");
}

TEST_F(rocksdb_store_test, overwrites_of_one_key_hold_one_pending_entry) {
  auto o = options();
  o.mode = write_mode::write_through;
  o.write_through_threshold_bytes = 1024;
  {
    auto s = open(o);
    for (int i = 0; i < 10000; ++i) s->put("k", std::to_string(i));
    EXPECT_LT(s->pending_bytes(), 64u);
    EXPECT_EQ(s->get("k"), "9999");
  }  // closed without commit: below the threshold, nothing was written early
  auto s = open(o);
  EXPECT_EQ(s->get("k"), std::nullopt);
}

TEST_F(rocksdb_store_test, hold_until_commit_keeps_overwrites_of_read_keys_out_of_rocksdb) {
  auto o = options();
  o.mode = write_mode::hold_until_commit;
  {
    auto s = open(o);
    s->put("a", "1");
    s->commit(changelog_offset(1));
    EXPECT_EQ(s->get("a"), "1");
    s->put("a", "2");
    s->remove("b");
    s->flush();
  }  // closed without commit, as after an aborted transaction
  auto s = open(o);
  EXPECT_EQ(s->committed_offset(), changelog_offset(1));
  EXPECT_EQ(s->get("a"), "1");
}

// Whatever the read cache keeps (nothing, a few entries, everything), reads, scans and the
// reopened store equal a plain model through puts, deletes, commits and aborts.
TEST_F(rocksdb_store_test, reads_match_a_model_whatever_the_read_cache_keeps) {
  for (std::size_t cache : {std::size_t{0}, std::size_t{4096}, std::size_t{1} << 20}) {
    SCOPED_TRACE("read_cache_bytes " + std::to_string(cache));
    auto o = options("model-" + std::to_string(cache));
    o.read_cache_bytes = cache;
    std::map<std::string, std::string> committed;
    std::map<std::string, std::optional<std::string>> pending;
    std::mt19937 rng(7);
    std::int64_t offset = 0;
    {
      auto s = open(o);
      std::string out;
      for (int round = 0; round < 40; ++round) {
        for (int i = 0; i < 300; ++i) {
          const std::string key = "k" + std::to_string(rng() % 500);
          const auto op = rng() % 10;
          if (op < 5) {
            const std::string value = std::to_string(rng());
            s->put(key, value);
            pending[key] = value;
          } else if (op < 6) {
            s->remove(key);
            pending[key] = std::nullopt;
          } else {
            std::optional<std::string> want;
            if (auto p = pending.find(key); p != pending.end()) {
              want = p->second;
            } else if (auto c = committed.find(key); c != committed.end()) {
              want = c->second;
            }
            ASSERT_EQ(s->get(key), want) << key;
          }
        }
        if (rng() % 5 == 0) {
          s->abort();
        } else {
          s->commit(changelog_offset(++offset));
          for (auto& [k, v] : pending) {
            if (v) {
              committed[k] = *v;
            } else {
              committed.erase(k);
            }
          }
        }
        pending.clear();
        ASSERT_EQ(drain(s->all()),
                  (std::vector<std::pair<std::string, std::string>>(committed.begin(), committed.end())));
      }
    }
    auto s = open(o);
    EXPECT_EQ(s->committed_offset(), changelog_offset(offset));
    EXPECT_EQ(drain(s->all()), (std::vector<std::pair<std::string, std::string>>(committed.begin(), committed.end())));
  }
}

// kill -9 without WAL: everything since the last memtable flush is lost, data and offset
// together, so the store reopens at an older but consistent point.
TEST_F(rocksdb_store_test, crash_loses_unflushed_data_and_offset_together) {
  if (const char* child_dir = test::child_argument()) {
    rocksdb_environment env({.memory_budget_bytes = std::size_t{32} << 20});
    auto s = open_rocksdb_store({.name = "counts", .directory = child_dir}, env);
    s->put("a", "1");
    s->commit(changelog_offset(10));
    s->flush();  // durable point: a=1 at offset 10
    s->put("a", "2");
    s->put("b", "2");
    s->commit(changelog_offset(20));  // in the memtable only
    std::_Exit(0);                    // no destructors, no flush: like kill -9
  }
  ASSERT_EQ(test::run_child(dir_.path().string()), 0);
  auto s = open(options());
  EXPECT_EQ(s->committed_offset(), changelog_offset(10));
  EXPECT_EQ(s->get("a"), "1");
  EXPECT_EQ(s->get("b"), std::nullopt);
}

TEST_F(rocksdb_store_test, clean_close_makes_the_last_commit_durable) {
  if (const char* child_dir = test::child_argument()) {
    rocksdb_environment env({.memory_budget_bytes = std::size_t{32} << 20});
    auto s = open_rocksdb_store({.name = "counts", .directory = child_dir}, env);
    s->put("a", "1");
    s->commit(changelog_offset(10));
    s->close();
    std::_Exit(0);
  }
  ASSERT_EQ(test::run_child(dir_.path().string()), 0);
  auto s = open(options());
  EXPECT_EQ(s->committed_offset(), changelog_offset(10));
  EXPECT_EQ(s->get("a"), "1");
}

TEST_F(rocksdb_store_test, restore_survives_reopen) {
  {
    auto s = open(options());
    std::vector<restore_record> batch{{"a", "1"}, {"b", "2"}, {"a", std::nullopt}};
    s->restore(batch, changelog_offset(3));
  }
  auto s = open(options());
  EXPECT_EQ(s->committed_offset(), changelog_offset(3));
  EXPECT_EQ(s->get("a"), std::nullopt);
  EXPECT_EQ(s->get("b"), "2");
}

// Changelog records k<first>..k<first+count-1> in a scrambled key order, each with `value`.
std::vector<std::pair<std::string, std::string>> scrambled_records(int first, int count, const std::string& value) {
  std::vector<std::pair<std::string, std::string>> out;
  for (int i = 0; i < count; ++i) {
    out.emplace_back("k" + std::to_string(first + (i * 7919) % count), value);
  }
  return out;
}

/// Changelog records and the restore batch viewing them (a batch holds views only).
struct changelog_run {
  std::vector<std::pair<std::string, std::optional<std::string>>> records;
  std::vector<restore_record> batch() const {
    std::vector<restore_record> out;
    for (const auto& [k, v] : records) {
      out.push_back({k, v ? std::optional<std::string_view>(*v) : std::nullopt});
    }
    return out;
  }
};

changelog_run run_of(const std::vector<std::pair<std::string, std::string>>& records) {
  changelog_run run;
  for (const auto& [k, v] : records) {
    run.records.emplace_back(k, v);
  }
  return run;
}

// A store restored from empty buffers its records and ingests them as SST files (sorted by a
// plain byte comparison on a thread of their own) instead of inserting into the skip list,
// which compares each key about log2(n) times on the restoring thread. A store that already
// holds a checkpoint restores through the skip list.
TEST_F(rocksdb_store_test, a_restore_from_empty_adds_records_without_comparing_keys) {
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kEnableCount);
  const auto records = scrambled_records(0, 4000, "v");
  {
    auto s = open(options());
    rocksdb::get_perf_context()->Reset();
    s->restore(run_of(records).batch(), changelog_offset(4000));
    EXPECT_LT(rocksdb::get_perf_context()->user_key_comparison_count, 4000u);
  }
  auto s = open(options());
  ASSERT_EQ(s->committed_offset(), changelog_offset(4000));
  rocksdb::get_perf_context()->Reset();
  const auto more = run_of(scrambled_records(4000, 4000, "v"));
  s->restore(more.batch(), changelog_offset(8000));
  EXPECT_GT(rocksdb::get_perf_context()->user_key_comparison_count, 4u * 4000u);
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
}

// After a restore from empty the store serves reads, scans, writes and commits as any
// other, and a later restore and a reopen keep it equal to its changelog.
TEST_F(rocksdb_store_test, a_store_restored_from_empty_serves_reads_writes_and_later_restores) {
  std::map<std::string, std::string> model;
  auto apply = [&](const std::vector<restore_record>& batch) {
    for (const auto& r : batch) {
      if (r.value) {
        model[std::string(r.key)] = std::string(*r.value);
      } else {
        model.erase(std::string(r.key));
      }
    }
  };
  auto expect_model = [&](kv_store& s) {
    EXPECT_EQ(drain(s.all()), (std::vector<std::pair<std::string, std::string>>(model.begin(), model.end())));
  };
  const auto first_run = run_of(scrambled_records(0, 3000, "a"));
  auto second_run = run_of(scrambled_records(1000, 3000, "b"));  // overwrites k1000..k2999
  for (int i = 0; i < 3000; i += 3) {
    second_run.records.emplace_back("k" + std::to_string(i), std::nullopt);  // tombstones of restored keys
  }
  const auto first = first_run.batch();
  const auto second = second_run.batch();
  {
    auto s = open(options());
    s->restore(first, changelog_offset(3000));
    apply(first);
    s->restore(second, changelog_offset(7000));
    apply(second);
    for (const auto& [k, v] : model) {
      ASSERT_EQ(s->get(k), v) << k;
    }
    EXPECT_EQ(s->get("k0"), std::nullopt);
    expect_model(*s);
    s->put("k1", "written");
    s->remove("k2");
    s->commit(changelog_offset(7002));
    model["k1"] = "written";
    model.erase("k2");
    expect_model(*s);
    const auto third_run = run_of(scrambled_records(3500, 2000, "c"));
    const auto third = third_run.batch();
    s->restore(third, changelog_offset(9002));
    apply(third);
    expect_model(*s);
  }
  auto s = open(options());
  EXPECT_EQ(s->committed_offset(), changelog_offset(9002));
  expect_model(*s);
}

// kill -9 while restoring from empty: the store reopens at the last chunk it ingested (small
// write buffers make chunks of 64 KiB, several during the restore, one possibly half written
// or half ingested at the kill), and holds exactly the changelog up to the offset it claims:
// data and offset together, never an offset past its data. A store that crashed before any
// chunk was ingested reopens empty, without an offset.
TEST_F(rocksdb_store_test, a_crash_during_a_restore_from_empty_keeps_data_and_offset_together) {
  constexpr int batches = 30, per_batch = 1000, keys = 4000;
  // Batch b writes value "b" to per_batch keys of k0..k3999, in a scrambled order.
  auto batch_records = [&](int b) {
    auto run = run_of(scrambled_records(0, keys, std::to_string(b)));
    const auto first = static_cast<std::ptrdiff_t>((b * per_batch) % keys);
    run.records = {run.records.begin() + first, run.records.begin() + first + per_batch};
    return run;
  };
  auto small_memtables = [](rocksdb::Options& o) { o.write_buffer_size = std::size_t{64} << 10; };
  if (const char* child_dir = test::child_argument()) {
    rocksdb_environment env({.memory_budget_bytes = std::size_t{32} << 20});
    auto flushed =
        open_rocksdb_store({.name = "flushed", .directory = child_dir, .configure_rocksdb = small_memtables}, env);
    for (int b = 0; b < batches; ++b) {
      const auto run = batch_records(b);
      flushed->restore(run.batch(), changelog_offset((b + 1) * per_batch));
    }
    auto unflushed = open_rocksdb_store({.name = "unflushed", .directory = child_dir}, env);
    const auto run = batch_records(0);
    unflushed->restore(run.batch(), changelog_offset(per_batch));
    std::_Exit(0);  // no destructors, no flush: like kill -9
  }
  ASSERT_EQ(test::run_child(dir_.path().string()), 0);
  auto flushed = open(options("flushed"));
  // 30,000 records fill several chunks of 64 KiB.
  ASSERT_TRUE(flushed->committed_offset().has_value());
  const auto offset = flushed->committed_offset()->value();
  ASSERT_EQ(offset % per_batch, 0);
  ASSERT_LE(offset, batches * per_batch);
  std::map<std::string, std::string> want;
  for (int b = 0; b < offset / per_batch; ++b) {
    for (const auto& [k, v] : batch_records(b).records) want[k] = *v;
  }
  EXPECT_EQ(drain(flushed->all()), (std::vector<std::pair<std::string, std::string>>(want.begin(), want.end())))
      << "at offset " << offset;
  auto unflushed = open(options("unflushed"));
  EXPECT_EQ(unflushed->committed_offset(), std::nullopt);
  EXPECT_FALSE(unflushed->all().valid());
}

// Records of one key spread over many restore batches and several ingested SST files
// (64 KiB chunks): the last write in changelog order wins, and a tombstone deletes a key an
// earlier file holds, in the store and after a reopen.
TEST_F(rocksdb_store_test, a_restore_from_empty_through_several_files_keeps_the_last_write_per_key) {
  auto small_chunks = [](rocksdb::Options& o) {
    o.write_buffer_size = std::size_t{64} << 10;
    o.disable_auto_compactions = true;  // the files stay as ingested
  };
  auto o = options();
  o.configure_rocksdb = small_chunks;
  std::mt19937 random(17);
  std::map<std::string, std::string> model;
  std::int64_t offset = 0;
  {
    auto s = open(o);
    for (int b = 0; b < 40; ++b) {
      changelog_run run;
      for (int i = 0; i < 1000; ++i) {
        const auto key = "k" + std::to_string(random() % 3000);
        if (random() % 5 == 0) {
          run.records.emplace_back(key, std::nullopt);
          model.erase(key);
        } else {
          const auto value = std::to_string(offset + i);
          run.records.emplace_back(key, value);
          model[key] = value;
        }
      }
      offset += 1000;
      s->restore(run.batch(), changelog_offset(offset));
    }
    s->flush();  // the restore ends
    EXPECT_EQ(drain(s->all()), (std::vector<std::pair<std::string, std::string>>(model.begin(), model.end())));
    for (int k = 0; k < 3000; k += 7) {
      const auto key = "k" + std::to_string(k);
      const auto it = model.find(key);
      EXPECT_EQ(s->get(key), it == model.end() ? std::nullopt : std::optional<std::string>(it->second)) << key;
    }
  }
  int files = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir_.path() / "counts")) {
    files += f.path().extension() == ".sst" ? 1 : 0;
  }
  EXPECT_GE(files, 6);  // data and offset files of three chunks or more
  auto s = open(o);
  EXPECT_EQ(s->committed_offset(), changelog_offset(offset));
  EXPECT_EQ(drain(s->all()), (std::vector<std::pair<std::string, std::string>>(model.begin(), model.end())));
}

// The runtime checkpoints (flushes) a store once its restore ends; from then on it restores
// through the skip list like any store holding a checkpoint.
TEST_F(rocksdb_store_test, a_flush_ends_the_restore_from_empty) {
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kEnableCount);
  auto s = open(options());
  const auto first = run_of(scrambled_records(0, 4000, "v"));
  s->restore(first.batch(), changelog_offset(4000));
  s->flush();
  rocksdb::get_perf_context()->Reset();
  const auto second = run_of(scrambled_records(4000, 4000, "v"));
  s->restore(second.batch(), changelog_offset(8000));
  EXPECT_GT(rocksdb::get_perf_context()->user_key_comparison_count, 4u * 4000u);
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
  EXPECT_EQ(s->get("k0"), "v");
  EXPECT_EQ(s->get("k7999"), "v");
}

// begin_flush() hands what a restore from empty buffered to the store's thread and returns
// at once: false while that chunk is sorted and ingested, true once flush() would not wait.
// The data and the offset are then durable together, as after flush() alone.
TEST_F(rocksdb_store_test, begin_flush_ingests_the_last_restored_chunk_in_the_background) {
  const auto records = run_of(scrambled_records(0, 4000, "v"));
  {
    auto s = open(options());
    s->restore(records.batch(), changelog_offset(4000));
    EXPECT_FALSE(s->begin_flush());  // sealed now: nothing was in flight before
    while (!s->begin_flush()) std::this_thread::yield();
    s->flush();
    EXPECT_EQ(s->get("k0"), "v");
    EXPECT_EQ(s->get("k3999"), "v");
  }
  auto s = open(options());
  EXPECT_EQ(s->committed_offset(), changelog_offset(4000));
  EXPECT_EQ(drain(s->all()).size(), 4000u);
  EXPECT_EQ(s->get("k1234"), "v");
  EXPECT_TRUE(s->begin_flush());  // a store that is not restoring from empty has nothing to start
}

// A restore from empty pauses the data family's automatic compactions (its ingested chunks
// overlap) and resumes them when it ends; compactions that the configure hook disabled stay
// disabled.
TEST_F(rocksdb_store_test, a_restore_from_empty_resumes_compactions_unless_the_configure_hook_disabled_them) {
  const auto records = run_of(scrambled_records(0, 4000, "v"));
  auto compacting = open(options("compacting"));
  ASSERT_EQ(rocksdb_auto_compactions(*compacting), true);
  compacting->restore(records.batch(), changelog_offset(4000));
  EXPECT_EQ(rocksdb_auto_compactions(*compacting), false);  // paused during the restore
  compacting->flush();                                      // the restore ends
  EXPECT_EQ(rocksdb_auto_compactions(*compacting), true);
  auto o = options("not_compacting");
  o.configure_rocksdb = [](rocksdb::Options& r) { r.disable_auto_compactions = true; };
  auto not_compacting = open(o);
  not_compacting->restore(records.batch(), changelog_offset(4000));
  EXPECT_FALSE(not_compacting->begin_flush());  // restoring from empty: a chunk was sealed
  not_compacting->flush();
  EXPECT_EQ(rocksdb_auto_compactions(*not_compacting), false);
}

TEST_F(rocksdb_store_test, two_stores_share_one_environment) {
  auto first = open(options("first"));
  auto second = open(options("second"));
  const auto before = env_.memtable_usage_bytes();
  for (int i = 0; i < 1000; ++i) {
    first->put("k" + std::to_string(i), std::string(100, 'a'));
    second->put("k" + std::to_string(i), std::string(100, 'b'));
  }
  first->commit(changelog_offset(1000));
  second->commit(changelog_offset(2000));
  EXPECT_GT(env_.memtable_usage_bytes(), before + 2 * 1000 * 100);
  EXPECT_GE(env_.cache_usage_bytes(), env_.memtable_usage_bytes());  // charged to the cache
  EXPECT_EQ(first->get("k1"), std::string(100, 'a'));
  EXPECT_EQ(second->get("k1"), std::string(100, 'b'));
  EXPECT_EQ(first->committed_offset(), changelog_offset(1000));
  EXPECT_EQ(second->committed_offset(), changelog_offset(2000));
}

TEST_F(rocksdb_store_test, expert_hook_receives_rocksdb_options_but_cannot_disable_atomic_flush) {
  bool called = false;
  auto o = options();
  o.configure_rocksdb = [&](rocksdb::Options& options) {
    auto* ro = &options;
    EXPECT_TRUE(ro->atomic_flush);
    EXPECT_NE(ro->write_buffer_manager, nullptr);
    ro->atomic_flush = false;
    ro->max_open_files = 64;
    called = true;
  };
  auto s = open(o);
  EXPECT_TRUE(called);
  s->put("a", "1");
  s->commit(changelog_offset(1));
  EXPECT_EQ(s->get("a"), "1");
}

TEST_F(rocksdb_store_test, a_commit_with_nothing_written_at_the_same_offset_writes_nothing) {
  auto statistics = rocksdb::CreateDBStatistics();
  auto o = options();
  o.configure_rocksdb = [&](rocksdb::Options& options) { options.statistics = statistics; };
  auto written = [&] { return statistics->getTickerCount(rocksdb::NUMBER_KEYS_WRITTEN); };
  auto s = open(o);
  s->put("a", "1");
  s->commit(changelog_offset(1));
  const auto after_first = written();
  EXPECT_GE(after_first, 2u) << "the value and the offset";
  s->commit(changelog_offset(1));  // idle: nothing pending, the same offset
  EXPECT_EQ(written(), after_first);
  s->commit(changelog_offset(2));  // a new offset is recorded even with no data
  EXPECT_EQ(written(), after_first + 1);
  s->remove("a");
  s->commit(changelog_offset(2));  // pending data is written whatever the offset
  EXPECT_EQ(written(), after_first + 3);
  EXPECT_EQ(s->get("a"), std::nullopt);
  EXPECT_EQ(s->committed_offset(), changelog_offset(2));
}

TEST_F(rocksdb_store_test, corrupt_store_fails_to_open_with_a_state_error_and_wipe_recovers) {
  task_directory task(dir_.path(), "app", "0_0");
  store_options o{.name = "counts", .directory = task.path()};
  {
    auto s = open(o);
    s->put("a", "1");
    s->commit(changelog_offset(5));
  }
  std::ofstream(task.store_path("counts") / "CURRENT", std::ios::trunc) << "garbage\n";
  auto e = test::thrown_error([&] { open(o); });
  EXPECT_EQ(e.code(), errc::state);
  EXPECT_NE(std::string(e.what()).find("cannot open state store 'counts'"), std::string::npos);
  task.wipe_store("counts");
  auto s = open(o);
  EXPECT_EQ(s->committed_offset(), std::nullopt);
  EXPECT_EQ(s->get("a"), std::nullopt);
}

// Opening does not read SST data blocks; the first read that meets a garbled one fails with a
// state error and marks the store, so the next open refuses it (and the runtime wipes it)
// rather than failing on the same block at every start.
TEST_F(rocksdb_store_test, corrupt_data_block_found_by_a_read_marks_the_store_so_the_next_open_refuses_it) {
  task_directory task(dir_.path(), "app", "0_0");
  store_options o{.name = "counts", .directory = task.path()};
  {
    auto s = open(o);
    for (int i = 0; i < 100; ++i) s->put("key" + std::to_string(i), std::string(100, 'v'));
    s->commit(changelog_offset(5));
  }  // close flushes: one SST file
  std::filesystem::path sst;
  for (const auto& f : std::filesystem::directory_iterator(task.store_path("counts")))
    if (f.path().extension() == ".sst" && (sst.empty() || f.file_size() > std::filesystem::file_size(sst)))
      sst = f.path();
  ASSERT_FALSE(sst.empty());
  {
    std::fstream f(sst, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(64);
    f << std::string(64, 'Z');
  }
  {
    auto s = open(o);  // the footer, index and filter are intact
    auto e = test::thrown_error([&] { s->get("key1"); });
    EXPECT_EQ(e.code(), errc::state);
    EXPECT_NE(std::string(e.what()).find("Corruption"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("marked corrupt"), std::string::npos) << e.what();
  }
  auto e = test::thrown_error([&] { open(o); });
  EXPECT_EQ(e.code(), errc::state);
  EXPECT_NE(std::string(e.what()).find("was found corrupt while running"), std::string::npos) << e.what();
  task.wipe_store("counts");
  auto s = open(o);
  EXPECT_EQ(s->committed_offset(), std::nullopt);
  EXPECT_EQ(s->get("key1"), std::nullopt);
}

TEST_F(rocksdb_store_test, a_committed_range_delete_survives_reopen) {
  {
    auto s = open(options());
    for (int i = 0; i < 100; ++i) s->put("k" + std::to_string(1000 + i), "v");
    s->commit(changelog_offset(1));
    s->flush();
    s->remove_range("k1010", "k1090");
    s->commit(changelog_offset(2));
  }
  auto s = open(options());
  EXPECT_EQ(s->committed_offset(), changelog_offset(2));
  EXPECT_EQ(drain(s->all()).size(), 20u);
  EXPECT_EQ(s->get("k1050"), std::nullopt);
  EXPECT_EQ(s->get("k1090"), "v");
}

// The point of remove_range: one range tombstone, not one tombstone per key that later
// scans step over one by one.
TEST_F(rocksdb_store_test, a_range_delete_leaves_no_point_tombstones_for_scans_to_skip) {
  auto s = open(options());
  for (int i = 0; i < 5000; ++i) s->put("q" + std::to_string(100000 + i), "v");
  s->commit(changelog_offset(1));
  s->flush();  // the entries are in an SST file; the range tombstone lands in the memtable
  s->remove_range("q100000", "q104990");
  s->commit(changelog_offset(2));
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kEnableCount);
  rocksdb::get_perf_context()->Reset();
  auto rest = drain(s->prefix("q"));
  const auto deletes_skipped = rocksdb::get_perf_context()->internal_delete_skipped_count;
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
  EXPECT_EQ(rest.size(), 10u);
  EXPECT_EQ(deletes_skipped, 0u);
}

// The value format a store's meta family records ("value_format"), read with RocksDB itself
// from the closed store at `path`; nullopt when none is recorded.
std::optional<std::string> recorded_format(const std::filesystem::path& path) {
  std::vector<rocksdb::ColumnFamilyDescriptor> families{{rocksdb::kDefaultColumnFamilyName, {}}, {"sluice_meta", {}}};
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  auto s = rocksdb::DB::OpenForReadOnly(rocksdb::DBOptions(), path.string(), families, &handles, &raw);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return std::nullopt;
  std::unique_ptr<rocksdb::DB> db(raw);
  std::string value;
  s = db->Get(rocksdb::ReadOptions(), handles.at(1), "value_format", &value);
  for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
  if (s.IsNotFound()) return std::nullopt;
  EXPECT_TRUE(s.ok()) << s.ToString();
  return value;
}

// Removes the value format from the closed store at `path`, as stores were written before
// they recorded one.
void forget_format(const std::filesystem::path& path) {
  rocksdb::Options o;
  std::vector<rocksdb::ColumnFamilyDescriptor> families{{rocksdb::kDefaultColumnFamilyName, {}}, {"sluice_meta", {}}};
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  auto s = rocksdb::DB::Open(rocksdb::DBOptions(o), path.string(), families, &handles, &raw);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::unique_ptr<rocksdb::DB> db(raw);
  ASSERT_TRUE(db->Delete(rocksdb::WriteOptions(), handles.at(1), "value_format").ok());
  ASSERT_TRUE(db->Flush(rocksdb::FlushOptions(), handles).ok());
  for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
  ASSERT_EQ(recorded_format(path), std::nullopt);
}

const std::string plain_format(1, '\0');
const std::string timestamped_format(1, '\1');

store_options with_format(store_options o, value_format f) {
  o.format = f;
  return o;
}

// A store records its value format with its first write and keeps its data when it is opened
// with that format again.
TEST_F(rocksdb_store_test, a_new_store_records_its_value_format_and_reopens_with_its_data) {
  const auto o = with_format(options(), value_format::timestamped);
  {
    auto s = open(o);
    s->put("a", "1");
    s->commit(changelog_offset(5));
  }
  EXPECT_EQ(recorded_format(dir_.path() / "counts"), timestamped_format);
  auto s = open(o);
  EXPECT_EQ(s->committed_offset(), changelog_offset(5));
  EXPECT_EQ(s->get("a"), "1");
}

// Opened with the other format than it recorded, either way, a store starts empty without an
// offset (so the runtime restores it from the start of its changelog) and records the new
// format with what it is restored with.
TEST_F(rocksdb_store_test, a_store_opened_with_another_value_format_is_wiped) {
  for (const auto& [before, after] : {std::pair{value_format::plain, value_format::timestamped},
                                      std::pair{value_format::timestamped, value_format::plain}}) {
    SCOPED_TRACE("from " + std::to_string(static_cast<int>(before)) + " to " + std::to_string(static_cast<int>(after)));
    const auto name = "s" + std::to_string(static_cast<int>(before));
    {
      auto s = open(with_format(options(name), before));
      s->put("a", "old");
      s->put("b", "old");
      s->commit(changelog_offset(7));
    }
    {
      auto s = open(with_format(options(name), after));
      EXPECT_EQ(s->committed_offset(), std::nullopt);
      EXPECT_EQ(s->get("a"), std::nullopt);
      EXPECT_TRUE(drain(s->all()).empty());
      const std::string value = "new";
      const std::vector<restore_record> changelog{{"a", value}};
      s->restore(changelog, changelog_offset(9));
    }
    EXPECT_EQ(recorded_format(dir_.path() / name), after == value_format::plain ? plain_format : timestamped_format);
    auto s = open(with_format(options(name), after));
    EXPECT_EQ(s->committed_offset(), changelog_offset(9));
    EXPECT_EQ(drain(s->all()), (std::vector<std::pair<std::string, std::string>>{{"a", "new"}}));
  }
}

// Stores written before stores recorded their format hold plain values: opened as plain they
// keep their data (and record the format with their next write), opened as timestamped they
// are wiped.
TEST_F(rocksdb_store_test, a_store_without_a_recorded_format_is_plain) {
  for (const auto format : {value_format::plain, value_format::timestamped}) {
    const auto name = "s" + std::to_string(static_cast<int>(format));
    {
      auto s = open(options(name));
      s->put("a", "1");
      s->commit(changelog_offset(3));
    }
    forget_format(dir_.path() / name);
    auto s = open(with_format(options(name), format));
    if (format == value_format::plain) {
      EXPECT_EQ(s->committed_offset(), changelog_offset(3));
      EXPECT_EQ(s->get("a"), "1");
      s->put("b", "2");
      s->commit(changelog_offset(4));
      s->close();
      EXPECT_EQ(recorded_format(dir_.path() / name), plain_format);
    } else {
      EXPECT_EQ(s->committed_offset(), std::nullopt);
      EXPECT_EQ(s->get("a"), std::nullopt);
    }
  }
}

// A store restored from empty through SST files records its format in the files' meta
// entries: reopened with it, the store keeps what it restored.
TEST_F(rocksdb_store_test, a_store_restored_from_empty_records_its_value_format) {
  const auto o = with_format(options(), value_format::timestamped);
  const auto run = run_of(scrambled_records(0, 3000, "v"));
  {
    auto s = open(o);
    s->restore(run.batch(), changelog_offset(3000));
    s->close();
  }
  EXPECT_EQ(recorded_format(dir_.path() / "counts"), timestamped_format);
  auto s = open(o);
  EXPECT_EQ(s->committed_offset(), changelog_offset(3000));
  EXPECT_EQ(s->get("k2999"), "v");
}

TEST_F(rocksdb_store_test, missing_directory_is_a_configuration_error) {
  auto e = test::thrown_error([&] { open({.name = "counts"}); });
  EXPECT_EQ(e.code(), errc::invalid_config);
}

TEST(rocksdb_environment, rejects_a_budget_too_small_to_run) {
  auto e = test::thrown_error([] { rocksdb_environment env({.memory_budget_bytes = 1024}); });
  EXPECT_EQ(e.code(), errc::invalid_config);
}

/// Holds a fixed number of bytes on a memory_budget; nothing to release.
struct fixed_consumer final : memory_consumer {
  std::size_t release_least_recent() noexcept override { return 0; }
};

TEST(rocksdb_environment, block_cache_gives_up_what_in_memory_indexes_hold) {
  constexpr std::size_t mib = std::size_t{1} << 20;
  rocksdb_environment env({.memory_budget_bytes = 32 * mib, .index_memory_fraction = 0.5});
  EXPECT_EQ(env.index_memory().limit_bytes(), 16 * mib);
  EXPECT_EQ(env.cache_capacity_bytes(), 32 * mib);  // nothing held: RocksDB has the whole budget
  fixed_consumer consumer;
  auto account = env.index_memory().open_account(consumer);
  account.charge(5 * mib + 1);
  EXPECT_EQ(env.cache_capacity_bytes(), 26 * mib);  // in 1 MiB steps, rounded up
  account.charge(20 * mib);                         // over the share: the cache keeps its half
  EXPECT_EQ(env.cache_capacity_bytes(), 16 * mib);
  account.close();
  EXPECT_EQ(env.cache_capacity_bytes(), 32 * mib);
}

TEST(rocksdb_environment, rejects_an_index_memory_fraction_out_of_range) {
  auto e = test::thrown_error([] { rocksdb_environment env({.index_memory_fraction = 0.95}); });
  EXPECT_EQ(e.code(), errc::invalid_config);
}

}  // namespace
}  // namespace sluice::state
