// stream_task: one partition of one sub-topology. Owns its nodes (a fresh instance of each
// from the topology's factories), its stores and their changelogs, its stream time and
// punctuators, and the offsets it has processed. Touched by one stream thread only.
//
// Its stores live in its state_manager; its records (outputs, changelog writes, dead
// letters) go straight to its record sender: the stream thread's record collector, or the
// test driver.
//
// Lifecycle: constructed (stores opened) -> restoring (the changelog_reader feeds changelog
// records) -> running (start(): nodes initialized, records processed) -> closed (clean:
// stores committed by the thread's last commit; dirty: pending writes dropped).
#pragma once

#include <algorithm>
#include <atomic>
#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kafka/types.hpp"
#include "runtime/partition_group.hpp"
#include "runtime/record_collector.hpp"
#include "runtime/record_size.hpp"
#include "runtime/state_manager.hpp"
#include "runtime/task_id.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/node.hpp"
#include "sluice/metrics.hpp"
#include "sluice/state/kv_store.hpp"
#include "sluice/state/rocksdb_store.hpp"
#include "sluice/state/task_directory.hpp"
#include "sluice/topology.hpp"

namespace sluice::runtime {

/// Why a record was skipped or dead-lettered: its error handler's kind. The `reason` label
/// of sluice_records_skipped_total and sluice_records_dead_lettered_total (a bounded set).
enum class failure_reason { deserialization, processing };
inline constexpr std::size_t failure_reason_count = 2;
constexpr std::string_view to_string(failure_reason r) noexcept {
  return r == failure_reason::deserialization ? "deserialization" : "processing";
}

/// What every task of an app shares: read-only settings and process-wide resources.
/// read_task_settings fills the fields that come from the configuration (application id,
/// guarantee, error handlers, dead-letter topic, idling, changelog buffer, read cache); the
/// caller sets the rest (topology, state directory and RocksDB environment, metrics, global views,
/// clock, memory-only stores, partition counts, record limits).
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
  std::function<std::int64_t()> wall_clock_ms;                         ///< real clock, or the test driver's
  bool memory_stores_only = false;                                     ///< the test driver's default
  std::map<int, std::int32_t> subtopology_partitions;                  ///< sub-topology id -> partition count
  std::map<std::string, std::int32_t, std::less<>> output_partitions;  ///< sink topic -> partition count
  /// The largest record each written topic takes: checked before every send, so an oversized
  /// record is a processing error of its input, and a dead letter is cut to fit.
  record_size_limits record_limits;
  /// max.task.idle.ms: how long a task reading several partitions waits for an empty one
  /// that is caught up before it processes the others' records anyway; -1 never waits.
  std::int64_t max_task_idle_ms = 0;
  /// statestore.changelog.buffer.bytes: bytes of changelog writes a task's stores buffer
  /// between commits before sending early (key-value stores: the last write per key; other
  /// kinds under at-least-once: every write); 0 sends every write at once.
  std::int64_t changelog_buffer_bytes = 0;
  /// statestore.read.cache.bytes: per RocksDB key-value store, the entries already written
  /// that it keeps in memory for reads (state::store_options::read_cache_bytes).
  std::int64_t read_cache_bytes = std::int64_t{1} << 20;
};

/// Sets the task settings read from the configuration (application id, guarantee, error
/// handlers, dead-letter topic, idling, changelog buffer, read cache), as sluice::app and the
/// TopologyTestDriver both take them; the other fields (topology, clock, stores, limits) are
/// the caller's and left as they are.
void read_task_settings(const config& cfg, task_services& s);

class stream_task final : public detail::task_context {
 public:
  /// Opens the task directory (when it has persistent stores) and its stores.
  stream_task(runtime::task_id id, const task_services& services, record_sender& sender, std::string thread_label);
  /// Builds its stores over `storage`, opened ahead (open_task_storage(id, services)); throws
  /// what opening it failed with, as the constructor above would.
  stream_task(runtime::task_id id, const task_services& services, record_sender& sender, std::string thread_label,
              task_storage storage);
  ~stream_task() override;

  runtime::task_id id() const noexcept { return id_; }
  /// "<subtopology>_<partition>", for logs.
  const std::string& name() const noexcept { return name_; }
  /// The task's stores: commit, abort, checkpoint go through here.
  state_manager& stores() noexcept { return stores_; }
  const state_manager& stores() const noexcept { return stores_; }
  /// The source topic-partitions this task reads (resolved names).
  const std::vector<kafka::topic_partition>& inputs() const noexcept { return inputs_; }

  /// Initializes the nodes; call once restoration is done.
  void start();
  bool running() const noexcept { return started_; }

  /// Processes one record of one of inputs(). Per-record failures go to the handlers;
  /// throws sluice::error only to stop the job (a `fail` policy or a Kafka error).
  void process(const kafka::message& m);
  /// Records of inputs() waiting for this task, one queue per input (same order).
  partition_group& queued() noexcept { return queued_; }
  /// Processes queued records, lowest timestamp first, until none is left, a processor
  /// pauses the input at `now_ms`, or the task idles (partition_group::ready(): an empty
  /// input may still bring an older record; `lags` tells what the consumer knows of them).
  void process_queued(std::int64_t now_ms, const lag_source& lags);
  /// Processes the next queued record if the task may (as process_queued()); false if not.
  bool process_next_queued(std::int64_t now_ms, const lag_source& lags);
  /// Runs wall-clock punctuators that are due.
  void punctuate_wall_clock(std::int64_t now_ms);

  /// Offsets to commit: next offset per input partition processed since the last call
  /// to mark_committed(); with `every_known`, also those of partitions with nothing new
  /// (the last processed one's, or the start offset learned by learn_start_offsets()).
  std::vector<kafka::topic_partition_offset> offsets_to_commit(bool every_known = false) const;
  /// Input partitions the task knows no offset of (nothing processed, no start offset
  /// learned), until learn_start_offsets() was called once: then none, so the group's
  /// committed offsets are asked for once per task even when it has committed nothing.
  std::vector<kafka::topic_partition> inputs_without_offset() const;
  /// Takes the group's committed offsets as the offsets of inputs the task has not processed
  /// yet (a record processed later replaces them); negative ones (nothing committed) are ignored.
  void learn_start_offsets(const std::vector<kafka::topic_partition_offset>& committed);
  void mark_committed();
  /// The start of a commit: runs the processors' before_commit callbacks (a running task's),
  /// then hands the stores' buffered changelog writes to the sender.
  void prepare_commit();
  bool commit_requested() const noexcept { return commit_requested_; }
  /// Closes nodes and stores; dirty drops pending writes.
  void close(close_mode mode);
  std::uint64_t processed() const noexcept { return processed_total_; }
  /// True while a processor's pause_input_until() holds back this task's input at `now`.
  bool input_paused(std::int64_t now_ms) const noexcept { return input_paused_until_ > now_ms; }
  std::int64_t input_paused_until() const noexcept { return input_paused_until_; }

  // task_context
  const record_metadata& metadata() const override { return metadata_; }
  std::int64_t stream_time() const override { return stream_time_; }
  std::int64_t wall_clock_ms() const override { return services_.wall_clock_ms(); }
  std::string_view task_id() const override { return name_; }
  std::int32_t partition() const override { return id_.partition; }
  std::string_view application_id() const override { return services_.application_id; }
  bool exactly_once() const override { return services_.guarantee == processing_guarantee::exactly_once; }
  std::int32_t partition_count() const override;
  std::int32_t output_partitions(std::string_view topic) const override;
  void pause_input_until(std::int64_t wall_clock_ms) override {
    input_paused_until_ = std::max(input_paused_until_, wall_clock_ms);
  }
  detail::store_binding store(std::string_view name) override;
  cancellable schedule(std::chrono::milliseconds interval, punctuation_type type,
                       std::function<void(std::int64_t)> callback) override;
  void request_commit() override { commit_requested_ = true; }
  void before_commit(std::function<void()> callback) override { commit_hooks_.push_back(std::move(callback)); }
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
  void run_punctuators(punctuation_type type, std::int64_t now);
  /// The time queued record `m` of input `input` is ordered by: its extracted timestamp
  /// (decoded for it), or its own when it does not decode. Set on the partition group only
  /// when the task has several inputs and a source with a timestamp extractor.
  std::int64_t order_time(std::size_t input, const kafka::message& m);
  static detail::raw_record raw_of(const kafka::message& m);
  /// Decodes record `m` of `input` with its source node (decode_raw: the timestamp to order or
  /// process it by), unless the node still holds that very record from order_time. `hold`:
  /// the decoded record stays for a later call (order_time); else it is about to be
  /// forwarded, which consumes it.
  std::int64_t decode(std::size_t input, const kafka::message& m, bool hold);
  /// A processing failure of record `m`: rethrown when it is not the record's fault
  /// (classify_failure), else to the processing handler. Call inside a catch block.
  void throw_or_handle_processing(const kafka::message& m, const std::exception& e);
  void handle_failure(const kafka::message& m, error_policy policy, failure_reason reason, const std::string& what);
  /// dead_letter's part of handle_failure: the record whole when it fits the dead-letter
  /// topic, else a truncated copy that says so, else skipped and logged. False when not even
  /// the error headers fit.
  bool send_dead_letter(const kafka::message& m, failure_reason reason, const std::string& what);
  /// Index in inputs_ of `topic`, or inputs_.size() when the task does not read it.
  std::size_t input_index(std::string_view topic);

  runtime::task_id id_;
  std::string name_;  // id_.to_string()
  const task_services& services_;
  record_sender& sender_;
  /// stream_time_ for the stores' TTL clock, which RocksDB's compaction threads also read
  /// (task_storage::stream_clock, which the stores were opened with).
  std::shared_ptr<std::atomic<std::int64_t>> stream_clock_;
  state_manager stores_;
  std::vector<std::unique_ptr<detail::node>> nodes_;
  std::vector<std::function<void()>> commit_hooks_;  // processor_context::before_commit
  // Per input (parallel vectors): the topic-partition, its source node and the next offset
  // to commit (-1 until a record of it was processed). A task has a handful of inputs, so a
  // scan by topic beats a map and builds no key per record.
  std::vector<kafka::topic_partition> inputs_;
  std::vector<detail::node*> sources_;
  std::vector<std::int64_t> next_offsets_;
  /// Per input: the record its source node decoded last (a node may read several inputs,
  /// so the slot is shared by the inputs of one node: first_input_of_node_), so that a head
  /// record decoded to order it is not decoded again to process it.
  struct decoded_record {
    std::size_t input = 0;
    std::int64_t offset = -1;  ///< -1: none held
    std::int64_t timestamp = 0;
  };
  std::vector<decoded_record> decoded_;
  std::vector<std::size_t> first_input_of_node_;
  bool start_offsets_learned_ = false;  ///< learn_start_offsets() was called
  std::size_t last_input_ = 0;          // index the previous record came from: usually the next one's
  partition_group queued_;
  std::vector<punctuator> punctuators_;
  record_metadata metadata_;
  std::int64_t stream_time_ = -1;
  bool started_ = false;
  bool closed_ = false;
  bool commit_requested_ = false;
  bool dirty_offsets_ = false;
  std::int64_t input_paused_until_ = 0;  ///< wall clock ms; see pause_input_until()
  std::uint64_t processed_total_ = 0;
  std::string label_;  ///< thread="N",task="S_P": every metric of the task carries it
  counter& processed_;
  /// Indexed by failure_reason: the `reason` label of the skip and dead-letter counters.
  std::array<counter*, failure_reason_count> skipped_;
  std::array<counter*, failure_reason_count> dead_lettered_;
  counter& dead_lettered_truncated_;  ///< shown (at 0) from the start, like the others
  histogram& e2e_latency_;
  counter& enforced_processing_;  ///< records processed although an input was idle (ready() == enforced)
};

}  // namespace sluice::runtime
