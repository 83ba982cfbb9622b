// The queue store: key layout, head cursors, range removal of consumed entries, and a
// restore that turns consumed entries into one range delete per queue (see the header).
#include "sluice/state/queue_store.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include "sluice/error.hpp"
#include "sluice/state/big_endian.hpp"

namespace sluice::state {
namespace {

constexpr char entry_tag = 'e';
constexpr char meta_tag = 'm';
constexpr char meta_version = 0x01;
constexpr std::size_t sequence_bytes = 16;
constexpr std::size_t meta_bytes = 1 + 16 + 16 + 8;

// 'e' <u32 length> <queue>: every entry key of the queue starts with it, and no key of
// another queue does (the length makes queue names prefix-free).
void entry_prefix(std::string& out, std::string_view queue) {
  out.clear();
  out.push_back(entry_tag);
  append_u32(out, static_cast<std::uint32_t>(queue.size()));
  out.append(queue);
}

void entry_key(std::string& out, std::string_view queue, queue_sequence s) {
  entry_prefix(out, queue);
  append_u64(out, s.high);
  append_u64(out, s.low);
}

std::string meta_key(std::string_view queue) {
  std::string k;
  k.reserve(1 + queue.size());
  k.push_back(meta_tag);
  k.append(queue);
  return k;
}

struct parsed_entry_key {
  std::string_view queue;
  queue_sequence sequence;
};

std::optional<parsed_entry_key> parse_entry_key(std::string_view key) noexcept {
  if (key.size() < 5 + sequence_bytes || key[0] != entry_tag) {
    return std::nullopt;
  }
  const std::uint32_t n = read_u32(key, 1);
  if (key.size() != 5 + n + sequence_bytes) {
    return std::nullopt;
  }
  const auto seq = key.substr(5 + n);
  return parsed_entry_key{key.substr(5, n), {read_u64(seq), read_u64(seq.substr(8))}};
}

queue_sequence sequence_of(std::string_view entry_key) noexcept {
  const auto seq = entry_key.substr(entry_key.size() - sequence_bytes);
  return {read_u64(seq), read_u64(seq.substr(8))};
}

}  // namespace

std::string queue_entry_key(std::string_view queue, queue_sequence sequence) {
  std::string out;
  entry_key(out, queue, sequence);
  return out;
}

queue_store::queue_store(std::unique_ptr<kv_store> storage, changelog_sink* changelog, queue_store_options options)
    : kv_backed_store(std::move(storage), "queue store"), changelog_(changelog), options_(options) {
  load_non_empty();
}

queue_store::~queue_store() { close(); }

void queue_store::commit(changelog_offset next_changelog_offset) {
  storage_->commit(next_changelog_offset);
  touched_.clear();
  consumed_uncompacted_ += consumed_pending_;
  consumed_pending_ = 0;
  if (options_.compact_after_consumed > 0 && consumed_uncompacted_ >= options_.compact_after_consumed) {
    consumed_uncompacted_ = 0;
    // Entries and meta records: [entry_tag, meta_tag + 1) holds every key of the store. The
    // meta records count as much as the entries: each pop overwrites one, and their old
    // versions keep sorted runs alive that a head read's iterator opens.
    static_assert(entry_tag < meta_tag);
    storage_->compact_range(std::string(1, entry_tag), std::string(1, static_cast<char>(meta_tag + 1)),
                            compaction_mode::background);
  }
}

void queue_store::abort() {
  storage_->abort();
  consumed_pending_ = 0;
  for (const auto& q : touched_) {
    if (read_meta(q).size > 0) {
      non_empty_.insert(q);
    } else if (auto it = non_empty_.find(q); it != non_empty_.end()) {
      non_empty_.erase(it);
    }
  }
  touched_.clear();
}

void queue_store::restore(std::span<const restore_record> batch, changelog_offset next_offset) {
  // The latest head of every queue the batch names: the later of the stored one and the
  // last meta record in the batch (heads only move forward).
  std::map<std::string, queue_sequence, std::less<>> stored_heads;
  std::map<std::string, queue_sequence, std::less<>> heads;
  for (const auto& r : batch) {
    if (r.key.empty() || r.key[0] != meta_tag || !r.value) {
      continue;
    }
    const auto v = *r.value;
    if (v.size() != meta_bytes || v[0] != meta_version) {
      throw sluice::error(errc::state, "queue store '" + name() +
                                           "': a changelog meta record has an unknown format; "
                                           "was the changelog written by another store kind?");
    }
    const queue_sequence h{read_u64(v.substr(1)), read_u64(v.substr(9))};
    auto [it, inserted] = heads.try_emplace(std::string(r.key.substr(1)), h);
    if (!inserted) {
      it->second = std::max(it->second, h);
    }
  }
  auto head_of = [&](std::string_view queue) -> queue_sequence {
    auto s = stored_heads.find(queue);
    if (s == stored_heads.end()) {
      s = stored_heads.emplace(std::string(queue), read_meta(queue).head).first;
    }
    auto [h, inserted] = heads.try_emplace(s->first, s->second);
    if (!inserted) {
      h->second = std::max(h->second, s->second);
    }
    return h->second;
  };
  std::vector<restore_record> kept;
  kept.reserve(batch.size());
  for (const auto& r : batch) {
    if (auto e = parse_entry_key(r.key)) {
      if (e->sequence < head_of(e->queue)) {
        continue;  // consumed: the range delete below removes it, no tombstone of its own
      }
    } else if (!r.key.empty() && r.key[0] == meta_tag) {
      head_of(r.key.substr(1));
    }
    kept.push_back(r);
  }
  storage_->restore(kept, next_offset);
  bool ranges = false;
  for (const auto& [queue, h] : heads) {
    if (h > stored_heads.at(queue)) {
      entry_prefix(key_scratch_, queue);
      std::string from = key_scratch_;
      entry_key(key_scratch_, queue, h);
      storage_->remove_range(from, key_scratch_);
      ranges = true;
    }
  }
  if (ranges) {
    storage_->commit(next_offset);
  }
  for (const auto& [queue, h] : heads) {
    if (read_meta(queue).size > 0) {
      non_empty_.insert(queue);
    } else if (auto it = non_empty_.find(queue); it != non_empty_.end()) {
      non_empty_.erase(it);
    }
  }
}

void queue_store::close() {
  if (closed_) {
    return;
  }
  closed_ = true;
  non_empty_.clear();
  touched_.clear();
  storage_->close();
}

append_result queue_store::append(std::string_view queue, queue_sequence sequence, std::string_view value,
                                  std::int64_t timestamp_ms) {
  meta m = read_meta(queue);
  if (sequence < m.head) {
    return append_result::already_consumed;
  }
  entry_key(key_scratch_, queue, sequence);
  // Appends in sequence order (the usual case) are new for sure: no lookup.
  const bool beyond_tail = m.size == 0 || sequence > m.tail;
  if (!beyond_tail && storage_->get(key_scratch_, get_scratch_)) {
    return append_result::already_queued;
  }
  storage_->put(key_scratch_, value);
  log(key_scratch_, value, timestamp_ms);
  ++m.size;
  m.tail = std::max(m.tail, sequence);
  write_meta(queue, m, timestamp_ms);
  return append_result::appended;
}

void queue_store::peek(std::string_view queue, std::size_t n, std::vector<queue_entry>& out) {
  out.clear();
  if (n == 0) {
    return;
  }
  const meta m = read_meta(queue);
  if (m.size == 0) {
    return;
  }
  entry_key(key_scratch_, queue, m.head);
  std::string to;
  entry_key(to, queue, {UINT64_MAX, UINT64_MAX});
  for (auto it = storage_->range(key_scratch_, to); it.valid() && out.size() < n; it.next()) {
    out.push_back({sequence_of(it.key()), std::string(it.value())});
  }
}

std::optional<queue_entry> queue_store::front(std::string_view queue) {
  std::vector<queue_entry> one;
  peek(queue, 1, one);
  if (one.empty()) {
    return std::nullopt;
  }
  return std::move(one.front());
}

std::size_t queue_store::pop(std::string_view queue, std::size_t n, std::int64_t timestamp_ms) {
  meta m = read_meta(queue);
  if (n == 0 || m.size == 0) {
    return 0;
  }
  std::vector<std::string> popped;
  {
    entry_key(key_scratch_, queue, m.head);
    std::string to;
    entry_key(to, queue, {UINT64_MAX, UINT64_MAX});
    for (auto it = storage_->range(key_scratch_, to); it.valid() && popped.size() < n; it.next()) {
      popped.emplace_back(it.key());
    }
  }
  if (popped.empty()) {
    return 0;
  }
  m.head = sequence_of(popped.back()).successor();
  m.size -= std::min<std::uint64_t>(m.size, popped.size());
  // The meta record goes to the changelog before the tombstones, so a restore always knows
  // the head when it meets them (see restore()).
  write_meta(queue, m, timestamp_ms);
  for (const auto& k : popped) {
    log(k, std::nullopt, timestamp_ms);
  }
  entry_prefix(key_scratch_, queue);
  std::string from = key_scratch_;
  entry_key(key_scratch_, queue, m.head);
  storage_->remove_range(from, key_scratch_);
  consumed_pending_ += popped.size();
  return popped.size();
}

std::uint64_t queue_store::size(std::string_view queue) { return read_meta(queue).size; }

queue_sequence queue_store::head(std::string_view queue) { return read_meta(queue).head; }

queue_store::meta queue_store::read_meta(std::string_view queue) {
  key_scratch_ = meta_key(queue);
  if (!storage_->get(key_scratch_, get_scratch_)) {
    return {};
  }
  const std::string_view v = get_scratch_;
  if (v.size() != meta_bytes || v[0] != meta_version) {
    throw sluice::error(errc::state, "queue store '" + name() +
                                         "' holds a queue record in an unknown format "
                                         "(corruption?); wipe the store to rebuild it from its "
                                         "changelog");
  }
  return {{read_u64(v.substr(1)), read_u64(v.substr(9))},
          {read_u64(v.substr(17)), read_u64(v.substr(25))},
          read_u64(v.substr(33))};
}

void queue_store::write_meta(std::string_view queue, const meta& m, std::int64_t timestamp_ms) {
  value_scratch_.clear();
  value_scratch_.push_back(meta_version);
  append_u64(value_scratch_, m.head.high);
  append_u64(value_scratch_, m.head.low);
  append_u64(value_scratch_, m.tail.high);
  append_u64(value_scratch_, m.tail.low);
  append_u64(value_scratch_, m.size);
  const std::string key = meta_key(queue);
  storage_->put(key, value_scratch_);
  log(key, value_scratch_, timestamp_ms);
  track(queue, m);
}

void queue_store::log(std::string_view key, const std::optional<std::string_view>& value, std::int64_t timestamp_ms) {
  if (changelog_ != nullptr) {
    changelog_->log(key, value, timestamp_ms);
  }
}

void queue_store::track(std::string_view queue, const meta& m) {
  if (touched_.find(queue) == touched_.end()) {
    touched_.emplace(queue);
  }
  if (m.size > 0) {
    if (non_empty_.find(queue) == non_empty_.end()) {
      non_empty_.emplace(queue);
    }
  } else if (auto it = non_empty_.find(queue); it != non_empty_.end()) {
    non_empty_.erase(it);
  }
}

void queue_store::load_non_empty() {
  non_empty_.clear();
  const std::string prefix(1, meta_tag);
  for (auto it = storage_->prefix(prefix); it.valid(); it.next()) {
    const auto v = it.value();
    if (v.size() == meta_bytes && v[0] == meta_version && read_u64(v.substr(33)) > 0) {
      non_empty_.emplace(it.key().substr(1));
    }
  }
}

}  // namespace sluice::state
