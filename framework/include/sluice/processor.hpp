// The Processor API: write a class, get records one at a time, keep state in stores,
// forward results, schedule punctuators. The DSL's own operations are built the same way.
//
//   struct dedupe : sluice::processor<std::string, event> {
//     void init(sluice::processor_context<std::string, event>& ctx) override {
//       seen_.emplace(ctx.store<std::string, std::int64_t>("seen"));
//     }
//     void process(const sluice::record<std::string, event>& r) override {
//       if (seen_->put_if_absent(r.key, r.timestamp)) context().forward(r);
//     }
//     std::optional<sluice::key_value_store<std::string, std::int64_t>> seen_;
//   };
//
// Lifecycle: one instance per task (partition), made by the supplier you give the DSL;
// init() once before the first record, process() per record, close() when the task closes
// (rebalance or shutdown). All calls come from the task's thread: no locking needed.
// context() is valid from init() on: the runtime sets it before calling init(), so an
// override need not call processor::init (calling it is harmless). Calling context() before
// that, e.g. in the processor's constructor, throws sluice::error(errc::invalid_topology).
#pragma once

#include <chrono>
#include <concepts>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "sluice/detail/node.hpp"
#include "sluice/metrics.hpp"
#include "sluice/record.hpp"
#include "sluice/store.hpp"

namespace sluice {

namespace detail {
template <class P>
class processor_node;
[[noreturn]] void throw_context_before_init();
}  // namespace detail

/// What a processor can do besides receiving records. Valid from init() to close().
template <class KOut, class VOut>
class processor_context {
 public:
  processor_context(detail::task_context& task, detail::node& node) : task_(&task), node_(&node) {}

  /// Sends a record to every child node.
  void forward(const record<KOut, VOut>& r) { node_->forward_erased(&r); }
  /// Sends a record to the child named `child` (see Topology::describe() for names).
  void forward(const record<KOut, VOut>& r, std::string_view child) { node_->forward_erased(&r, child); }

  /// A store this processor declared, typed. Throws sluice::error(errc::invalid_topology)
  /// naming the store when it was not declared for this processor.
  template <class K, class V, class KS = default_state_serde<K>, class VS = default_state_serde<V>>
  key_value_store<K, V, KS, VS> store(std::string_view name) {
    return detail::store_handle_factory::make<key_value_store<K, V, KS, VS>>(task_->store(name), task_);
  }

  /// A store this processor declared, through the typed handle H of its kind (a ranked
  /// index, a queue, ...): H is constructible from (detail::store_binding,
  /// detail::task_context*) and throws sluice::error(errc::invalid_topology) when the store
  /// is of another kind. key_value_store is one such handle.
  template <class H>
  H state_store(std::string_view name) {
    return detail::store_handle_factory::make<H>(task_->store(name), task_);
  }

  /// A global store (global_table), read-only, typed with the table topic's serdes.
  template <class K, class V, class KS = default_serde<K>, class VS = default_serde<V>>
  global_store_view<K, V, KS, VS> global_store(std::string_view name) {
    return global_store_view<K, V, KS, VS>(task_->global_store(name));
  }

  /// Calls `callback(time)` every `interval` of stream time (record timestamps, as the
  /// sources' timestamp extractors give them) or of wall clock. The returned handle cancels
  /// it. Stream time, as in Kafka Streams 3.9: the schedule is a fixed grid of multiples of
  /// `interval` from the epoch; the first call comes after the first record processed after
  /// scheduling; a record crossing a grid point is processed first, then the punctuator runs
  /// once with the current stream time (grid points skipped by a jump in time are not
  /// replayed). Wall clock: every `interval` from the time of scheduling.
  cancellable schedule(std::chrono::milliseconds interval, punctuation_type type,
                       std::function<void(std::int64_t)> callback) {
    return task_->schedule(interval, type, std::move(callback));
  }

  /// Topic, partition and offset of the record being processed (-1 inside a punctuator).
  const record_metadata& metadata() const { return task_->metadata(); }
  std::int64_t stream_time() const { return task_->stream_time(); }
  std::int64_t wall_clock_ms() const { return task_->wall_clock_ms(); }
  std::string_view task_id() const { return task_->task_id(); }
  std::int32_t partition() const { return task_->partition(); }
  /// Partitions (= tasks) of this processor's sub-topology in the whole job, e.g. to split a
  /// job-wide budget between tasks.
  std::int32_t partition_count() const { return task_->partition_count(); }
  std::string_view application_id() const { return task_->application_id(); }
  /// True when the app runs processing.guarantee=exactly_once: a commit makes the task's
  /// outputs, store writes and input offsets visible together, or none of them.
  bool exactly_once() const { return task_->exactly_once(); }
  /// Names of this processor's children, in the order the topology created them; a
  /// processor with several outlets forwards to them by name.
  const std::vector<std::string>& child_names() const noexcept { return node_->child_names(); }
  /// The app's metrics registry: register counters in init() (it locks), add per record.
  metrics_registry& metrics() { return task_->metrics(); }
  /// Back-pressure: the task gets no further input record until the wall clock reaches
  /// `wall_clock_ms` (ms since the epoch; a time already passed does nothing, a later call
  /// may extend the pause). The current record finishes normally and counts as processed;
  /// the following ones stay unread in Kafka, so they cost no memory and their offsets are
  /// not committed. Punctuators keep firing. Used by sluice::topologies::pace.
  void pause_input_until(std::int64_t wall_clock_ms) { task_->pause_input_until(wall_clock_ms); }
  /// Asks for a commit soon after this record (a request, not a synchronous commit).
  void commit() { task_->request_commit(); }
  /// Calls `callback` at the start of each commit of this task, before the task's stores
  /// are made durable: what it writes to the processor's stores commits with the records
  /// processed so far. For a processor that keeps hot state in memory between records and
  /// writes it back once per commit instead of once per record (the overflow buffer's
  /// customer states). A crash loses what it held exactly as it loses uncommitted store
  /// writes, and the records behind it are processed again. Register it in init(); it stays
  /// until the task closes (close() comes after the last commit of a clean close). What it
  /// throws fails the commit as a store failure would.
  void before_commit(std::function<void()> callback) { task_->before_commit(std::move(callback)); }

 private:
  detail::task_context* task_;
  detail::node* node_;
};

/// Base class of user processors: input record<KIn, VIn>, output record<KOut, VOut>.
template <class KIn, class VIn, class KOut = KIn, class VOut = VIn>
class processor {
 public:
  using key_in = KIn;
  using value_in = VIn;
  using key_out = KOut;
  using value_out = VOut;
  using context_type = processor_context<KOut, VOut>;
  using processor_base = processor;

  virtual ~processor() = default;
  /// Called once before the first record, with context() already set: an override may
  /// skip calling this base version.
  virtual void init(context_type& context) { context_ = &context; }
  virtual void process(const record<KIn, VIn>& record) = 0;
  virtual void close() {}

 protected:
  /// The task's context. Throws sluice::error(errc::invalid_topology) when called before
  /// init() (e.g. from the constructor), instead of dereferencing nothing.
  context_type& context() {
    if (context_ == nullptr) detail::throw_context_before_init();
    return *context_;
  }

 private:
  template <class P>
  friend class detail::processor_node;
  context_type* context_ = nullptr;
};

namespace detail {

/// Runs a user processor as a graph node.
template <class P>
class processor_node final : public typed_node<typename P::key_in, typename P::value_in> {
 public:
  explicit processor_node(std::unique_ptr<P> p) : processor_(std::move(p)) {}
  void init(task_context& task) override {
    node::init(task);
    context_ = std::make_unique<typename P::context_type>(task, *this);
    // Set before init() so that an override which does not call processor::init still has
    // its context (issue: a forgotten base call used to leave context() null).
    static_cast<typename P::processor_base&>(*processor_).context_ = context_.get();
    processor_->init(*context_);
  }
  void on_record(const record<typename P::key_in, typename P::value_in>& r) override { processor_->process(r); }
  void close() override { processor_->close(); }

 private:
  std::unique_ptr<P> processor_;
  std::unique_ptr<typename P::context_type> context_;
};

template <class T>
struct unique_ptr_element {};
template <class T>
struct unique_ptr_element<std::unique_ptr<T>> {
  using type = T;
};

}  // namespace detail

/// A processor supplier: callable with no arguments, returning std::unique_ptr<P> where P
/// derives from sluice::processor<...>. It is called once per task.
template <class F>
concept processor_supplier = requires(F f) {
  typename detail::unique_ptr_element<std::remove_cvref_t<decltype(f())>>::type;
}
&&requires { typename detail::unique_ptr_element<std::remove_cvref_t<std::invoke_result_t<F>>>::type::key_in; };

template <class F>
using supplied_processor_t = typename detail::unique_ptr_element<std::remove_cvref_t<std::invoke_result_t<F>>>::type;

}  // namespace sluice
