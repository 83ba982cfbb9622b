// sluice::interactive_queries: read access to the stores of the tasks this instance runs, of
// any kind (key-value, ranked index, queue, a topology's own), through the same typed handles
// processors get from ctx.state_store<H>(name). From C++ (app::queries(), and
// topology_test_driver::queries() in tests) and from HTTP handlers (request::stores()).
//
//   auto& q = app.queries();
//   auto p = q.partition_of("scores", segment_bytes);          // the task holding the key
//   auto n = q.read<sluice::ranked_index_store>("scores", *p,
//       [&](sluice::ranked_index_store& s) { return s.count(board); });   // throws query_error
//   // or, without exceptions:
//   std::uint64_t count = 0;
//   auto outcome = q.run<sluice::ranked_index_store>("scores", *p, [&](auto& s) { count = s.count(board); });
//
// Guarantees: in a running app the function runs on the stream thread that owns the
// partition's task, between two polls, on committed state (under exactly-once right after a
// commit, never seeing a write of an open transaction); while the task restores or moves the
// answer is `unavailable`. The caller waits up to the timeout. In the TopologyTestDriver it
// runs at once on the calling thread.
//
// The function must only read, be quick (the stream thread is paused while it runs) and keep
// nothing that refers into the store. Writes through a typed handle are refused: the handle
// gets a context whose stream time, scheduling and sending throw, and a changelog that throws,
// so a ranked-index or queue write fails before it reaches the store; a raw kv_store& (the
// key-value overload of run) is not guarded.
//
// Threading: every method is safe from any thread, concurrently; a query blocks its caller.
// Lifecycle: an app's queries answer `unavailable` before start() and after close().
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "sluice/detail/node.hpp"
#include "sluice/error.hpp"
#include "sluice/state/kv_store.hpp"

namespace sluice {

/// What became of a store query.
enum class query_outcome {
  done,           ///< the function ran
  unknown_store,  ///< no store of that name in the topology (or a global one)
  wrong_kind,     ///< the store is of another kind than the handle asked for (see failure)
  not_local,      ///< no stream thread of this instance runs the partition's task
  unavailable,    ///< the task is here but restoring (or the app is starting or stopping)
  timed_out,      ///< the owning thread did not answer in time
  failed,         ///< the function threw (the message is in the failure text)
};

/// A readable name ("not_local").
const char* to_string(query_outcome o) noexcept;

/// Thrown by interactive_queries::read when the outcome is not done. code() is
/// invalid_topology (unknown_store, wrong_kind), timeout (timed_out) or state (the others).
class query_error : public error {
 public:
  query_error(query_outcome outcome, const std::string& message);
  query_outcome outcome() const noexcept { return outcome_; }

 private:
  query_outcome outcome_;
};

class interactive_queries {
 public:
  using outcome = query_outcome;
  static constexpr std::chrono::milliseconds default_timeout{5000};

  /// What the runtime runs for a query: the partition's store as a processor's handle gets
  /// it, with a context that refuses every write. Used by run<H>; rarely needed directly.
  using binding_reader = std::function<void(const detail::store_binding&, detail::task_context&)>;

  virtual ~interactive_queries() = default;

  /// The partition whose task holds `key_bytes` (the serialized record key the store is
  /// partitioned by) of `store`, as Kafka's murmur2 partitioner places it; nullopt for an
  /// unknown store or before the app knows its partition counts.
  virtual std::optional<std::int32_t> partition_of(std::string_view store, std::string_view key_bytes) const = 0;
  /// The partition count of the store's tasks; 0 for an unknown store or before the app knows.
  virtual std::int32_t partitions(std::string_view store) const = 0;
  /// Every partition of the store's tasks, 0 to partitions(store) - 1: what a read of the
  /// whole store passes to run_bindings or run_each. Empty when partitions(store) is 0.
  std::vector<std::int32_t> every_partition(std::string_view store) const;

  /// Runs `fn` on partition `partition` of `store`, on the owning thread (see the file
  /// comment). `failure` receives the message for wrong_kind and failed.
  virtual outcome run_binding(std::string_view store, std::int32_t partition, binding_reader fn,
                              std::chrono::milliseconds timeout = default_timeout, std::string* failure = nullptr) = 0;

  /// What run_bindings runs on each partition: the partition, its store and a read-only context.
  using partition_reader =
      std::function<void(std::int32_t partition, const detail::store_binding&, detail::task_context&)>;
  /// What became of one partition of run_bindings or run_each; `failure` as run_binding's.
  struct partition_outcome {
    std::int32_t partition = -1;
    outcome result = outcome::unavailable;
    std::string failure;
  };

  /// Runs `fn` on each of `partitions` of `store` as run_binding runs it on one, but asks
  /// every partition before waiting for any answer: in a running app under exactly-once they
  /// are all answered at the end of the same transaction, so reading 8 partitions waits one
  /// commit interval rather than 8. Calls for different partitions may run at the same time
  /// on different stream threads: `fn` must write only what belongs to its partition.
  /// `timeout` bounds the whole call, and `fn` never runs after it returns. One outcome per
  /// partition, in the order given. This default asks the partitions one after another.
  virtual std::vector<partition_outcome> run_bindings(std::string_view store,
                                                      const std::vector<std::int32_t>& partitions, partition_reader fn,
                                                      std::chrono::milliseconds timeout = default_timeout);

  /// Runs `fn(H&)` with H the typed handle of the store's kind (ranked_index_store,
  /// queue_store_handle, key_value_store<K, V>, ...), made as ctx.state_store<H>(store) makes
  /// it. A store of another kind answers wrong_kind with a message naming both.
  template <class H, class F>
  outcome run(std::string_view store, std::int32_t partition, F&& fn,
              std::chrono::milliseconds timeout = default_timeout, std::string* failure = nullptr) {
    static_assert(std::is_invocable_v<F&, H&>, "run<H>: the query function must take the handle as H&");
    std::string kind_error;
    auto o = run_binding(
        store, partition,
        [&](const detail::store_binding& binding, detail::task_context& context) {
          std::optional<H> handle;
          try {
            handle.emplace(detail::store_handle_factory::make<H>(binding, &context));
          } catch (const error& e) {
            if (e.code() != errc::invalid_topology) throw;
            kind_error = e.what();
            return;
          }
          fn(*handle);
        },
        timeout, failure);
    if (o == outcome::done && !kind_error.empty()) {
      if (failure) *failure = std::move(kind_error);
      return outcome::wrong_kind;
    }
    return o;
  }

  /// run<H> on each of `partitions` at once (see run_bindings: `fn(partition, handle)` of two
  /// partitions may run at the same time, so it must write only its partition's result).
  template <class H, class F>
  std::vector<partition_outcome> run_each(std::string_view store, const std::vector<std::int32_t>& partitions, F&& fn,
                                          std::chrono::milliseconds timeout = default_timeout) {
    static_assert(std::is_invocable_v<F&, std::int32_t, H&>,
                  "run_each<H>: the query function must take the partition and the handle as H&");
    std::vector<std::string> kind_errors(partitions.size());  // a slot per partition asked
    auto outcomes = run_bindings(
        store, partitions,
        [&](std::int32_t p, const detail::store_binding& binding, detail::task_context& context) {
          std::optional<H> handle;
          try {
            handle.emplace(detail::store_handle_factory::make<H>(binding, &context));
          } catch (const error& e) {
            if (e.code() != errc::invalid_topology) throw;
            kind_errors[slot_of(partitions, p)] = e.what();
            return;
          }
          fn(p, *handle);
        },
        timeout);
    apply_kind_errors(outcomes, kind_errors);
    return outcomes;
  }

  /// Runs `fn` on the raw key-value store (serialized keys and values). A store of another
  /// kind answers wrong_kind.
  outcome run(std::string_view store, std::int32_t partition, std::function<void(state::kv_store&)> fn,
              std::chrono::milliseconds timeout = default_timeout, std::string* failure = nullptr);
  /// The raw key-value run on each of `partitions` at once (see run_bindings: `fn` of two
  /// partitions may run at the same time).
  std::vector<partition_outcome> run_each(std::string_view store, const std::vector<std::int32_t>& partitions,
                                          std::function<void(std::int32_t partition, state::kv_store&)> fn,
                                          std::chrono::milliseconds timeout = default_timeout);

  /// Like run<H>, returning what `fn` returns; throws query_error (naming the store, the
  /// partition and the outcome) when the outcome is not done.
  template <class H, class F>
  auto read(std::string_view store, std::int32_t partition, F&& fn, std::chrono::milliseconds timeout = default_timeout)
      -> std::invoke_result_t<F&, H&> {
    using result_type = std::invoke_result_t<F&, H&>;
    std::string failure;
    if constexpr (std::is_void_v<result_type>) {
      auto o = run<H>(store, partition, fn, timeout, &failure);
      if (o != outcome::done) throw query_error(o, describe(o, store, partition, failure));
    } else {
      std::optional<result_type> result;
      auto o = run<H>(
          store, partition, [&](H& h) { result.emplace(fn(h)); }, timeout, &failure);
      if (o != outcome::done) throw query_error(o, describe(o, store, partition, failure));
      return std::move(*result);
    }
  }

  /// A sentence for an outcome other than done, naming the store and partition and what to do.
  static std::string describe(outcome o, std::string_view store, std::int32_t partition, std::string_view failure = {});

 private:
  /// The position of `partition` in `partitions` (run_each: one slot per partition asked).
  static std::size_t slot_of(const std::vector<std::int32_t>& partitions, std::int32_t partition);
  /// A partition that ran but found its store of another kind answers wrong_kind, with the
  /// message (run_each: one slot per partition asked).
  static void apply_kind_errors(std::vector<partition_outcome>& outcomes, std::vector<std::string>& kind_errors);
};

}  // namespace sluice
