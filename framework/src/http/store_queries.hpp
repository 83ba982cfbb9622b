// store_queries: the HTTP endpoints of interactive queries of a running app's key-value
// and window stores, over the app's store_access (runtime/app_queries.hpp): GET
// /stores/{store}/keys/{key}, /stores/{store}/range, /stores/{store}/prefix/{prefix} and
// /stores/{store}/keys/{key}/windows decode keys and values with the store's serdes
// (detail::store_codec) into JSON; /metadata says which instance runs what.
// Global tables answer on the same paths from the instance asked (every instance holds each
// table whole), never forwarded.
//
// Threading: every handler is safe from any thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "http/owner_forwarding.hpp"
#include "http/router.hpp"
#include "runtime/global_tables.hpp"
#include "sluice/http.hpp"
#include "sluice/topology.hpp"

namespace sluice::http {

/// Most entries a range or prefix query returns; larger limits are refused with 400.
inline constexpr std::size_t max_query_limit = 1000;
/// Entries a range or prefix query returns without ?limit=.
inline constexpr std::size_t default_query_limit = 100;

/// The app's global table stores for the store endpoints: set by app::start() once the
/// tables have caught up (queries of a global table answer 503 before). The stores outlive
/// the server's use of them (the app stops the server first).
class global_store_slot {
 public:
  using stores = std::map<std::string, const runtime::global_table_store*, std::less<>>;
  void set(stores s) {
    std::lock_guard lock(mutex_);
    stores_ = std::move(s);
  }
  /// The store of global table `name`; null when unknown or not caught up yet.
  const runtime::global_table_store* find(std::string_view name) const {
    std::lock_guard lock(mutex_);
    auto it = stores_.find(name);
    return it == stores_.end() ? nullptr : it->second;
  }

 private:
  mutable std::mutex mutex_;
  stores stores_;
};

/// Adds /stores/{store}/keys/{key}, /stores/{store}/keys/{key}/windows,
/// /stores/{store}/range, /stores/{store}/prefix/{prefix}, /metadata and
/// /metadata/stores/{store}/keys/{key}. Answers carry X-Sluice-Served-By; a key of a
/// partition this instance does not run goes to its owner through `forwarding`. Global
/// tables are read from `globals`, here.
void add_store_endpoints(router& routes, store_access& stores, const topology& topo,
                         std::shared_ptr<const owner_forwarding> forwarding, const global_store_slot& globals);

}  // namespace sluice::http
