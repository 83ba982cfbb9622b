// app_queries: the running app's interactive_queries (sluice/queries.hpp), the same object
// the HTTP server hands its handlers as http::store_access. A query goes to every stream
// thread's query_inbox; the thread running the partition's task answers it between polls
// (after a commit under exactly-once), the others say "not here". A read of several
// partitions (run_bindings) queues all of them before it waits for the first answer.
//
// Lifecycle: owned by the app from its construction; attach() gives it the stream threads'
// inboxes once they exist, detach() takes them away before the threads are destroyed
// (queries then answer unavailable). Threading: every method is safe from any thread.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "runtime/query_inbox.hpp"
#include "sluice/http.hpp"
#include "sluice/topology.hpp"

namespace sluice::runtime {

class app_queries final : public http::store_access {
 public:
  explicit app_queries(const topology& topo) : topo_(topo) {}

  void attach(std::vector<query_inbox*> inboxes, std::map<int, std::int32_t> subtopology_partitions);
  void detach();

  /// How forward() reaches the owner of a partition: set by the HTTP server, which knows the
  /// group (and reset when it goes); without it forward() answers 503.
  using forwarding = std::function<http::response(const http::request&, std::string_view, std::int32_t)>;
  void set_forwarding(forwarding f);
  http::response forward(const http::request& req, std::string_view store, std::int32_t partition) override;

  std::optional<std::int32_t> partition_of(std::string_view store, std::string_view key_bytes) const override;
  std::int32_t partitions(std::string_view store) const override;
  outcome run_binding(std::string_view store, std::int32_t partition, binding_reader fn,
                      std::chrono::milliseconds timeout, std::string* failure) override;
  /// Queues the query of every partition on every thread before waiting for the first answer.
  std::vector<partition_outcome> run_bindings(std::string_view store, const std::vector<std::int32_t>& partitions,
                                              partition_reader fn, std::chrono::milliseconds timeout) override;

 private:
  /// The sub-topology whose tasks hold `store`, or -1.
  int subtopology_of(std::string_view store) const;

  const topology& topo_;
  mutable std::mutex mutex_;
  std::vector<query_inbox*> inboxes_;
  std::map<int, std::int32_t> partitions_;
  forwarding forwarding_;
};

}  // namespace sluice::runtime
