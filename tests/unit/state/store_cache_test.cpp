// The RocksDB store's cache (state/src/store_cache.hpp) on its own: what it keeps after a
// commit of many keys.
#include "store_cache.hpp"

#include <gtest/gtest.h>

#include <string>

namespace sluice::state::detail {
namespace {

TEST(store_cache, a_commit_of_a_burst_of_keys_leaves_its_buckets_and_dirty_list_behind) {
  store_cache cache(64 << 10);  // clean entries up to 64 KiB: a few hundred
  std::string value;
  for (int i = 0; i < 100000; ++i) {
    value = "v";
    cache.put("key-" + std::to_string(i), value);
  }
  EXPECT_GE(cache.bucket_count(), 100000u);
  EXPECT_GE(cache.dirty_capacity(), 100000u);
  cache.mark_written();  // the burst reached RocksDB; clean entries evicted to the limit
  EXPECT_LT(cache.size(), 1000u);
  EXPECT_LT(cache.bucket_count(), 10000u);
  EXPECT_LT(cache.dirty_capacity(), 10000u);
  // The cache works on after the trim.
  value = "again";
  cache.put("key-7", value);
  ASSERT_NE(cache.find("key-7"), nullptr);
  EXPECT_EQ(cache.find("key-7")->st, store_cache::state::dirty_put);
}

TEST(store_cache, a_load_that_writes_as_many_keys_every_commit_keeps_its_buckets) {
  // Shrinking them at each commit would make every commit grow them again.
  store_cache cache(64 << 10);
  std::string value;
  auto commit_of = [&](int keys) {
    for (int i = 0; i < keys; ++i) {
      value = "v";
      cache.put("key-" + std::to_string(i), value);
    }
    cache.mark_written();
  };
  commit_of(100000);  // the first: nothing held before it, so its buckets go
  commit_of(100000);
  EXPECT_GE(cache.bucket_count(), 100000u);
  EXPECT_GE(cache.dirty_capacity(), 100000u);
  commit_of(100000);
  EXPECT_GE(cache.bucket_count(), 100000u);
  commit_of(10);  // the load ends: the commit after it lets them go
  commit_of(10);
  EXPECT_LT(cache.bucket_count(), 10000u);
  EXPECT_LT(cache.dirty_capacity(), 10000u);
}

}  // namespace
}  // namespace sluice::state::detail
