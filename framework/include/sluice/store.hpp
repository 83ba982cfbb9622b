// sluice::key_value_store<K, V>: a typed view of a task's state store, as processors use it.
//
// Keys and values cross into the store as bytes through state serdes (compact binary for
// described structs). Every write also goes to the store's changelog topic unless logging
// is off. Ranges compare the serialized keys byte by byte: strings sort as expected;
// signed integers sort as their big-endian bytes (negative after positive).
//
// Thread-safety: a handle belongs to the task that gave it out; use it from that task only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "sluice/detail/node.hpp"
#include "sluice/serde/serde.hpp"
#include "sluice/state/big_endian.hpp"
#include "sluice/state/kv_store.hpp"

namespace sluice {

/// Iterates typed entries of a range; RAII, it closes its store iterator when destroyed.
/// `value_offset`: bytes in front of each stored value that V's serde does not read (the
/// timestamp of a timestamped store read through a plain handle).
template <class K, class V, class KS, class VS>
class kv_range {
 public:
  explicit kv_range(state::kv_iterator it, std::size_t value_offset = 0)
      : it_(std::move(it)), value_offset_(value_offset) {}
  bool valid() const { return it_.valid(); }
  void next() { it_.next(); }
  K key() const { return KS::deserialize(it_.key()); }
  V value() const { return VS::deserialize(it_.value().substr(value_offset_)); }

 private:
  state::kv_iterator it_;
  std::size_t value_offset_;
};

template <class K, class V, class KS = default_state_serde<K>, class VS = default_state_serde<V>>
class key_value_store {
 public:
  using range_type = kv_range<K, V, KS, VS>;

  std::optional<V> get(const K& key) {
    KS::serialize(key, key_buf_);
    if (!store_->get(key_buf_, value_buf_)) return std::nullopt;
    return VS::deserialize(std::string_view(value_buf_).substr(value_offset_));
  }

  /// On a timestamped store (an aggregation's) the value is written with the task's stream
  /// time as its timestamp.
  void put(const K& key, const V& value) {
    KS::serialize(key, key_buf_);
    write(value);
  }

  /// Writes only when the key is absent; returns whether it wrote.
  bool put_if_absent(const K& key, const V& value) {
    KS::serialize(key, key_buf_);
    if (store_->get(key_buf_, value_buf_)) return false;
    write(value);
    return true;
  }

  void remove(const K& key) {
    KS::serialize(key, key_buf_);
    store_->remove(key_buf_);
    if (changelog_) changelog_->log(key_buf_, std::nullopt, context_->stream_time());
  }

  /// Entries with from <= key <= to (serialized order), forward or reverse.
  range_type range(const K& from, const K& to, state::direction dir = state::direction::forward) {
    std::string f, t;
    KS::serialize(from, f);
    KS::serialize(to, t);
    return range_type(store_->range(f, t, dir), value_offset_);
  }

  /// Entries whose serialized key starts with `prefix`'s serialized form.
  range_type prefix(const K& prefix, state::direction dir = state::direction::forward) {
    std::string p;
    KS::serialize(prefix, p);
    return range_type(store_->prefix(p, dir), value_offset_);
  }

  range_type all(state::direction dir = state::direction::forward) {
    return range_type(store_->all(dir), value_offset_);
  }

  std::uint64_t approximate_count() { return store_->approximate_count(); }

 private:
  friend struct detail::store_handle_factory;
  /// Made by processor_context::store and the test driver (through
  /// detail::store_handle_factory). Throws sluice::error(errc::invalid_topology) when the
  /// bound store is of another kind (a ranked index or a queue asked for as a key-value store).
  key_value_store(detail::store_binding binding, detail::task_context* context)
      : store_(detail::kv_store_of(binding)),
        changelog_(binding.changelog),
        context_(context),
        value_offset_(binding.format == detail::value_format::timestamped ? 8 : 0) {}

  /// Writes `value` under key_buf_; on a timestamped store after the task's stream time as
  /// its timestamp, and logged without it (detail::value_format).
  void write(const V& value) {
    const std::int64_t now = context_->stream_time();
    value_buf_.clear();
    if (value_offset_ > 0) {
      state::append_u64(value_buf_, static_cast<std::uint64_t>(now));
      VS::serialize(value, scratch_);
      value_buf_.append(scratch_);
    } else {
      VS::serialize(value, value_buf_);
    }
    store_->put(key_buf_, value_buf_);
    if (changelog_) changelog_->log(key_buf_, std::string_view(value_buf_).substr(value_offset_), now);
  }

  state::kv_store* store_;
  detail::changelog_writer* changelog_;
  detail::task_context* context_;
  std::size_t value_offset_;
  std::string key_buf_, value_buf_, scratch_;
};

/// A typed read-only view of a global store (global_table): readable from every task.
template <class K, class V, class KS = default_serde<K>, class VS = default_serde<V>>
class global_store_view {
 public:
  explicit global_store_view(const detail::global_view& view) : view_(&view) {}
  std::optional<V> get(const K& key) const {
    KS::serialize(key, key_buf_);
    if (!view_->get(key_buf_, value_buf_)) return std::nullopt;
    return VS::deserialize(value_buf_);
  }

 private:
  const detail::global_view* view_;
  mutable std::string key_buf_, value_buf_;
};

}  // namespace sluice
