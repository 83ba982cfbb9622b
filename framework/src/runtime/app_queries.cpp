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
  const int sub = subtopology_of(store);
  if (sub < 0) return outcome::unknown_store;
  std::vector<query_inbox*> inboxes;
  {
    std::lock_guard lock(mutex_);
    inboxes = inboxes_;
  }
  if (inboxes.empty()) return outcome::unavailable;  // starting or stopping
  auto q = std::make_shared<store_query>(std::string(store), task_id{sub, partition}, std::move(fn),
                                         static_cast<int>(inboxes.size()));
  for (auto* inbox : inboxes) inbox->submit(q);
  switch (q->wait(timeout)) {
    case query_status::done: return outcome::done;
    case query_status::not_here: return outcome::not_local;
    case query_status::unavailable: return outcome::unavailable;
    case query_status::timed_out: return outcome::timed_out;
    case query_status::failed:
      if (failure) *failure = q->failure();
      return outcome::failed;
  }
  return outcome::failed;
}

}  // namespace sluice::runtime
