// stream_thread: one consumer, one producer (record collector), and the loop that feeds
// the thread's tasks: poll, restore, process, punctuate, commit. Its task_manager owns
// the tasks, its changelog_reader restores their stores; both report back, and only the
// thread sets its state. Under exactly-once it owns one transaction at a time. A failure
// that reaches the loop is classified once (error_classification.hpp): a retriable one
// closes the tasks dirty, aborts, recreates the producer (and, when the group fenced the
// consumer, the consumer and task manager) and resumes from the last committed offsets,
// retried for up to task.timeout.ms while the thread reports degraded() (until the commit
// it makes right after a successful recovery); a fatal one stops the thread.
//
// Lifecycle: created -> start() (starting) -> rebalancing -> restoring / running, back to
// rebalancing on every assignment -> request_stop() -> pending_shutdown -> dead; failed
// when an error stops it (failure() says why).
//
// Threading: everything here runs on the thread's own std::thread except request_stop(),
// state(), degraded() and degraded_reason(), which are safe from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "kafka/consumer.hpp"
#include "runtime/changelog_reader.hpp"
#include "runtime/running_total.hpp"
#include "runtime/client_statistics.hpp"
#include "runtime/error_classification.hpp"
#include "runtime/query_inbox.hpp"
#include "runtime/record_collector.hpp"
#include "runtime/stream_task.hpp"
#include "runtime/task_manager.hpp"

namespace sluice::runtime {

enum class thread_state { created, starting, rebalancing, restoring, running, pending_shutdown, dead, failed };

struct thread_settings {
  int index = 0;
  kafka::config_map consumer;
  kafka::config_map restore_consumer;
  kafka::config_map producer;
  std::string transactional_id;
  /// The producer's transaction.timeout.ms (app.cpp puts it into `producer` under
  /// exactly-once; librdkafka's default otherwise): bounds the producer-twin window.
  std::chrono::milliseconds transaction_timeout{60000};
  error_policy on_production_error = error_policy::fail;
  std::chrono::milliseconds commit_interval{30000};
  std::chrono::milliseconds poll_timeout{100};
  std::chrono::milliseconds checkpoint_interval{5000};
  /// A task's stores are also checkpointed at a commit once a store's unflushed changelog
  /// tail and its unflushed entries both exceed this share of its changelog position (at
  /// least checkpoint_min_records), and under exactly-once a commit comes early once a
  /// store's uncommitted writes exceed the same share (at least early_commit_min_records):
  /// a crash then replays about twice this share of the changelog whatever the record rate,
  /// and at most the two floors' worth of records (milliseconds of restore) while the
  /// changelog is young; except for a store rewriting fewer keys than the bound in place,
  /// whose tail is bounded by checkpoint_interval.
  double checkpoint_tail_fraction = 0.04;
  std::int64_t checkpoint_min_records = 1000;
  /// Higher than checkpoint_min_records: an early commit costs a transaction (a producer
  /// flush, the offsets and an EndTxn round trip, markers on every partition written). At
  /// 1,000 a young store's commits came every 20-30 ms instead of every commit.interval.ms
  /// (about 145 commits instead of 40 for bench/run's count), which took a third of
  /// exactly-once throughput (bench/README, "Early commits"). A 100 ms transaction of one
  /// task on the 2-core bench machine holds fewer than 5,000 records, so the floor leaves
  /// ordinary transactions alone and still bounds a backlog's; 5,000 records restore in
  /// about 4 ms.
  std::int64_t early_commit_min_records = 5000;
  std::chrono::milliseconds restore_log_interval{5000};
  std::size_t max_poll_records = 1000;
  /// How long the thread keeps retrying after a retriable failure (broker outage, leader
  /// move, fenced producer) without a successful commit before it stops (task.timeout.ms).
  std::chrono::milliseconds task_timeout{300000};
  /// The pause between two recovery attempts that failed (the cluster is still away).
  std::chrono::milliseconds recovery_backoff{1000};
  std::vector<std::string> source_topics;           ///< resolved names, all sub-topologies
  std::map<std::string, int> topic_to_subtopology;  ///< resolved source topic -> sub-topology
};

class stream_thread final : kafka::rebalance_listener {
 public:
  stream_thread(thread_settings settings, const task_services& services,
                std::function<void(thread_state)> on_state_change);
  ~stream_thread() override;

  void start();
  /// Asks the loop to finish the records in hand, commit, close. Returns at once.
  void request_stop() noexcept { stop_.store(true); }
  void join();
  /// Joins if the thread finishes by `deadline`; returns false (not joined) otherwise.
  bool join_until(std::chrono::steady_clock::time_point deadline);
  thread_state state() const noexcept { return state_.load(); }
  /// True from a retriable failure until the next successful commit (the thread is
  /// recovering or retrying, and its tasks may be closed), and while its consumer reports
  /// every broker down until one answers (watch_brokers()). Safe from any thread.
  bool degraded() const noexcept { return degraded_.load(); }
  /// While degraded(): what the thread rides out ("no broker at bootstrap.servers answers",
  /// or the last retriable failure); empty otherwise. Safe from any thread.
  std::string degraded_reason() const;
  const std::string& failure() const noexcept { return failure_; }
  /// Where HTTP handlers queue store queries for this thread's tasks; safe from any thread.
  query_inbox& queries() noexcept { return queries_; }

 private:
  void run();
  void loop_once();
  void set_state(thread_state s);
  void on_assigned(const std::vector<kafka::topic_partition>& parts) override;
  void on_revoked(const std::vector<kafka::topic_partition>& parts) override;
  void on_lost(const std::vector<kafka::topic_partition>& parts) override;

  /// Re-creates the tasks of `parts` outside a rebalance (recovery from a failure):
  /// their restoring inputs are paused at once, before any seek.
  void create_tasks(const std::vector<kafka::topic_partition>& parts);
  /// The thread's state once tasks exist: restoring while a store is behind.
  void set_state_from_tasks();
  /// rebalancing from a revocation (or loss) until the next assignment, unless stopping.
  void enter_rebalance();
  void commit_all();
  /// Drops held records (never processed: the next owner or the rewind reads them again)
  /// and closes every task.
  void close_tasks(close_mode mode);
  enum class producer_after_abort { keep, recreate };
  /// Drops everything not committed (a failed commit, a revocation whose commit failed, lost
  /// partitions): aborts the open transaction (counted under exactly-once), closes the tasks
  /// dirty (their stores drop pending writes); with `recreate`, a producer whose transaction
  /// was aborted under exactly-once is replaced.
  void drop_uncommitted(producer_after_abort after);
  /// Every running task's offsets to commit (with `every_known`, also those of partitions
  /// with nothing new since the last commit; see stream_task::offsets_to_commit).
  std::vector<kafka::topic_partition_offset> running_offsets(bool every_known);
  /// Counts a retriable failure and marks the thread degraded; throws the message the thread
  /// stops with once failures have lasted task.timeout.ms without a commit.
  void note_failure(const std::exception& e);
  enum class recovery_attempt { now, next_loop };
  /// A failure `e` that reached the loop, classified in error_classification.hpp: fatal ones
  /// are rethrown (call it inside a catch), retriable ones noted, then, when `attempt` is
  /// now, the tasks are closed dirty and recovery is tried at once; a fenced consumer is
  /// recreated each time and is fatal when fencing_record takes its fencings for a twin's.
  void on_failure(const std::exception& e, recovery_attempt attempt);
  /// Whether `e` fenced the producer soon after its start, again: producer_fencings_ takes
  /// such fencings for a twin's with the same transactional.id.
  bool twin_fenced_producer(const std::exception& e);
  /// recover_from_failure(); a retriable failure of it is noted and left for the next loop.
  void try_recovery();
  /// Aborts the transaction, closes the tasks dirty, recreates the producer, recreates the
  /// tasks of the assignment and rewinds to the committed offsets; after a fenced consumer,
  /// recreates the consumer and the task manager instead and rejoins the group. A retriable
  /// failure on the way leaves recovery_pending_ set for the next loop to try again.
  void recover_from_failure();
  void rewind_to_committed();
  /// The group's committed offsets of `parts`, waited for up to 30 s in slices: a stop
  /// request cuts the wait short (its last error is thrown).
  std::vector<kafka::topic_partition_offset> committed_offsets(const std::vector<kafka::topic_partition>& parts);
  /// The end of a failure: a commit went through, or the first commit after a recovery found
  /// nothing to commit. Clears failing_ and the task.timeout.ms count.
  void note_progress();
  /// Sets one of the two causes of degraded() and publishes their sum and its reason.
  void set_failing(bool failing);
  void set_brokers_down(bool down);
  void publish_degraded();
  /// An idle at-least-once thread has nothing to commit during an outage, so no failure
  /// shows it: the consumer's report that every broker is down marks the thread degraded,
  /// and a metadata request once a second (up to 200 ms) clears it when a broker answers.
  void watch_brokers();
  /// Feeds queued records to their tasks (lowest timestamp first, until a processor pauses
  /// the input or the task idles for an empty input: max.task.idle.ms); pauses/resumes
  /// partitions in the consumer to bound what is queued.
  void release_held_records();
  /// Applies and forgets fetch_changes_.
  void apply_fetch_changes();
  /// Forgets queued records and resumes every partition paused for them (tasks closing, rewind).
  void drop_held_records() noexcept;
  /// `cap`, shortened so that the poll returns when the next held record is due (a
  /// processor's pause or a task's idling ends) or a partition paused in the consumer may be
  /// resumed.
  std::chrono::milliseconds until_next_release(std::int64_t now_ms, std::chrono::milliseconds cap) const;

  thread_settings settings_;
  const task_services& services_;
  std::function<void(thread_state)> on_state_change_;
  std::string label_;
  client_statistics consumer_statistics_;  ///< of every consumer_ it makes; outlives them
  // Declared in dependency order: the task manager goes first, its tasks send through the
  // collector and restore through the reader.
  std::unique_ptr<record_collector> collector_;
  std::unique_ptr<kafka::consumer> consumer_;
  std::unique_ptr<changelog_reader> reader_;
  std::unique_ptr<task_manager> tasks_;
  std::vector<kafka::topic_partition> assignment_;
  std::vector<kafka::message> batch_;
  fetch_changes fetch_changes_;  // reused: filled by the tasks' partition groups
  std::chrono::steady_clock::time_point last_commit_, last_checkpoint_;
  std::chrono::steady_clock::time_point partition_gauges_set_;  ///< last update_partition_gauges()
  query_inbox queries_;
  std::atomic<bool> stop_{false};
  /// Asked by the waits that may last long on the coordinator (the producer's init, the
  /// rewind's committed offsets), so that a stop cuts them short.
  const std::function<bool()> stop_requested_ = [this] { return stop_.load(); };
  std::atomic<thread_state> state_{thread_state::created};
  std::atomic<bool> degraded_{false};  ///< failing_ || brokers_down_
  bool failing_ = false;
  bool brokers_down_ = false;
  mutable std::mutex degraded_reason_mutex_;
  std::string degraded_reason_;  ///< guarded by degraded_reason_mutex_
  /// Set by a recovery: the next loop commits at once, not a commit interval later, and that
  /// commit ends the failure also when it has nothing to commit (the recovery heard the
  /// cluster: the committed offsets of the rewind, the new producer's init under exactly-once).
  bool commit_after_recovery_ = false;
  std::chrono::steady_clock::time_point brokers_checked_;  ///< last probe of watch_brokers()
  /// Since when failures have kept the thread from committing (task.timeout.ms counts from it).
  std::optional<std::chrono::steady_clock::time_point> failing_since_;
  std::string last_failure_;
  bool recovery_pending_ = false;
  bool consumer_fenced_ = false;            ///< recovery recreates the consumer too
  std::uint64_t consumer_incarnation_ = 0;  ///< numbers the consumers made, for fencings_
  fencing_record fencings_;
  /// Exactly-once: the fencings of producers that came within producer_twin_window_ of
  /// their start, numbered by record_collector::producer_incarnation.
  fencing_record producer_fencings_;
  std::chrono::milliseconds producer_twin_window_{};
  std::string failure_;
  std::thread thread_;
  std::mutex finished_mutex_;
  std::condition_variable finished_changed_;
  bool finished_ = false;  // run() returned
  /// Offsets for a transaction that has none of its own, so the broker checks the group
  /// generation (fences a zombie): every running task's known offsets.
  std::vector<kafka::topic_partition_offset> fencing_offsets();
  /// Sets the lag gauge of each assigned partition and the size gauges of each running
  /// task's stores (every partition_gauges_interval).
  void update_partition_gauges();
  /// Hides the lag gauges of assignment_ and the size gauges of the tasks' stores (revoked,
  /// or the thread ends).
  void retire_partition_gauges();
  std::unique_ptr<kafka::consumer> make_consumer();

  restore_metrics restore_metrics_;
  std::set<std::string> store_size_labels_;  ///< labels of the store size gauges set (update_partition_gauges)
  histogram& commit_latency_;
  counter& retries_;
  counter& recoveries_;
  /// sluice_transaction_aborts_total, shown (at 0) from the start so that a rate works.
  counter& aborts_;
  /// sluice_redelivered_records_skipped_total: records the consumer delivered again (below
  /// the offset after the last one a task received), not processed twice.
  counter& redelivered_;
  /// sluice_fetch_wakes_total of the group consumer (consumer="group", after each poll) and
  /// of the restore consumer (consumer="restore", after each restore step).
  running_total_feed group_fetch_wakes_;
  running_total_feed restore_fetch_wakes_;
};

}  // namespace sluice::runtime
