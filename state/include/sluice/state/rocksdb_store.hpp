// sluice::state RocksDB stores and the process-wide RocksDB resources they share.
//
// RocksDB is tuned as a cache over the changelog: WAL off on every write, bloom filters, one
// block cache and one write-buffer budget for every store of the process. This header keeps
// RocksDB out of its users' includes (pimpl); the expert hook in store_options reaches the
// raw rocksdb::Options when needed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>

#include "sluice/error.hpp"
#include "sluice/state/kv_store.hpp"
#include "sluice/state/memory_budget.hpp"

namespace sluice::state {

namespace detail {
struct rocksdb_shared_state;
}

/// Sizing of the shared RocksDB resources.
struct rocksdb_environment_options {
  /// Total memory for the block cache, the memtables of every store in the process and the
  /// in-memory structures of store kinds (`state.memory.budget.bytes`). Memtables are charged
  /// to the block cache, so the sum stays near this figure (index and filter blocks live in
  /// the cache too); what store kinds hold (index_memory()) is taken off the cache's capacity.
  /// Default: 256 MiB.
  std::size_t memory_budget_bytes = std::size_t{256} << 20;

  /// The share of memory_budget_bytes that store kinds' in-memory structures (the ranked
  /// index's order-statistic lists) may hold together, the limit of index_memory(). The block
  /// cache gets the rest of the budget plus whatever of this share is not in use, so a job
  /// without such structures gives RocksDB the whole budget. Must be in [0, 0.9].
  /// Default: 0.5.
  double index_memory_fraction = 0.5;

  /// The share of memory_budget_bytes that memtables of all stores may use before RocksDB
  /// flushes the largest ones (a WriteBufferManager charged to the cache).
  /// Default: 0.25.
  double write_buffer_fraction = 0.25;

  /// Memtable size of each store (RocksDB write_buffer_size). A full memtable is flushed,
  /// which also bounds the changelog tail replayed after a crash.
  /// Default: 16 MiB.
  std::size_t write_buffer_bytes_per_store = std::size_t{16} << 20;

  /// Open SST files kept per store (RocksDB max_open_files); bounds file descriptors when a
  /// process runs many stores.
  /// Default: 256.
  int max_open_files_per_store = 256;

  /// Background flush and compaction jobs per store, and the minimum size of RocksDB's
  /// process-wide background thread pool.
  /// Default: 2.
  int background_jobs = 2;

  /// Bloom filter bits per key.
  /// Default: 10 (about 1% false positives).
  double bloom_bits_per_key = 10.0;
};

/// The RocksDB resources shared by every store of a process: one LRU block cache and one
/// WriteBufferManager charged to it, sized by one budget, plus the table options (bloom
/// filters, index and filter blocks in the cache); and the memory_budget that store kinds'
/// in-memory structures are charged to, whose use the block cache gives up.
///
/// Create one per process (the runtime does) and pass it to open_rocksdb_store. Thread-safe:
/// stores on any thread may share it. Stores keep the resources alive, so the environment
/// object may be destroyed before the stores opened with it.
class rocksdb_environment {
 public:
  explicit rocksdb_environment(const rocksdb_environment_options& options = {});
  rocksdb_environment(const rocksdb_environment&) = delete;
  rocksdb_environment& operator=(const rocksdb_environment&) = delete;
  ~rocksdb_environment();

  const rocksdb_environment_options& options() const noexcept;
  /// Bytes currently charged to the shared block cache (blocks plus memtables).
  std::size_t cache_usage_bytes() const noexcept;
  /// Bytes of memtables of all stores, as counted by the WriteBufferManager.
  std::size_t memtable_usage_bytes() const noexcept;
  /// The block cache's capacity now: memory_budget_bytes less what index_memory() holds
  /// (in 1 MiB steps), never below memory_budget_bytes less index_memory()'s limit.
  std::size_t cache_capacity_bytes() const noexcept;
  /// The account of store kinds' in-memory structures (limit: memory_budget_bytes x
  /// index_memory_fraction). The runtime hands it to every store kind it opens. Thread-safe.
  memory_budget& index_memory() noexcept { return *index_memory_; }

  /// For the implementation.
  const std::shared_ptr<const detail::rocksdb_shared_state>& shared() const noexcept { return shared_; }

 private:
  std::shared_ptr<const detail::rocksdb_shared_state> shared_;
  std::unique_ptr<memory_budget> index_memory_;
};

/// What open_rocksdb_store throws when the filesystem of the store is full: an
/// errc::state error naming the directory and the fix. The store's files are not damaged,
/// so it is not wiped (that would only cost a full restore once space is freed).
class out_of_space_error : public sluice::error {
 public:
  using sluice::error::error;
};

/// Opens (creating if missing) the RocksDB store `<options.directory>/<options.name>`.
///
/// Data lives in the default column family, the recorded changelog offset in the column
/// family "sluice_meta", which iteration never shows. committed_offset() is what the last
/// durable commit()/restore() recorded (see README.md for what "durable" means without WAL).
///
/// Throws sluice::error(errc::invalid_config) for a missing directory or invalid name, and
/// sluice::error(errc::state) when RocksDB cannot open the store (corrupt or unreadable
/// files, another process holding RocksDB's LOCK), out_of_space_error (an errc::state
/// error too) when its filesystem is full. A corrupt store is only a cache of its
/// changelog: the runtime wipes it (task_directory::wipe_store) and opens it again empty,
/// which restores it from the start of the changelog; a full filesystem stops the job.
std::unique_ptr<kv_store> open_rocksdb_store(const store_options& options, rocksdb_environment& environment);

}  // namespace sluice::state
