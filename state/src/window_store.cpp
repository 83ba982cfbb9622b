// The window store: segment-first key layout, retention by observed stream time, whole
// segments dropped with one range delete (see the header).
#include "sluice/state/window_store.hpp"

#include <algorithm>
#include <utility>

#include "sluice/error.hpp"
#include "sluice/state/big_endian.hpp"

namespace sluice::state {
namespace {

constexpr std::size_t segment_bytes = 8;
constexpr std::size_t length_bytes = 4;
constexpr std::size_t start_bytes = 8;

// The layout record's key: shorter than a segment id and all zero, so it sorts before every
// window (and outside every segment range that is fetched or dropped).
constexpr std::string_view layout_key{"\0\0\0\0", 4};

/// What the layout record holds: the segment interval and the writer's kept record time
/// (-1: none kept; a record of 8 bytes, from before the time was kept, has none).
struct layout {
  std::chrono::milliseconds interval;
  std::int64_t record_time = -1;
};

std::string layout_value(const layout& l) {
  std::string out;
  append_u64(out, static_cast<std::uint64_t>(l.interval.count()));
  if (l.record_time >= 0) append_u64(out, static_cast<std::uint64_t>(l.record_time));
  return out;
}

/// The layout a layout record holds; refuses a record that cannot be one.
layout parse_layout(std::string_view value, const std::string& name) {
  const bool sized = value.size() == 8 || value.size() == 16;
  if (!sized || read_u64(value) == 0 || read_u64(value) > std::uint64_t{1} << 62 ||
      (value.size() == 16 && read_u64(value, 8) > std::uint64_t{1} << 62))
    throw sluice::error(errc::state, "window store '" + name +
                                         "': its layout record (the segment interval and record time) is corrupt; "
                                         "reset the application to rebuild the store from its input");
  return layout{std::chrono::milliseconds(static_cast<std::int64_t>(read_u64(value))),
                value.size() == 16 ? static_cast<std::int64_t>(read_u64(value, 8)) : -1};
}

std::string segment_prefix(std::int64_t segment) {
  std::string out;
  append_u64(out, static_cast<std::uint64_t>(segment));
  return out;
}

// <segment> <u32 length> <key>: every window of `key` in `segment` starts with it, and no
// window of another key does (the length makes keys prefix-free).
void key_prefix(std::string& out, std::int64_t segment, std::string_view key) {
  out.clear();
  append_u64(out, static_cast<std::uint64_t>(segment));
  append_u32(out, static_cast<std::uint32_t>(key.size()));
  out.append(key);
}

struct parsed_key {
  std::string_view key;
  std::int64_t start = 0;
};

std::optional<parsed_key> parse(std::string_view k) {
  if (k.size() < segment_bytes + length_bytes + start_bytes) return std::nullopt;
  const std::uint32_t n = read_u32(k, segment_bytes);
  if (k.size() != segment_bytes + length_bytes + n + start_bytes) return std::nullopt;
  return parsed_key{k.substr(segment_bytes + length_bytes, n),
                    static_cast<std::int64_t>(read_u64(k.substr(segment_bytes + length_bytes + n)))};
}

std::chrono::milliseconds checked_interval(const window_store_options& o, const std::string& name) {
  if (o.retention.count() <= 0)
    throw sluice::error(errc::invalid_config, "window store '" + name + "': retention must be positive, got " +
                                                  std::to_string(o.retention.count()) + " ms");
  if (o.segment_interval.count() < 0)
    throw sluice::error(errc::invalid_config, "window store '" + name + "': segment_interval must be >= 0, got " +
                                                  std::to_string(o.segment_interval.count()) + " ms");
  if (o.segment_interval.count() > 0) return o.segment_interval;
  return std::max(o.retention / 2, std::chrono::milliseconds(60'000));
}

}  // namespace

std::string window_entry_key(std::string_view key, std::int64_t start, std::chrono::milliseconds segment_interval) {
  std::string out;
  key_prefix(out, start / segment_interval.count(), key);
  append_u64(out, static_cast<std::uint64_t>(start));
  return out;
}

window_store::window_store(std::unique_ptr<kv_store> storage, changelog_sink* changelog, window_store_options options)
    : kv_backed_store(std::move(storage), "window store"),
      changelog_(changelog),
      retention_(options.retention),
      segment_interval_(checked_interval(options, storage_->name())) {
  if (auto stored = storage_->get(layout_key)) {
    const auto l = parse_layout(*stored, name());
    segment_interval_ = l.interval;
    record_time_ = committed_record_time_ = l.record_time;
    layout_stored_ = true;
  }
  observed_ = committed_observed_ = read_observed_from_storage();
}

window_store::~window_store() { close(); }

std::int64_t window_store::read_observed_from_storage() {
  // The newest segment is the last key's; the highest start is somewhere in that segment.
  std::int64_t newest_segment = -1;
  {
    auto it = storage_->all(direction::reverse);
    if (!it.valid() || it.key() == layout_key) return -1;
    newest_segment = static_cast<std::int64_t>(read_u64(it.key()));
  }
  std::int64_t observed = -1;
  for (auto it = storage_->prefix(segment_prefix(newest_segment)); it.valid(); it.next())
    if (auto p = parse(it.key())) observed = std::max(observed, p->start);
  return observed;
}

std::int64_t window_store::min_live_start() const noexcept { return observed_ - retention_.count() + 1; }

void window_store::drop_expired_segments() {
  const std::int64_t live = min_live_start();
  if (live <= 0) return;
  const std::int64_t first_live_segment = segment_of(live);
  if (first_live_segment <= dropped_below_) return;
  // One range tombstone over every segment below the first live one: nothing of them is
  // read again, and RocksDB drops their files in compaction.
  storage_->remove_range(segment_prefix(0), segment_prefix(first_live_segment));
  dropped_below_ = first_live_segment;
}

void window_store::commit(changelog_offset next_changelog_offset) {
  storage_->commit(next_changelog_offset);
  committed_observed_ = observed_;
  committed_record_time_ = record_time_;
}

void window_store::abort() {
  storage_->abort();
  observed_ = committed_observed_;
  record_time_ = committed_record_time_;
  // A drop of the aborted batch is gone too; the next put decides again.
  dropped_below_ = 0;
  layout_stored_ = storage_->get(layout_key).has_value();  // it may have been in the batch
}

void window_store::restore(std::span<const restore_record> batch, changelog_offset next_offset) {
  // The layout the changelog was written with decides the segments, whatever the options
  // say now: its record comes before the store's first window.
  for (const auto& r : batch)
    if (r.key == layout_key && r.value) {
      const auto l = parse_layout(*r.value, name());
      segment_interval_ = l.interval;
      record_time_ = std::max(record_time_, l.record_time);
      layout_stored_ = true;
    }
  // Observed time first, over the whole batch: a record is skipped when it is expired by
  // the end of what is restored, as the original store would have dropped it by then.
  for (const auto& r : batch)
    if (auto p = parse(r.key)) observed_ = std::max(observed_, p->start);
  std::vector<restore_record> kept;
  kept.reserve(batch.size());
  const std::int64_t live = min_live_start();
  for (const auto& r : batch) {
    if (r.key == layout_key) {
      kept.push_back(r);
      continue;
    }
    auto p = parse(r.key);
    if (!p)
      throw sluice::error(errc::state, "window store '" + name() +
                                           "': a changelog record's key is not a window key; the changelog belongs to "
                                           "another store kind (reset the application to rebuild it)");
    if (p->start < live && r.value) continue;
    kept.push_back(r);
  }
  storage_->restore(kept, next_offset);
  const auto dropped = dropped_below_;
  drop_expired_segments();
  if (dropped_below_ != dropped) storage_->commit(next_offset);
  committed_observed_ = observed_;
  committed_record_time_ = record_time_;
}

void window_store::close() {
  if (closed_) return;
  closed_ = true;
  storage_->close();
}

void window_store::log(std::string_view key, const std::optional<std::string_view>& value, std::int64_t timestamp_ms) {
  if (changelog_) changelog_->log(key, value, timestamp_ms);
}

bool window_store::put(std::string_view key, std::int64_t window_start, std::string_view value,
                       std::int64_t timestamp_ms) {
  if (window_start < 0)
    throw sluice::error(errc::state, "window store '" + name() + "': window start " + std::to_string(window_start) +
                                         " is negative; windows start at or after the epoch");
  observed_ = std::max(observed_, window_start);
  drop_expired_segments();
  if (window_start < min_live_start()) return false;
  if (!layout_stored_) write_layout(timestamp_ms);  // before the store's first window, in the same commit
  key_scratch_ = window_entry_key(key, window_start, segment_interval_);
  storage_->put(key_scratch_, value);
  log(key_scratch_, value, timestamp_ms);
  return true;
}

void window_store::write_layout(std::int64_t timestamp_ms) {
  const auto value = layout_value({segment_interval_, record_time_});
  storage_->put(layout_key, value);
  log(layout_key, value, timestamp_ms);
  layout_stored_ = true;
}

void window_store::keep_record_time(std::int64_t record_time, std::int64_t timestamp_ms) {
  if (record_time <= record_time_) return;
  record_time_ = record_time;
  write_layout(timestamp_ms);
}

void window_store::remove(std::string_view key, std::int64_t window_start, std::int64_t timestamp_ms) {
  if (window_start < 0) return;
  key_scratch_ = window_entry_key(key, window_start, segment_interval_);
  storage_->remove(key_scratch_);
  log(key_scratch_, std::nullopt, timestamp_ms);
}

std::optional<std::string> window_store::fetch(std::string_view key, std::int64_t window_start) {
  if (window_start < 0 || window_start < min_live_start()) return std::nullopt;
  return storage_->get(window_entry_key(key, window_start, segment_interval_));
}

void window_store::fetch(std::string_view key, std::int64_t from, std::int64_t to, std::vector<window_entry>& out) {
  out.clear();
  from = std::max({from, min_live_start(), std::int64_t{0}});
  to = std::min(to, observed_);  // nothing starts later: bounds the segments visited
  if (from > to) return;
  std::string lo, hi;
  for (std::int64_t s = segment_of(from); s <= segment_of(to); ++s) {
    key_prefix(lo, s, key);
    hi = lo;
    append_u64(lo, static_cast<std::uint64_t>(from));
    append_u64(hi, static_cast<std::uint64_t>(to));
    for (auto it = storage_->range(lo, hi); it.valid(); it.next())
      out.push_back({static_cast<std::int64_t>(read_u64(it.key().substr(it.key().size() - start_bytes))),
                     std::string(it.value())});
  }
}

void window_store::fetch_all(
    std::int64_t from, std::int64_t to,
    const std::function<void(std::string_view key, std::int64_t start, std::string_view value)>& visit) {
  from = std::max({from, min_live_start(), std::int64_t{0}});
  to = std::min(to, observed_);
  if (from > to) return;
  for (auto it = storage_->range(segment_prefix(segment_of(from)), segment_prefix(segment_of(to) + 1)); it.valid();
       it.next()) {
    auto p = parse(it.key());
    if (!p || p->start < from || p->start > to) continue;
    visit(p->key, p->start, it.value());
  }
}

}  // namespace sluice::state
