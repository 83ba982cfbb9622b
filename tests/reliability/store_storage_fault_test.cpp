// A RocksDB store on a small ext4 volume that fills up: the store reports the full disk as
// sluice::error(errc::state) naming its directory and the fix (RocksDB's own file logger used
// to abort the process instead), keeps its last durable commit intact, and works again once
// space is freed. Needs root to loop-mount the volume; CI runs as root.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "loop_volume.hpp"
#include "sluice/error.hpp"
#include "sluice/state/rocksdb_store.hpp"

namespace {

namespace fs = std::filesystem;
using sluice::state::kv_store;
using sluice::state::open_rocksdb_store;
using sluice::state::rocksdb_environment;
using sluice::state::store_options;

constexpr int keys_per_batch = 100;

std::string key_of(int batch, int k) { return "b" + std::to_string(batch) + "-k" + std::to_string(k); }

// 2 KiB a value, incompressible and a function of (batch, key) so reads can be checked.
std::string value_of(int batch, int k) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(batch) * 1000003u + static_cast<std::uint64_t>(k));
  std::string v(2048, '\0');
  for (auto& c : v) c = static_cast<char>(rng());
  return v;
}

// After recovery the store holds exactly the batches below its committed offset (batch i is
// committed with offset i + 1) and none at or above it: data and offset agree.
void expect_exactly_batches_below_offset(kv_store& s, int batches_written) {
  ASSERT_TRUE(s.committed_offset().has_value());
  const auto offset = static_cast<int>(s.committed_offset()->value());
  for (int b = 0; b < batches_written; ++b) {
    for (int k = 0; k < keys_per_batch; k += 7) {
      auto got = s.get(key_of(b, k));
      if (b < offset) {
        ASSERT_TRUE(got.has_value()) << key_of(b, k) << " of a batch below offset " << offset;
        ASSERT_EQ(*got, value_of(b, k)) << key_of(b, k);
      } else {
        ASSERT_FALSE(got.has_value()) << key_of(b, k) << " of a batch at or past offset " << offset;
      }
    }
  }
}

class store_storage_fault : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = sluice::test::loop_volume::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
    mount_ = fs::temp_directory_path() / ("sluice-store-disk-" + std::to_string(::getpid()));
    volume_ = std::make_unique<sluice::test::loop_volume>(mount_, 32);
    state_dir_ = mount_ / "state";
    fs::create_directories(state_dir_);
  }
  void TearDown() override {
    volume_.reset();
    std::error_code ec;
    fs::remove_all(mount_, ec);
  }

  std::unique_ptr<kv_store> open() {
    return open_rocksdb_store(store_options{.name = "counts", .directory = state_dir_}, env_);
  }

  fs::path mount_, state_dir_;
  std::unique_ptr<sluice::test::loop_volume> volume_;
  rocksdb_environment env_{{.memory_budget_bytes = std::size_t{32} << 20}};
};

TEST_F(store_storage_fault,
       full_disk_is_a_state_error_naming_the_directory_and_the_store_resumes_after_space_is_freed) {
  volume_->fill_leaving(std::uint64_t{6} << 20);
  auto store = open();

  // Commit and flush batch after batch (offset = batches committed) until the disk is full.
  int batches = 0;
  int durable = 0;  // batches whose commit a successful flush made durable
  std::string message;
  for (; batches < 1000 && message.empty(); ++batches) {
    try {
      for (int k = 0; k < keys_per_batch; ++k) store->put(key_of(batches, k), value_of(batches, k));
      store->commit(sluice::state::changelog_offset(batches + 1));
      store->flush();
      durable = batches + 1;
    } catch (const sluice::error& e) {
      EXPECT_EQ(e.code(), sluice::errc::state) << e.what();
      message = e.what();
    }
  }
  ASSERT_FALSE(message.empty()) << "6 MiB of free space took " << batches << " batches of 200 KiB";
  EXPECT_GT(durable, 0) << "the first batch already failed: " << message;
  EXPECT_NE(message.find("state store 'counts'"), std::string::npos) << message;
  EXPECT_NE(message.find("No space left on device"), std::string::npos) << message;
  EXPECT_NE(message.find("free space on it"), std::string::npos) << message;
  EXPECT_NE(message.find("'" + state_dir_.string() + "'"), std::string::npos) << message;
  std::cout << "disk full after " << durable << " durable batches: " << message << "\n";

  // Closing on a full disk cannot flush; it warns and keeps the last durable state.
  store->abort();
  store.reset();
  volume_->free_ballast();

  store = open();
  ASSERT_TRUE(store->committed_offset().has_value());
  EXPECT_GE(store->committed_offset()->value(), durable);
  EXPECT_LE(store->committed_offset()->value(), batches);
  expect_exactly_batches_below_offset(*store, batches);

  // It takes writes again, and they survive a reopen.
  const int next = static_cast<int>(store->committed_offset()->value());
  for (int k = 0; k < keys_per_batch; ++k) store->put(key_of(next, k), value_of(next, k));
  store->commit(sluice::state::changelog_offset(next + 1));
  store->flush();
  store.reset();
  store = open();
  EXPECT_EQ(store->committed_offset(), sluice::state::changelog_offset(next + 1));
  expect_exactly_batches_below_offset(*store, batches + 1);
}

TEST_F(store_storage_fault, a_new_store_needs_well_under_a_mebibyte_of_disk) {
  const auto before = volume_->free_bytes();
  auto store = open();
  store->put("a", "1");
  store->commit(sluice::state::changelog_offset(1));
  store->flush();
  const auto used = before - volume_->free_bytes();
  // RocksDB's default preallocates 4 MiB for the MANIFEST alone.
  EXPECT_LT(used, std::uint64_t{1} << 20) << used << " bytes for a store holding one key";
}

}  // namespace
