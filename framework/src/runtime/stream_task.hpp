// stream_task: one partition of one sub-topology. Owns its nodes (a fresh instance of each
// from the topology's factories), its stores and their changelogs, its stream time and
// punctuators, and the offsets it has processed. Touched by one stream thread only.
//
// Lifecycle: constructed (stores opened) -> restoring (the thread feeds changelog records)
// -> running (nodes initialized, records processed) -> closed (clean: stores committed by
// the thread's last commit; dirty: pending writes dropped).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kafka/types.hpp"
#include "runtime/record_collector.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/node.hpp"
#include "sluice/metrics.hpp"
#include "sluice/state/kv_store.hpp"
#include "sluice/state/rocksdb_store.hpp"
#include "sluice/state/task_directory.hpp"
#include "sluice/topology.hpp"

namespace sluice::runtime {

/// What every task of an app shares: read-only settings and process-wide resources.
struct task_services {
  const topology* topo = nullptr;
  std::string application_id;
  processing_guarantee guarantee = processing_guarantee::at_least_once;
  std::filesystem::path state_dir;
  error_policy on_deserialization_error = error_policy::fail;
  error_policy on_processing_error = error_policy::fail;
  std::string dead_letter_topic;
  state::rocksdb_environment* rocksdb = nullptr;
  metrics_registry* metrics = nullptr;
  std::map<std::string, const detail::global_view*> global_views;
  std::function<std::int64_t()> wall_clock_ms;  ///< real clock, or the test driver's
  bool memory_stores_only = false;              ///< the test driver's default
  std::map<int, std::int32_t> subtopology_partitions;  ///< sub-topology id -> partition count
};

/// A store of a task and where its changelog goes.
/// Sends a task's records somewhere: the thread's record collector, or the test driver.
class record_sender {
 public:
  virtual ~record_sender() = default;
  virtual void send(std::string_view topic, std::int32_t partition, const std::optional<std::string_view>& key,
                    const std::optional<std::string_view>& value, std::int64_t timestamp,
                    const sluice::headers& headers) = 0;
};

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

struct task_store {
  const detail::store_spec* spec = nullptr;
  std::unique_ptr<state::state_store> store;  ///< the kind the spec's factory made (key-value by default)
  std::string changelog_topic;  ///< empty when not logged
  std::unique_ptr<changelog_logger> changelog;
};

class stream_task final : public detail::task_context {
 public:
  /// Opens the task directory (when it has persistent stores) and its stores.
  stream_task(int subtopology, std::int32_t partition, const task_services& services, record_sender& sender,
              std::string thread_label);
  ~stream_task() override;

  const std::string& id() const noexcept { return id_; }
  int subtopology_id() const noexcept { return subtopology_; }
  std::vector<task_store>& stores() noexcept { return stores_; }
  /// The source topic-partitions this task reads (resolved names).
  const std::vector<kafka::topic_partition>& inputs() const noexcept { return inputs_; }

  /// Initializes the nodes; call once restoration is done.
  void start();
  bool running() const noexcept { return started_; }

  /// Processes one record of one of inputs(). Per-record failures go to the handlers;
  /// throws sluice::error only to stop the job (a `fail` policy or a Kafka error).
  void process(const kafka::message& m);
  /// Runs wall-clock punctuators that are due.
  void punctuate_wall_clock(std::int64_t now_ms);

  /// Offsets to commit: next offset per input partition processed since the last call
  /// to mark_committed().
  std::vector<kafka::topic_partition_offset> offsets_to_commit() const;
  void mark_committed();
  bool commit_requested() const noexcept { return commit_requested_; }
  /// Applies pending store writes with their changelog offsets (after Kafka committed).
  void commit_stores(const std::function<std::optional<std::int64_t>(const std::string&, std::int32_t)>& next_offset);
  /// Drops pending store writes (after an aborted transaction).
  void abort_stores();
  /// Flushes store memtables so a crash replays a short tail.
  void checkpoint_stores();
  /// True when a logged store's changelog position moved past its last checkpoint by more
  /// than max(min_records, fraction * position): a crash now would replay more than that
  /// share of the changelog, which a time-only checkpoint cannot bound at high rates.
  bool checkpoint_due(double fraction, std::int64_t min_records) const;
  /// True when a logged store's changelog writes since the last commit exceed
  /// max(min_records, fraction * position). Committing then bounds what a crash replays
  /// (the unflushed tail plus the open commit) to about twice that share even when one
  /// commit interval carries many records, as right after a restart with a backlog.
  bool commit_due(double fraction, std::int64_t min_records) const;
  /// Closes nodes and stores; dirty drops pending writes.
  void close(bool clean);
  std::uint64_t processed() const noexcept { return processed_total_; }
  /// True while a processor's pause_input_until() holds back this task's input at `now`.
  bool input_paused(std::int64_t now_ms) const noexcept { return input_paused_until_ > now_ms; }
  std::int64_t input_paused_until() const noexcept { return input_paused_until_; }

  // task_context
  const record_metadata& metadata() const override { return metadata_; }
  std::int64_t stream_time() const override { return stream_time_; }
  std::int64_t wall_clock_ms() const override { return services_.wall_clock_ms(); }
  std::string_view task_id() const override { return id_; }
  std::int32_t partition() const override { return partition_; }
  std::string_view application_id() const override { return services_.application_id; }
  std::int32_t partition_count() const override;
  void pause_input_until(std::int64_t wall_clock_ms) override {
    input_paused_until_ = std::max(input_paused_until_, wall_clock_ms);
  }
  detail::store_binding store(std::string_view name) override;
  cancellable schedule(std::chrono::milliseconds interval, punctuation_type type,
                       std::function<void(std::int64_t)> callback) override;
  void request_commit() override { commit_requested_ = true; }
  void send(std::string_view topic, const std::optional<std::string_view>& key,
            const std::optional<std::string_view>& value, std::int64_t timestamp, const sluice::headers& headers,
            std::int32_t partition) override;
  const detail::global_view& global_store(std::string_view name) override;
  metrics_registry& metrics() override { return *services_.metrics; }

 private:
  struct punctuator {
    std::chrono::milliseconds interval;
    punctuation_type type;
    std::int64_t next_due;
    std::function<void(std::int64_t)> callback;
    std::shared_ptr<bool> cancelled;
  };
  void open_stores();
  void run_punctuators(punctuation_type type, std::int64_t now);
  void handle_failure(const kafka::message& m, error_policy policy, std::string_view kind, const std::string& what);
  /// Index in inputs_ of `topic`, or inputs_.size() when the task does not read it.
  std::size_t input_index(std::string_view topic);

  int subtopology_;
  std::int32_t partition_;
  std::string id_;
  const task_services& services_;
  record_sender& sender_;
  std::optional<state::task_directory> directory_;
  std::vector<task_store> stores_;
  std::vector<std::int64_t> checkpointed_;  // per store: committed_offset() at the last flush (or open)
  std::vector<std::unique_ptr<detail::node>> nodes_;
  // Per input (parallel vectors): the topic-partition, its source node and the next offset
  // to commit (-1 until a record of it was processed). A task has a handful of inputs, so a
  // scan by topic beats a map and builds no key per record.
  std::vector<kafka::topic_partition> inputs_;
  std::vector<detail::node*> sources_;
  std::vector<std::int64_t> next_offsets_;
  std::size_t last_input_ = 0;  // index the previous record came from: usually the next one's
  std::vector<punctuator> punctuators_;
  record_metadata metadata_;
  std::int64_t stream_time_ = -1;
  /// stream_time_ for the stores' TTL clock, which RocksDB's compaction threads also read.
  std::shared_ptr<std::atomic<std::int64_t>> stream_clock_ = std::make_shared<std::atomic<std::int64_t>>(-1);
  bool started_ = false;
  bool commit_requested_ = false;
  bool dirty_offsets_ = false;
  std::int64_t input_paused_until_ = 0;  ///< wall clock ms; see pause_input_until()
  std::uint64_t processed_total_ = 0;
  std::string label_;  ///< thread="N",task="S_P": every metric of the task carries it
  counter& processed_;
  counter& skipped_;
  counter& dead_lettered_;
  histogram& e2e_latency_;
};

}  // namespace sluice::runtime
