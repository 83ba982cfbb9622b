// state_manager: the stores of one task. Opens them (wiping and reopening a corrupt
// RocksDB store, which the changelog then rebuilds), owns their changelog loggers, commits
// them with the changelog offset each reflects, aborts them, checkpoints them and says when
// a checkpoint or an early commit is due.
//
// Lifecycle: open_task_storage() opens the task directory and the stores' storage (or the
// constructor does it) -> the constructor builds every store of the task's sub-topology over
// it -> commit() / abort() / checkpoint() any number of times -> close(clean or dirty) once
// (the destructor closes dirty if close() was not called).
//
// Threading: open_task_storage() may run on any thread (see task_storage); the state_manager
// is owned by its stream_task and touched by that task's stream thread only.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/record_collector.hpp"
#include "runtime/task_id.hpp"
#include "sluice/detail/node.hpp"
#include "sluice/state/kv_store.hpp"
#include "sluice/state/state_store.hpp"
#include "sluice/state/task_directory.hpp"

namespace sluice::runtime {

struct task_services;

/// How a task or its stores close: clean keeps what the last commit made durable; dirty
/// (after a failure or an aborted transaction) drops pending writes first.
enum class close_mode { clean, dirty };

/// How a store's changelog records leave the task.
enum class changelog_batching {
  /// Every write is sent at once, in write order: for store kinds that log something other
  /// than independent per-key values, or whose restore depends on the order of writes to
  /// different keys (queue stores, window stores, ranked indexes, custom kinds), under
  /// exactly-once, where the transaction orders them against the outputs.
  per_write,
  /// Every write, in write order, is kept and sent when the task commits (or early, past the
  /// task's buffer bound): the same kinds under at-least-once. The record collector sends a
  /// changelog record only after the outputs sent before it are delivered (a flush);
  /// sending at each write would flush at nearly every write of a processor that emits and
  /// writes in turn (the overflow buffer's drain: an emission, then its pop).
  every_write_per_commit,
  /// The last write per key since the last commit is kept and sent when the task commits
  /// (or early, past the task's buffer bound): plain key-value stores, whose restore is
  /// last-write-wins per key, so a restore ends in the same state with fewer records.
  last_write_per_commit,
};

/// Bytes a task's changelog loggers buffer (shared by the loggers of one task's stores) and
/// the bound past which a logger sends its buffer early (statestore.changelog.buffer.bytes).
struct changelog_buffer_budget {
  std::int64_t bound = 0;  ///< 0: no buffering, every write is sent at once
  std::int64_t used = 0;
};

/// Sends a store's writes to its changelog partition, counting them since the last commit.
///
/// Under last_write_per_commit the writes wait in a buffer holding the last value (or
/// tombstone) and timestamp per key, in the order each key was first written; under
/// every_write_per_commit every write waits there, in write order. send() hands them to the
/// sender, drop() forgets them (an aborted transaction's writes). The stream thread calls
/// send() before it flushes the producer and commits offsets (at-least-once) or commits the
/// transaction (exactly-once), so the delivery reports the store's committed changelog offset
/// comes from cover every buffered write.
///
/// Threading: owned by a task's state_manager, used by that task's stream thread only.
class changelog_logger final : public detail::changelog_writer {
 public:
  changelog_logger(std::string topic, std::int32_t partition, record_sender& sender,
                   changelog_batching batching = changelog_batching::per_write,
                   changelog_buffer_budget* budget = nullptr);
  ~changelog_logger() override;
  changelog_logger(const changelog_logger&) = delete;
  changelog_logger& operator=(const changelog_logger&) = delete;

  void log(std::string_view key, const std::optional<std::string_view>& value, std::int64_t timestamp) override;
  /// Sends the buffered writes (one record per key) and empties the buffer.
  void send();
  /// Forgets the buffered writes and the count (the transaction they belonged to aborted).
  void drop() noexcept;
  /// Changelog records of the open commit: those sent since the last reset plus those
  /// buffered (one per key), i.e. what the commit will have added to the changelog. The
  /// early-commit policy (state_manager::commit_due) measures this, not the writes made.
  std::int64_t uncommitted() const noexcept { return sent_ + static_cast<std::int64_t>(live_); }
  /// Records handed to the sender since the last reset.
  std::int64_t sent() const noexcept { return sent_; }
  /// Writes waiting in the buffer (one per key under last_write_per_commit).
  std::size_t buffered() const noexcept { return live_; }
  /// Key and value bytes waiting in the buffer.
  std::int64_t buffered_bytes() const noexcept { return buffered_bytes_; }
  /// Entries whose storage the buffer holds: those buffered and those kept for reuse (at
  /// most as many as the last send() or drop() emptied).
  std::size_t kept_entries() const noexcept { return buffer_.size(); }
  /// After a commit: the count starts again. Precondition: send() since the last write.
  void reset() noexcept { sent_ = 0; }

 private:
  struct entry {
    std::string key;
    std::string value;
    bool tombstone = false;
    std::int64_t timestamp = 0;
  };
  static std::int64_t bytes_of(const entry& e) noexcept {
    return static_cast<std::int64_t>(e.key.size() + e.value.size());
  }
  void add_bytes(std::int64_t delta) noexcept;
  /// The buffer's next entry (reused when an earlier commit left one), holding `key`.
  entry& append(std::string_view key);
  /// Empties the buffer, keeping its entries (and their strings' storage) for the next commit.
  void clear_buffer() noexcept;

  std::string topic_;
  std::int32_t partition_;
  record_sender& sender_;
  changelog_batching batching_;
  changelog_buffer_budget* budget_;
  std::int64_t sent_ = 0;
  // The first live_ entries are the buffered writes, in first-write (last_write_per_commit)
  // or write order; the rest are kept for reuse. A deque, so index_'s views stay valid as it
  // grows.
  std::deque<entry> buffer_;
  std::size_t live_ = 0;
  // last_write_per_commit: key (viewing buffer_'s) -> position
  std::unordered_map<std::string_view, std::size_t> index_;
  std::int64_t buffered_bytes_ = 0;
};

/// A store of a task and where its changelog goes.
struct task_store {
  const detail::store_spec* spec = nullptr;
  std::unique_ptr<state::state_store> store;  ///< the kind the spec's factory made (key-value by default)
  std::string changelog_topic;                ///< empty when not logged
  std::unique_ptr<changelog_logger> changelog;
};

/// The storage under a task's stores, opened before the task is built: the task directory
/// (when a store is persistent) and each store's key-value storage, RocksDB or in-memory, in
/// the sub-topology's order. A failure is kept, not thrown: the state_manager built over it
/// rethrows it where it would have opened that store itself, so a task whose storage was
/// opened ahead fails exactly as one that opens its own. Opening stops at the first failure.
///
/// Threading: open_task_storage() runs no store factory (those run in the state_manager, on
/// the task's thread) and shares nothing but the RocksDB environment, which is thread-safe:
/// the task_manager opens the storage of several new tasks at once, one thread each (a
/// RocksDB open costs dozens of fsyncs). A store's rocksdb_options hook runs in it.
struct task_storage {
  /// The task's stream time, the clock of its stores' TTL (RocksDB's compaction threads read
  /// it too); the stream_task advances it.
  std::shared_ptr<std::atomic<std::int64_t>> stream_clock;
  std::optional<state::task_directory> directory;
  std::exception_ptr directory_failure;  ///< creating or locking the task directory failed
  struct store {
    std::unique_ptr<state::kv_store> storage;
    std::exception_ptr failure;  ///< opening it failed (the last entry: nothing opened after it)
    /// At-least-once: what the storage calls before it applies writes early
    /// (store_options::before_write_through); empty until the state_manager binds it to the
    /// store's changelog.
    std::shared_ptr<std::function<void()>> before_write_through;
  };
  std::vector<store> stores;  ///< the sub-topology's stores, in order, up to the first failure
};

/// Opens task `id`'s directory and the storage of its stores (see task_storage), whose TTL
/// runs on `stream_clock` (a new clock at -1 when null).
task_storage open_task_storage(task_id id, const task_services& services,
                               std::shared_ptr<std::atomic<std::int64_t>> stream_clock = nullptr);

class state_manager {
 public:
  /// The next changelog offset the producer confirmed for (topic, partition) since the last
  /// commit, if any.
  using changelog_offsets = std::function<std::optional<state::changelog_offset>(const std::string&, std::int32_t)>;

  /// Builds every store of the sub-topology over `storage` (open_task_storage(id, services)),
  /// throwing the failure it holds where opening that store failed; their changelog writes go
  /// to `sender`; `storage.stream_clock` is the clock of their TTL.
  state_manager(task_id id, const task_services& services, record_sender& sender, task_storage storage);
  /// Opens the storage itself first: open_task_storage(id, services, stream_clock).
  state_manager(task_id id, const task_services& services, record_sender& sender,
                std::shared_ptr<std::atomic<std::int64_t>> stream_clock);
  ~state_manager();
  state_manager(const state_manager&) = delete;
  state_manager& operator=(const state_manager&) = delete;

  std::vector<task_store>& all() noexcept { return stores_; }
  const std::vector<task_store>& all() const noexcept { return stores_; }
  /// The store named `name`, or nullptr.
  task_store* find(std::string_view name) noexcept;

  /// Applies pending writes with the changelog offset each store now reflects (after Kafka
  /// committed the transaction or the input offsets).
  void commit(const changelog_offsets& next_offset);
  /// Sends the changelog writes its loggers buffer (the last per key since the last commit,
  /// or every write in order). Call before the producer is flushed or the transaction
  /// committed.
  void send_changelogs();
  /// Drops pending writes and buffered changelog writes (after an aborted transaction).
  void abort();
  /// Flushes memtables so a crash replays a short tail.
  void checkpoint();
  /// Starts in the background what checkpoint() would wait for, where the stores can
  /// (state_store::begin_flush), and says whether checkpoint() would now return without
  /// waiting. Never blocks.
  bool begin_checkpoint();
  /// True when a logged store's changelog position moved past its last checkpoint by more
  /// than max(min_records, fraction * position) and the store holds more unflushed entries
  /// than that too (state_store::unflushed_entries; a store that cannot tell counts records
  /// alone): a crash now would take more than that share from the store, which a time-only
  /// checkpoint cannot bound at high rates. For a store writing new keys the two counts are
  /// about equal; a store rewriting a few keys in place stays under the entries' bound and is
  /// flushed at the timed checkpoints only (its replay is then bounded by their interval).
  bool checkpoint_due(double fraction, std::int64_t min_records) const;
  /// True when a logged store's changelog writes since the last commit exceed
  /// max(min_records, fraction * position). Committing then bounds what a crash replays
  /// (the unflushed tail plus the open commit) to about twice that share even when one
  /// commit interval carries many records, as right after a restart with a backlog.
  bool commit_due(double fraction, std::int64_t min_records) const;
  /// Closes every store; dirty drops pending writes first. Errors are logged.
  void close(close_mode mode) noexcept;

 private:
  /// Builds one store as its spec says over its opened `storage` (the one place that knows
  /// store kinds), and binds `before_write_through` (the storage's hook, null under
  /// exactly-once) to the store's changelog.
  task_store make_store(const detail::store_spec& spec, std::unique_ptr<state::kv_store> storage,
                        const std::shared_ptr<std::function<void()>>& before_write_through);

  task_id id_;
  std::string name_;  // id_.to_string(): the task directory and the logs
  const task_services& services_;
  record_sender& sender_;
  std::shared_ptr<std::atomic<std::int64_t>> stream_clock_;
  std::optional<state::task_directory> directory_;
  std::vector<task_store> stores_;
  changelog_buffer_budget changelog_budget_;  // shared by the loggers of this task's stores
  std::vector<std::int64_t> checkpointed_;    // per store: committed_offset() at the last flush (or open)
};

}  // namespace sluice::runtime
