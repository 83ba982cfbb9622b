// sluice::state::ranked_index: a store kind holding, per index key, members ordered by a
// score, answering rank, page and neighbour queries in O(log n + k).
//
// Bytes in, bytes out: an index key, a member and a score are byte strings. Members of one
// index are ordered by (score, member), both compared bytewise as unsigned bytes; a caller
// that wants numbers in order encodes them order-preservingly (big-endian, sign bit flipped).
//
// Storage: the index is composed over a kv_store the runtime opens for it (RocksDB or
// in-memory), one entry per member (README.md, "Ranked index"). Every write goes to that
// kv_store and, when the store is logged, to the changelog sink as an ordinary key/value
// record, so commit, abort, restore and tail-only replay are the kv_store's. Rank queries are
// served by an in-memory order-statistic list per index, built from a prefix scan of the
// index's entries on first use, maintained on writes, and dropped when untouched for
// ranked_index_options::idle_eviction or when the process's memory_budget (the share of
// `state.memory.budget.bytes` the runtime gives to store kinds' in-memory structures) is over
// its limit: least recently used first across every store of the process; the next query
// rebuilds it. abort() and restore() drop the lists of the indexes they change, so the
// lists always agree with the kv_store.
//
// Threading: one instance belongs to one task and is used by one thread at a time, like
// every store. The only other thread that touches it is another store's, through the shared
// memory_budget, which may drop one of its lists: an internal mutex, uncontended on the
// task's own thread, guards the lists, and the budget only try-locks it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/state/kv_backed_store.hpp"
#include "sluice/state/kv_store.hpp"
#include "sluice/state/memory_budget.hpp"
#include "sluice/state/state_store.hpp"

namespace sluice::state {

/// One member of an index as queries return it.
struct ranked_member {
  std::string member;
  std::string score;
  /// 0-based position in the index's order (score, then member).
  std::uint64_t position = 0;
  friend bool operator==(const ranked_member&, const ranked_member&) = default;
};

/// The memory of the loaded lists is not an option: it is charged to the memory_budget the
/// index is opened with (README.md, "Memory budget").
struct ranked_index_options {
  /// An index not read or written for this long (on `now_ms`) is dropped from memory at
  /// the next commit(). 0 = only the budget drops indexes.
  /// Default: 10 minutes.
  std::chrono::milliseconds idle_eviction{10 * 60 * 1000};

  /// The clock for idle_eviction, in milliseconds. Tests inject one.
  /// Default: empty, meaning std::chrono::steady_clock.
  std::function<std::int64_t()> now_ms{};
};

namespace detail {
class order_list;
struct loaded_index;
}  // namespace detail

/// A ranked index over a kv_store. See the file comment for storage and threading.
///
/// Writes (upsert, remove) take the timestamp their changelog record carries (the task's
/// stream time). Reads see pending writes (read-your-writes), like the kv_store's.
/// Errors: the kv_store's (sluice::error(errc::state) on I/O or corruption).
class ranked_index final : public kv_backed_store, public memory_charged_store {
 public:
  /// Takes ownership of `storage`; `changelog` may be null (the store is not logged) and
  /// must outlive the index otherwise. Its lists are charged to no budget (only idle eviction
  /// drops them) until charge_memory_to(): the runtime calls it for every ranked index it
  /// opens; code using an index on its own should pass a budget (the next constructor).
  ranked_index(std::unique_ptr<kv_store> storage, changelog_sink* changelog, ranked_index_options options = {});
  /// As above, with the loaded lists charged to `memory` from the start (the runtime's is
  /// rocksdb_environment::index_memory()); the index keeps an account there, which keeps the
  /// budget's state alive.
  ranked_index(std::unique_ptr<kv_store> storage, changelog_sink* changelog, memory_budget& memory,
               ranked_index_options options = {});
  ~ranked_index() override;

  /// Sets `member`'s score in `index` (adding the member if absent).
  void upsert(std::string_view index, std::string_view member, std::string_view score, std::int64_t timestamp);
  /// Removes `member` from `index`; false if it was not there.
  bool remove(std::string_view index, std::string_view member, std::int64_t timestamp);

  /// `member`'s score, or nullopt if it is not in `index`. One kv lookup; loads nothing.
  std::optional<std::string> score(std::string_view index, std::string_view member);
  /// `member`'s 0-based position in `index`, or nullopt if it is not there.
  std::optional<std::uint64_t> position(std::string_view index, std::string_view member);
  /// How many members of `index` have a score bytewise smaller than `bound` (the position a
  /// member with score `bound` and the smallest member would take). With a score that
  /// starts with a fixed-width primary part, count_below(index, primary) + 1 is the
  /// competition rank ("1, 2, 2, 4") by that part.
  std::uint64_t count_below(std::string_view index, std::string_view bound);
  /// The members at positions [offset, offset + limit), in order.
  std::vector<ranked_member> range(std::string_view index, std::uint64_t offset, std::uint64_t limit);
  /// The members at positions [p - n, p + n] (clipped to the index), p being `member`'s
  /// position; empty if `member` is not in `index`.
  std::vector<ranked_member> around(std::string_view index, std::string_view member, std::uint64_t n);
  /// Members in `index`.
  std::uint64_t count(std::string_view index);

  /// Indexes whose order-statistic list is in memory, and the estimated bytes they use (what
  /// this store charges to its memory_budget).
  std::size_t loaded_indexes() const noexcept;
  std::size_t memory_bytes() const noexcept;
  /// Drops every index not used for ranked_index_options::idle_eviction (commit() does it).
  void evict_idle();

  /// memory_charged_store: charges the lists to `memory` from now on (once; a second call
  /// moves the account).
  void charge_memory_to(memory_budget& memory) override;

  // state_store (the rest is kv_backed_store's): abort() and restore() also drop the
  // in-memory lists of the indexes they change.
  void commit(changelog_offset next_changelog_offset) override;
  void abort() override;
  void restore(std::span<const restore_record> batch, changelog_offset next_offset) override;
  void close() override;

  /// The kv key of (`index`, `member`): varint(index length), index, member. Exposed for
  /// tests and tools reading the changelog.
  static void encode_key(std::string_view index, std::string_view member, std::string& out);
  /// The index part of a kv key; nullopt if `key` is not one.
  static std::optional<std::string_view> index_of_key(std::string_view key);

 private:
  // The *_locked members and load() run with indexes_->mutex held.
  detail::loaded_index& load(std::string_view index);
  void upsert_locked(std::string_view index, std::string_view member, std::string_view score, std::int64_t timestamp);
  std::optional<std::uint64_t> position_locked(std::string_view index, std::string_view member);
  void range_locked(std::string_view index, std::uint64_t offset, std::uint64_t limit, std::vector<ranked_member>& out);
  void evict_idle_locked();
  /// With the mutex released: asks the budget to release memory when it is over its limit.
  void enforce_budget() noexcept;

  changelog_sink* changelog_;
  ranked_index_options options_;
  struct index_table;
  std::unique_ptr<index_table> indexes_;
  std::string key_buf_, value_buf_;
};

/// Opens a ranked index over `storage`; the store_factory the runtime calls for a store
/// declared as a ranked index (the runtime then charges it to its memory budget).
std::unique_ptr<ranked_index> open_ranked_index(std::unique_ptr<kv_store> storage, changelog_sink* changelog,
                                                ranked_index_options options = {});
/// The same, charged to `memory` from the start (for use outside the runtime).
std::unique_ptr<ranked_index> open_ranked_index(std::unique_ptr<kv_store> storage, changelog_sink* changelog,
                                                memory_budget& memory, ranked_index_options options = {});

}  // namespace sluice::state
