// server: the instance HTTP server, on Boost.Beast over Asio. One I/O thread accepts and
// reads requests asynchronously (idle or slow connections cost a socket and a small buffer,
// never a thread); handlers run on a small pool of handler threads, so a slow handler (a
// store query waiting for its stream thread) never holds up reading other requests, and no
// handler ever runs on a stream thread.
//
// Limits (see README.md): at most max_connections open connections (more are closed as soon
// as they are accepted), request headers up to max_header_bytes (431 beyond), bodies up to
// max_body_bytes (413 beyond; every endpoint is a GET), and a whole request must arrive
// within request_timeout of the server starting to wait for it (slowloris), idle keep-alive
// connections included.
//
// Lifecycle: constructed (nothing bound) -> start() binds and listens -> stop() closes every
// connection, waits for handlers in flight and joins the threads. The destructor stops.
// Threading: start() and stop() from one owning thread; the router must outlive the server.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "http/router.hpp"
#include "sluice/metrics.hpp"

namespace sluice::http {

struct server_options {
  /// Address to listen on. Default: 127.0.0.1 (0.0.0.0 must be asked for).
  std::string bind_address = "127.0.0.1";
  /// Port to listen on; 0 picks a free one (tests). Default: 0
  std::uint16_t port = 0;
  /// When non-empty, every path but the unauthenticated ones needs "Authorization: Bearer <token>".
  /// Default: empty (no authentication)
  std::string auth_token;
  /// Open connections at most; further ones are closed on accept. Default: 512
  std::size_t max_connections = 512;
  /// Request line plus headers, bytes. Default: 8192
  std::size_t max_header_bytes = 8192;
  /// Request body, bytes. Default: 4096
  std::size_t max_body_bytes = 4096;
  /// Time for a whole request to arrive, counted from when the server starts waiting for it
  /// (so an idle keep-alive connection is closed after it too). Default: 10 s
  std::chrono::milliseconds request_timeout{10000};
  /// Time to write a response. Default: 10 s
  std::chrono::milliseconds write_timeout{10000};
  /// Threads that run handlers. Default: 2
  int handler_threads = 2;
};

/// Paths answered without the auth token (Kubernetes probes carry none).
bool is_unauthenticated_path(std::string_view path) noexcept;

/// True when `authorization` is exactly "Bearer <token>" (compared in constant time).
bool bearer_matches(std::string_view authorization, std::string_view token) noexcept;

class server {
 public:
  /// `metrics` receives sluice_http_* counters; `stores` (may be null) is what handlers reach
  /// through request::stores(). All three must outlive the server.
  server(server_options options, const router& routes, metrics_registry& metrics, store_access* stores = nullptr);
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  /// Binds and starts the threads. Throws sluice::error(errc::invalid_config) naming the
  /// address when it cannot be bound.
  void start();
  void stop() noexcept;
  /// The bound port (the chosen one when options.port was 0); valid after start().
  std::uint16_t port() const noexcept;

  struct impl;  ///< defined in server.cpp (Beast and Asio stay there)

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace sluice::http
