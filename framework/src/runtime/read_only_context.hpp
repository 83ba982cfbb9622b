// read_only_context: what a store query's handle gets instead of its task (queries.hpp). It
// answers the task's identity, wall clock and metrics, and throws on everything that writes
// or acts (stream time, which every store write takes as its changelog timestamp; scheduling;
// sending; commits; input pauses; other stores), so a query function that tries to write
// through a ranked-index or queue handle fails before the store changes. read_only_changelog
// throws on any changelog write for the same reason.
//
// Lifecycle: made on the stack for one query, on the thread running the task.
#pragma once

#include <string>

#include "sluice/detail/node.hpp"
#include "sluice/error.hpp"

namespace sluice::runtime {

[[noreturn]] inline void refuse_query_write(const std::string& store, const char* what) {
  throw error(errc::invalid_topology, "a store query may only read, but the query on store '" + store + "' tried to " +
                                          what + "; write from a processor instead");
}

class read_only_changelog final : public state::changelog_sink {
 public:
  explicit read_only_changelog(std::string store) : store_(std::move(store)) {}
  void log(std::string_view, const std::optional<std::string_view>&, std::int64_t) override {
    refuse_query_write(store_, "write to it");
  }

 private:
  std::string store_;
};

class read_only_context final : public detail::task_context {
 public:
  read_only_context(detail::task_context& task, std::string store) : task_(task), store_(std::move(store)) {}

  const record_metadata& metadata() const override { return task_.metadata(); }
  std::int64_t stream_time() const override { refuse_query_write(store_, "write to it (writes take the stream time)"); }
  std::int64_t wall_clock_ms() const override { return task_.wall_clock_ms(); }
  std::string_view task_id() const override { return task_.task_id(); }
  std::int32_t partition() const override { return task_.partition(); }
  std::int32_t partition_count() const override { return task_.partition_count(); }
  std::string_view application_id() const override { return task_.application_id(); }
  bool exactly_once() const override { return task_.exactly_once(); }
  void pause_input_until(std::int64_t) override { refuse_query_write(store_, "pause the task's input"); }
  detail::store_binding store(std::string_view) override { refuse_query_write(store_, "open another store"); }
  cancellable schedule(std::chrono::milliseconds, punctuation_type, std::function<void(std::int64_t)>) override {
    refuse_query_write(store_, "schedule a punctuator");
  }
  void request_commit() override { refuse_query_write(store_, "request a commit"); }
  void before_commit(std::function<void()>) override { refuse_query_write(store_, "register a commit hook"); }
  std::int32_t output_partitions(std::string_view topic) const override { return task_.output_partitions(topic); }
  void send(std::string_view, const std::optional<std::string_view>&, const std::optional<std::string_view>&,
            std::int64_t, const sluice::headers&, std::int32_t) override {
    refuse_query_write(store_, "send a record");
  }
  const detail::global_view& global_store(std::string_view name) override { return task_.global_store(name); }
  metrics_registry& metrics() override { return task_.metrics(); }

 private:
  detail::task_context& task_;
  std::string store_;
};

}  // namespace sluice::runtime
