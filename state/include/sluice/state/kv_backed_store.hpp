// sluice::state::kv_backed_store: the base of a store kind that keeps all its data in one
// kv_store (queue_store, window_store, ranked_index).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "sluice/state/kv_store.hpp"
#include "sluice/state/state_store.hpp"

namespace sluice::state {

/// The state_store calls a store kind over one kv_store has nothing to add to go straight
/// to that storage: its name, committed offset, flushes and what it holds unflushed. commit,
/// abort, restore and close stay the kind's own (each also calls the storage's).
///
/// Lifecycle and threading: those of state_store; the storage lives as long as the store.
class kv_backed_store : public state_store {
 public:
  const std::string& name() const noexcept final { return storage_->name(); }
  std::optional<changelog_offset> committed_offset() const noexcept final { return storage_->committed_offset(); }
  void flush() final { storage_->flush(); }
  bool begin_flush() final { return storage_->begin_flush(); }
  std::size_t pending_bytes() const noexcept final { return storage_->pending_bytes(); }
  std::optional<std::uint64_t> unflushed_entries() const noexcept final { return storage_->unflushed_entries(); }

  /// The kv_store holding the data (for the runtime and tests).
  kv_store& storage() noexcept { return *storage_; }

 protected:
  /// Throws errc::invalid_topology naming `kind` when `storage` is nullptr.
  kv_backed_store(std::unique_ptr<kv_store> storage, const char* kind);

  std::unique_ptr<kv_store> storage_;
};

}  // namespace sluice::state
