// ranked_index: members and scores in a kv_store (durable, changelogged), and per loaded
// index an in-memory order_list serving positions, charged to the process's memory_budget
// (see ranked_index.hpp and README.md).
#include "sluice/state/ranked_index.hpp"

#include <algorithm>
#include <list>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "order_list.hpp"
#include "store_common.hpp"
#include "sluice/error.hpp"

namespace sluice::state {
namespace detail {

struct loaded_index {
  std::string index;
  order_list list;
  std::int64_t last_used_ms = 0;
  std::uint64_t last_used_tick = 0;  // the memory budget's use clock
  std::size_t charged_bytes = 0;     // what index_table::memory_bytes counts for this index
  std::list<loaded_index*>::iterator lru_position;
};

}  // namespace detail

namespace {

using detail::string_hash;

/// Bookkeeping per loaded index besides its list: the map node, the key, the LRU node.
constexpr std::size_t index_overhead_bytes = sizeof(detail::loaded_index) + 96;

std::function<std::int64_t()> resolve_clock(const ranked_index_options& o) {
  if (o.now_ms) return o.now_ms;
  return [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
}

}  // namespace

/// The loaded lists and their bookkeeping. `mutex` guards all of it: the owning task's thread
/// holds it for each operation, and the memory budget's release_least_recent() (called from any
/// stream thread) only try-locks it, so it never waits for a busy store.
struct ranked_index::index_table final : memory_consumer {
  std::unordered_map<std::string, std::unique_ptr<detail::loaded_index>, string_hash, std::equal_to<>> loaded;
  std::list<detail::loaded_index*> lru;  // most recently used first
  /// Indexes written since the last commit (their lists include pending writes).
  std::unordered_set<std::string, string_hash, std::equal_to<>> written;
  std::function<std::int64_t()> now;
  std::mutex mutex;
  memory_budget::account account;
  std::size_t memory_bytes = 0;

  detail::loaded_index* find(std::string_view index) {
    auto it = loaded.find(index);
    return it == loaded.end() ? nullptr : it->second.get();
  }

  void touch(detail::loaded_index& li) {
    li.last_used_ms = now();
    li.last_used_tick = account.use_tick();
    lru.splice(lru.begin(), lru, li.lru_position);
    std::size_t now_bytes = li.list.memory_bytes() + index_overhead_bytes + li.index.size();
    memory_bytes = memory_bytes - li.charged_bytes + now_bytes;
    li.charged_bytes = now_bytes;
    publish();
  }

  void drop(std::string_view index) {
    auto it = loaded.find(index);
    if (it == loaded.end()) return;
    memory_bytes -= it->second->charged_bytes;
    lru.erase(it->second->lru_position);
    loaded.erase(it);
    publish();
  }

  void drop_all() {
    lru.clear();
    loaded.clear();
    written.clear();
    memory_bytes = 0;
    publish();
  }

  /// Tells the budget what this store holds and when its least recently used list other
  /// than the most recent one was last used (the one release_least_recent() would drop).
  void publish() noexcept {
    account.charge(memory_bytes);
    account.set_least_recent(lru.size() >= 2 ? lru.back()->last_used_tick : memory_budget::account::nothing_to_release);
  }

  std::size_t release_least_recent() noexcept override {
    std::unique_lock lock(mutex, std::try_to_lock);
    if (!lock.owns_lock() || lru.size() < 2) return 0;  // busy, or only the one in use
    auto* victim = lru.back();
    const std::size_t bytes = victim->charged_bytes;
    const std::string name = victim->index;
    drop(name);
    return bytes;
  }
};

ranked_index::ranked_index(std::unique_ptr<kv_store> storage, changelog_sink* changelog, ranked_index_options options)
    : kv_backed_store(std::move(storage), "ranked index"),
      changelog_(changelog),
      options_(std::move(options)),
      indexes_(std::make_unique<index_table>()) {
  indexes_->now = resolve_clock(options_);
}

ranked_index::ranked_index(std::unique_ptr<kv_store> storage, changelog_sink* changelog, memory_budget& memory,
                           ranked_index_options options)
    : ranked_index(std::move(storage), changelog, std::move(options)) {
  charge_memory_to(memory);
}

void ranked_index::charge_memory_to(memory_budget& memory) {
  auto account = memory.open_account(*indexes_);  // outside the lock: it takes the budget's
  {
    std::lock_guard lock(indexes_->mutex);
    std::swap(indexes_->account, account);
    indexes_->publish();
  }
  account.close();  // the previous one, if any
  enforce_budget();
}

ranked_index::~ranked_index() { close(); }

void ranked_index::enforce_budget() noexcept {
  if (indexes_->account.over_limit()) indexes_->account.enforce();
}

void ranked_index::encode_key(std::string_view index, std::string_view member, std::string& out) {
  out.clear();
  std::uint64_t n = index.size();
  while (n >= 0x80) {
    out.push_back(static_cast<char>((n & 0x7f) | 0x80));
    n >>= 7;
  }
  out.push_back(static_cast<char>(n));
  out.append(index);
  out.append(member);
}

std::optional<std::string_view> ranked_index::index_of_key(std::string_view key) {
  std::uint64_t length = 0;
  std::size_t i = 0;
  for (int shift = 0;; shift += 7) {
    if (i >= key.size() || shift > 56) return std::nullopt;
    auto b = static_cast<unsigned char>(key[i++]);
    length |= std::uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) break;
  }
  if (length > key.size() - i) return std::nullopt;
  return key.substr(i, length);
}

detail::loaded_index& ranked_index::load(std::string_view index) {
  if (auto* li = indexes_->find(index)) {
    indexes_->touch(*li);
    return *li;
  }
  // One prefix scan of the index's entries (kv order is by member), sorted by score.
  std::vector<detail::order_entry> entries;
  encode_key(index, {}, key_buf_);
  for (auto it = storage_->prefix(key_buf_); it.valid(); it.next())
    entries.emplace_back(it.value(), it.key().substr(key_buf_.size()));
  std::sort(entries.begin(), entries.end(),
            [](const detail::order_entry& a, const detail::order_entry& b) { return detail::entry_less(a, b); });
  auto owned = std::make_unique<detail::loaded_index>();
  auto& li = *owned;
  li.index.assign(index);
  li.list.assign_sorted(std::move(entries));
  indexes_->lru.push_front(&li);
  li.lru_position = indexes_->lru.begin();
  indexes_->loaded.emplace(li.index, std::move(owned));
  indexes_->touch(li);
  return li;
}

void ranked_index::evict_idle() {
  std::lock_guard lock(indexes_->mutex);
  evict_idle_locked();
}

void ranked_index::evict_idle_locked() {
  if (options_.idle_eviction.count() <= 0) return;
  const std::int64_t now = indexes_->now();
  while (!indexes_->lru.empty()) {
    auto* oldest = indexes_->lru.back();
    if (now - oldest->last_used_ms < options_.idle_eviction.count()) return;
    std::string name = oldest->index;
    indexes_->drop(name);
  }
}

std::size_t ranked_index::loaded_indexes() const noexcept {
  std::lock_guard lock(indexes_->mutex);
  return indexes_->loaded.size();
}

std::size_t ranked_index::memory_bytes() const noexcept {
  std::lock_guard lock(indexes_->mutex);
  return indexes_->memory_bytes;
}

void ranked_index::upsert(std::string_view index, std::string_view member, std::string_view score,
                          std::int64_t timestamp) {
  {
    std::lock_guard lock(indexes_->mutex);
    upsert_locked(index, member, score, timestamp);
  }
  enforce_budget();
}

void ranked_index::upsert_locked(std::string_view index, std::string_view member, std::string_view score,
                                 std::int64_t timestamp) {
  encode_key(index, member, key_buf_);
  const bool existed = storage_->get(key_buf_, value_buf_);
  if (existed && value_buf_ == score) return;  // unchanged: no write, no changelog record
  if (auto* li = indexes_->find(index)) {
    if (existed) li->list.erase(value_buf_, member);
    li->list.insert(score, member);
    indexes_->touch(*li);
  }
  // Not loaded: the kv write is all; the list is built from the kv_store when needed.
  storage_->put(key_buf_, score);
  if (changelog_) changelog_->log(key_buf_, score, timestamp);
  if (!indexes_->written.contains(index)) indexes_->written.emplace(index);
}

bool ranked_index::remove(std::string_view index, std::string_view member, std::int64_t timestamp) {
  std::lock_guard lock(indexes_->mutex);
  encode_key(index, member, key_buf_);
  if (!storage_->get(key_buf_, value_buf_)) return false;
  if (auto* li = indexes_->find(index)) {
    li->list.erase(value_buf_, member);
    indexes_->touch(*li);
  }
  storage_->remove(key_buf_);
  if (changelog_) changelog_->log(key_buf_, std::nullopt, timestamp);
  if (!indexes_->written.contains(index)) indexes_->written.emplace(index);
  return true;
}

std::optional<std::string> ranked_index::score(std::string_view index, std::string_view member) {
  std::lock_guard lock(indexes_->mutex);  // key_buf_ is shared with the writes
  encode_key(index, member, key_buf_);
  return storage_->get(key_buf_);
}

std::optional<std::uint64_t> ranked_index::position(std::string_view index, std::string_view member) {
  std::optional<std::uint64_t> p;
  {
    std::lock_guard lock(indexes_->mutex);
    p = position_locked(index, member);
  }
  enforce_budget();
  return p;
}

std::optional<std::uint64_t> ranked_index::position_locked(std::string_view index, std::string_view member) {
  encode_key(index, member, key_buf_);
  if (!storage_->get(key_buf_, value_buf_)) return std::nullopt;
  std::string score = value_buf_;
  return load(index).list.position(score, member);
}

std::uint64_t ranked_index::count_below(std::string_view index, std::string_view bound) {
  std::uint64_t n = 0;
  {
    std::lock_guard lock(indexes_->mutex);
    n = load(index).list.count_below(bound);
  }
  enforce_budget();
  return n;
}

std::vector<ranked_member> ranked_index::range(std::string_view index, std::uint64_t offset, std::uint64_t limit) {
  std::vector<ranked_member> out;
  {
    std::lock_guard lock(indexes_->mutex);
    range_locked(index, offset, limit, out);
  }
  enforce_budget();
  return out;
}

void ranked_index::range_locked(std::string_view index, std::uint64_t offset, std::uint64_t limit,
                                std::vector<ranked_member>& out) {
  load(index).list.visit(offset, limit, [&](const detail::order_entry& e, std::uint64_t pos) {
    out.push_back({std::string(e.member()), std::string(e.score()), pos});
  });
}

std::vector<ranked_member> ranked_index::around(std::string_view index, std::string_view member, std::uint64_t n) {
  std::vector<ranked_member> out;
  {
    std::lock_guard lock(indexes_->mutex);
    auto p = position_locked(index, member);
    if (!p) return {};
    std::uint64_t from = *p >= n ? *p - n : 0;
    range_locked(index, from, *p + n + 1 - from, out);
  }
  enforce_budget();
  return out;
}

std::uint64_t ranked_index::count(std::string_view index) {
  std::uint64_t n = 0;
  {
    std::lock_guard lock(indexes_->mutex);
    n = load(index).list.size();
  }
  enforce_budget();
  return n;
}

void ranked_index::commit(changelog_offset next_changelog_offset) {
  std::lock_guard lock(indexes_->mutex);
  storage_->commit(next_changelog_offset);
  indexes_->written.clear();
  evict_idle_locked();
}

void ranked_index::abort() {
  std::lock_guard lock(indexes_->mutex);
  storage_->abort();
  // The lists of written indexes hold the dropped writes: rebuild them from storage on use.
  for (const auto& index : indexes_->written) indexes_->drop(index);
  indexes_->written.clear();
}

void ranked_index::restore(std::span<const restore_record> batch, changelog_offset next_offset) {
  std::lock_guard lock(indexes_->mutex);
  storage_->restore(batch, next_offset);
  for (const auto& r : batch)
    if (auto index = index_of_key(r.key)) indexes_->drop(*index);
}

void ranked_index::close() {
  if (!indexes_) return;
  indexes_->account.close();  // first: after it the budget never calls this store again
  std::lock_guard lock(indexes_->mutex);
  indexes_->drop_all();
  storage_->close();
}

std::unique_ptr<ranked_index> open_ranked_index(std::unique_ptr<kv_store> storage, changelog_sink* changelog,
                                                ranked_index_options options) {
  return std::make_unique<ranked_index>(std::move(storage), changelog, std::move(options));
}

std::unique_ptr<ranked_index> open_ranked_index(std::unique_ptr<kv_store> storage, changelog_sink* changelog,
                                                memory_budget& memory, ranked_index_options options) {
  return std::make_unique<ranked_index>(std::move(storage), changelog, memory, std::move(options));
}

}  // namespace sluice::state
