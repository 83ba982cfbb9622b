// store_queries: interactive queries of a running app's key-value stores. app_store_access
// implements the public store_access over the stream threads' query inboxes; the endpoints
// GET /stores/{store}/keys/{key}, /stores/{store}/range and /stores/{store}/prefix/{prefix}
// decode keys and values with the store's serdes (detail::store_codec) into JSON.
//
// Lifecycle: app_store_access exists from app::start(); attach() gives it the stream
// threads' inboxes once they exist, detach() takes them away before the threads are
// destroyed (queries then answer unavailable). Threading: every method is safe from any thread.
#pragma once

#include <map>
#include <mutex>
#include <vector>

#include "http/instance_directory.hpp"
#include "http/router.hpp"
#include "runtime/query_inbox.hpp"
#include "sluice/http.hpp"
#include "sluice/topology.hpp"

namespace sluice::http {

/// Most entries a range or prefix query returns; larger limits are refused with 400.
inline constexpr std::size_t max_query_limit = 1000;
/// Entries a range or prefix query returns without ?limit=.
inline constexpr std::size_t default_query_limit = 100;

class app_store_access final : public store_access {
 public:
  explicit app_store_access(const topology& topo) : topo_(topo) {}

  void attach(std::vector<runtime::query_inbox*> inboxes, std::map<int, std::int32_t> subtopology_partitions);
  void detach();

  std::optional<std::int32_t> partition_of(std::string_view store, std::string_view key_bytes) const override;
  std::int32_t partitions(std::string_view store) const override;
  outcome run(std::string_view store, std::int32_t partition, std::function<void(state::kv_store&)> fn,
              std::chrono::milliseconds timeout, std::string* failure) override;

 private:
  /// The sub-topology whose tasks hold `store`, or -1.
  int subtopology_of(std::string_view store) const;

  const topology& topo_;
  mutable std::mutex mutex_;
  std::vector<runtime::query_inbox*> inboxes_;
  std::map<int, std::int32_t> partitions_;
};

/// Where the store endpoints find other instances: set once the app knows its group.
class directory_slot {
 public:
  void set(std::unique_ptr<instance_directory> d) {
    owned_ = std::move(d);
    current_.store(owned_.get(), std::memory_order_release);
  }
  instance_directory* get() const noexcept { return current_.load(std::memory_order_acquire); }

 private:
  std::unique_ptr<instance_directory> owned_;
  std::atomic<instance_directory*> current_{nullptr};
};

/// Adds /stores/{store}/keys/{key}, /stores/{store}/range, /stores/{store}/prefix/{prefix},
/// /metadata and /metadata/stores/{store}/keys/{key}. `self` (application.server) is sent
/// back in X-Sluice-Served-By and names this instance when it forwards a query (with
/// `auth_token`, when set) to the owner of a partition it does not run.
void add_store_endpoints(router& routes, store_access& stores, const topology& topo, std::string self,
                         std::string auth_token, const directory_slot& directory);

}  // namespace sluice::http
