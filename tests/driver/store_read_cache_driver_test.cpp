// statestore.read.cache.bytes: how much of what a RocksDB key-value store already wrote it
// keeps in memory for reads. Observed through RocksDB's own per-thread counters (the driver
// processes on the calling thread): under exactly-once a count writes its key at every
// commit, and each later record reads it back, from the cache or, with the cache off, from
// RocksDB.
#include <gtest/gtest.h>
#include <rocksdb/perf_context.h>
#include <rocksdb/perf_level.h>

#include <cstdint>
#include <string>

#include "sluice/builder.hpp"
#include "sluice/config.hpp"
#include "sluice/test_driver.hpp"

namespace {

using sluice::testing::topology_test_driver;

/// RocksDB memtable lookups made on this thread while ten records of one key are counted,
/// one commit per record, after the key's first record.
std::uint64_t rocksdb_reads_of_a_counted_key(const std::string& read_cache_bytes) {
  sluice::streams_builder b;
  b.stream<std::string, std::string>("in").group_by_key().count("c").to_stream().to("out");
  sluice::config cfg;
  cfg.set("processing.guarantee", "exactly_once");
  cfg.set("statestore.read.cache.bytes", read_cache_bytes);
  topology_test_driver d(b.build(), cfg, {.rocksdb_stores = true, .commit_every_records = 1});
  auto in = d.input_topic<std::string, std::string>("in");
  in.pipe("k", "x");
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kEnableCount);
  rocksdb::get_perf_context()->Reset();
  for (int i = 0; i < 10; ++i) in.pipe("k", "x");
  const std::uint64_t reads = rocksdb::get_perf_context()->get_from_memtable_count;
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
  auto counts = d.output_topic<std::string, std::int64_t>("out").read_key_values_to_map();
  EXPECT_EQ(counts["k"], 11);
  return reads;
}

TEST(store_read_cache, a_store_reads_what_it_wrote_from_its_cache_and_from_rocksdb_with_the_cache_off) {
  EXPECT_EQ(rocksdb_reads_of_a_counted_key("1048576"), 0u);
  EXPECT_GE(rocksdb_reads_of_a_counted_key("0"), 10u);
}

}  // namespace
