// sluice::state::state_store: what the runtime needs of every store kind, whatever it holds
// (key-value, ranked index, queue, windows), and changelog_sink, where a store's changelog
// records go.
//
// The runtime drives every store through this interface alone: it opens the task's stores,
// commits them with the changelog offset they reflect, aborts them with a failed transaction,
// restores them from their changelog, flushes them at checkpoints and closes them. A new
// store kind therefore plugs in without touching the runtime: it is built over the
// key-value storage the runtime opens for it (see `store_factory` in the framework's
// `sluice/detail/node.hpp`), writes its data there and logs its writes itself.
//
// Threading: a store instance belongs to one task and is used by one thread at a time;
// nothing here locks. Hand a store to another thread only with a happens-before edge.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "sluice/state/changelog_offset.hpp"

namespace sluice::state {

/// One changelog record to restore: a value, or a tombstone (nullopt) that deletes the key.
struct restore_record {
  std::string_view key{};
  std::optional<std::string_view> value{};
  /// The changelog record's timestamp, used as the write time for TTL so a restored entry
  /// expires when the original would have (an already expired entry is not restored).
  /// Default: nullopt, meaning "now" on the store's clock.
  std::optional<std::int64_t> timestamp_ms{};
};

/// Receives a store's changelog records. Implemented by the runtime (one per store and
/// task, sending to `<application.id>-<store>-changelog`, partition = the task's) and by
/// tests. Called on the task's thread.
class changelog_sink {
 public:
  virtual ~changelog_sink() = default;
  /// Logs `key` = `value` (nullopt: a tombstone) written at `timestamp` (stream time, ms).
  virtual void log(std::string_view key, const std::optional<std::string_view>& value, std::int64_t timestamp) = 0;
};

/// The lifecycle every store kind shares with the runtime.
///
/// Writes wait in a pending batch; commit(offset) applies them together with the changelog
/// offset they reflect in one atomic write; abort() drops them; restore() applies changelog
/// records directly. Storage failures throw sluice::error(errc::state). Calling a store after
/// close() is a programming error.
class state_store {
 public:
  state_store() = default;
  state_store(const state_store&) = delete;
  state_store& operator=(const state_store&) = delete;
  virtual ~state_store() = default;

  /// The store's name, unique within its task (the changelog topic is named after it).
  virtual const std::string& name() const noexcept = 0;

  /// The next changelog offset to restore from, as recorded by the last commit() or
  /// restore() that reached storage; nullopt for a new (or wiped) store.
  virtual std::optional<changelog_offset> committed_offset() const noexcept = 0;

  /// Applies the pending batch and `next_changelog_offset` in one atomic write.
  virtual void commit(changelog_offset next_changelog_offset) = 0;
  /// Drops the pending batch (after an aborted transaction).
  virtual void abort() = 0;
  /// Applies changelog records and `next_offset` in one atomic write, bypassing the pending
  /// batch. Precondition: no pending writes (throws sluice::error(errc::state) otherwise).
  virtual void restore(std::span<const restore_record> batch, changelog_offset next_offset) = 0;

  /// Makes everything committed so far durable, so a crash after it replays no changelog
  /// records before the current offset. Expensive: call at checkpoints, not per commit.
  virtual void flush() = 0;
  /// Starts in the background what flush() would wait for, where the store can, and says
  /// whether flush() would now return without waiting. Never blocks: call it again until it
  /// returns true, then flush() (which may be called at any time, and waits). A RocksDB store
  /// restored from empty hands its last restored chunk to its thread (state/README.md,
  /// "Restore from empty"); the kinds built on a key-value store ask theirs. Default: true
  /// (flush() does all the work). Failures surface from flush(). The runtime calls it on a
  /// store whose restore ended while it restores others. Same thread as the store's other calls.
  virtual bool begin_flush() { return true; }

  /// Bytes in the pending batch (what commit() would write; abort() would drop).
  virtual std::size_t pending_bytes() const noexcept = 0;

  /// Entries committed but not yet durable: what flush() would write, and what a crash now
  /// would take from the store for its restore to put back (a key written at every commit
  /// since the last flush counts once where its storage updates entries in place, else once
  /// per commit). The runtime's checkpoint policy weighs a flush by it. Default: nullopt, the
  /// store cannot tell (the runtime then counts changelog records alone).
  virtual std::optional<std::uint64_t> unflushed_entries() const noexcept { return std::nullopt; }

  /// Drops pending writes, flushes committed data and releases the store's resources.
  /// Idempotent; the destructor calls it.
  virtual void close() = 0;
};

}  // namespace sluice::state
