// The nodes of a stream–stream windowed join (kstream::join, left_join, outer_join with
// join_windows), as Kafka Streams 3.9's KStreamJoinWindow and KStreamKStreamJoin: per input
// stream a windowing node that keeps the stream's records in a window store and a join node
// that looks each record up in the other stream's store; left and outer joins keep records
// still without a match in a shared "outer" key-value store until their window closes.
//
// Thread-safety: one instance per task, used by the task's thread only; the two join nodes of
// a task share one join_time_tracker, handed out under a mutex at init.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/detail/dsl_nodes.hpp"
#include "sluice/error.hpp"
#include "sluice/state/big_endian.hpp"
#include "sluice/store.hpp"
#include "sluice/window_store.hpp"

namespace sluice::detail {

enum class stream_join_kind { inner, left, outer };
enum class stream_join_side { left, right };

/// The time both join nodes of a task see (Kafka Streams' shared TimeTracker): stream time,
/// the highest record timestamp either side processed; and min_time, the lowest timestamp
/// the outer store may hold (a hint that saves scans, kept exactly as Kafka Streams keeps it,
/// since it decides which record's arrival releases an unmatched result).
struct join_time_tracker {
  std::int64_t stream_time = -1;
  std::int64_t min_time = std::numeric_limits<std::int64_t>::max();
};

/// The trackers of one join, one per task; shared by the join's node prototypes.
class join_time_trackers {
 public:
  std::shared_ptr<join_time_tracker> of(std::string_view task) {
    std::lock_guard lock(mutex_);
    auto& t = by_task_[std::string(task)];
    if (!t) t = std::make_shared<join_time_tracker>();
    return t;
  }
  void remove(std::string_view task) {
    std::lock_guard lock(mutex_);
    by_task_.erase(std::string(task));
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<join_time_tracker>> by_task_;
};

/// The outer store's keys as bytes ordered <timestamp><side><key> (Kafka Streams'
/// TimestampedKeyAndJoinSide): big-endian timestamp, then 0 for the right side and 1 for the
/// left, then the key as the topic encodes it (default_serde, as Kafka Streams uses the
/// join's key serde), so records of equal time and side come out in Kafka Streams' key order.
struct outer_join_key {
  static void encode(std::int64_t timestamp, stream_join_side side, std::string_view key, std::string& out) {
    out.clear();
    state::append_u64(out, static_cast<std::uint64_t>(timestamp) ^ (std::uint64_t{1} << 63));
    out.push_back(side == stream_join_side::left ? '\1' : '\0');
    out.append(key);
  }
  static std::int64_t timestamp(std::string_view bytes) {
    return static_cast<std::int64_t>(state::read_u64(bytes) ^ (std::uint64_t{1} << 63));
  }
  static stream_join_side side(std::string_view bytes) {
    return bytes[8] == '\1' ? stream_join_side::left : stream_join_side::right;
  }
  static std::string_view key(std::string_view bytes) { return bytes.substr(9); }
};

/// A list of values (the records of one key and time) in a store: per value a 4-byte
/// big-endian length, then the value in its state encoding.
template <class V>
struct value_list_serde {
  static void serialize(const std::vector<V>& values, std::string& out) {
    out.clear();
    std::string one;
    for (const auto& v : values) {
      default_state_serde<V>::serialize(v, one);
      state::append_u32(out, static_cast<std::uint32_t>(one.size()));
      out.append(one);
    }
  }
  static std::vector<V> deserialize(std::string_view bytes) {
    std::vector<V> values;
    while (!bytes.empty()) {
      if (bytes.size() < 4) throw_truncated();
      const std::uint32_t n = state::read_u32(bytes);
      if (bytes.size() - 4 < n) throw_truncated();
      values.push_back(default_state_serde<V>::deserialize(bytes.substr(4, n)));
      bytes.remove_prefix(4 + n);
    }
    return values;
  }
  [[noreturn]] static void throw_truncated() {
    throw error(errc::state,
                "a stream join's store holds a truncated list of records (the store or its changelog is "
                "corrupt); reset the application's state (delete its state.dir and changelogs)");
  }
};

/// Bytes in, bytes out: the outer store is read and written in its own layout.
struct raw_bytes_serde {
  static void serialize(const std::string& value, std::string& out) { out = value; }
  static std::string deserialize(std::string_view bytes) { return std::string(bytes); }
};

/// KSTREAM-WINDOWED: passes a record on to its join node, then keeps it in its stream's
/// window store under (key, timestamp), with the other records of that key and time (a
/// list: equal timestamps keep every record, as Kafka Streams' retainDuplicates). A record
/// whose time already left the store's retention is passed on but not kept.
template <class K, class V>
class join_window_node final : public typed_node<K, V> {
 public:
  explicit join_window_node(std::string store) : store_name_(std::move(store)) {}
  void init(task_context& task) override {
    node::init(task);
    store_.emplace(
        store_handle_factory::make<window_store_handle<K, std::vector<V>, default_state_serde<K>, value_list_serde<V>>>(
            task.store(store_name_), &task));
  }
  void on_record(const record<K, V>& r) override {
    this->forward_erased(&r);
    auto values = store_->fetch(r.key, r.timestamp).value_or(std::vector<V>{});
    values.push_back(r.value);
    store_->put(r.key, r.timestamp, values);
  }

 private:
  std::string store_name_;
  std::optional<window_store_handle<K, std::vector<V>, default_state_serde<K>, value_list_serde<V>>> store_;
};

/// KSTREAM-JOINTHIS / -JOINOTHER (and the OUTER/LEFT variants): joins each record of its
/// side with the other side's records of the key within the window, in (timestamp, arrival)
/// order, each result at the later of the two timestamps. F is the user's joiner, left
/// stream's value first: VOut(const VL&, const VR&) for inner, VOut(const VL&, const
/// std::optional<VR>&) for left, VOut(const std::optional<VL>&, const std::optional<VR>&) for
/// outer.
///
/// A record without a match on a side that keeps unmatched records (`Outer`: the left side
/// of a left join, both sides of an outer join) comes out with nullopt for the other side at
/// its own timestamp: at once when its window has already closed (its time + after <
/// stream time), otherwise once stream time passes its time + lookback + grace, from the
/// outer store; a later match removes it from there. Every record at stream time (not an
/// out-of-order one) first releases the unmatched records whose windows closed, in
/// (timestamp, right before left, key) order, as Kafka Streams' emitNonJoinedOuterRecords
/// (without its wall-clock throttle: Kafka Streams checks at most once per
/// __emit.interval.ms.kstreams.outer.join.spurious.results.fix__, 1 s by default).
template <class K, class VThis, class VOther, class VOut, class F, stream_join_kind Kind, stream_join_side Side,
          bool Outer>
class stream_join_node final : public typed_node<K, VThis> {
 public:
  using VL = std::conditional_t<Side == stream_join_side::left, VThis, VOther>;
  using VR = std::conditional_t<Side == stream_join_side::left, VOther, VThis>;

  struct settings {
    std::string other_store;
    std::string outer_store;  ///< empty: an inner join, no outer store
    std::int64_t before = 0;  ///< this side's look-back: the other's records from time - before
    std::int64_t after = 0;   ///< and up to time + after
    std::int64_t grace = 0;
    std::int64_t windows_before = 0;  ///< the join windows' own before and after, for the
    std::int64_t windows_after = 0;   ///< unmatched records' closing time per side
  };

  stream_join_node(settings s, F joiner, std::shared_ptr<join_time_trackers> trackers)
      : settings_(std::move(s)), joiner_(std::move(joiner)), trackers_(std::move(trackers)) {}

  void init(task_context& task) override {
    node::init(task);
    other_.emplace(store_handle_factory::make<
                   window_store_handle<K, std::vector<VOther>, default_state_serde<K>, value_list_serde<VOther>>>(
        task.store(settings_.other_store), &task));
    if (!settings_.outer_store.empty())
      outer_.emplace(store_handle_factory::make<outer_store>(task.store(settings_.outer_store), &task));
    tracker_ = trackers_->of(task.task_id());
  }

  void close() override {
    if (context_of()) trackers_->remove(context_of()->task_id());
  }

  void on_record(const record<K, VThis>& r) override {
    const std::int64_t t = r.timestamp;
    auto& time = *tracker_;
    time.stream_time = std::max(time.stream_time, t);
    if (outer_ && t == time.stream_time) emit_closed(r);

    const std::int64_t from = std::max<std::int64_t>(0, t - settings_.before);
    const std::int64_t to = std::max<std::int64_t>(0, t + settings_.after);
    const auto matches = other_->fetch(r.key, from, to);
    for (const auto& [other_time, values] : matches) {
      if (outer_) {
        topic_serde_t<K>::serialize(r.key, key_buf_);
        outer_join_key::encode(other_time, other_side, key_buf_, outer_key_);
        outer_->remove(outer_key_);
      }
      for (const auto& v : values) {
        if constexpr (Side == stream_join_side::left)
          emit(r.key, join(&r.value, &v), std::max(t, other_time), r);
        else
          emit(r.key, join(&v, &r.value), std::max(t, other_time), r);
      }
    }
    if constexpr (Outer) {
      if (!matches.empty()) return;
      if (!outer_ || to < time.stream_time) return emit(r.key, unmatched(r.value), t, r);
      time.min_time = std::min(time.min_time, t);
      topic_serde_t<K>::serialize(r.key, key_buf_);
      outer_join_key::encode(t, Side, key_buf_, outer_key_);
      auto waiting = outer_->get(outer_key_);
      std::vector<VThis> values;
      if (waiting) values = value_list_serde<VThis>::deserialize(*waiting);
      values.push_back(r.value);
      value_list_serde<VThis>::serialize(values, value_buf_);
      outer_->put(outer_key_, value_buf_);
    }
  }

 private:
  using outer_store = key_value_store<std::string, std::string, raw_bytes_serde, raw_bytes_serde>;
  static constexpr stream_join_side other_side =
      Side == stream_join_side::left ? stream_join_side::right : stream_join_side::left;

  task_context* context_of() const { return this->context_; }

  VOut join(const VL* l, const VR* r) {
    if constexpr (Kind == stream_join_kind::inner) {
      return std::invoke(joiner_, *l, *r);
    } else if constexpr (Kind == stream_join_kind::left) {
      return std::invoke(joiner_, *l, r ? std::optional<VR>(*r) : std::optional<VR>());
    } else {
      return std::invoke(joiner_, l ? std::optional<VL>(*l) : std::optional<VL>(),
                         r ? std::optional<VR>(*r) : std::optional<VR>());
    }
  }
  VOut unmatched(const VThis& value) {
    if constexpr (Side == stream_join_side::left)
      return join(&value, nullptr);
    else
      return join(nullptr, &value);
  }

  /// The closing time of an unmatched record of `side` (Kafka Streams' outer-join
  /// look-back: the windows' after for the left side, their before for the right).
  std::int64_t lookback(stream_join_side side) const {
    return side == stream_join_side::left ? settings_.windows_after : settings_.windows_before;
  }

  void emit_closed(const record<K, VThis>& r) {
    auto& time = *tracker_;
    // Nothing can be due yet. (With min_time at its maximum, Kafka Streams' sum overflows
    // and the scan runs.)
    if (time.min_time != std::numeric_limits<std::int64_t>::max() &&
        time.min_time + settings_.after + settings_.grace >= time.stream_time)
      return;
    time.min_time = std::numeric_limits<std::int64_t>::max();
    struct closed {
      std::string key;
      std::int64_t timestamp;
      stream_join_side side;
      std::string values;
    };
    std::vector<closed> due;
    bool left_open = false, right_open = false;
    for (auto it = outer_->all(); it.valid(); it.next()) {
      const std::string key = it.key();
      time.min_time = outer_join_key::timestamp(key);
      if (left_open && right_open) break;
      const auto side = outer_join_key::side(key);
      if (time.min_time + lookback(side) + settings_.grace >= time.stream_time) {
        (side == stream_join_side::left ? left_open : right_open) = true;
        continue;
      }
      due.push_back({key, time.min_time, side, it.value()});
    }
    for (const auto& d : due) {
      outer_->remove(d.key);
      const K key = topic_serde_t<K>::deserialize(outer_join_key::key(d.key));
      if (d.side == stream_join_side::left) {
        if constexpr (Kind != stream_join_kind::inner)
          for (const auto& v : value_list_serde<VL>::deserialize(d.values))
            emit(key, join(&v, nullptr), d.timestamp, r);
      } else {
        if constexpr (Kind == stream_join_kind::outer)
          for (const auto& v : value_list_serde<VR>::deserialize(d.values))
            emit(key, join(nullptr, &v), d.timestamp, r);
      }
    }
  }

  void emit(const K& key, VOut value, std::int64_t timestamp, const record<K, VThis>& in) {
    out_.key = key;
    out_.value = std::move(value);
    out_.timestamp = timestamp;
    out_.headers = in.headers;
    this->forward_erased(&out_);
  }

  settings settings_;
  F joiner_;
  std::shared_ptr<join_time_trackers> trackers_;
  std::shared_ptr<join_time_tracker> tracker_;
  std::optional<window_store_handle<K, std::vector<VOther>, default_state_serde<K>, value_list_serde<VOther>>> other_;
  std::optional<outer_store> outer_;
  std::string key_buf_, outer_key_, value_buf_;
  record<K, VOut> out_;
};

}  // namespace sluice::detail
