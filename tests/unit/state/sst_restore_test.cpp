// sst_restore on its own, against a RocksDB database laid out as a store's (data and meta
// column families): when chunks are sealed early (the chunk thread idle, the minimum
// reached), that many small overlapping chunks keep the last write per key and tombstones,
// and that destroying it mid-restore leaves data and offset together.
#include <gtest/gtest.h>

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <rocksdb/metadata.h>
#include <rocksdb/options.h>

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "sst_restore.hpp"
#include "state_test_util.hpp"
#include "store_common.hpp"

namespace sluice::state::detail {
namespace {

constexpr std::string_view offset_key = "changelog_offset";

/// A file system that holds the creation of restore files (the chunk thread's first step)
/// until opened: while closed, a sealed chunk stays in flight.
class gated_file_system : public rocksdb::FileSystemWrapper {
 public:
  gated_file_system() : rocksdb::FileSystemWrapper(rocksdb::FileSystem::Default()) {}
  const char* Name() const override { return "gated_file_system"; }

  rocksdb::IOStatus NewWritableFile(const std::string& name, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* file,
                                    rocksdb::IODebugContext* debug) override {
    if (name.find("sluice-restore-") != std::string::npos) {
      std::unique_lock lock(mutex_);
      opened_.wait(lock, [&] { return open_; });
    }
    return target()->NewWritableFile(name, options, file, debug);
  }

  void set_open(bool open) {
    {
      std::lock_guard lock(mutex_);
      open_ = open;
    }
    opened_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable opened_;
  bool open_ = true;
};

/// A database with the store's two column families, auto compactions off so the ingested
/// files stay as they are; closed on destruction.
class restore_database {
 public:
  explicit restore_database(const std::filesystem::path& path, rocksdb::Env* env = rocksdb::Env::Default()) {
    options_.env = env;
    options_.create_if_missing = true;
    options_.create_missing_column_families = true;
    options_.disable_auto_compactions = true;
    meta_options_ = options_;
    std::vector<rocksdb::ColumnFamilyDescriptor> families{{rocksdb::kDefaultColumnFamilyName, options_},
                                                          {"sluice_meta", options_}};
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* raw = nullptr;
    const auto s = rocksdb::DB::Open(options_, path.string(), families, &handles, &raw);
    if (!s.ok()) throw std::runtime_error(s.ToString());
    db_.reset(raw);
    data_ = handles.at(0);
    meta_ = handles.at(1);
  }
  ~restore_database() {
    db_->DestroyColumnFamilyHandle(data_);
    db_->DestroyColumnFamilyHandle(meta_);
  }
  restore_database(const restore_database&) = delete;
  restore_database& operator=(const restore_database&) = delete;

  sst_restore::target target(const std::filesystem::path& directory) const {
    sst_restore::target t;
    t.db = db_.get();
    t.data = data_;
    t.meta = meta_;
    t.data_options = &options_;
    t.meta_options = &meta_options_;
    t.meta_key = std::string(offset_key);
    t.directory = directory;
    return t;
  }

  std::map<std::string, std::string> contents() const {
    std::map<std::string, std::string> out;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), data_));
    for (it->SeekToFirst(); it->Valid(); it->Next()) out.emplace(it->key().ToString(), it->value().ToString());
    return out;
  }

  std::optional<changelog_offset> offset() const {
    std::string value;
    if (!db_->Get(rocksdb::ReadOptions(), meta_, rocksdb::Slice(offset_key.data(), offset_key.size()), &value).ok()) {
      return std::nullopt;
    }
    return decode_offset(value);
  }

  /// The data family's live SST files, at every level.
  std::size_t data_files() const {
    rocksdb::ColumnFamilyMetaData meta;
    db_->GetColumnFamilyMetaData(data_, &meta);
    return meta.file_count;
  }

 private:
  rocksdb::Options options_;
  rocksdb::Options meta_options_;
  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::ColumnFamilyHandle* data_ = nullptr;
  rocksdb::ColumnFamilyHandle* meta_ = nullptr;
};

/// A changelog of `batches` batches of `per_batch` records over `keys` keys, one in five a
/// tombstone, every value distinct; and the store it leaves after each batch.
struct changelog {
  std::vector<std::vector<std::pair<std::string, std::optional<std::string>>>> batches;
  std::vector<std::map<std::string, std::string>> after;  ///< the store after batch i

  changelog(int batch_count, int per_batch, int keys, unsigned seed) {
    std::mt19937 random(seed);
    std::map<std::string, std::string> model;
    for (int b = 0; b < batch_count; ++b) {
      auto& batch = batches.emplace_back();
      for (int i = 0; i < per_batch; ++i) {
        auto key = "k" + std::to_string(random() % static_cast<unsigned>(keys));
        if (random() % 5 == 0) {
          model.erase(key);
          batch.emplace_back(std::move(key), std::nullopt);
        } else {
          auto value = "v" + std::to_string(b * per_batch + i);
          model[key] = value;
          batch.emplace_back(std::move(key), std::move(value));
        }
      }
      after.push_back(model);
    }
  }

  static changelog_offset offset_after(int batch, int per_batch) { return changelog_offset((batch + 1) * per_batch); }
};

void add(sst_restore& r, const std::vector<std::pair<std::string, std::optional<std::string>>>& batch) {
  for (const auto& [key, value] : batch) {
    r.add(key, value ? std::optional<std::string_view>(*value) : std::nullopt);
  }
}

/// Waits until the chunk thread has nothing to do (it ends on its own; nothing here starts
/// more work).
void wait_until_idle(const sst_restore& r) {
  while (r.chunk_in_flight()) std::this_thread::yield();
}

/// A database whose restore files are created through a gated_file_system, closed to hold a
/// sealed chunk in flight; the file system outlives the database.
struct gated_database {
  explicit gated_database(const std::filesystem::path& path) : db(path, env.get()) {}

  std::shared_ptr<gated_file_system> file_system = std::make_shared<gated_file_system>();
  std::unique_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(file_system);
  restore_database db;
};

class sst_restore_test : public ::testing::Test {
 protected:
  std::filesystem::path db_path() const { return dir_.path() / "db"; }

  /// A restore into `db` (at db_path()) with chunks of up to 16 MiB, sealed early from 8 KiB.
  sst_restore restore_into(const restore_database& db) const {
    return sst_restore(db.target(db_path()), std::size_t{16} << 20, std::size_t{8} << 10);
  }

  test::temp_dir dir_;
};

// With the chunk thread idle at every batch's end, each batch holding the minimum is sealed
// at once, far below the chunk bound: a batch under the minimum waits for the next. The 60
// chunks overlap (every batch spans the key range), and the store holds the last write per
// key in changelog order, tombstones deleting what earlier files hold.
TEST_F(sst_restore_test, sealing_whenever_idle_keeps_the_last_write_per_key_across_many_chunks) {
  constexpr int batches = 120, per_batch = 200;
  const changelog log(batches, per_batch, 1500, 23);
  restore_database db(db_path());
  {
    // 200 records of about 34 bytes (24 of index) fill the 8 KiB minimum in two batches.
    auto r = restore_into(db);
    std::uint64_t sealed = 0;
    for (int b = 0; b < batches; ++b) {
      wait_until_idle(r);
      add(r, log.batches[b]);
      ASSERT_TRUE(r.end_batch(changelog::offset_after(b, per_batch)).ok());
      // Odd batches complete a chunk of two batches; even ones leave it under the minimum.
      EXPECT_EQ(r.chunks_sealed(), sealed + (b % 2 == 1 ? 1 : 0)) << "batch " << b;
      sealed = r.chunks_sealed();
    }
    ASSERT_TRUE(r.finish().ok());
    EXPECT_EQ(r.chunks_sealed(), static_cast<std::uint64_t>(batches / 2));
  }
  EXPECT_EQ(db.data_files(), static_cast<std::size_t>(batches / 2));
  EXPECT_EQ(db.offset(), changelog::offset_after(batches - 1, per_batch));
  EXPECT_EQ(db.contents(), log.after.back());
}

// While a chunk is in flight, a chunk that reached the minimum but not the bound stays
// open, and is sealed at the first batch's end once the chunk thread is idle.
TEST_F(sst_restore_test, a_chunk_is_not_sealed_early_while_another_is_in_flight) {
  constexpr int batches = 6, per_batch = 1000;
  const changelog log(batches, per_batch, 5000, 5);
  gated_database gated(db_path());
  auto& db = gated.db;
  auto r = restore_into(db);
  gated.file_system->set_open(false);
  add(r, log.batches[0]);
  ASSERT_TRUE(r.end_batch(changelog::offset_after(0, per_batch)).ok());
  ASSERT_EQ(r.chunks_sealed(), 1u);  // nothing was in flight: sealed at the minimum
  for (int b = 1; b < batches - 1; ++b) {
    ASSERT_TRUE(r.chunk_in_flight());  // held at its first file
    add(r, log.batches[b]);
    ASSERT_TRUE(r.end_batch(changelog::offset_after(b, per_batch)).ok());
    EXPECT_EQ(r.chunks_sealed(), 1u) << "batch " << b;
  }
  gated.file_system->set_open(true);
  wait_until_idle(r);
  EXPECT_EQ(db.offset(), changelog::offset_after(0, per_batch));
  add(r, log.batches[batches - 1]);
  ASSERT_TRUE(r.end_batch(changelog::offset_after(batches - 1, per_batch)).ok());
  EXPECT_EQ(r.chunks_sealed(), 2u);  // batches 1-5 in one chunk
  ASSERT_TRUE(r.finish().ok());
  EXPECT_EQ(r.chunks_sealed(), 2u);
  EXPECT_EQ(db.data_files(), 2u);
  EXPECT_EQ(db.offset(), changelog::offset_after(batches - 1, per_batch));
  EXPECT_EQ(db.contents(), log.after.back());
}

// Destroyed before finish() (a task closed by a failure, or the process going down) with a
// chunk in flight and another filling: the chunk in flight is ingested with its offset, the
// filling one dropped, so the database holds exactly the changelog up to the offset it
// claims, and a restore from there completes it.
TEST_F(sst_restore_test, destroyed_mid_restore_leaves_data_and_offset_together) {
  constexpr int batches = 41, per_batch = 300;
  const changelog log(batches, per_batch, 2000, 91);
  int last_sealed_batch = -1;
  {
    gated_database gated(db_path());
    auto r = restore_into(gated.db);
    std::uint64_t sealed = 0;
    int b = 0;
    for (; b < batches - 4; ++b) {  // one chunk each: the chunk thread is idle at each end
      wait_until_idle(r);
      add(r, log.batches[b]);
      ASSERT_TRUE(r.end_batch(changelog::offset_after(b, per_batch)).ok());
      if (r.chunks_sealed() != sealed) last_sealed_batch = b;
      sealed = r.chunks_sealed();
    }
    ASSERT_EQ(sealed, static_cast<std::uint64_t>(batches - 4));
    wait_until_idle(r);
    gated.file_system->set_open(false);
    // Each batch holds the minimum (300 records of about 35 bytes): the first of these two is
    // sealed at once and held in flight, the second stays in the filling chunk.
    const auto sealed_before = sealed;
    for (; b < batches - 2; ++b) {
      add(r, log.batches[b]);
      ASSERT_TRUE(r.end_batch(changelog::offset_after(b, per_batch)).ok());
      if (r.chunks_sealed() != sealed) last_sealed_batch = b;
      sealed = r.chunks_sealed();
    }
    ASSERT_EQ(sealed, sealed_before + 1);
    ASSERT_EQ(last_sealed_batch, batches - 4);
    for (; b < batches; ++b) {  // and so do these
      ASSERT_TRUE(r.chunk_in_flight());
      add(r, log.batches[b]);
      ASSERT_TRUE(r.end_batch(changelog::offset_after(b, per_batch)).ok());
      ASSERT_EQ(r.chunks_sealed(), sealed);
    }
    gated.file_system->set_open(true);  // the destructor waits for the chunk in flight
  }
  restore_database db(db_path());
  ASSERT_EQ(db.offset(), changelog::offset_after(last_sealed_batch, per_batch));
  EXPECT_EQ(db.contents(), log.after[last_sealed_batch]);
  // Restoring the rest from the offset it claims completes it.
  auto r = restore_into(db);
  for (int b = last_sealed_batch + 1; b < batches; ++b) {
    add(r, log.batches[b]);
    ASSERT_TRUE(r.end_batch(changelog::offset_after(b, per_batch)).ok());
  }
  ASSERT_TRUE(r.finish().ok());
  EXPECT_EQ(db.offset(), changelog::offset_after(batches - 1, per_batch));
  EXPECT_EQ(db.contents(), log.after.back());
}

}  // namespace
}  // namespace sluice::state::detail
