// The non-template pieces of sluice/queries.hpp: outcome names, query_error, the raw
// key-value overload of run and the sentences for refusals.
#include "sluice/queries.hpp"

#include <algorithm>
#include <numeric>

namespace sluice {

const char* to_string(query_outcome o) noexcept {
  switch (o) {
    case query_outcome::done: return "done";
    case query_outcome::unknown_store: return "unknown_store";
    case query_outcome::wrong_kind: return "wrong_kind";
    case query_outcome::not_local: return "not_local";
    case query_outcome::unavailable: return "unavailable";
    case query_outcome::timed_out: return "timed_out";
    case query_outcome::failed: return "failed";
  }
  return "unknown";
}

namespace {

errc code_of(query_outcome o) noexcept {
  switch (o) {
    case query_outcome::unknown_store:
    case query_outcome::wrong_kind: return errc::invalid_topology;
    case query_outcome::timed_out: return errc::timeout;
    default: return errc::state;
  }
}

/// The raw key-value store of a binding, or nullptr with `kind_error` naming the mismatch.
state::kv_store* raw_kv_store(const detail::store_binding& binding, std::string_view store, std::string& kind_error) {
  auto* kv = dynamic_cast<state::kv_store*>(binding.store);
  if (!kv)
    kind_error = "store '" + std::string(store) +
                 "' is not a key-value store; query it with run<H> and the handle of its kind "
                 "(e.g. ranked_index_store, queue_store_handle)";
  return kv;
}

}  // namespace

query_error::query_error(query_outcome outcome, const std::string& message)
    : error(code_of(outcome), message), outcome_(outcome) {}

query_outcome interactive_queries::run(std::string_view store, std::int32_t partition,
                                       std::function<void(state::kv_store&)> fn, std::chrono::milliseconds timeout,
                                       std::string* failure) {
  std::string kind_error;
  auto o = run_binding(
      store, partition,
      [&](const detail::store_binding& binding, detail::task_context&) {
        if (auto* kv = raw_kv_store(binding, store, kind_error)) fn(*kv);
      },
      timeout, failure);
  if (o == outcome::done && !kind_error.empty()) {
    if (failure) *failure = std::move(kind_error);
    return outcome::wrong_kind;
  }
  return o;
}

std::vector<interactive_queries::partition_outcome> interactive_queries::run_bindings(
    std::string_view store, const std::vector<std::int32_t>& partitions, partition_reader fn,
    std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<partition_outcome> outcomes;
  outcomes.reserve(partitions.size());
  for (const auto p : partitions) {
    const auto left =
        std::max(std::chrono::milliseconds(0),
                 std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()));
    auto& o = outcomes.emplace_back(partition_outcome{p, outcome::unavailable, {}});
    o.result = run_binding(
        store, p, [&](const detail::store_binding& binding, detail::task_context& context) { fn(p, binding, context); },
        left, &o.failure);
  }
  return outcomes;
}

std::vector<interactive_queries::partition_outcome> interactive_queries::run_each(
    std::string_view store, const std::vector<std::int32_t>& partitions,
    std::function<void(std::int32_t, state::kv_store&)> fn, std::chrono::milliseconds timeout) {
  // One slot per partition asked: the calls of two partitions may run at the same time.
  std::vector<std::string> kind_errors(partitions.size());
  auto outcomes = run_bindings(
      store, partitions,
      [&](std::int32_t p, const detail::store_binding& binding, detail::task_context&) {
        if (auto* kv = raw_kv_store(binding, store, kind_errors[slot_of(partitions, p)])) fn(p, *kv);
      },
      timeout);
  apply_kind_errors(outcomes, kind_errors);
  return outcomes;
}

std::vector<std::int32_t> interactive_queries::every_partition(std::string_view store) const {
  std::vector<std::int32_t> all(static_cast<std::size_t>(std::max(partitions(store), 0)));
  std::iota(all.begin(), all.end(), 0);
  return all;
}

std::size_t interactive_queries::slot_of(const std::vector<std::int32_t>& partitions, std::int32_t partition) {
  return static_cast<std::size_t>(std::find(partitions.begin(), partitions.end(), partition) - partitions.begin());
}

void interactive_queries::apply_kind_errors(std::vector<partition_outcome>& outcomes,
                                            std::vector<std::string>& kind_errors) {
  for (std::size_t i = 0; i < outcomes.size(); ++i)
    if (outcomes[i].result == outcome::done && !kind_errors[i].empty()) {
      outcomes[i].result = outcome::wrong_kind;
      outcomes[i].failure = std::move(kind_errors[i]);
    }
}

std::string interactive_queries::describe(outcome o, std::string_view store, std::int32_t partition,
                                          std::string_view failure) {
  const std::string where = "partition " + std::to_string(partition) + " of store '" + std::string(store) + "'";
  switch (o) {
    case outcome::done: return where + " answered";
    case outcome::unknown_store:
      return "no store '" + std::string(store) + "' in this topology (global stores are read with global_store)";
    case outcome::wrong_kind: return std::string(failure);
    case outcome::not_local:
      return where + " is not hosted by this instance; ask the instance that owns it (/metadata names it)";
    case outcome::unavailable: return where + " is restoring or moving (or the app is not running); retry shortly";
    case outcome::timed_out: return "the stream thread owning " + where + " did not answer in time";
    case outcome::failed: return "the query on " + where + " failed: " + std::string(failure);
  }
  return "unknown outcome";
}

}  // namespace sluice
