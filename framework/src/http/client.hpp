// client: the one-hop forwarding of a query to the instance that owns its partition
// (Boost.Beast, blocking, on a handler thread, bounded by a timeout).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "sluice/http.hpp"

namespace sluice::http {

/// Header a forwarded request carries (the forwarding instance's application.server): the
/// receiver answers it itself and never forwards it again.
inline constexpr const char* forwarded_header = "X-Sluice-Forwarded-By";
/// Header every answer of a store query carries: the application.server that served it.
inline constexpr const char* served_by_header = "X-Sluice-Served-By";

/// GET `target` from `application_server` (host:port) with the given headers; the response
/// as received, or 502/504 naming the instance when it cannot be reached in `timeout`.
response forward_get(const std::string& application_server, const std::string& target,
                     const std::vector<std::pair<std::string, std::string>>& headers,
                     std::chrono::milliseconds timeout);

}  // namespace sluice::http
