// The resources a rocksdb_environment shares with its stores. Private to sluice_state.
#pragma once

#include <memory>

#include <rocksdb/cache.h>
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

}  // namespace sluice::state::detail
