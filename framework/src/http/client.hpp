// client: the one-hop forwarding of a query to the instance that owns its partition
// (Boost.Beast, blocking, on a handler thread, bounded by a timeout).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "sluice/http.hpp"
#include "sluice/http_headers.hpp"

namespace sluice::http {

/// GET `target` from `application_server` (host:port) with the given headers; the response
/// as received, or 502/504 naming the instance when it cannot be reached in `timeout`.
response forward_get(const std::string& application_server, const std::string& target,
                     const std::vector<std::pair<std::string, std::string>>& headers,
                     std::chrono::milliseconds timeout);

}  // namespace sluice::http
