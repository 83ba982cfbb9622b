// query_inbox: how an HTTP handler reads a task's committed store state without a lock on
// the stream thread's hot path. A handler submits a store_query to every stream thread's
// inbox and waits (with a timeout); each thread, between polls, answers the queries queued
// for it: the thread running the task of (store, partition) runs the query's function on
// the store, a thread holding the task while it restores says "unavailable", the others
// "not here".
//
// When a thread answers: under at-least-once between two records (the store holds what the
// records processed so far wrote; its changelog is flushed at the next commit), so a query
// waits for one record, not for the thread's whole batch; under exactly-once only while no
// transaction is open, i.e. right after a commit, so a query never sees a write of an open
// transaction. A submitted query wakes a thread waiting in its poll.
//
// Threading: submit() from any thread; pending(), serve() and close() from the owning stream
// thread only. pending() is one atomic load: the only cost on the hot path.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "runtime/task_id.hpp"
#include "sluice/queries.hpp"

namespace sluice::runtime {

class stream_task;

/// What a query found.
enum class query_status {
  done,         ///< a thread ran the function on the task's store
  not_here,     ///< no stream thread of this instance has the task
  unavailable,  ///< the task is here but not running (restoring)
  timed_out,    ///< no answer within the timeout
  failed,       ///< the function threw; see store_query::failure()
};

/// One query, shared by the handler waiting on it and the threads answering it.
class store_query {
 public:
  /// A query of `store` in the task `task` (the store's sub-topology, the partition asked).
  store_query(std::string store, task_id task, interactive_queries::binding_reader fn, int threads)
      : store_(std::move(store)), task_(task), fn_(std::move(fn)), remaining_(threads) {}

  /// Handler side: waits for the answer until `deadline` (one deadline for the queries of
  /// one read). After a timeout the function never runs (or has finished running).
  query_status wait_until(std::chrono::steady_clock::time_point deadline);
  /// The exception message when wait_until() returned failed.
  const std::string& failure() const noexcept { return failure_; }

  // Stream thread side.
  const std::string& store() const noexcept { return store_; }
  task_id task() const noexcept { return task_; }
  /// Runs the function on `task`'s store `s`, whose values are laid out as `format` (on the
  /// answering stream thread) through a read-only context and changelog, and records done
  /// (or failed).
  void run(detail::task_context& task, state::state_store& s, detail::value_format format);
  /// Records one thread's answer other than done.
  void reply(query_status s);

 private:
  std::string store_;
  task_id task_;
  interactive_queries::binding_reader fn_;
  std::mutex mutex_;
  std::condition_variable answered_;
  int remaining_;
  bool finished_ = false;
  query_status status_ = query_status::not_here;
  std::string failure_;
};

class query_inbox {
 public:
  /// Queues `q` and wakes the thread's poll; false when the thread no longer serves (then
  /// `q` got a not_here reply).
  bool submit(std::shared_ptr<store_query> q);
  /// What submit() calls to cut the owning thread's poll short (the consumer's wake), or
  /// empty. Called by the owning thread before its consumer goes away and after a new one
  /// exists; submit() calls it under the inbox's lock, so it never outlives its consumer.
  void set_waker(std::function<void()> wake);
  bool pending() const noexcept { return pending_.load(std::memory_order_acquire); }
  /// The queries waiting for the thread's next serve (any thread). Read by tests, which
  /// wait until every query they sent is queued before they serve or time out.
  std::size_t queued() const;
  /// Answers every queued query against the thread's tasks.
  void serve(const std::map<task_id, std::unique_ptr<stream_task>>& tasks);
  /// The thread stops: queued and later queries are answered not_here.
  void close();

 private:
  mutable std::mutex mutex_;
  std::deque<std::shared_ptr<store_query>> queue_;
  std::atomic<bool> pending_{false};
  bool closed_ = false;
  std::function<void()> wake_;
};

}  // namespace sluice::runtime
