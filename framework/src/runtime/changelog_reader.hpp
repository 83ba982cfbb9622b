// changelog_reader: brings the stores of a thread's new tasks up to their changelogs' ends
// before the tasks process anything. One restore consumer, assigned the changelog
// partitions still behind; each poll applies contiguous runs of one partition as one write
// batch; progress (records done / total, rate, ETA) is logged and exported. Kafka Streams'
// StoreChangelogReader; standby tasks will keep their stores current here too.
//
// It only reports: add() says whether a task has anything to restore, restore() hands back
// the tasks whose stores are all current. Starting them, pausing and resuming their input
// and the thread's state belong to the task_manager and the stream thread.
//
// Lifecycle: constructed when its stream thread starts -> add() per new task -> restore()
// on every loop iteration while restoring() -> remove()/clear() when tasks close.
//
// Threading: used by its stream thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "kafka/consumer.hpp"
#include "sluice/metrics.hpp"
#include "sluice/state/state_store.hpp"

namespace sluice::runtime {

class stream_task;
struct task_store;

/// Where the current restore of a thread's stores stands, summed over its store partitions.
/// A restore begins when a store partition is added while none is restoring and ends when
/// the last one is current; its figures stay until the next restore begins.
struct restore_progress {
  std::int64_t done = 0;          ///< changelog offsets applied since each partition began
  std::int64_t total = 0;         ///< offsets between where each partition began and its end
  double records_per_second = 0;  ///< over the current restore; 0 when none is in progress
  double eta_seconds = 0;         ///< 0 when nothing is left or no rate is known yet
  /// Store partitions read to their last stable offset whose end lies past a transaction
  /// still open there: they wait for its commit or abort.
  int waiting_for_transactions = 0;
};

/// The gauges and counter a changelog_reader exports (its thread's labels); owned by the
/// metrics registry.
struct restore_metrics {
  counter* restored_records;  ///< sluice_restored_records_total: every record applied, ever
  gauge* remaining;           ///< sluice_restore_remaining_records
  gauge* done;                ///< sluice_restore_done_records: the current (or last) restore
  gauge* total;               ///< sluice_restore_total_records: the current (or last) restore
  gauge* rate;                ///< sluice_restore_rate_records_per_second: 0 between restores
};

class changelog_reader {
 public:
  /// `restore_consumer`: read_committed, enable.partition.eof=true, no group.
  /// `open_transaction_wait`: how long a store partition waits for a transaction open in its
  /// changelog (see restore()) before it gives up and ends at the last stable offset, with a
  /// warning: a transaction the broker never ends (a "hanging" one) would otherwise keep the
  /// task restoring for good, while a live producer's is ended by its transaction timeout.
  changelog_reader(const kafka::config_map& restore_consumer, std::chrono::milliseconds log_interval,
                   restore_metrics metrics, std::chrono::milliseconds open_transaction_wait = std::chrono::minutes(5));

  /// Registers the logged stores of `tasks` that are behind their changelog's end and starts
  /// reading them. Returns, for each task in order, whether it has any (false: every store
  /// is current, the task can start now). The end offsets of all their changelog partitions
  /// are asked at once (two requests to each leader).
  std::vector<bool> add(const std::vector<stream_task*>& tasks);
  /// add() for one task.
  bool add(stream_task& task);
  /// Polls the restore consumer once (briefly) and applies what came. Appends to
  /// `restored` the tasks whose stores are now all current; they leave the reader, with
  /// their stores committed to the changelog end but not yet checkpointed.
  void restore(std::vector<stream_task*>& restored);
  /// Forgets `task` (closing while restoring).
  void remove(const stream_task& task);
  /// Forgets every task and unassigns the restore consumer.
  void clear();
  /// True while a task's stores are behind.
  bool restoring() const noexcept { return !entries_.empty(); }
  /// How many times the restore consumer woke a stalled fetcher (kafka::consumer::fetch_wakes).
  std::uint64_t fetch_wakes() const noexcept { return consumer_->fetch_wakes(); }
  /// The current restore, or the last one when none is in progress.
  restore_progress progress() const;

 private:
  /// One store partition being restored.
  struct entry {
    stream_task* task;
    task_store* store;
    std::string topic;
    std::int32_t partition;
    std::int64_t next;
    std::int64_t end;
    std::int64_t start;
    std::uint64_t restored = 0;
    std::int64_t eof = -1;  ///< end of partition reported by the consumer, applied after the batch
    bool done = false;
    bool waiting = false;  ///< read to the last stable offset, a transaction open past it
    std::chrono::steady_clock::time_point waiting_since{};
  };

  void log_progress();
  /// Starts a restore's figures when the first store partition is added.
  void begin_restore_if_idle();
  /// Moves `e`'s figures out of the live entries before it is erased: a finished one
  /// counts whole, one removed unfinished leaves the total.
  void retire_entry(const entry& e);
  /// Ends the restore once no entry is left (the rate drops to 0).
  void end_restore_if_empty();
  void publish();
  /// The first and end (high watermark) offsets of each changelog partition, in order.
  std::vector<std::pair<std::int64_t, std::int64_t>> end_offsets(const std::vector<kafka::topic_partition>& parts);
  /// Registers one store partition when it is behind [low, high); true when it is.
  bool add_store(stream_task& task, task_store& store, std::int64_t low, std::int64_t high);
  /// Reads the tasks' registered store partitions: one assignment of the restore consumer
  /// and one leaders lookup for all of them. Nothing when `tasks` is empty.
  void start_reading(const std::vector<stream_task*>& tasks);

  std::unique_ptr<kafka::consumer> consumer_;
  /// Changelog topics whose leaders consumer_ has asked for (kafka::consumer::learn_leaders).
  std::unordered_set<std::string> topics_led_;
  /// The same client settings read_uncommitted, only for end offsets: a read_committed client
  /// reports the last stable offset as the end, which stops short of a transaction open in
  /// the changelog (see restore()).
  std::unique_ptr<kafka::consumer> end_offsets_;
  kafka::config_map end_offsets_config_;
  std::chrono::milliseconds log_interval_;
  std::chrono::milliseconds open_transaction_wait_;
  std::vector<entry> entries_;
  std::vector<state::restore_record> run_;  ///< the restore batch of one run, viewing librdkafka's buffers
  /// A timestamped store's values of one run with their timestamps in front (run_ views them).
  std::vector<std::string> timestamped_;
  std::chrono::steady_clock::time_point started_, last_log_;
  restore_metrics metrics_;
  bool in_restore_ = false;
  std::int64_t restore_total_ = 0;     ///< offsets of every partition added to this restore
  std::int64_t retired_done_ = 0;      ///< offsets done of the entries already erased
  std::uint64_t restore_records_ = 0;  ///< records applied in this restore (the rate's)
};

}  // namespace sluice::runtime
