// The resources a rocksdb_environment shares with its stores. Private to sluice_state.
#pragma once

#include <memory>
#include <string>

#include <rocksdb/cache.h>
#include <rocksdb/env.h>
#include <rocksdb/table.h>
#include <rocksdb/write_buffer_manager.h>

#include "sluice/state/rocksdb_store.hpp"

namespace sluice::state::detail {

/// Immutable after construction; Cache and WriteBufferManager are thread-safe themselves.
struct rocksdb_shared_state {
  rocksdb_environment_options options;
  std::shared_ptr<rocksdb::Cache> block_cache;
  std::shared_ptr<rocksdb::WriteBufferManager> write_buffer_manager;
  rocksdb::BlockBasedTableOptions table_options;  // copied into every store's options
};

/// RocksDB's info log for the store at `store_path`, forwarded to spdlog (warnings and
/// errors only) instead of a LOG file in the store's directory. RocksDB's own file logger
/// writes through a file writer that, once a write failed (ENOSPC), aborts the process on
/// its next write in builds with assertions (Debian's); this one never touches the disk.
/// Thread-safe: RocksDB logs from its background threads.
std::shared_ptr<rocksdb::Logger> make_info_logger(std::string store_path);

}  // namespace sluice::state::detail
