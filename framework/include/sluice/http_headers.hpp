// The HTTP headers sluice's instances exchange when one answers a query for another: the
// built-in /stores endpoints, store_access::forward, and a topology's endpoint that gathers
// from several instances (e.g. the overflow buffer's GET /overflow/backlog).
#pragma once

namespace sluice::http {

/// Header a forwarded request carries (the forwarding instance's application.server): the
/// receiver answers it itself and never forwards it again. A handler that gathers from
/// several instances answers only for its own instance when its request carries it.
inline constexpr const char* forwarded_header = "X-Sluice-Forwarded-By";
/// Header every answer of a store query carries: the application.server that served it.
inline constexpr const char* served_by_header = "X-Sluice-Served-By";

}  // namespace sluice::http
