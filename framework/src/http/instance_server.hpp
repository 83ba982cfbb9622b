// instance_server: the HTTP server of one app instance, on when `application.server` is
// set. Owns the router with the built-in endpoints (/metrics, /health, /ready, /topology)
// the interactive queries of stores (/stores/...), those the topology added
// (streams_builder::add_endpoint), and the Beast server.
//
// Lifecycle: made by app::start() before anything connects (so probes answer while the app
// starts), stopped by app::close() before the stream threads go away.
// Threading: start()/stop() on the app's owning thread; handlers on the server's threads.
#pragma once

#include <memory>

#include "http/router.hpp"
#include "http/server.hpp"
#include "http/store_queries.hpp"
#include "runtime/app_queries.hpp"
#include "sluice/app.hpp"
#include "sluice/config.hpp"

namespace sluice::http {

/// host and port of `application.server`; throws errc::invalid_config naming the value.
struct host_port {
  std::string host;
  std::uint16_t port = 0;
};
host_port parse_application_server(const std::string& value);

/// The server settings read from the configuration (http.* keys).
server_options options_from_config(const config& cfg);

/// The process' own figures in Prometheus text (CPU seconds, resident memory, open file
/// descriptors, threads, start time), read from /proc at the time of the call.
std::string process_metrics_text();

class instance_server {
 public:
  /// Null when application.server is not set. Validates the http.* keys. `stores` is the
  /// app's queries (they outlive the server); the server gives them its owner forwarding, so
  /// store_access::forward reaches other instances.
  static std::unique_ptr<instance_server> from_config(const config& cfg, app& owner, runtime::app_queries& stores);

  instance_server(server_options options, std::string application_server, app& owner, runtime::app_queries& stores);
  ~instance_server();
  void start() { server_.start(); }
  void stop() noexcept { server_.stop(); }
  std::uint16_t port() const noexcept { return server_.port(); }
  /// Where other instances are: set by app::start() once the group is known.
  void set_directory(std::unique_ptr<instance_directory> d) { directory_.set(std::move(d)); }
  /// The app's global tables, queried on the /stores/... paths: set by app::start() once they
  /// have caught up.
  void set_global_stores(global_store_slot::stores stores) { globals_.set(std::move(stores)); }

 private:
  void add_builtin_endpoints();

  app& app_;
  router routes_;
  runtime::app_queries& stores_;
  directory_slot directory_;
  global_store_slot globals_;
  server server_;
};

}  // namespace sluice::http
