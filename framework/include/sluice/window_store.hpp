// sluice::window_store_handle: a processor's typed handle to a window store (values per
// key and window start, kept for a retention period in time segments dropped whole;
// state/include/sluice/state/window_store.hpp), and window_store_materialized(), which
// declares one.
//
//   b.add_state_store(sluice::window_store_materialized("clicks-per-minute", {.retention = 1h}));
//   ... in init():    clicks_.emplace(ctx.state_store<sluice::window_store_handle<std::string,
//   std::int64_t>>("clicks-per-minute"));
//   ... in process(): clicks_->put(r.key, start, n);  auto w = clicks_->fetch(r.key, from, to);
//
// Keys and values are stored with state serdes (compact binary for described structs).
// Changelog records get the task's stream time as their timestamp. The windowed
// aggregations of the DSL (kgrouped_stream::windowed_by) keep their results in this store.
//
// Threading: like every store handle, used from its task's thread only; valid from init()
// to close().
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sluice/builder.hpp"
#include "sluice/serde/serde.hpp"
#include "sluice/state/window_store.hpp"
#include "sluice/store.hpp"

namespace sluice {

template <class K, class V, class KS = default_state_serde<K>, class VS = default_state_serde<V>>
class window_store_handle {
 public:
  /// Throws sluice::error(errc::invalid_topology) naming the store when it is not a window
  /// store (declare it with window_store_materialized()). Checked once, here.
  window_store_handle(detail::store_binding binding, detail::task_context* context)
      : store_(detail::store_of_kind<state::window_store>(binding, "window")), context_(context) {}

  /// Sets the window of `key` starting at `window_start`; false when that window has
  /// already left retention (nothing written).
  bool put(const K& key, std::int64_t window_start, const V& value) {
    KS::serialize(key, key_buf_);
    VS::serialize(value, value_buf_);
    return store_->put(key_buf_, window_start, value_buf_, context_->stream_time());
  }
  void remove(const K& key, std::int64_t window_start) {
    KS::serialize(key, key_buf_);
    store_->remove(key_buf_, window_start, context_->stream_time());
  }
  /// The window of `key` starting at `window_start`, if present and not expired.
  std::optional<V> fetch(const K& key, std::int64_t window_start) {
    KS::serialize(key, key_buf_);
    auto v = store_->fetch(key_buf_, window_start);
    if (!v) return std::nullopt;
    return VS::deserialize(*v);
  }
  /// The windows of `key` with from <= start <= to, ordered by start, as (start, value).
  std::vector<std::pair<std::int64_t, V>> fetch(const K& key, std::int64_t from, std::int64_t to) {
    KS::serialize(key, key_buf_);
    store_->fetch(key_buf_, from, to, entries_);
    std::vector<std::pair<std::int64_t, V>> out;
    out.reserve(entries_.size());
    for (const auto& e : entries_) out.emplace_back(e.start, VS::deserialize(e.value));
    return out;
  }
  /// The highest window start the store has seen (-1 before any).
  std::int64_t observed_stream_time() const noexcept { return store_->observed_stream_time(); }
  /// Keeps `record_time` in the store (and its changelog) when it is higher than the time
  /// kept, for the next owner of the store after a restart: call it once per commit
  /// (processor_context::before_commit), not per record.
  void keep_record_time(std::int64_t record_time) { store_->keep_record_time(record_time, context_->stream_time()); }
  /// The highest time kept with keep_record_time() (-1 before any).
  std::int64_t kept_record_time() const noexcept { return store_->kept_record_time(); }

 private:
  state::window_store* store_;
  detail::task_context* context_;
  std::string key_buf_, value_buf_;
  std::vector<state::window_entry> entries_;
};

/// Declares a window store named `name` with `options` (retention, segment interval) for
/// streams_builder::add_state_store(); RocksDB with a changelog unless `backend` says
/// otherwise.
namespace detail {

/// Builds a state::window_store with `options` over a store's key-value storage.
inline store_factory window_store_factory(state::window_store_options options) {
  return [options](std::unique_ptr<state::kv_store> storage,
                   state::changelog_sink* changelog) -> std::unique_ptr<state::state_store> {
    return std::make_unique<state::window_store>(std::move(storage), changelog, options);
  };
}

/// `storage` as a window store with `options`, as the windowed aggregations and the
/// stream–stream joins keep theirs. Its changelog keeps a window a day past the store
/// (Kafka Streams' windowstore.changelog.additional.retention.ms), then the broker deletes it.
inline store_spec window_store_spec(store_spec storage, state::window_store_options options) {
  storage.make_store = window_store_factory(options);
  storage.changelog_retention = options.retention + std::chrono::hours(24);
  return storage;
}

}  // namespace detail

inline materialized window_store_materialized(std::string name, state::window_store_options options = {},
                                              detail::store_backend backend = detail::store_backend::rocksdb) {
  materialized m;
  m.name = std::move(name);
  m.backend = backend;
  m.make_store = detail::window_store_factory(options);
  return m;
}

}  // namespace sluice
