// rocksdb_environment: one block cache and one write-buffer budget for every store.
#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <string>

#include <rocksdb/env.h>
#include <rocksdb/filter_policy.h>
#include <spdlog/spdlog.h>

#include "rocksdb_shared_state.hpp"
#include "sluice/error.hpp"
#include "sluice/state/rocksdb_store.hpp"

namespace sluice::state {
namespace detail {
namespace {

/// Forwards RocksDB's warnings and errors to spdlog, naming the store; drops the rest
/// (RocksDB's info level is a per-flush and per-compaction diary).
class spdlog_info_logger final : public rocksdb::Logger {
 public:
  explicit spdlog_info_logger(std::string store_path)
      : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL), store_path_(std::move(store_path)) {}

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override { Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap); }

  void Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) override {
    if (level < GetInfoLogLevel() || level == rocksdb::InfoLogLevel::HEADER_LEVEL) {
      return;
    }
    char buffer[1024];
    const int n = std::vsnprintf(buffer, sizeof buffer, format, ap);
    if (n < 0) {
      return;
    }
    const std::string_view text(buffer, std::min<std::size_t>(static_cast<std::size_t>(n), sizeof buffer - 1));
    // RocksDB 7.8 records no unique ID in the MANIFEST for an ingested SST file (a store
    // restored from empty ingests its restore, sst_restore.hpp) and says so once per process
    // at the first read of one; nothing is wrong, and the files' checksums are still checked.
    if (text.find("opened without unique ID to verify") != std::string_view::npos) {
      return;
    }
    if (level == rocksdb::InfoLogLevel::WARN_LEVEL) {
      spdlog::warn("state: RocksDB at '{}': {}", store_path_, text);
    } else {
      spdlog::error("state: RocksDB at '{}': {}", store_path_, text);
    }
  }

 private:
  std::string store_path_;
};

}  // namespace

std::shared_ptr<rocksdb::Logger> make_info_logger(std::string store_path) {
  return std::make_shared<spdlog_info_logger>(std::move(store_path));
}

}  // namespace detail

rocksdb_environment::rocksdb_environment(const rocksdb_environment_options& options) {
  if (options.memory_budget_bytes < (std::size_t{8} << 20)) {
    throw sluice::error(errc::invalid_config, "state.memory.budget.bytes is " +
                                                  std::to_string(options.memory_budget_bytes) +
                                                  "; RocksDB stores need at least 8388608 (8 MiB)");
  }
  if (!(options.write_buffer_fraction > 0.0 && options.write_buffer_fraction < 1.0)) {
    throw sluice::error(errc::invalid_config, "the write-buffer fraction of the state memory budget must be in (0, 1)");
  }
  if (!(options.index_memory_fraction >= 0.0 && options.index_memory_fraction <= 0.9)) {
    throw sluice::error(errc::invalid_config,
                        "the in-memory index fraction of the state memory budget must be in [0, 0.9]");
  }
  if (options.background_jobs < 1) {
    throw sluice::error(errc::invalid_config, "RocksDB background jobs must be at least 1");
  }
  auto state = std::make_shared<detail::rocksdb_shared_state>();
  state->options = options;

  rocksdb::LRUCacheOptions cache_options;
  cache_options.capacity = options.memory_budget_bytes;
  cache_options.num_shard_bits = -1;            // RocksDB picks from capacity
  cache_options.strict_capacity_limit = false;  // a full cache must not fail reads
  cache_options.high_pri_pool_ratio = 0.1;      // index and filter blocks
  state->block_cache = rocksdb::NewLRUCache(cache_options);

  const auto memtable_budget =
      static_cast<std::size_t>(static_cast<double>(options.memory_budget_bytes) * options.write_buffer_fraction);
  state->write_buffer_manager = std::make_shared<rocksdb::WriteBufferManager>(memtable_budget, state->block_cache);

  auto& table = state->table_options;
  table.block_cache = state->block_cache;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(options.bloom_bits_per_key, false));
  table.cache_index_and_filter_blocks = true;  // so the budget covers them
  table.cache_index_and_filter_blocks_with_high_priority = true;
  table.pin_l0_filter_and_index_blocks_in_cache = true;
  table.block_size = 16 * 1024;
  table.format_version = 5;

  // RocksDB's background pools are process-wide; stores share them.
  rocksdb::Env::Default()->IncBackgroundThreadsIfNeeded(options.background_jobs, rocksdb::Env::LOW);
  // Two flush threads, so the flushes of different stores overlap (added when restores
  // flushed vector memtables; restores from empty now ingest SST files and flush nothing).
  rocksdb::Env::Default()->IncBackgroundThreadsIfNeeded(2, rocksdb::Env::HIGH);

  // Store kinds' in-memory structures take their share off the cache's capacity as they
  // grow, so cache + memtables + structures stay near the one budget.
  const auto index_limit =
      static_cast<std::size_t>(static_cast<double>(options.memory_budget_bytes) * options.index_memory_fraction);
  index_memory_ = std::make_unique<memory_budget>(index_limit);
  index_memory_->set_usage_listener(std::size_t{1} << 20,
                                    [cache = state->block_cache, total = options.memory_budget_bytes,
                                     floor = options.memory_budget_bytes - index_limit](std::size_t used) {
                                      cache->SetCapacity(used >= total - floor ? floor : total - used);
                                    });

  shared_ = std::move(state);
  spdlog::info(
      "state: RocksDB environment with a {} MiB budget ({} MiB for memtables, up to {} MiB for in-memory "
      "indexes)",
      options.memory_budget_bytes >> 20, memtable_budget >> 20, index_limit >> 20);
}

rocksdb_environment::~rocksdb_environment() = default;

const rocksdb_environment_options& rocksdb_environment::options() const noexcept { return shared_->options; }

std::size_t rocksdb_environment::cache_usage_bytes() const noexcept { return shared_->block_cache->GetUsage(); }

std::size_t rocksdb_environment::memtable_usage_bytes() const noexcept {
  return shared_->write_buffer_manager->memory_usage();
}

std::size_t rocksdb_environment::cache_capacity_bytes() const noexcept { return shared_->block_cache->GetCapacity(); }

}  // namespace sluice::state
