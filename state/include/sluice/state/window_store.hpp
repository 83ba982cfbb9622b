// sluice::state::window_store: values per (key, window start), kept for a retention period
// in time segments that are dropped whole, over a kv_store.
//
// The store behind windowed aggregations (Kafka Streams' WindowStore): a window's result
// is put under its key and start time, fetched by key and a range of start times, and
// forgotten when the window leaves retention. Forgetting never deletes entry by entry: the
// key layout puts the segment first, so a segment that leaves retention goes with one
// kv_store::remove_range (one RocksDB DeleteRange in the commit's batch).
//
// Lifecycle: the runtime opens the kv_store (RocksDB or in-memory, per the store's backend)
// and hands it over with the store's changelog sink (nullptr when not logged); the window
// store owns the kv_store from then on and is committed, aborted, restored, flushed and
// closed by the runtime like every store. Writes are the kv_store's pending writes, so under
// exactly-once they reach storage only at the commit.
//
// Threading: like kv_store, one instance belongs to one task and is used by one thread at a
// time; nothing locks.
#pragma once

#include <chrono>
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
#include "sluice/state/state_store.hpp"

namespace sluice::state {

/// How long a window store keeps windows and how it cuts time into segments.
struct window_store_options {
  /// Windows whose start is at or below (observed stream time - retention) are expired:
  /// puts of them are ignored, fetches skip them, and their segments are dropped. A windowed
  /// aggregation needs at least window size + grace. Must be positive.
  /// Default: 1 day (Kafka Streams' default for windowed aggregations).
  std::chrono::milliseconds retention{std::chrono::hours(24)};

  /// The time span of one segment (segment id = window start / segment interval). Whole
  /// segments are dropped, so an expired window may stay on disk up to one interval longer
  /// (never visible). 0 picks Kafka Streams' default, max(retention / 2, 60 s). Applies to a
  /// new store only: a store keeps the interval it was first written with (its layout
  /// record), so a later change of retention or grace finds every window it holds.
  /// Default: 0.
  std::chrono::milliseconds segment_interval{0};
};

/// One window as fetch() returns it.
struct window_entry {
  std::int64_t start = 0;  ///< the window's start, ms since the epoch
  std::string value{};
};

/// Values per (key, window start), in time segments dropped whole when they leave retention.
///
/// Storage layout inside the kv_store (bytewise order keeps a segment contiguous, and a key's
/// windows contiguous and ordered by start within a segment):
///   <u64 segment id> <u32 key length> <key> <u64 window start>  ->  value
/// all integers big-endian. Window starts are >= 0 (stream time is never negative).
/// Before the first window, one layout record: key 00 00 00 00 (four zero bytes: it sorts
/// before every window), value the segment interval in ms (u64), then the kept record time
/// (u64, once keep_record_time() was called). The interval is part of every window's key, so
/// a store reads it back (on open, or from its changelog in a restore) and keeps it: options
/// that would now give another interval (a new retention, a longer grace) change expiry,
/// never where an existing window is found.
///
/// Observed stream time is the highest window start ever put (or restored); it decides
/// expiry, as in Kafka Streams' segmented stores. On open it is read back from the newest
/// segment (one scan of that segment).
///
/// Changelog: every put and remove is logged as an ordinary key/value record of the layout
/// above, with the caller's timestamp (the layout record with the first window's).
/// Dropping a segment logs nothing: a restore skips records of expired windows (as Kafka
/// Streams' restore does) and drops expired segments again, so what was dropped never comes
/// back.
///
/// Errors: storage failures throw sluice::error(errc::state); invalid options and negative
/// window starts throw errc::invalid_config / errc::state naming the store.
class window_store final : public kv_backed_store {
 public:
  /// Takes ownership of `storage`; logs to `changelog` unless it is nullptr.
  window_store(std::unique_ptr<kv_store> storage, changelog_sink* changelog, window_store_options options);
  ~window_store() override;

  void commit(changelog_offset next_changelog_offset) override;
  /// Drops pending writes and the observed stream time they advanced.
  void abort() override;
  void restore(std::span<const restore_record> batch, changelog_offset next_offset) override;
  void close() override;

  /// Sets the window of `key` starting at `window_start` to `value`. Advances observed
  /// stream time to `window_start` and drops segments that left retention. A window already
  /// expired is ignored (returns false). `timestamp_ms` is the changelog record's timestamp.
  bool put(std::string_view key, std::int64_t window_start, std::string_view value, std::int64_t timestamp_ms);
  /// Deletes the window of `key` starting at `window_start` (no-op if absent).
  void remove(std::string_view key, std::int64_t window_start, std::int64_t timestamp_ms);
  /// The value of the window of `key` starting at `window_start`, or nullopt if absent or
  /// expired.
  std::optional<std::string> fetch(std::string_view key, std::int64_t window_start);
  /// The windows of `key` with from <= start <= to (both inclusive, as Kafka Streams'
  /// fetch(key, timeFrom, timeTo)), ordered by start, into `out` (cleared first). Expired
  /// windows are skipped. One seek per segment the range covers.
  void fetch(std::string_view key, std::int64_t from, std::int64_t to, std::vector<window_entry>& out);
  /// Calls visit(key, start, value) for every live window with from <= start <= to, in
  /// segment then key then start order.
  void fetch_all(std::int64_t from, std::int64_t to,
                 const std::function<void(std::string_view key, std::int64_t start, std::string_view value)>& visit);

  /// The highest window start put or restored so far; -1 before any.
  std::int64_t observed_stream_time() const noexcept { return observed_; }

  /// Keeps `record_time` (when higher than the time kept) in the layout record, logged at
  /// `timestamp_ms`, so that it survives a restart: a windowed aggregation keeps the highest
  /// record timestamp it has seen, which is later than the highest window start and decides
  /// which windows have closed. A writer calls it once per commit, not per record.
  void keep_record_time(std::int64_t record_time, std::int64_t timestamp_ms);
  /// The highest time kept with keep_record_time() (committed, restored or pending); -1
  /// before any.
  std::int64_t kept_record_time() const noexcept { return record_time_; }
  std::chrono::milliseconds retention() const noexcept { return retention_; }
  /// The interval in use: the options' for a new store, the stored one for an existing one.
  std::chrono::milliseconds segment_interval() const noexcept { return segment_interval_; }
  /// The segment a window starting at `start` belongs to.
  std::int64_t segment_of(std::int64_t start) const noexcept { return start / segment_interval_.count(); }

 private:
  /// The earliest live window start at the current observed time.
  std::int64_t min_live_start() const noexcept;
  /// Drops (remove_range) every segment below the one holding min_live_start().
  void drop_expired_segments();
  void log(std::string_view key, const std::optional<std::string_view>& value, std::int64_t timestamp_ms);
  std::int64_t read_observed_from_storage();
  /// Puts and logs the layout record (interval and kept record time).
  void write_layout(std::int64_t timestamp_ms);

  changelog_sink* changelog_;
  std::chrono::milliseconds retention_;
  std::chrono::milliseconds segment_interval_;
  std::int64_t observed_ = -1;
  std::int64_t committed_observed_ = -1;     ///< observed_ as of the last commit or restore
  std::int64_t record_time_ = -1;            ///< keep_record_time()'s, pending or committed
  std::int64_t committed_record_time_ = -1;  ///< record_time_ as of the last commit or restore
  std::int64_t dropped_below_ = 0;           ///< segments below this id are gone (in this session)
  bool layout_stored_ = false;               ///< the layout record is written (pending or committed)
  std::string key_scratch_;
  bool closed_ = false;
};

/// The kv_store key of the window of `key` starting at `start` in a store whose segments
/// span `segment_interval` ms (exposed for tests that look underneath).
std::string window_entry_key(std::string_view key, std::int64_t start, std::chrono::milliseconds segment_interval);

}  // namespace sluice::state
