// state_manager: the stores of one task. Opens them (wiping and reopening a corrupt
// RocksDB store, which the changelog then rebuilds), owns their changelog loggers, commits
// them with the changelog offset each reflects, aborts them, checkpoints them and says when
// a checkpoint or an early commit is due.
//
// Lifecycle: the constructor opens every store of the task's sub-topology -> commit() /
// abort() / checkpoint() any number of times -> close(clean or dirty) once (the destructor
// closes dirty if close() was not called).
//
// Threading: owned by its stream_task and touched by that task's stream thread only.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/record_collector.hpp"
#include "runtime/task_id.hpp"
#include "sluice/detail/node.hpp"
#include "sluice/state/kv_store.hpp"
#include "sluice/state/state_store.hpp"
#include "sluice/state/task_directory.hpp"

namespace sluice::runtime {

struct task_services;

/// How a task or its stores close: clean keeps what the last commit made durable; dirty
/// (after a failure or an aborted transaction) drops pending writes first.
enum class close_mode { clean, dirty };

/// Sends a store's writes to its changelog partition, counting them since the last commit.
class changelog_logger final : public detail::changelog_writer {
 public:
  changelog_logger(std::string topic, std::int32_t partition, record_sender& sender)
      : topic_(std::move(topic)), partition_(partition), sender_(sender) {}
  void log(std::string_view key, const std::optional<std::string_view>& value, std::int64_t timestamp) override {
    sender_.send(topic_, partition_, key, value, timestamp < 0 ? 0 : timestamp, no_headers_);
    ++uncommitted_;
  }
  /// Writes since the last reset (the last commit or abort).
  std::int64_t uncommitted() const noexcept { return uncommitted_; }
  void reset() noexcept { uncommitted_ = 0; }

 private:
  std::string topic_;
  std::int32_t partition_;
  record_sender& sender_;
  sluice::headers no_headers_;
  std::int64_t uncommitted_ = 0;
};

/// A store of a task and where its changelog goes.
struct task_store {
  const detail::store_spec* spec = nullptr;
  std::unique_ptr<state::state_store> store;  ///< the kind the spec's factory made (key-value by default)
  std::string changelog_topic;                ///< empty when not logged
  std::unique_ptr<changelog_logger> changelog;
};

class state_manager {
 public:
  /// The next changelog offset the producer confirmed for (topic, partition) since the last
  /// commit, if any.
  using changelog_offsets = std::function<std::optional<state::changelog_offset>(const std::string&, std::int32_t)>;

  /// Opens the task directory (when a store is persistent) and every store of the
  /// sub-topology; their changelog writes go to `sender`; `stream_clock` (the task's stream
  /// time) is the clock of their TTL.
  state_manager(task_id id, const task_services& services, record_sender& sender,
                std::shared_ptr<std::atomic<std::int64_t>> stream_clock);
  ~state_manager();
  state_manager(const state_manager&) = delete;
  state_manager& operator=(const state_manager&) = delete;

  std::vector<task_store>& all() noexcept { return stores_; }
  const std::vector<task_store>& all() const noexcept { return stores_; }
  /// The store named `name`, or nullptr.
  task_store* find(std::string_view name) noexcept;

  /// Applies pending writes with the changelog offset each store now reflects (after Kafka
  /// committed the transaction or the input offsets).
  void commit(const changelog_offsets& next_offset);
  /// Drops pending writes (after an aborted transaction).
  void abort();
  /// Flushes memtables so a crash replays a short tail.
  void checkpoint();
  /// True when a logged store's changelog position moved past its last checkpoint by more
  /// than max(min_records, fraction * position): a crash now would replay more than that
  /// share of the changelog, which a time-only checkpoint cannot bound at high rates.
  bool checkpoint_due(double fraction, std::int64_t min_records) const;
  /// True when a logged store's changelog writes since the last commit exceed
  /// max(min_records, fraction * position). Committing then bounds what a crash replays
  /// (the unflushed tail plus the open commit) to about twice that share even when one
  /// commit interval carries many records, as right after a restart with a backlog.
  bool commit_due(double fraction, std::int64_t min_records) const;
  /// Closes every store; dirty drops pending writes first. Errors are logged.
  void close(close_mode mode) noexcept;

 private:
  /// Opens one store as its spec says (the one place that knows store kinds).
  task_store open_store(const detail::store_spec& spec);

  task_id id_;
  std::string name_;  // id_.to_string(): the task directory and the logs
  const task_services& services_;
  record_sender& sender_;
  std::shared_ptr<std::atomic<std::int64_t>> stream_clock_;
  std::optional<state::task_directory> directory_;
  std::vector<task_store> stores_;
  std::vector<std::int64_t> checkpointed_;  // per store: committed_offset() at the last flush (or open)
};

}  // namespace sluice::runtime
