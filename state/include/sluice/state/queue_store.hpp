// sluice::state::queue_store: many small durable FIFO queues, one per key, over a kv_store.
//
// Built for buffers that fill and drain all day (the overflow buffer parks each customer's
// excess here): consumed entries are removed by range (kv_store::remove_range, one RocksDB
// DeleteRange per queue and commit) behind a per-queue head cursor, never by a delete per
// entry that later reads would step over. Reading the head of a queue costs one seek at the
// cursor however many entries were consumed before it.
//
// Lifecycle: the runtime opens the kv_store (RocksDB or in-memory, per the store's backend)
// and hands it over with the store's changelog sink (nullptr when not logged); the queue
// store owns the kv_store from then on and is committed, aborted, restored, flushed and
// closed by the runtime like every store.
//
// Threading: like kv_store, one instance belongs to one task and is used by one thread at a
// time; nothing locks.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/state/kv_backed_store.hpp"
#include "sluice/state/kv_store.hpp"
#include "sluice/state/state_store.hpp"

namespace sluice::state {

/// An entry's position in its queue, chosen by the caller: entries are ordered by (high,
/// low) and a queue is read in that order. Appending at a sequence already in the queue, or
/// at or below one already consumed, changes nothing (replays are idempotent). The overflow
/// buffer uses {input partition, input offset}.
struct queue_sequence {
  std::uint64_t high = 0;
  std::uint64_t low = 0;
  friend auto operator<=>(const queue_sequence&, const queue_sequence&) = default;
  /// The next sequence in order (low + 1, carrying into high).
  queue_sequence successor() const noexcept {
    return low == UINT64_MAX ? queue_sequence{high + 1, 0} : queue_sequence{high, low + 1};
  }
};

/// One queued entry as peek() returns it.
struct queue_entry {
  queue_sequence sequence{};
  std::string value{};
};

/// What append() did.
enum class append_result {
  appended,          ///< the entry joined the queue
  already_queued,    ///< an entry with this sequence is in the queue: nothing changed
  already_consumed,  ///< the sequence is at or below the queue's head cursor: nothing changed
};

/// Tuning of a queue_store.
struct queue_store_options {
  /// After this many entries were consumed (popped and committed) since the last time, the
  /// store asks its kv_store to compact its keys (entries and meta records) in the background
  /// (kv_store::compact_range, compaction_mode::background): the range tombstones behind the
  /// head cursors and the files they sit in go, so a head read touches as few files as on a
  /// fresh store. 0 = never.
  /// Default: 1,000,000.
  std::uint64_t compact_after_consumed = 1'000'000;
};

/// Many FIFO queues keyed by arbitrary bytes, each ordered by a caller-given sequence.
///
/// Storage layout inside the kv_store (bytewise order keeps each queue contiguous):
///   'e' <u32 queue length> <queue> <u64 high> <u64 low>  ->  entry value
///   'm' <queue>  ->  <version 0x01> <head: u64 high, u64 low> <tail: u64 high, u64 low>
///                    <size: u64>
/// The meta record's head is the first sequence not yet consumed, its tail the highest
/// sequence ever appended (an append beyond it needs no lookup); everything of the queue
/// below it is gone (one range delete from the queue's first possible key to the head). The
/// meta record stays when a queue empties (a few dozen bytes on disk, no memory) so the
/// cursor keeps recognising replays of consumed entries.
///
/// Changelog: every write is logged as an ordinary key/value record (timestamps are the
/// stream time the caller passes): entry puts, meta records, and a tombstone per consumed
/// entry so compaction drops it. A pop logs the meta record *before* the entry tombstones;
/// restore() uses the latest head it knows for a queue (the batch's, else the stored one),
/// skips records of entries below it, and applies [queue start, head) as one range delete,
/// so a restored store has no point tombstones in front of any head either.
///
/// Compaction: range tombstones cost a RocksDB read nothing per deleted entry, but the files
/// that hold them (and the overwritten meta records) add sorted runs that every head read's
/// iterator opens; every queue_store_options::compact_after_consumed consumed entries the
/// store asks for a background compaction of its entries (see bench/README.md, "Queue store").
///
/// Memory: the set of non-empty queue keys (one string per queue with entries) and what the
/// kv_store caches; entries live in the kv_store (on disk for RocksDB).
///
/// Errors: storage failures throw sluice::error(errc::state); a meta record that cannot be
/// decoded throws errc::state naming the store (wipe it to rebuild from the changelog).
class queue_store final : public kv_backed_store {
 public:
  /// Takes ownership of `storage`; logs to `changelog` unless it is nullptr. Reads the meta
  /// records once to learn which queues are non-empty (O(queues ever used)).
  queue_store(std::unique_ptr<kv_store> storage, changelog_sink* changelog, queue_store_options options = {});
  ~queue_store() override;

  void commit(changelog_offset next_changelog_offset) override;
  /// Drops pending writes and re-reads the meta of the queues they touched.
  void abort() override;
  void restore(std::span<const restore_record> batch, changelog_offset next_offset) override;
  void close() override;

  /// Adds `value` at `sequence` to `queue` (see append_result for replays). `timestamp_ms`
  /// is the changelog records' timestamp (stream time).
  append_result append(std::string_view queue, queue_sequence sequence, std::string_view value,
                       std::int64_t timestamp_ms);

  /// Up to `n` entries from the head of `queue`, in order, appended to `out` (cleared first).
  /// One seek at the head cursor, then n steps.
  void peek(std::string_view queue, std::size_t n, std::vector<queue_entry>& out);
  /// The head entry of `queue`, or nullopt if it is empty.
  std::optional<queue_entry> front(std::string_view queue);

  /// Removes up to `n` entries from the head of `queue`; returns how many it removed.
  std::size_t pop(std::string_view queue, std::size_t n, std::int64_t timestamp_ms);

  /// Entries in `queue` (0 for a queue never used).
  std::uint64_t size(std::string_view queue);
  /// The first sequence of `queue` not yet consumed ({0, 0} for a queue never used).
  queue_sequence head(std::string_view queue);

  /// The keys of the queues that hold entries, in bytewise order. Kept in memory, so asking
  /// never scans empty queues. Valid until the next write, abort or restore.
  const std::set<std::string, std::less<>>& non_empty_queues() const noexcept { return non_empty_; }

 private:
  struct meta {
    queue_sequence head{};
    queue_sequence tail{};
    std::uint64_t size = 0;
  };

  meta read_meta(std::string_view queue);
  void write_meta(std::string_view queue, const meta& m, std::int64_t timestamp_ms);
  void log(std::string_view key, const std::optional<std::string_view>& value, std::int64_t timestamp_ms);
  void track(std::string_view queue, const meta& m);
  void load_non_empty();

  changelog_sink* changelog_;
  std::set<std::string, std::less<>> non_empty_;
  std::set<std::string, std::less<>> touched_;  ///< queues written since the last commit
  queue_store_options options_;
  std::uint64_t consumed_pending_ = 0;      ///< entries popped since the last commit
  std::uint64_t consumed_uncompacted_ = 0;  ///< committed pops since the last compaction
  std::string key_scratch_;
  std::string value_scratch_;
  std::string get_scratch_;
  bool closed_ = false;
};

/// The kv_store key of entry `sequence` of `queue` (exposed for tests and benchmarks that
/// look underneath).
std::string queue_entry_key(std::string_view queue, queue_sequence sequence);

}  // namespace sluice::state
