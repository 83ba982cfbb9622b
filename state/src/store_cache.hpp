// The RocksDB store's in-memory layer: one hash map holding the pending writes of the open
// commit (dirty entries, one per key, the latest write wins) and, bounded, entries already
// written to RocksDB (clean entries, a read cache). Private to sluice_state.
//
// Why not a WriteBatchWithIndex: it keeps every version of a key in its batch until the
// commit and writes them all into the memtable; its index is a skiplist compared through the
// batch. A count over 10,000 keys spent about 60 % of its CPU there. Here a write of a key
// already in the map reuses its node and buffer (no allocation), a read is one hash lookup,
// and a commit writes each key once.
//
// Invariants: a clean entry equals what RocksDB holds for its key (the store is RocksDB's
// only writer, and every path that writes RocksDB updates or erases the entry; the expiry
// compaction filter only drops entries that reads already treat as absent); a dirty entry is
// in dirty_ exactly once; the ordered index, when built, holds exactly the dirty entries.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "store_common.hpp"

namespace sluice::state::detail {

/// The pending writes and read cache of one rocksdb_store. Owned by the store and used only
/// from its thread (nothing locks). Entry pointers handed out (find, dirty, for_each_dirty_in)
/// stay valid until the next mark_written, drop_dirty, forget or clear.
class store_cache {
 public:
  /// What a lookup finds.
  enum class state : std::uint8_t {
    clean,         ///< equals RocksDB
    dirty_put,     ///< pending value
    dirty_delete,  ///< pending delete
    /// Written before a pending range delete that covers it: reads find nothing, and commit
    /// writes nothing for it (the DeleteRange does the work, no point tombstone).
    dirty_covered,
  };

  struct entry {
    std::string stored;  ///< the stored form (store_common.hpp); empty for dirty_delete
    state st = state::clean;
    bool referenced = false;  ///< read or written since the last eviction pass
  };

  using map_type = std::unordered_map<std::string, entry, string_hash, std::equal_to<>>;
  using slot = map_type::value_type;

  /// `clean_limit_bytes`: approximate memory (keys, values, per-entry overhead) that clean
  /// entries may use; 0 keeps none (every commit empties the map).
  explicit store_cache(std::size_t clean_limit_bytes) : clean_limit_(clean_limit_bytes) {}

  /// The entry for `key`, or nullptr. Marks it referenced.
  entry* find(std::string_view key) {
    auto it = map_.find(key);
    if (it == map_.end()) {
      return nullptr;
    }
    it->second.referenced = true;
    return &it->second;
  }

  /// Makes `key` a dirty put of `stored`; swaps buffers with `stored`, so the caller's
  /// scratch string takes the old buffer and no allocation happens for a known key.
  void put(std::string_view key, std::string& stored) {
    entry& e = make_dirty(key);
    dirty_bytes_ -= e.stored.size();
    e.stored.swap(stored);
    dirty_bytes_ += e.stored.size();
    e.st = state::dirty_put;
  }

  /// Makes `key` a dirty delete (a key already covered by a pending range stays covered).
  void remove(std::string_view key) {
    entry& e = make_dirty(key);
    if (e.st == state::dirty_covered) {
      return;
    }
    dirty_bytes_ -= e.stored.size();
    e.stored.clear();
    e.st = state::dirty_delete;
  }

  /// Adds the range delete [from, to): dirty entries in it were written before it and become
  /// dirty_covered; clean entries in it read as absent (covered()) until the range reaches
  /// RocksDB, when mark_written drops them. O(log n + dirty entries in range).
  void remove_range(std::string_view from, std::string_view to) {
    if (from >= to) {
      return;
    }
    key_bounds b{std::string(from), std::string(to), false};
    for_each_dirty_in(b, [&](std::string_view, entry& e) {
      if (e.st != state::dirty_covered) {
        dirty_bytes_ -= e.stored.size();
        e.stored.clear();
        e.st = state::dirty_covered;
      }
    });
    ranges_.add(from, to);
  }

  /// The pending range deletes.
  const range_set& ranges() const noexcept { return ranges_; }
  /// True if a pending range delete covers `key`. Cheap when none is pending.
  bool covered(std::string_view key) const noexcept { return !ranges_.empty() && ranges_.covers(key); }
  /// True if anything is pending (dirty entries or range deletes).
  bool has_pending() const noexcept { return !dirty_.empty() || !ranges_.empty(); }

  /// Dirty entries in write order of their first pending write (each key once).
  const std::vector<slot*>& dirty() const noexcept { return dirty_; }
  /// Bytes of keys and values of the dirty entries and of the pending ranges' bounds.
  std::size_t dirty_bytes() const noexcept { return dirty_bytes_ + ranges_.bytes(); }
  /// Approximate memory of the clean entries.
  std::size_t clean_bytes() const noexcept { return clean_bytes_; }
  /// Entries in the map, clean and dirty.
  std::size_t size() const noexcept { return map_.size(); }
  /// The map's buckets and the dirty list's capacity: what the map holds beyond its entries.
  std::size_t bucket_count() const noexcept { return map_.bucket_count(); }
  std::size_t dirty_capacity() const noexcept { return dirty_.capacity(); }

  /// After the dirty entries and range deletes reached RocksDB: clean entries under a range
  /// go (one pass over the map, only when a range was written), puts become clean, deletes
  /// leave the map; then clean entries are evicted down to the limit.
  void mark_written() {
    if (!ranges_.empty()) {
      for (auto it = map_.begin(); it != map_.end();) {
        if (it->second.st == state::clean && ranges_.covers(it->first)) {
          clean_bytes_ -= footprint(*it);
          it = map_.erase(it);
        } else {
          ++it;
        }
      }
      ranges_.clear();
    }
    std::size_t deleted = 0;  // entries that leave the map below
    for (slot* s : dirty_) {
      if (s->second.st == state::dirty_delete || s->second.st == state::dirty_covered) {
        ++deleted;
        map_.erase(map_.find(s->first));
        continue;
      }
      s->second.st = state::clean;
      clean_bytes_ += footprint(*s);
    }
    dirty_.clear();
    dirty_bytes_ = 0;
    ordered_.clear();
    ordered_built_ = false;
    const std::size_t held = map_.size() + deleted;  // this commit's entries at their most
    evict();
    trim(held);
  }

  /// Drops every dirty entry (abort): RocksDB still holds the value they replaced, so the
  /// cache must not keep one either.
  void drop_dirty() {
    for (slot* s : dirty_) {
      map_.erase(map_.find(s->first));
    }
    ranges_.clear();
    dirty_.clear();
    dirty_bytes_ = 0;
    ordered_.clear();
    ordered_built_ = false;
  }

  /// Forgets `key` if it is clean (restore writes RocksDB directly). Precondition: no dirty
  /// entries.
  void forget(std::string_view key) {
    if (map_.empty()) {
      return;
    }
    if (auto it = map_.find(key); it != map_.end()) {
      clean_bytes_ -= footprint(*it);
      map_.erase(it);
    }
  }

  void clear() noexcept {
    map_.clear();
    ranges_.clear();
    dirty_.clear();
    ordered_.clear();
    ordered_built_ = false;
    dirty_bytes_ = 0;
    clean_bytes_ = 0;
    previous_held_ = 0;
  }

  /// Calls f(key, entry) for the dirty entries with keys in `b`, in ascending key order. The
  /// first call after a commit or abort sorts the dirty keys (O(n log n)); later dirty keys
  /// join the order as they are written (O(log n) each), so a store that scans pays for the
  /// order and one that does not never does.
  template <class F>
  void for_each_dirty_in(const key_bounds& b, F&& f) {
    if (dirty_.empty()) {
      return;
    }
    if (!ordered_built_) {
      for (slot* s : dirty_) {
        ordered_.insert(s);
      }
      ordered_built_ = true;
    }
    auto it = b.lo ? ordered_.lower_bound(std::string_view(*b.lo)) : ordered_.begin();
    for (; it != ordered_.end() && b.below_hi((*it)->first); ++it) {
      f(std::string_view((*it)->first), (*it)->second);
    }
  }

 private:
  struct by_key {
    using is_transparent = void;
    bool operator()(const slot* a, const slot* b) const noexcept { return a->first < b->first; }
    bool operator()(const slot* a, std::string_view b) const noexcept { return a->first < b; }
    bool operator()(std::string_view a, const slot* b) const noexcept { return a < b->first; }
  };

  // Node, bucket and string headers of one entry, roughly (libstdc++, 64-bit).
  static constexpr std::size_t entry_overhead = 112;
  static std::size_t footprint(const slot& s) noexcept {
    return s.first.size() + s.second.stored.size() + entry_overhead;
  }

  entry& make_dirty(std::string_view key) {
    auto it = map_.find(key);
    if (it == map_.end()) {
      it = map_.emplace(std::string(key), entry{}).first;
      it->second.st = state::dirty_put;  // joins dirty_ below
    } else if (it->second.st == state::clean) {
      clean_bytes_ -= footprint(*it);
      // The key counts from now on; the old value too, until put/remove replaces it.
      dirty_bytes_ += it->first.size() + it->second.stored.size();
      it->second.referenced = true;
      enlist(*it);
      return it->second;
    } else {
      it->second.referenced = true;
      return it->second;
    }
    dirty_bytes_ += it->first.size();
    enlist(*it);
    return it->second;
  }

  void enlist(slot& s) {
    dirty_.push_back(&s);
    if (ordered_built_) {
      ordered_.insert(&s);
    }
  }

  // After a commit: the bucket array and the dirty list keep the size of the largest commit
  // (a burst of hundreds of thousands of keys, written through). They shrink once they are
  // far above what the map holds now and what the commit before this one held: a burst's
  // memory goes with its commit, while a load that writes as many keys every commit keeps
  // them (shrinking those each time made every commit grow them again: about a quarter more
  // per put over 50 commits of 20,000 keys each, in a loop of put and mark_written).
  void trim(std::size_t held) {
    constexpr std::size_t floor = 4096;
    const std::size_t need = std::max(map_.size(), previous_held_);
    previous_held_ = held;
    if (map_.bucket_count() > floor && map_.bucket_count() > 4 * need) map_.rehash(0);
    if (dirty_.capacity() > floor && dirty_.capacity() > 4 * need) std::vector<slot*>().swap(dirty_);
  }

  // Called with no dirty entries. Second chance: clean entries not referenced since the
  // last pass go first; if that frees too little, more go until half the limit is free. A
  // pass visits the whole map but runs only after clean entries grew by at least half the
  // limit since the last one, so its cost per write stays constant.
  void evict() {
    if (clean_bytes_ <= clean_limit_) {
      return;
    }
    if (clean_limit_ == 0) {
      map_.clear();
      clean_bytes_ = 0;
      return;
    }
    for (auto it = map_.begin(); it != map_.end();) {
      if (!it->second.referenced) {
        clean_bytes_ -= footprint(*it);
        it = map_.erase(it);
      } else {
        it->second.referenced = false;
        ++it;
      }
    }
    const std::size_t target = clean_limit_ / 2;
    for (auto it = map_.begin(); it != map_.end() && clean_bytes_ > target;) {
      clean_bytes_ -= footprint(*it);
      it = map_.erase(it);
    }
  }

  std::size_t clean_limit_;
  map_type map_;
  std::vector<slot*> dirty_;
  std::set<slot*, by_key> ordered_;
  range_set ranges_;
  bool ordered_built_ = false;
  std::size_t dirty_bytes_ = 0;
  std::size_t clean_bytes_ = 0;
  std::size_t previous_held_ = 0;  ///< entries the last commit held at its most (trim)
};

}  // namespace sluice::state::detail
