// The nodes of a table–table join (ktable::join, left_join, outer_join), as Kafka Streams
// 3.9's KTableKTableInnerJoin / LeftJoin / RightJoin / OuterJoin and KTableKTableJoinMerger:
// one side node per input table, each taking that table's updates (value or tombstone) after
// the table's store has applied them and looking the key up in the other table's store; both
// feed one merge node that keeps the join result in its own store and passes each result
// (value or tombstone) on.
//
// Thread-safety: one instance per task, used by the task's thread only.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sluice/detail/dsl_nodes.hpp"
#include "sluice/detail/window_nodes.hpp"
#include "sluice/store.hpp"
#include "sluice/windows.hpp"

namespace sluice::detail {

/// Which rows of the two tables a join keeps: both sides present (inner), every row of the
/// left table (left), every row of either (outer).
enum class table_join_kind { inner, left, outer };

/// Which input table a side node takes updates from.
enum class table_join_side { left, right };

/// The getter of a windowed aggregation's table (its window store), as Kafka Streams'
/// KStreamWindowAggregate / KStreamSessionWindowAggregate value getters: a time window by
/// key and window start (the window store's value and the timestamp of its latest update), a
/// session by key, start and end (timestamped with its end). Specialized below.
template <class K, class V>
class window_table_getter;

template <class K, class V>
class window_table_getter<windowed<K>, V> {
 public:
  void init(task_context& task, const std::string& store) { store_.emplace(task.store(store), &task); }
  /// The window's value, if present and not expired; raises `timestamp` to its timestamp.
  std::optional<V> get(const windowed<K>& key, std::int64_t& timestamp) {
    auto v = store_->fetch(key.key, key.window.start);
    if (!v) return std::nullopt;
    timestamp = std::max(timestamp, v->timestamp);
    return std::move(v->value);
  }

 private:
  std::optional<window_aggregate_store_handle<K, V>> store_;
};

template <class K, class V>
class window_table_getter<session_windowed<K>, V> {
 public:
  void init(task_context& task, const std::string& store) { store_.emplace(task.store(store), &task); }
  /// The session's value when the store holds exactly this session (the key's session ending
  /// at its end starts at its start), not expired; raises `timestamp` to the session's end.
  std::optional<V> get(const session_windowed<K>& key, std::int64_t& timestamp) {
    auto v = store_->fetch(key.key, key.window.end);
    if (!v || v->start != key.window.start) return std::nullopt;
    timestamp = std::max(timestamp, key.window.end);
    return std::move(v->value);
  }

 private:
  std::optional<session_aggregate_store_handle<K, V>> store_;
};

/// One side of a table–table join. In: record<K, I>, the updates of this side's table, where
/// I is VThis (a table whose updates are never deletions: an aggregation's) or
/// std::optional<VThis> (nullopt: the key was deleted). Out: record<K, std::optional<VO>>, the
/// join result for the key, or nullopt to delete it. F is the user's joiner with the left
/// table's value first whichever side this is: VO(const VL&, const VR&) for inner,
/// VO(const VL&, const std::optional<VR>&) for left, VO(const std::optional<VL>&, const
/// std::optional<VR>&) for outer.
///
/// What comes out, per Kafka Streams 3.9 (a deletion of a key a table never had included):
///   inner: the other side absent -> nothing; present -> joiner(this, other), or a
///          tombstone when this side deleted the key.
///   left, left side: the right absent and this side deleted a key the join had no row for
///          -> nothing; otherwise joiner(left, right or nullopt), or a tombstone on a deletion.
///   left, right side: the left absent -> nothing; present -> joiner(left, right or nullopt).
///   outer: the other side absent and this side deleted a key the join had no row for ->
///          nothing; otherwise joiner(left or nullopt, right or nullopt), or a tombstone when
///          both are absent.
/// "The join had a row for the key" is read from the result store: for left and outer joins
/// it has one exactly when this side had one before (the other side being absent), which is
/// what Kafka Streams learns from the old value it enables on the input tables.
///
/// Getter reads the other table (key_value_getter or window_table_getter, under a
/// table_getter, which answers for a suppressed table's buffered keys). A result carries
/// the later of the update's timestamp and the other side's stored value's, as Kafka
/// Streams 3.9's KTableKTable*Join stamp it: every table keeps its values' timestamps (a
/// table read from a topic its records', an aggregation its aggregates', a join its
/// results'); with the other side absent, or answered from a suppression buffer, the
/// update's own.
template <class K, class I, class VThis, class VOther, class VO, class F, table_join_kind Kind, table_join_side Side,
          class Getter = key_value_getter<K, VOther>>
class table_join_side_node final : public typed_node<K, I> {
 public:
  table_join_side_node(std::string other_store, std::vector<std::string> other_buffers, std::string result_store,
                       F joiner)
      : other_name_(std::move(other_store)),
        result_name_(std::move(result_store)),
        joiner_(std::move(joiner)),
        other_(std::move(other_buffers)) {}

  void init(task_context& task) override {
    node::init(task);
    other_.init(task, other_name_);
    result_.init(task, result_name_);
  }

  void on_record(const record<K, I>& r) override {
    const VThis* self = nullptr;
    if constexpr (is_optional_v<I>) {
      if (r.value) self = &*r.value;
    } else {
      self = &r.value;
    }
    std::int64_t timestamp = r.timestamp;
    const std::optional<VOther> other = other_.get(r.key, timestamp);
    auto emit = [&](std::optional<VO> value) {
      out_.key = r.key;
      out_.value = std::move(value);
      out_.timestamp = timestamp;
      out_.headers = r.headers;
      this->forward_erased(&out_);
    };
    if constexpr (Kind == table_join_kind::inner) {
      if (!other) return;
      if (!self) return emit(std::optional<VO>());
      return emit(std::optional<VO>(join(*self, *other)));
    } else if constexpr (Kind == table_join_kind::left && Side == table_join_side::right) {
      if (!other) return;  // no left row: a left join has no row for the key
      std::optional<VThis> right;
      if (self) right = *self;
      return emit(std::optional<VO>(std::invoke(joiner_, *other, right)));
    } else {
      // left join's left side, and both sides of an outer join
      if (!other && !self && !result_.contains(r.key)) return;
      if (!self && (Kind == table_join_kind::left || !other)) return emit(std::optional<VO>());
      std::optional<VThis> mine;
      if (self) mine = *self;
      if constexpr (Kind == table_join_kind::left) {
        return emit(std::optional<VO>(std::invoke(joiner_, *mine, other)));
      } else if constexpr (Side == table_join_side::left) {
        return emit(std::optional<VO>(std::invoke(joiner_, mine, other)));
      } else {
        return emit(std::optional<VO>(std::invoke(joiner_, other, mine)));
      }
    }
  }

 private:
  VO join(const VThis& self, const VOther& other) {
    if constexpr (Side == table_join_side::left)
      return std::invoke(joiner_, self, other);
    else
      return std::invoke(joiner_, other, self);
  }

  std::string other_name_;
  std::string result_name_;
  F joiner_;
  table_getter<K, VOther, Getter> other_;
  timestamped_store<K, VO> result_;
  record<K, std::optional<VO>> out_;
};

/// The merge point of a table–table join: applies each result of either side to the join's
/// store (a value puts, nullopt deletes), kept with the result's timestamp
/// (value_format::timestamped, as Kafka Streams' KTableKTableJoinMerger keeps it in a
/// TimestampedKeyValueStore), and passes it on unchanged, tombstones included: what a table
/// read from a topic does with its updates, so it is that node.
template <class K, class VO>
using table_join_merge_node = table_node<K, VO>;

}  // namespace sluice::detail
