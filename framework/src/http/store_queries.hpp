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

#include "http/owner_forwarding.hpp"
#include "http/router.hpp"
#include "sluice/http.hpp"
#include "sluice/topology.hpp"

namespace sluice::http {

/// Most entries a range or prefix query returns; larger limits are refused with 400.
inline constexpr std::size_t max_query_limit = 1000;
/// Entries a range or prefix query returns without ?limit=.
inline constexpr std::size_t default_query_limit = 100;

/// Adds /stores/{store}/keys/{key}, /stores/{store}/range, /stores/{store}/prefix/{prefix},
/// /metadata and /metadata/stores/{store}/keys/{key}. Answers carry X-Sluice-Served-By; a key
/// of a partition this instance does not run goes to its owner through `forwarding`.
void add_store_endpoints(router& routes, store_access& stores, const topology& topo,
                         std::shared_ptr<const owner_forwarding> forwarding);

}  // namespace sluice::http
