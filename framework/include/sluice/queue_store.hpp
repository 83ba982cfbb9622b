// sluice::queue_store_handle: a processor's typed handle to a queue store (many small
// durable FIFO queues, one per key; state/include/sluice/state/queue_store.hpp), and
// queue_store_materialized(), which declares one.
//
//   b.add_state_store(sluice::queue_store_materialized("buffer"));
//   ... in init():   buffer_.emplace(ctx.state_store<sluice::queue_store_handle>("buffer"));
//   ... in process(): buffer_->append(customer, {partition, offset}, bytes);
//
// Changelog records get the task's stream time as their timestamp.
//
// Threading: like every store handle, used from its task's thread only; valid from init()
// to close().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/builder.hpp"
#include "sluice/error.hpp"
#include "sluice/state/queue_store.hpp"
#include "sluice/store.hpp"

namespace sluice {

class queue_store_handle {
 public:
  /// Throws sluice::error(errc::invalid_topology) naming the store when it is not a queue
  /// store (declare it with queue_store_materialized()). Checked once, here.
  queue_store_handle(detail::store_binding binding, detail::task_context* context)
      : store_(detail::store_of_kind<state::queue_store>(binding, "queue")), context_(context) {}

  /// Adds `value` at `sequence` to `queue`; a replay (already queued or consumed) changes
  /// nothing (state::append_result says which).
  state::append_result append(std::string_view queue, state::queue_sequence sequence, std::string_view value) {
    return store_->append(queue, sequence, value, context_->stream_time());
  }
  /// Up to `n` entries from the head of `queue`, into `out`.
  void peek(std::string_view queue, std::size_t n, std::vector<state::queue_entry>& out) {
    store_->peek(queue, n, out);
  }
  std::optional<state::queue_entry> front(std::string_view queue) { return store_->front(queue); }
  /// Removes up to `n` entries from the head of `queue`; returns how many.
  std::size_t pop(std::string_view queue, std::size_t n) { return store_->pop(queue, n, context_->stream_time()); }
  std::uint64_t size(std::string_view queue) { return store_->size(queue); }
  /// The queues with entries, without scanning empty ones.
  const std::set<std::string, std::less<>>& non_empty_queues() const noexcept { return store_->non_empty_queues(); }

 private:
  state::queue_store* store_;
  detail::task_context* context_;
};

/// Declares a queue store named `name` (RocksDB with a changelog unless `backend` /
/// `logged` say otherwise) for streams_builder::add_state_store().
inline materialized queue_store_materialized(std::string name, store_backend backend = store_backend::rocksdb) {
  materialized m;
  m.name = std::move(name);
  m.backend = backend;
  m.make_store = [](std::unique_ptr<state::kv_store> storage,
                    state::changelog_sink* changelog) -> std::unique_ptr<state::state_store> {
    return std::make_unique<state::queue_store>(std::move(storage), changelog);
  };
  return m;
}

}  // namespace sluice
