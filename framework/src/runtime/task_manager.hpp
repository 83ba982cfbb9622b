// task_manager: the tasks of one stream thread and the index from an assigned source
// partition to the task it feeds. On an assignment it creates the tasks of the new
// partitions and hands their stores to the changelog_reader; a task with something to
// restore has its input partitions paused in the consumer until restore() reports its
// stores current, then it is checkpointed, started and its input resumed. On a revocation
// (or a transaction failure) it closes every task. Kafka Streams' TaskManager; standby
// tasks will be created and promoted here.
//
// It reports, it does not decide: the stream thread commits the tasks, sets its own state
// from restoring(), and owns the consumer's poll.
//
// Lifecycle: constructed when its thread starts -> assign() on each assignment ->
// restore() while restoring() -> close_all() on revocation, failure or shutdown.
//
// Threading: used by its stream thread only (the rebalance callbacks run on that thread,
// inside its poll). assign() opens the new tasks' stores on short-lived threads of its own
// (open_task_storage, which runs no store or processor factory) and joins them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kafka/consumer.hpp"
#include "runtime/changelog_reader.hpp"
#include "runtime/record_collector.hpp"
#include "runtime/stream_task.hpp"

namespace sluice::runtime {

/// Orders (topic, partition) keys and finds them by a partition_ref, so the per-record
/// lookups build no string.
struct partition_less {
  using is_transparent = void;
  template <class A, class B>
  bool operator()(const A& a, const B& b) const noexcept {
    const std::string_view at = a.first, bt = b.first;
    return at < bt || (at == bt && a.second < b.second);
  }
};
using partition_ref = std::pair<std::string_view, std::int32_t>;

/// An assigned source partition: the task it feeds and its index among the task's
/// inputs (and partition_group queues).
struct partition_input {
  stream_task* task = nullptr;
  std::size_t index = 0;
};

class task_manager {
 public:
  using task_map = std::map<task_id, std::unique_ptr<stream_task>>;
  using partition_map = std::map<std::pair<std::string, std::int32_t>, partition_input, partition_less>;

  /// `topic_to_subtopology`: resolved source topic -> sub-topology. Tasks send through
  /// `collector`; their stores restore through `reader`; `consumer` is the thread's main
  /// consumer, whose partitions are paused while their task restores.
  task_manager(const task_services& services, const std::map<std::string, int>& topic_to_subtopology,
               record_collector& collector, changelog_reader& reader, kafka::consumer& consumer,
               std::string thread_label);
  ~task_manager();

  /// Creates the tasks of `parts` this thread does not own yet and indexes every partition.
  /// A task with stores to restore has its partitions queued for pause_restoring_inputs().
  /// The new tasks' stores open at once, on a few threads of their own (joined before it
  /// returns); a failure throws as if the tasks had opened their stores one after another.
  void assign(const std::vector<kafka::topic_partition>& parts);
  /// Pauses, in the consumer, the partitions of tasks that began restoring since the last
  /// call. assign() runs in the rebalance callback, before librdkafka takes the assignment,
  /// which is too early to pause; the stream thread calls this after each poll (and at once
  /// when it re-creates tasks outside a rebalance). Records delivered before the pause are
  /// held for the task, and librdkafka resumes after the last one delivered.
  void pause_restoring_inputs();
  /// One restore step; tasks whose stores became current are checkpointed (a crash soon
  /// after must not replay the restored tail again), started and their input resumed. The
  /// checkpoint of a restored task runs in the background while other tasks restore (a store
  /// restored from empty sorts and ingests its last chunk): the task starts at the first step
  /// that finds it complete, or, once nothing else restores, all of them are waited for
  /// together.
  void restore();
  /// True while a task's stores are behind their changelogs or their checkpoint after the
  /// restore is under way.
  bool restoring() const noexcept { return reader_.restoring() || !checkpointing_.empty(); }
  /// Closes every task (clean: stores checkpointed first) and forgets the partitions;
  /// resumes the partitions paused for restoration. Queued records are not dropped here:
  /// the caller does that first, resuming what pacing paused.
  void close_all(close_mode mode);

  task_map& tasks() noexcept { return tasks_; }
  partition_map& partitions() noexcept { return by_partition_; }
  /// The input of an assigned partition, or nullptr.
  partition_input* find(const partition_ref& tp) {
    auto it = by_partition_.find(tp);
    return it == by_partition_.end() ? nullptr : &it->second;
  }

 private:
  /// Opens the storage of the tasks `ids` (open_task_storage), on several threads when there
  /// are several.
  std::map<task_id, task_storage> open_storage(const std::vector<task_id>& ids) const;
  /// The assigned partitions `task` reads.
  std::vector<kafka::topic_partition> inputs_of(const stream_task& task) const;

  const task_services& services_;
  const std::map<std::string, int>& topic_to_subtopology_;
  record_collector& collector_;
  changelog_reader& reader_;
  kafka::consumer& consumer_;
  std::string label_;
  task_map tasks_;
  partition_map by_partition_;
  std::vector<stream_task*> to_pause_;       ///< began restoring; input not paused yet
  std::vector<stream_task*> paused_;         ///< input paused until restored
  std::vector<stream_task*> restored_;       ///< reused by restore()
  std::vector<stream_task*> checkpointing_;  ///< restored; their checkpoint under way, not started yet
};

}  // namespace sluice::runtime
