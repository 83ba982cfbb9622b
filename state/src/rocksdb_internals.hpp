// RocksDB's own numbers and options of a store opened with open_rocksdb_store, for tests and diagnostics
// that must look beneath the kv_store interface (e.g. that retention dropped a window
// store's segments without per-entry delete tombstones). Not in the public headers, which
// stay free of RocksDB.
//
// Threading: the store's own thread, like every other call on it.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "sluice/state/kv_store.hpp"

namespace sluice::state {

/// RocksDB integer property `name` ("rocksdb.estimate-num-keys",
/// "rocksdb.num-deletes-active-mem-table", ...) of the store's data column family; nullopt
/// when `store` is not a RocksDB store or RocksDB does not know the property.
std::optional<std::uint64_t> rocksdb_int_property(kv_store& store, std::string_view name);

/// Whether RocksDB runs automatic compactions on the store's data column family now (a
/// restore from empty pauses them until it ends); nullopt when `store` is not an open
/// RocksDB store. Unlike the property above, asking does not end a restore from empty.
std::optional<bool> rocksdb_auto_compactions(kv_store& store);

/// Compacts the store's whole data column family now (waits for it), so the properties
/// above count what live files hold after range deletes. No-op for other stores.
void rocksdb_compact_now(kv_store& store);

}  // namespace sluice::state
