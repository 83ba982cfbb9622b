// sluice::state::kv_store: the byte-level key-value store every typed store is built on.
//
// A store holds bytes; serdes live at the edge (the runtime). A store knows nothing about
// Kafka except the changelog offset it reflects, which it records atomically with its data
// (see README.md, "Consistency protocol"). Two implementations share this interface and its
// semantics: RocksDB (rocksdb_store.hpp) and in-memory (open_memory_store below).
//
// Threading: one store instance belongs to one task and is used by one thread at a time.
// Nothing here locks; hand a store to another thread only with a happens-before edge (the
// task manager's hand-over). Iterators belong to the same thread as their store.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "sluice/state/state_store.hpp"

namespace rocksdb {
struct Options;
}

namespace sluice::state {

/// Adjusts a RocksDB store's options before it opens (store_options::configure_rocksdb).
using rocksdb_config_setter = std::function<void(rocksdb::Options& options)>;

/// Order in which an iterator visits keys (bytewise, unsigned).
enum class direction {
  forward,  ///< ascending keys
  reverse,  ///< descending keys
};

/// How kv_store::compact_range runs.
enum class compaction_mode {
  background,  ///< marks the range for the store's compaction threads and returns at once
  wait,        ///< compacts the range on the calling thread before returning
};

/// How the values a caller stores are laid out, as far as a store needs to know: a RocksDB
/// store records it and, opened with another layout than it holds, starts empty instead of
/// reading values of one layout as the other (store_options::format). The store never looks
/// inside a value.
enum class value_format : std::uint8_t {
  /// The caller's bytes alone.
  plain = 0,
  /// An 8-byte big-endian timestamp, then the caller's bytes (the framework's non-windowed
  /// aggregations, as Kafka Streams' TimestampedKeyValueStore).
  timestamped = 1,
};

/// When pending writes reach the underlying storage.
enum class write_mode {
  /// Exactly-once: nothing reaches storage before commit(); abort() rolls everything back.
  hold_until_commit,
  /// At-least-once: pending writes may be applied early once they exceed
  /// store_options::write_through_threshold_bytes; the changelog offset is still written only
  /// by commit(). abort() drops only what was not applied yet.
  write_through,
};

/// How to open a store. Both implementations take the same options; fields that only one
/// of them uses say so.
struct store_options {
  /// The store's name, unique within its task. It is a directory name: non-empty, no '/',
  /// not starting with '.'.
  /// Default: none (required).
  std::string name{};

  /// The task directory (task_directory::path()); a RocksDB store lives in
  /// `<directory>/<name>`. Ignored by the in-memory store.
  /// Default: empty (required by open_rocksdb_store).
  std::filesystem::path directory{};

  /// When pending writes reach storage; see write_mode.
  /// Default: write_mode::hold_until_commit (correct under both guarantees).
  write_mode mode = write_mode::hold_until_commit;

  /// write_mode::write_through only: pending writes are applied to storage (without an
  /// offset) once their size exceeds this many bytes.
  /// Default: 8 MiB.
  std::size_t write_through_threshold_bytes = std::size_t{8} << 20;

  /// write_mode::write_through only: called just before pending writes are applied early
  /// (past write_through_threshold_bytes), so that what must be durable before the store's
  /// storage moves on gets there first (the framework delivers the outputs sent before the
  /// writes and hands their changelog records to the producer). If it throws, nothing is
  /// applied, the writes stay pending and the exception propagates from the write.
  /// Default: empty (nothing is called).
  std::function<void()> before_write_through{};

  /// RocksDB only: approximate memory (keys, values and bookkeeping) for entries already
  /// written to RocksDB that the store keeps in front of it, so that reading a key written
  /// recently needs no RocksDB lookup. Pending writes are held regardless (one entry per
  /// key). Least recently used entries go first, roughly. 0 turns the cache off.
  /// Default: 1 MiB.
  std::size_t read_cache_bytes = std::size_t{1} << 20;

  /// Entries expire this long after their write time (put, or the record timestamp on
  /// restore); reads never return an expired entry. 0 disables expiry.
  /// Default: 0 (entries never expire).
  std::chrono::milliseconds ttl{0};

  /// The clock for TTL, in milliseconds since the epoch. Tests inject one. The RocksDB store
  /// also calls it from RocksDB's background compaction threads, so it must be thread-safe.
  /// Default: empty, meaning std::chrono::system_clock.
  std::function<std::int64_t()> now_ms{};

  /// Expert hook, RocksDB only: called with the `rocksdb::Options` of the data column family
  /// after sluice has filled them in, before the database opens (include
  /// <rocksdb/options.h> where you define it). Whatever it sets wins, except `atomic_flush`
  /// and `create_if_missing`, which the consistency protocol needs and sluice sets again
  /// afterwards. It runs on the thread that opens the store, which is not always the stream
  /// thread: a new assignment's stores open on a few threads at once, so a setter shared by
  /// several stores must be safe to call concurrently.
  /// Default: empty (no changes).
  rocksdb_config_setter configure_rocksdb{};

  /// RocksDB only: the layout of the values the caller stores. A store records it in its meta
  /// column family with its first write. At open, a store that recorded another layout, or
  /// one holding data written before stores recorded theirs when this is
  /// value_format::timestamped (such data is plain), is wiped, data and changelog offset,
  /// and starts empty (committed_offset() nullopt), so the runtime restores it from the start
  /// of its changelog instead of misreading its values; the store logs why at info level.
  /// Default: value_format::plain.
  value_format format = value_format::plain;
};

namespace detail {
/// What a concrete store's iterator implements; kv_iterator wraps it. Not for users.
class kv_iterator_impl {
 public:
  virtual ~kv_iterator_impl() = default;
  virtual bool valid() const noexcept = 0;
  virtual std::string_view key() const noexcept = 0;
  virtual std::string_view value() const noexcept = 0;
  virtual void next() = 0;
};
}  // namespace detail

/// A forward-only cursor over a consistent snapshot of a store: the committed data and the
/// pending writes as they were when the iterator was created. Later writes, commits and
/// aborts of the store do not change what it shows; writing to the store while iterating
/// (e.g. deleting what you visit) is safe.
///
/// Lifetime: an iterator must be destroyed before its store is closed or destroyed. A store
/// closed with open iterators prints the store's name and calls std::terminate, because the
/// iterator would otherwise read freed memory later.
///
/// key() and value() stay valid until the next next() or the iterator's destruction.
class kv_iterator {
 public:
  kv_iterator(std::unique_ptr<detail::kv_iterator_impl> impl, std::size_t* open_count) noexcept;
  kv_iterator(kv_iterator&& other) noexcept;
  kv_iterator& operator=(kv_iterator&& other) noexcept;
  kv_iterator(const kv_iterator&) = delete;
  kv_iterator& operator=(const kv_iterator&) = delete;
  ~kv_iterator();

  /// True while the iterator is positioned on an entry.
  bool valid() const noexcept { return impl_ && impl_->valid(); }
  /// The current key. Precondition: valid().
  std::string_view key() const noexcept { return impl_->key(); }
  /// The current value. Precondition: valid().
  std::string_view value() const noexcept { return impl_->value(); }
  /// Moves to the next entry. Precondition: valid(). Throws sluice::error(errc::state) on an
  /// I/O or corruption error.
  void next() { impl_->next(); }

 private:
  void release() noexcept;

  std::unique_ptr<detail::kv_iterator_impl> impl_;
  std::size_t* open_count_ = nullptr;
};

/// A byte-level key-value store: the state_store every typed store and every composed store
/// kind is built on.
///
/// Reads (get, iterators) see the pending batch over the committed data (read-your-writes).
/// Writes (put, remove, remove_range) go to the pending batch; commit(offset) applies it and
/// the offset atomically; abort() drops it; restore() applies changelog records and their offset directly.
/// Keys are ordered bytewise (as unsigned bytes). Expired entries (ttl) are never returned.
///
/// Errors: storage failures (I/O, corruption) throw sluice::error(errc::state). Calling a
/// store after close() is a programming error (undefined).
///
/// Lifecycle members (name, committed_offset, commit, abort, restore, flush, pending_bytes,
/// close) are state_store's; for the RocksDB store, flush() is an atomic memtable flush of
/// data and offset (see README.md), and the abort of write_mode::write_through keeps writes
/// already applied early (at-least-once replays the input anyway). close() calls
/// std::terminate if iterators are still open (see kv_iterator). The in-memory store's
/// flush() does nothing.
class kv_store : public state_store {
 public:
  /// The value of `key`, or nullopt if absent or expired (get(key, out) into a new string).
  std::optional<std::string> get(std::string_view key) {
    std::string out;
    if (!get(key, out)) return std::nullopt;
    return out;
  }
  /// Like get(key), writing into `out` (reusing its capacity): true if found; `out` is
  /// unspecified when false.
  virtual bool get(std::string_view key, std::string& out) = 0;
  /// Sets `key` to `value` in the pending batch.
  virtual void put(std::string_view key, std::string_view value) = 0;
  /// Puts `value` if `key` is absent (or expired); returns true if it did.
  virtual bool put_if_absent(std::string_view key, std::string_view value) = 0;
  /// Deletes `key` in the pending batch (no-op if absent).
  virtual void remove(std::string_view key) = 0;
  /// Deletes every key k with from <= k < to (half-open, unlike range()) in the pending
  /// batch; no-op if from >= to. Reads see it at once; a put after it survives; commit()
  /// applies it in the same atomic write as the other pending writes (RocksDB: one
  /// DeleteRange, a single range tombstone instead of one tombstone per key, so later reads
  /// do not skip over deleted keys); abort() drops it. Pending ranges of one commit that
  /// overlap or touch are merged. Reads of single keys pay for it only while a range delete
  /// is pending (one ordered lookup).
  virtual void remove_range(std::string_view from, std::string_view to) = 0;

  /// Rewrites the committed data in [from, to) so that what was deleted there (range
  /// tombstones and the entries under them) no longer costs reads: RocksDB compacts the range
  /// down to its last level (compaction_mode::wait: on this thread; background: on a thread
  /// of the store's own, one at a time, a request while one runs dropped, cancelled and
  /// joined by close()). Data does not change; pending writes are not touched. The in-memory
  /// store has nothing to compact.
  virtual void compact_range(std::string_view from, std::string_view to, compaction_mode mode) {
    (void)from, (void)to, (void)mode;
  }

  /// Entries with from <= key <= to (both inclusive, as in Kafka Streams). Empty if from > to.
  kv_iterator range(std::string_view from, std::string_view to, direction dir = direction::forward) {
    return make_range(from, to, dir);
  }
  /// Entries whose key starts with `key_prefix` (all entries if it is empty).
  kv_iterator prefix(std::string_view key_prefix, direction dir = direction::forward) {
    return make_prefix(key_prefix, dir);
  }
  /// Every entry.
  kv_iterator all(direction dir = direction::forward) { return make_all(dir); }

  /// An estimate of the number of entries: for RocksDB, RocksDB's estimate plus the pending
  /// writes (overwrites and deletes make it inexact; expired entries count until compaction
  /// drops them). For the in-memory store, exact except for expired entries not yet read.
  virtual std::uint64_t approximate_count() = 0;
  /// An estimate of the bytes the store's entries take where they live: for RocksDB, its
  /// live SST files plus its memtables; nullopt for the in-memory store (its entries are in
  /// the process's heap: sluice_allocator_in_use_bytes). Reads RocksDB's properties only.
  virtual std::optional<std::uint64_t> approximate_bytes() { return std::nullopt; }

  /// Iterators created by this store and not destroyed yet.
  std::size_t open_iterators() const noexcept { return open_iterators_; }

 protected:
  virtual kv_iterator make_range(std::string_view from, std::string_view to, direction dir) = 0;
  virtual kv_iterator make_prefix(std::string_view key_prefix, direction dir) = 0;
  virtual kv_iterator make_all(direction dir) = 0;

  /// Wraps an implementation and counts it as open until destroyed.
  kv_iterator wrap_iterator(std::unique_ptr<detail::kv_iterator_impl> impl) {
    return kv_iterator(std::move(impl), &open_iterators_);
  }
  /// Terminates the process (with a message naming the store and `operation`) if iterators
  /// are open.
  void require_no_open_iterators(const char* operation) const noexcept;

 private:
  std::size_t open_iterators_ = 0;
};

/// Opens an in-memory store. It starts empty on every open (committed_offset() is nullopt)
/// and is rebuilt from the changelog by restore(). Same semantics as the RocksDB store,
/// including pending batch, write modes and TTL (expired entries are skipped by reads and
/// removed lazily when a get() meets them; memory is not reclaimed otherwise).
/// Throws sluice::error(errc::invalid_config) for an invalid name.
std::unique_ptr<kv_store> open_memory_store(const store_options& options);

}  // namespace sluice::state
