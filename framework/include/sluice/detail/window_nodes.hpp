// The nodes behind windowed aggregations (kgrouped_stream::windowed_by(...).count /
// reduce / aggregate): Kafka Streams 3.9's KStreamWindowAggregate (tumbling, hopping),
// KStreamSlidingWindowAggregate (sliding) and KStreamSessionWindowAggregate (sessions), each
// over a window store, on one base that holds what they share.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sluice/detail/node.hpp"
#include "sluice/metrics.hpp"
#include "sluice/record.hpp"
#include "sluice/window_store.hpp"
#include "sluice/windows.hpp"

namespace sluice::detail {

/// The typed handle to a windowed aggregation's store: values with the timestamp of their
/// latest update (value_and_timestamp), in the state serdes.
template <class K, class A>
using window_aggregate_store_handle = window_store_handle<K, value_and_timestamp<A>, default_state_serde<K>,
                                                          value_and_timestamp_serde<default_state_serde<A>>>;

/// What the windowed aggregations below share: their store (Handle), the observed stream
/// time (the highest record timestamp the node has seen; kept in the store once per commit
/// and continued from there after a restart, so a window that had closed stays closed and a
/// final result is not emitted twice; a store written before the time was kept gives its
/// highest window start, so windows it has dropped cannot be updated again), the counter of
/// records too late for a window (sluice_window_late_records_dropped_total) and the emitted
/// record, reused. Created and used on its task's thread, as every node.
template <class K, class V, class A, class Handle, class OutKey, class OutValue>
class window_aggregation_node : public typed_node<K, V>, public prior_value_keeper<A> {
 public:
  void init(task_context& task) override {
    node::init(task);
    store_.emplace(task.store(store_name_), &task);
    observed_ = std::max({observed_, store_->observed_stream_time(), store_->kept_record_time()});
    task.before_commit([this] { store_->keep_record_time(observed_); });
    late_ = &task.metrics().get_counter("sluice_window_late_records_dropped_total",
                                        "task=\"" + std::string(task.task_id()) + "\",store=\"" + store_name_ + "\"");
  }

 protected:
  explicit window_aggregation_node(std::string store) : store_name_(std::move(store)) {}

  /// Emits `value` for `window` of the record's key at `timestamp`, with the record's headers.
  void emit_window(const record<K, V>& r, const time_window& window, OutValue value, std::int64_t timestamp) {
    out_.key.key = r.key;
    out_.key.window = window;
    out_.value = std::move(value);
    out_.timestamp = timestamp;
    out_.headers = r.headers;
    this->forward_erased(&out_);
  }

  /// Advances the observed stream time to `timestamp` and returns the close time: a window
  /// ending at or before it, `open_after` having passed since (grace, plus a session's
  /// gap), takes no more records.
  std::int64_t advance_stream_time(std::int64_t timestamp, std::chrono::milliseconds open_after) {
    observed_ = std::max(observed_, timestamp);
    return observed_ - open_after.count();
  }

  std::optional<Handle> store_;
  std::int64_t observed_ = -1;
  counter* late_ = nullptr;

 private:
  std::string store_name_;
  record<OutKey, OutValue> out_;
};

/// The base of the aggregations over time windows (tumbling, hopping, sliding).
template <class K, class V, class A>
using time_window_aggregation_node =
    window_aggregation_node<K, V, A, window_aggregate_store_handle<K, A>, windowed<K>, A>;

/// Folds each record into every window it belongs to and emits each window's new
/// aggregate, keyed windowed<K>, at the highest timestamp folded into the window.
///
/// Late records, exactly as Kafka Streams: observed stream time is the highest record
/// timestamp this node has seen; a window with end + grace <= observed stream time is
/// closed, and a record's update of it is dropped and counted in
/// sluice_window_late_records_dropped_total (a record may update some of its hopping
/// windows and be late for others).
///
/// Initial() -> std::optional<A> is a new window's aggregate before its first record: the
/// initializer's value (a count's 0), none for a reduce. As Kafka Streams' aggregations, the
/// node passes it as a new window's prior value (the old value of Kafka Streams' Change),
/// so a suppression of this table keeps it for a window it holds back and never emitted.
/// Fold(key, value, std::optional<A> current) -> A, current being the window's aggregate or
/// Initial()'s value, makes count, reduce and aggregate one node.
template <class K, class V, class A, class Initial, class Fold>
class window_aggregate_node final : public time_window_aggregation_node<K, V, A> {
  using base = time_window_aggregation_node<K, V, A>;
  using base::late_;
  using base::store_;

 public:
  using stored = value_and_timestamp<A>;

  window_aggregate_node(std::string store, time_windows windows, Initial initial, Fold fold)
      : base(std::move(store)), windows_(windows), initial_(std::move(initial)), fold_(std::move(fold)) {}

  void on_record(const record<K, V>& r) override {
    const std::int64_t close_time = this->advance_stream_time(r.timestamp, windows_.grace());
    windows_.for_each_window(r.timestamp, [&](const time_window& w) {
      if (w.end <= close_time) {
        late_->add();
        return;
      }
      auto current = store_->fetch(r.key, w.start);
      const std::int64_t ts = current ? std::max(r.timestamp, current->timestamp) : r.timestamp;
      std::optional<A> agg = current ? std::optional<A>(std::move(current->value)) : initial_();
      if (this->sends_prior_values()) this->set_prior(agg);
      A next = fold_(r.key, r.value, std::move(agg));
      store_->put(r.key, w.start, stored{next, ts});
      this->emit_window(r, w, std::move(next), ts);
    });
  }

 private:
  time_windows windows_;
  Initial initial_;
  Fold fold_;
};

/// Sliding-window aggregation, exactly as Kafka Streams 3.9's KStreamSlidingWindowAggregate
/// (KIP-450) with a store that iterates backwards. A record at t updates every existing
/// window of its key that contains it, creates its left window [t - d, t] (seeded with the
/// aggregate of the latest earlier window when the previous record is within d), creates
/// its right window [t + 1, t + 1 + d] when a later record already falls in it (holding the
/// aggregate of those later records, without this one), and creates the right window of the
/// previous record when this record falls in it. Records earlier than d go to the window
/// [0, d] instead of a left window with a negative start.
///
/// Late records: observed stream time is the highest record timestamp this node has seen;
/// a record is dropped whole when t + 1 + d <= observed - grace, and a window's update is
/// dropped when its end < observed - grace (its end is inclusive). Each drop is counted in
/// sluice_window_late_records_dropped_total. Updates are emitted keyed windowed<K> with
/// window {start, start + d}, at the highest timestamp folded into the window.
///
/// Initial and Fold as in window_aggregate_node. Prior values as Kafka Streams': a window
/// created empty (a left window with no earlier record within d, the previous record's right
/// window, [0, d]) passes Initial()'s value; a left window seeded with the latest earlier
/// window's aggregate passes that aggregate; a record's right window, created holding the
/// later records' aggregate, passes none.
template <class K, class V, class A, class Initial, class Fold>
class sliding_window_aggregate_node final : public time_window_aggregation_node<K, V, A> {
  using base = time_window_aggregation_node<K, V, A>;
  using base::late_;
  using base::store_;

 public:
  using stored = value_and_timestamp<A>;

  sliding_window_aggregate_node(std::string store, sliding_windows windows, Initial initial, Fold fold)
      : base(std::move(store)), windows_(windows), initial_(std::move(initial)), fold_(std::move(fold)) {}

  void on_record(const record<K, V>& r) override {
    const std::int64_t ts = r.timestamp, d = windows_.time_difference().count();
    const std::int64_t close_time = this->advance_stream_time(ts, windows_.grace());
    if (ts + 1 + d <= close_time) {
      late_->add();
      return;
    }
    if (ts < d)
      process_early(r, close_time);
    else
      process_in_order(r, close_time);
  }

 private:
  /// t >= d: the windows of the key with start in [t - 2d, t + 1], newest first.
  void process_in_order(const record<K, V>& r, std::int64_t close_time) {
    const std::int64_t ts = r.timestamp, d = windows_.time_difference().count();
    auto windows = store_->fetch(r.key, std::max<std::int64_t>(0, ts - 2 * d), ts + 1);
    starts_.clear();
    std::optional<stored> left_agg, right_agg;
    bool left_exists = false, right_exists = false;
    std::optional<std::int64_t> previous;  // the latest timestamp of an earlier record
    for (auto it = windows.rbegin(); it != windows.rend(); ++it) {
      const std::int64_t start = it->first, end = start + d;
      starts_.push_back(start);
      if (start == ts + 1) {
        right_exists = true;
      } else if (end > ts) {
        if (!right_agg) right_agg = it->second;
        update(r, start, it->second, close_time);
      } else if (end == ts) {
        left_exists = true;
        const std::int64_t latest = it->second.timestamp;
        update(r, start, it->second, close_time);
        if (latest >= ts) return;  // every window this record needs exists
        previous = latest;
      } else {
        left_agg = it->second;
        previous = it->second.timestamp;
        break;
      }
    }
    if (previous) {
      const std::int64_t previous_right = *previous + 1;
      if (!started(previous_right) && previous_right + d >= ts) update(r, previous_right, std::nullopt, close_time);
    }
    if (!left_exists) {
      if (previous && left_agg && ts - d <= *previous)
        update(r, ts - d, stored{left_agg->value, ts}, close_time);
      else
        update(r, ts - d, std::nullopt, close_time);
    }
    if (!right_exists && right_agg && right_agg->timestamp > ts) create_right_window(r, *right_agg);
  }

  /// 0 <= t < d: the record's left window would start before 0; it goes to [0, d].
  void process_early(const record<K, V>& r, std::int64_t close_time) {
    const std::int64_t ts = r.timestamp;
    auto windows = store_->fetch(r.key, 0, ts + 1);
    starts_.clear();
    std::optional<stored> combined, right_agg;
    bool right_exists = false;
    std::optional<std::int64_t> previous;
    for (auto& [start, current] : windows) {
      starts_.push_back(start);
      if (start == 0) {
        combined = current;
        if (current.timestamp < ts) previous = current.timestamp;
      } else if (start <= ts) {
        right_agg = current;
        update(r, start, current, close_time);
      } else if (start == ts + 1) {
        right_exists = true;
      }
    }
    // Without a right window found, [0, d] holds only records later than this one when its
    // latest timestamp is: those are this record's right window.
    if (!right_agg && combined && combined->timestamp > ts) right_agg = combined;
    if (!right_exists && right_agg && right_agg->timestamp > ts) create_right_window(r, *right_agg);
    if (previous && !started(*previous + 1)) update(r, *previous + 1, std::nullopt, close_time);
    update(r, 0, combined, close_time);
  }

  bool started(std::int64_t start) const { return std::find(starts_.begin(), starts_.end(), start) != starts_.end(); }

  /// The record's right window [t + 1, t + 1 + d], holding the later records' aggregate
  /// (not this record), put and emitted as is (Kafka Streams checks no close time here).
  void create_right_window(const record<K, V>& r, const stored& aggregate) {
    const std::int64_t start = r.timestamp + 1;
    store_->put(r.key, start, aggregate);
    if (this->sends_prior_values()) this->set_prior(std::nullopt);  // the window did not exist
    emit(r, start, aggregate.value, aggregate.timestamp);
  }

  /// Folds the record into the window starting at `start` (`current`: its aggregate, or
  /// nullopt for a new empty window, which starts from Initial()) unless the window has closed.
  void update(const record<K, V>& r, std::int64_t start, const std::optional<stored>& current,
              std::int64_t close_time) {
    const std::int64_t end = start + windows_.time_difference().count();
    if (end < close_time) {
      late_->add();
      return;
    }
    const std::int64_t ts = current ? std::max(r.timestamp, current->timestamp) : r.timestamp;
    std::optional<A> agg = current ? std::optional<A>(current->value) : initial_();
    if (this->sends_prior_values()) this->set_prior(agg);
    A next = fold_(r.key, r.value, std::move(agg));
    store_->put(r.key, start, stored{next, ts});
    emit(r, start, std::move(next), ts);
  }

  void emit(const record<K, V>& r, std::int64_t start, A value, std::int64_t timestamp) {
    this->emit_window(r, time_window{start, start + windows_.time_difference().count()}, std::move(value), timestamp);
  }

  sliding_windows windows_;
  Initial initial_;
  Fold fold_;
  std::vector<std::int64_t> starts_;
};

/// The typed handle to a session aggregation's store: per (key, session end), the aggregate
/// and the session's start (session_value), in the state serdes.
template <class K, class A>
using session_aggregate_store_handle =
    window_store_handle<K, session_value<A>, default_state_serde<K>, session_value_serde<default_state_serde<A>>>;

/// Session aggregation, exactly as Kafka Streams 3.9's KStreamSessionWindowAggregate. A
/// record at t finds its key's sessions that end at or after t - gap and start at or before
/// t + gap, merges their aggregates (merge(key, aggregate so far, session's), in order of
/// session end, starting from the initializer), and folds the record in; the new session
/// spans them all and the record. Sessions merged away are deleted and emitted as
/// tombstones (nullopt) keyed with their own window, at their end; the new session is
/// emitted at its end. A record whose merged session ends before observed stream time -
/// grace - gap is dropped and counted in sluice_window_late_records_dropped_total.
///
/// Store: a window store keyed by (key, session end) holding session_value{aggregate,
/// start}; sessions of one key never overlap, so their ends are distinct.
template <class K, class V, class A, class Fold, class Merge>
class session_aggregate_node final : public window_aggregation_node<K, V, A, session_aggregate_store_handle<K, A>,
                                                                    session_windowed<K>, std::optional<A>> {
  using base =
      window_aggregation_node<K, V, A, session_aggregate_store_handle<K, A>, session_windowed<K>, std::optional<A>>;
  using base::late_;
  using base::store_;

 public:
  using stored = session_value<A>;

  session_aggregate_node(std::string store, session_windows windows, Fold fold, Merge merge)
      : base(std::move(store)), windows_(windows), fold_(std::move(fold)), merge_(std::move(merge)) {}

  void on_record(const record<K, V>& r) override {
    const std::int64_t ts = r.timestamp, gap = windows_.inactivity_gap().count();
    // Kafka Streams' close time for sessions: a session ending at e can still grow until
    // stream time passes e + gap, so it closes at e + gap + grace.
    const std::int64_t close_time = this->advance_stream_time(ts, windows_.grace() + windows_.inactivity_gap());
    // Sessions ending in [t - gap, ...]: none ends after the highest timestamp seen.
    auto sessions = store_->fetch(r.key, std::max<std::int64_t>(0, ts - gap), std::max(this->observed_, ts + gap));
    merged_.clear();
    merged_values_.clear();
    time_window window{ts, ts};
    std::optional<A> agg;
    for (auto& [end, session] : sessions) {
      if (session.start > ts + gap) continue;
      agg = merge_(r.key, std::move(agg), session.value);
      window = time_window{std::min(window.start, session.start), std::max(window.end, end)};
      merged_.push_back(time_window{session.start, end});
      if (this->sends_prior_values()) merged_values_.push_back(session.value);
    }
    if (window.end < close_time) {
      late_->add();
      return;
    }
    if (window != time_window{ts, ts}) {
      for (std::size_t i = 0; i < merged_.size(); ++i) {
        store_->remove(r.key, merged_[i].end);
        if (this->sends_prior_values()) this->set_prior(std::move(merged_values_[i]));
        emit(r, merged_[i], std::nullopt);
      }
    }
    A next = fold_(r.key, r.value, std::move(agg));
    store_->put(r.key, window.end, stored{next, window.start});
    // As Kafka Streams, the new session's prior value is null, even when it replaces a
    // session of the same window (merged away above, with its own prior value).
    if (this->sends_prior_values()) this->set_prior(std::nullopt);
    emit(r, window, std::move(next));
  }

 private:
  /// A session's update or tombstone, at the session's end.
  void emit(const record<K, V>& r, const time_window& window, std::optional<A> value) {
    this->emit_window(r, window, std::move(value), window.end);
  }

  session_windows windows_;
  Fold fold_;
  Merge merge_;
  std::vector<time_window> merged_;
  std::vector<A> merged_values_;
};

}  // namespace sluice::detail
