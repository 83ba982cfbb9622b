// The app's interactive queries over the stream threads' query inboxes (app_queries.hpp).
#include "runtime/app_queries.hpp"

#include <algorithm>

#include "kafka/producer.hpp"

namespace sluice::runtime {

void app_queries::attach(std::vector<query_inbox*> inboxes, std::map<int, std::int32_t> subtopology_partitions) {
  std::lock_guard lock(mutex_);
  inboxes_ = std::move(inboxes);
  partitions_ = std::move(subtopology_partitions);
}

void app_queries::set_forwarding(forwarding f) {
  std::lock_guard lock(mutex_);
  forwarding_ = std::move(f);
}

http::response app_queries::forward(const http::request& req, std::string_view store, std::int32_t partition) {
  forwarding f;
  {
    std::lock_guard lock(mutex_);
    f = forwarding_;
  }
  return f ? f(req, store, partition) : store_access::forward(req, store, partition);
}

void app_queries::detach() {
  std::lock_guard lock(mutex_);
  inboxes_.clear();
}

int app_queries::subtopology_of(std::string_view store) const {
  const auto* spec = detail::topology_access::find_store(topo_, store);
  if (!spec || spec->global) return -1;
  for (const auto& sub : topo_.subtopologies())
    if (std::find(sub.stores.begin(), sub.stores.end(), store) != sub.stores.end()) return sub.id;
  return -1;
}

std::int32_t app_queries::partitions(std::string_view store) const {
  const int sub = subtopology_of(store);
  std::lock_guard lock(mutex_);
  auto it = partitions_.find(sub);
  return it == partitions_.end() ? 0 : it->second;
}

std::optional<std::int32_t> app_queries::partition_of(std::string_view store, std::string_view key_bytes) const {
  const auto count = partitions(store);
  if (count <= 0) return std::nullopt;
  return kafka::murmur2_partition(key_bytes, count);
}

query_outcome app_queries::run_binding(std::string_view store, std::int32_t partition, binding_reader fn,
                                       std::chrono::milliseconds timeout, std::string* failure) {
  auto answers = run_bindings(
      store, {partition},
      [&fn](std::int32_t, const detail::store_binding& binding, detail::task_context& context) {
        fn(binding, context);
      },
      timeout);
  if (failure && !answers[0].failure.empty()) *failure = std::move(answers[0].failure);
  return answers[0].result;
}

std::vector<interactive_queries::partition_outcome> app_queries::run_bindings(
    std::string_view store, const std::vector<std::int32_t>& partitions, partition_reader fn,
    std::chrono::milliseconds timeout) {
  std::vector<partition_outcome> answers;
  for (const auto p : partitions) answers.push_back(partition_outcome{p, outcome::unavailable, {}});
  const int sub = subtopology_of(store);
  if (sub < 0) {
    for (auto& a : answers) a.result = outcome::unknown_store;
    return answers;
  }
  std::vector<query_inbox*> inboxes;
  {
    std::lock_guard lock(mutex_);
    inboxes = inboxes_;
  }
  if (inboxes.empty()) return answers;  // starting or stopping: unavailable
  // Every partition is queued before any answer is awaited, so a thread answers all of its
  // own in one serve. `fn` is held by reference: a query never runs after its wait returned.
  std::vector<std::shared_ptr<store_query>> queries;
  for (const auto p : partitions) {
    auto q = std::make_shared<store_query>(
        std::string(store), task_id{sub, p},
        [&fn, p](const detail::store_binding& binding, detail::task_context& context) { fn(p, binding, context); },
        static_cast<int>(inboxes.size()));
    for (auto* inbox : inboxes) inbox->submit(q);
    queries.push_back(std::move(q));
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (std::size_t i = 0; i < queries.size(); ++i) {
    switch (queries[i]->wait_until(deadline)) {
      case query_status::done: answers[i].result = outcome::done; break;
      case query_status::not_here: answers[i].result = outcome::not_local; break;
      case query_status::unavailable: answers[i].result = outcome::unavailable; break;
      case query_status::timed_out: answers[i].result = outcome::timed_out; break;
      case query_status::failed:
        answers[i].result = outcome::failed;
        answers[i].failure = queries[i]->failure();
        break;
    }
  }
  return answers;
}

}  // namespace sluice::runtime
