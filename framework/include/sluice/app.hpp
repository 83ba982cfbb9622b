// sluice::app: runs a topology (the KafkaStreams of sluice). One app per process; it starts
// num.stream.threads stream threads, each with one consumer and one producer, and runs one
// task per (sub-topology, partition) assigned to it.
//
//   sluice::app app(builder.build(), std::move(args.settings));
//   return app.run();  // until SIGTERM / SIGINT, then a final commit and a clean close
//
// Lifecycle: created -> (rebalancing <-> restoring <-> running <-> degraded) -> pending_shutdown ->
// not_running, or error when a thread failed. run() blocks; start()/close() are for embedding in a
// process that owns its own main loop. state() and metrics() are safe from any thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "sluice/config.hpp"
#include "sluice/metrics.hpp"
#include "sluice/queries.hpp"
#include "sluice/topology.hpp"

namespace sluice {

/// restoring: some task is replaying its changelog before it processes (see the restore
/// lines in the log and sluice_restore_remaining_records).
/// degraded: a stream thread is riding out a retriable failure (broker outage, leader or
/// coordinator move, fenced producer): its tasks were closed and are being recovered from
/// the last commit, retried for up to task.timeout.ms; it leaves degraded at its first
/// commit after a recovery, which comes at once (sluice_task_retries_total and
/// sluice_task_recoveries_total count). Also while no broker answers an idle thread.
enum class app_state { created, rebalancing, restoring, running, pending_shutdown, not_running, error, degraded };

/// A readable name of the state ("running").
const char* to_string(app_state s) noexcept;

class app {
 public:
  /// Validates the configuration against the topology (throws sluice::error naming the
  /// problem); connects nothing yet.
  app(topology t, config c);
  ~app();
  app(const app&) = delete;
  app& operator=(const app&) = delete;

  /// Starts, installs SIGTERM/SIGINT handlers, blocks until a signal or a fatal error,
  /// closes. Returns the process exit code: 0 after a clean stop, 1 after an error.
  int run();

  /// Starts the threads and returns: creates internal topics, checks co-partitioning,
  /// catches up global tables. Throws sluice::error when the job cannot start.
  void start();
  /// Asks every thread to finish its records in hand, commit and close; waits up to
  /// `timeout` for them. Threads still closing then go on (state() stays pending_shutdown)
  /// and the destructor waits for them. Safe to call twice and from any thread. Called while
  /// start() runs on another thread (waiting for its brokers, say), it makes start() stop
  /// within about a second and throw errc::state, and returns after it; start() after
  /// close() throws the same.
  void close(std::chrono::milliseconds timeout = std::chrono::seconds(60));
  /// Blocks until the app stops by itself (error) or close() is called elsewhere.
  void wait();

  app_state state() const noexcept;
  /// The first fatal error's message, when state() is error.
  std::string error_message() const;
  /// While state() is degraded: what each degraded stream thread rides out ("stream thread 0:
  /// no broker at bootstrap.servers answers", or "stream thread 0: retrying after: " and its
  /// last retriable failure), "; " between threads; empty in every other state.
  std::string degraded_reason() const;
  /// The state and, in error and degraded, its reason (error_message(), degraded_reason()),
  /// read together: what /health and /ready answer.
  struct status_snapshot {
    app_state state = app_state::created;
    std::string reason;
  };
  status_snapshot status() const;
  metrics_registry& metrics() noexcept;
  /// Reads of the stores of the tasks this instance runs, of any kind, on their stream
  /// threads and on committed state (sluice/queries.hpp); the same path the HTTP handlers
  /// use, HTTP on or off. Safe from any thread; answers `unavailable` before start() and
  /// after close().
  interactive_queries& queries() noexcept;
  const topology& get_topology() const noexcept;
  /// Called on every state change with (previous state, new state), the reverse of Kafka
  /// Streams' (new, old), from the thread that changed it.
  void on_state_change(std::function<void(app_state, app_state)> listener);

  /// The bootstrap address the app uses (the embedded cluster's when bootstrap.servers=embedded).
  std::string bootstrap_servers() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace sluice
