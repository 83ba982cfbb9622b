// store_queries: the HTTP endpoints of interactive queries of a running app's key-value
// stores, over the app's store_access (runtime/app_queries.hpp): GET /stores/{store}/keys/{key},
// /stores/{store}/range and /stores/{store}/prefix/{prefix} decode keys and values with the
// store's serdes (detail::store_codec) into JSON; /metadata says which instance runs what.
//
// Threading: every handler is safe from any thread.
#pragma once

#include <map>
#include <mutex>
#include <vector>

#include "http/instance_directory.hpp"
#include "http/router.hpp"
#include "sluice/http.hpp"
#include "sluice/topology.hpp"

namespace sluice::http {

/// Most entries a range or prefix query returns; larger limits are refused with 400.
inline constexpr std::size_t max_query_limit = 1000;
/// Entries a range or prefix query returns without ?limit=.
inline constexpr std::size_t default_query_limit = 100;

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
