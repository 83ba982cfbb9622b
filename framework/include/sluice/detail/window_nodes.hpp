// The node behind windowed aggregations (kgrouped_stream::windowed_by(...).count /
// reduce / aggregate): Kafka Streams 3.9's KStreamWindowAggregate, over a window store.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

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

/// Folds each record into every window it belongs to and emits each window's new
/// aggregate, keyed windowed<K>, at the highest timestamp folded into the window.
///
/// Late records, exactly as Kafka Streams: observed stream time is the highest record
/// timestamp this node has seen; a window with end + grace <= observed stream time is
/// closed, and a record's update of it is dropped and counted in
/// sluice_window_late_records_dropped_total (a record may update some of its hopping
/// windows and be late for others). Fold(key, value, std::optional<A> current) -> A makes
/// count, reduce and aggregate one node.
template <class K, class V, class A, class Fold>
class window_aggregate_node final : public typed_node<K, V> {
 public:
  using stored = value_and_timestamp<A>;
  using store_handle = window_aggregate_store_handle<K, A>;

  window_aggregate_node(std::string store, time_windows windows, Fold fold)
      : store_name_(std::move(store)), windows_(windows), fold_(std::move(fold)) {}

  void init(task_context& task) override {
    node::init(task);
    store_.emplace(task.store(store_name_), &task);
    // After a restart the store knows how far its windows went; windows it has dropped
    // cannot be updated again.
    observed_ = std::max(observed_, store_->observed_stream_time());
    late_ = &task.metrics().get_counter("sluice_window_late_records_dropped_total",
                                        "task=\"" + std::string(task.task_id()) + "\",store=\"" + store_name_ + "\"");
  }

  void on_record(const record<K, V>& r) override {
    observed_ = std::max(observed_, r.timestamp);
    const std::int64_t close_time = observed_ - windows_.grace().count();
    windows_.for_each_window(r.timestamp, [&](const time_window& w) {
      if (w.end <= close_time) {
        late_->add();
        return;
      }
      auto current = store_->fetch(r.key, w.start);
      const std::int64_t ts = current ? std::max(r.timestamp, current->timestamp) : r.timestamp;
      std::optional<A> agg;
      if (current) agg.emplace(std::move(current->value));
      A next = fold_(r.key, r.value, std::move(agg));
      store_->put(r.key, w.start, stored{next, ts});
      out_.key.key = r.key;
      out_.key.window = w;
      out_.value = std::move(next);
      out_.timestamp = ts;
      out_.headers = r.headers;
      this->forward_erased(&out_);
    });
  }

 private:
  std::string store_name_;
  time_windows windows_;
  Fold fold_;
  std::optional<store_handle> store_;
  std::int64_t observed_ = -1;
  counter* late_ = nullptr;
  record<windowed<K>, A> out_;
};

}  // namespace sluice::detail
