// sluice::http: the types a topology uses to add its own read-only endpoints to the
// instance HTTP server (on when `application.server` is set), with no HTTP library in sight.
//
//   sluice::streams_builder b;
//   ...
//   b.add_endpoint("/greetings/{name}", [](const sluice::http::request& r) {
//     return sluice::http::response::json(200, "{\"hello\": \"" + std::string(r.path_param("name")) + "\"}");
//   });
//
// A route pattern is a path whose segments are literals or `{name}` placeholders; a
// placeholder matches one non-empty segment, percent-decoded. Only GET is routed. The
// server checks `http.auth.token` before any endpoint a topology adds runs.
//
// Threading: handlers run on the server's handler threads, never on a stream thread, and
// may run concurrently with each other: a handler must be safe to call from several
// threads at once (capture nothing mutable, or guard it).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/queries.hpp"

namespace sluice::http {

/// HTTP status codes the server and handlers use.
enum class status : int {
  ok = 200,
  bad_request = 400,
  unauthorized = 401,
  not_found = 404,
  method_not_allowed = 405,
  payload_too_large = 413,
  header_fields_too_large = 431,
  internal_server_error = 500,
  bad_gateway = 502,
  service_unavailable = 503,
  gateway_timeout = 504,
};

/// What a handler returns: a status, a body (JSON unless content_type says otherwise) and
/// extra headers (e.g. Retry-After).
struct response {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;

  /// A JSON body with `code`.
  static response json(int code, std::string body) { return response{code, std::move(body)}; }
  static response json(http::status code, std::string body) { return json(static_cast<int>(code), std::move(body)); }
  /// `{"error": "<message>"}` with `code`; the message is JSON-escaped.
  static response error(http::status code, std::string_view message);
  /// A header of this response by name (case-insensitive, as request::header); nullopt
  /// when absent. Valid while `headers` is unchanged.
  std::optional<std::string_view> header(std::string_view name) const noexcept;
};

class request;

/// Read access, from a handler, to the stores of the tasks this instance runs: the
/// app's interactive_queries (sluice/queries.hpp), so a handler reads stores of any kind
/// through their typed handles. The function runs on the stream thread that owns the task,
/// between two polls, on committed state (under exactly-once never a write of an open
/// transaction). The handler waits.
///
///   auto& stores = req.stores();
///   auto p = stores.partition_of("scores", segment);
///   std::uint64_t n = 0;
///   auto outcome = stores.run<sluice::ranked_index_store>("scores", *p, [&](auto& s) { n = s.count(board); });
///   if (outcome != sluice::http::store_access::outcome::done) return sluice::http::store_access::refusal(outcome,
///   "scores", *p);
///
/// Key-value stores also take a raw `sluice::state::kv_store&` function (run without a
/// handle type). The function must only read, be quick (the stream thread is paused while it
/// runs) and keep nothing that refers into the store.
class store_access : public interactive_queries {
 public:
  /// The answer of the instance that runs partition `partition` of `store` to the same request
  /// (path and query), asked once, as the built-in /stores endpoints forward: for a handler
  /// whose run() answered not_local. 503 with Retry-After while no other instance owns the
  /// partition (it is moving), when `req` was itself forwarded (never two hops), or outside an
  /// app's server; 502 or 504 when the owner cannot be reached in time.
  virtual response forward(const request& req, std::string_view store, std::int32_t partition);

  /// The response for an outcome other than done: 404 (unknown store, not local), 500 (wrong
  /// kind, failed), 503 with Retry-After (restoring or moving), 504 (timed out).
  static response refusal(outcome o, std::string_view store, std::int32_t partition, std::string_view failure = {});
};

/// One GET request as a handler sees it. Valid only during the handler call.
class request {
 public:
  using params = std::vector<std::pair<std::string, std::string>>;

  request(std::string_view path, params path_params, params query, store_access* stores = nullptr,
          std::string_view target = {}, params headers = {}) noexcept
      : path_(path),
        path_params_(std::move(path_params)),
        query_(std::move(query)),
        stores_(stores),
        target_(target),
        headers_(std::move(headers)) {}

  /// The decoded path, without the query string ("/stores/counts/keys/alpha").
  std::string_view path() const noexcept { return path_; }
  /// The segment a `{name}` placeholder of the route matched, percent-decoded; "" when the
  /// route has no such placeholder.
  std::string_view path_param(std::string_view name) const noexcept;
  /// A query parameter, percent-decoded (`+` is a space); nullopt when absent. The first
  /// one wins when a name repeats.
  std::optional<std::string_view> query(std::string_view name) const noexcept;
  /// A whole-number query parameter (?limit=10): `fallback` when absent, else its decimal
  /// digits' value within [min, max]. Otherwise nullopt, and `refusal` is the 400 that names
  /// the parameter and the value: "limit 'x' is not a whole number", "limit 0 is below the
  /// minimum 1", or "limit 1001 is above the maximum 1000" followed by `past_max_hint`
  /// (e.g. how to page instead).
  std::optional<std::uint64_t> whole_number_query(std::string_view name, std::uint64_t fallback, std::uint64_t min,
                                                  std::uint64_t max, response& refusal,
                                                  std::string_view past_max_hint = {}) const;
  const params& path_params() const noexcept { return path_params_; }
  const params& query_params() const noexcept { return query_; }
  /// The request target as received: path and query string, still percent-encoded.
  std::string_view target() const noexcept { return target_; }
  /// A request header by name (case-insensitive); nullopt when absent.
  std::optional<std::string_view> header(std::string_view name) const noexcept;
  /// The app's stores (see store_access). Throws sluice::error(errc::invalid_config) outside
  /// an app's server (a handler called directly, e.g. in a unit test, without one).
  store_access& stores() const;

 private:
  std::string_view path_;
  params path_params_;
  params query_;
  store_access* stores_ = nullptr;
  std::string_view target_;
  params headers_;
};

/// Answers one request. Throwing answers 500 with the exception's message.
using handler = std::function<response(const request&)>;

/// A pattern and its handler, as a topology carries them to the server.
struct route {
  std::string pattern;
  handler fn;
};

/// Escapes `s` for use inside a JSON string literal (quotes not added). Bytes that are not
/// well-formed UTF-8 become U+FFFD, so the result is always valid JSON text.
std::string json_escape(std::string_view s);

}  // namespace sluice::http
