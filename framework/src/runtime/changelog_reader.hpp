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
#include <vector>

#include "kafka/consumer.hpp"
#include "sluice/metrics.hpp"

namespace sluice::runtime {

class stream_task;
struct task_store;

/// Where the restoration of a thread's stores stands, summed over its store partitions.
struct restore_progress {
  std::int64_t done = 0;   ///< changelog records (offsets) applied since each began
  std::int64_t total = 0;  ///< offsets between where each began and its end
  double records_per_second = 0;
  double eta_seconds = 0;  ///< 0 when nothing is left or no rate is known yet
  /// Store partitions read to their last stable offset whose end lies past a transaction
  /// still open there: they wait for its commit or abort.
  int waiting_for_transactions = 0;
};

class changelog_reader {
 public:
  /// `restore_consumer`: read_committed, enable.partition.eof=true, no group.
  /// `open_transaction_wait`: how long a store partition waits for a transaction open in its
  /// changelog (see restore()) before it gives up and ends at the last stable offset, with a
  /// warning: a transaction the broker never ends (a "hanging" one) would otherwise keep the
  /// task restoring for good, while a live producer's is ended by its transaction timeout.
  changelog_reader(const kafka::config_map& restore_consumer, std::chrono::milliseconds log_interval,
                   counter& restored_records, gauge& remaining_records,
                   std::chrono::milliseconds open_transaction_wait = std::chrono::minutes(5));

  /// Registers `task`'s logged stores that are behind their changelog's end and starts
  /// reading them. Returns false when every store is current (the task can start now).
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

  std::unique_ptr<kafka::consumer> consumer_;
  /// The same client settings read_uncommitted, only for end offsets: a read_committed client
  /// reports the last stable offset as the end, which stops short of a transaction open in
  /// the changelog (see restore()).
  std::unique_ptr<kafka::consumer> end_offsets_;
  std::chrono::milliseconds log_interval_;
  std::chrono::milliseconds open_transaction_wait_;
  std::vector<entry> entries_;
  std::vector<kafka::message> batch_;
  std::chrono::steady_clock::time_point started_, last_log_;
  counter& restored_records_;
  gauge& remaining_records_;
};

}  // namespace sluice::runtime
