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

namespace sluice::state {
class kv_store;
}

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
};

/// Read access, from a handler, to the stores of the tasks this instance runs: the
/// function runs on the stream thread that owns the task, between two polls, on committed
/// state (under exactly-once never a write of an open transaction). The handler waits.
///
///   auto& stores = req.stores();
///   auto p = stores.partition_of("word-counts", key_bytes);
///   std::optional<std::string> value;
///   auto outcome = stores.run("word-counts", *p, [&](sluice::state::kv_store& s) { value = s.get(key_bytes); });
///   if (outcome != sluice::http::store_access::outcome::done) return sluice::http::store_access::refusal(outcome, ...);
///
/// The function must only read (get, range, prefix, approximate_count), be quick (the stream
/// thread is paused while it runs) and keep nothing that refers into the store.
class store_access {
 public:
  enum class outcome {
    done,           ///< the function ran
    unknown_store,  ///< no key-value store of that name in the topology
    not_local,      ///< no stream thread of this instance runs the partition's task
    unavailable,    ///< the task is here but restoring (or the app is starting or stopping)
    timed_out,      ///< the owning thread did not answer in time
    failed,         ///< the function threw (the message is in failure())
  };
  virtual ~store_access() = default;
  /// The partition whose task holds `key_bytes` (the serialized key) of `store`, as Kafka's
  /// murmur2 partitioner places it; nullopt for an unknown store.
  virtual std::optional<std::int32_t> partition_of(std::string_view store, std::string_view key_bytes) const = 0;
  /// The partition count of the store's tasks; 0 for an unknown store or before the app knows.
  virtual std::int32_t partitions(std::string_view store) const = 0;
  /// Runs `fn` against partition `partition` of `store`; see the class comment. `failure`
  /// receives the exception message when the outcome is failed.
  virtual outcome run(std::string_view store, std::int32_t partition, std::function<void(state::kv_store&)> fn,
                      std::chrono::milliseconds timeout = std::chrono::seconds(5), std::string* failure = nullptr) = 0;
  /// The response for an outcome other than done: 404, 503 with Retry-After, 504 or 500.
  static response refusal(outcome o, std::string_view store, std::int32_t partition, std::string_view failure = {});
};

/// One GET request as a handler sees it. Valid only during the handler call.
class request {
 public:
  using params = std::vector<std::pair<std::string, std::string>>;

  request(std::string_view path, params path_params, params query, store_access* stores = nullptr,
          std::string_view target = {}, params headers = {}) noexcept
      : path_(path), path_params_(std::move(path_params)), query_(std::move(query)), stores_(stores),
        target_(target), headers_(std::move(headers)) {}

  /// The decoded path, without the query string ("/stores/counts/keys/alpha").
  std::string_view path() const noexcept { return path_; }
  /// The segment a `{name}` placeholder of the route matched, percent-decoded; "" when the
  /// route has no such placeholder.
  std::string_view path_param(std::string_view name) const noexcept;
  /// A query parameter, percent-decoded (`+` is a space); nullopt when absent. The first
  /// one wins when a name repeats.
  std::optional<std::string_view> query(std::string_view name) const noexcept;
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

/// Escapes `s` for use inside a JSON string literal (quotes not added).
std::string json_escape(std::string_view s);

}  // namespace sluice::http
