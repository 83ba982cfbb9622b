// ranked_index: members and scores in a kv_store (durable, changelogged), and per loaded
// index an in-memory order_list serving positions (see ranked_index.hpp and README.md).
#include "sluice/state/ranked_index.hpp"

#include <algorithm>
#include <list>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "order_list.hpp"
#include "sluice/error.hpp"

namespace sluice::state {
namespace detail {

struct loaded_index {
  std::string index;
  order_list list;
  std::int64_t last_used_ms = 0;
  std::size_t charged_bytes = 0;  // what memory_bytes_ counts for this index
  std::list<loaded_index*>::iterator lru_position;
};

}  // namespace detail

namespace {

struct string_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

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

struct ranked_index::index_table {
  std::unordered_map<std::string, std::unique_ptr<detail::loaded_index>, string_hash, std::equal_to<>> loaded;
  std::list<detail::loaded_index*> lru;  // most recently used first
  /// Indexes written since the last commit (their lists include pending writes).
  std::unordered_set<std::string, string_hash, std::equal_to<>> written;
  std::function<std::int64_t()> now;
};

ranked_index::ranked_index(std::unique_ptr<kv_store> storage, changelog_sink* changelog, ranked_index_options options)
    : storage_(std::move(storage)), changelog_(changelog), options_(std::move(options)),
      indexes_(std::make_unique<index_table>()) {
  if (!storage_) throw error(errc::invalid_topology, "ranked_index: no kv_store to hold the index");
  indexes_->now = resolve_clock(options_);
}

ranked_index::~ranked_index() { close(); }

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

detail::loaded_index* ranked_index::find_loaded(std::string_view index) {
  auto it = indexes_->loaded.find(index);
  return it == indexes_->loaded.end() ? nullptr : it->second.get();
}

void ranked_index::touch(detail::loaded_index& li) {
  li.last_used_ms = indexes_->now();
  indexes_->lru.splice(indexes_->lru.begin(), indexes_->lru, li.lru_position);
  std::size_t now_bytes = li.list.memory_bytes() + index_overhead_bytes + li.index.size();
  memory_bytes_ = memory_bytes_ - li.charged_bytes + now_bytes;
  li.charged_bytes = now_bytes;
}

detail::loaded_index& ranked_index::load(std::string_view index) {
  if (auto* li = find_loaded(index)) {
    touch(*li);
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
  touch(li);
  enforce_budget(&li);
  return li;
}

void ranked_index::drop(std::string_view index) {
  auto it = indexes_->loaded.find(index);
  if (it == indexes_->loaded.end()) return;
  memory_bytes_ -= it->second->charged_bytes;
  indexes_->lru.erase(it->second->lru_position);
  indexes_->loaded.erase(it);
}

void ranked_index::enforce_budget(const detail::loaded_index* keep) {
  while (memory_bytes_ > options_.memory_budget_bytes && !indexes_->lru.empty()) {
    auto* victim = indexes_->lru.back();
    if (victim == keep) return;  // the most recently used: it is last only when alone
    std::string name = victim->index;
    drop(name);
  }
}

void ranked_index::evict_idle() {
  if (options_.idle_eviction.count() <= 0) return;
  const std::int64_t now = indexes_->now();
  while (!indexes_->lru.empty()) {
    auto* oldest = indexes_->lru.back();
    if (now - oldest->last_used_ms < options_.idle_eviction.count()) return;
    std::string name = oldest->index;
    drop(name);
  }
}

std::size_t ranked_index::loaded_indexes() const noexcept { return indexes_->loaded.size(); }

void ranked_index::upsert(std::string_view index, std::string_view member, std::string_view score,
                          std::int64_t timestamp) {
  encode_key(index, member, key_buf_);
  const bool existed = storage_->get(key_buf_, value_buf_);
  if (existed && value_buf_ == score) return;  // unchanged: no write, no changelog record
  if (auto* li = find_loaded(index)) {
    if (existed) li->list.erase(value_buf_, member);
    li->list.insert(score, member);
    touch(*li);
  }
  // Not loaded: the kv write is all; the list is built from the kv_store when needed.
  storage_->put(key_buf_, score);
  if (changelog_) changelog_->log(key_buf_, score, timestamp);
  if (!indexes_->written.contains(index)) indexes_->written.emplace(index);
  enforce_budget(find_loaded(index));
}

bool ranked_index::remove(std::string_view index, std::string_view member, std::int64_t timestamp) {
  encode_key(index, member, key_buf_);
  if (!storage_->get(key_buf_, value_buf_)) return false;
  if (auto* li = find_loaded(index)) {
    li->list.erase(value_buf_, member);
    touch(*li);
  }
  storage_->remove(key_buf_);
  if (changelog_) changelog_->log(key_buf_, std::nullopt, timestamp);
  if (!indexes_->written.contains(index)) indexes_->written.emplace(index);
  return true;
}

std::optional<std::string> ranked_index::score(std::string_view index, std::string_view member) {
  encode_key(index, member, key_buf_);
  return storage_->get(key_buf_);
}

std::optional<std::uint64_t> ranked_index::position(std::string_view index, std::string_view member) {
  encode_key(index, member, key_buf_);
  if (!storage_->get(key_buf_, value_buf_)) return std::nullopt;
  std::string score = value_buf_;
  return load(index).list.position(score, member);
}

std::uint64_t ranked_index::count_below(std::string_view index, std::string_view bound) {
  return load(index).list.count_below(bound);
}

std::vector<ranked_member> ranked_index::range(std::string_view index, std::uint64_t offset, std::uint64_t limit) {
  std::vector<ranked_member> out;
  load(index).list.visit(offset, limit, [&](const detail::order_entry& e, std::uint64_t pos) {
    out.push_back({std::string(e.member()), std::string(e.score()), pos});
  });
  return out;
}

std::vector<ranked_member> ranked_index::around(std::string_view index, std::string_view member, std::uint64_t n) {
  auto p = position(index, member);
  if (!p) return {};
  std::uint64_t from = *p >= n ? *p - n : 0;
  return range(index, from, *p + n + 1 - from);
}

std::uint64_t ranked_index::count(std::string_view index) { return load(index).list.size(); }

const std::string& ranked_index::name() const noexcept { return storage_->name(); }

std::optional<std::int64_t> ranked_index::committed_offset() const noexcept { return storage_->committed_offset(); }

void ranked_index::commit(std::int64_t next_changelog_offset) {
  storage_->commit(next_changelog_offset);
  indexes_->written.clear();
  evict_idle();
}

void ranked_index::abort() {
  storage_->abort();
  // The lists of written indexes hold the dropped writes: rebuild them from storage on use.
  for (const auto& index : indexes_->written) drop(index);
  indexes_->written.clear();
}

void ranked_index::restore(std::span<const restore_record> batch, std::int64_t next_offset) {
  storage_->restore(batch, next_offset);
  for (const auto& r : batch)
    if (auto index = index_of_key(r.key)) drop(*index);
}

void ranked_index::flush() { storage_->flush(); }

std::size_t ranked_index::pending_bytes() const noexcept { return storage_->pending_bytes(); }

void ranked_index::close() {
  if (!indexes_) return;
  indexes_->lru.clear();
  indexes_->loaded.clear();
  indexes_->written.clear();
  memory_bytes_ = 0;
  storage_->close();
}

std::unique_ptr<ranked_index> open_ranked_index(std::unique_ptr<kv_store> storage, changelog_sink* changelog,
                                                ranked_index_options options) {
  return std::make_unique<ranked_index>(std::move(storage), changelog, std::move(options));
}

}  // namespace sluice::state
