// stream_thread: one consumer, one producer (record collector), the tasks of the
// partitions assigned to it, and the loop that feeds them: poll, restore, process,
// punctuate, commit. Under exactly-once it owns one transaction at a time and, when the
// outcome of one is unknown, aborts, recreates its producer and resumes from the last
// committed offsets.
//
// Threading: everything here runs on the thread's own std::thread except request_stop()
// and state(), which are safe from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "kafka/consumer.hpp"
#include "runtime/record_collector.hpp"
#include "runtime/stream_task.hpp"

namespace sluice::runtime {

enum class thread_state { created, starting, rebalancing, restoring, running, pending_shutdown, dead, failed };

struct thread_settings {
  int index = 0;
  kafka::config_map consumer;
  kafka::config_map restore_consumer;
  kafka::config_map producer;
  std::string transactional_id;
  error_policy on_production_error = error_policy::fail;
  std::chrono::milliseconds commit_interval{30000};
  std::chrono::milliseconds poll_timeout{100};
  std::chrono::milliseconds checkpoint_interval{5000};
  /// A task's stores are also checkpointed at a commit once a store's unflushed changelog
  /// tail exceeds this share of its changelog position (at least checkpoint_min_records),
  /// and under exactly-once a commit comes early once a store's uncommitted writes exceed
  /// the same bound: a crash then replays about twice this share of the changelog whatever
  /// the record rate.
  double checkpoint_tail_fraction = 0.04;
  std::int64_t checkpoint_min_records = 1000;
  std::chrono::milliseconds restore_log_interval{5000};
  std::size_t max_poll_records = 1000;
  /// How long the thread keeps retrying after a retriable failure (broker outage, leader
  /// move, fenced producer) without a successful commit before it stops (task.timeout.ms).
  std::chrono::milliseconds task_timeout{300000};
  /// The pause between two recovery attempts that failed (the cluster is still away).
  std::chrono::milliseconds recovery_backoff{1000};
  std::vector<std::string> source_topics;          ///< resolved names, all sub-topologies
  std::map<std::string, int> topic_to_subtopology;  ///< resolved source topic -> sub-topology
};

/// Records of one partition fetched while its task's input was paused by pacing, oldest
/// first. A ring of message slots that keeps its slots, and their string capacity, after
/// records leave: push() swaps the record out of the poll batch and hands the batch a used
/// slot to fill next time, so holding and releasing a steady paced stream allocates nothing
/// per record. Single-threaded.
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

class held_queue {
 public:
  bool empty() const noexcept { return size_ == 0; }
  std::size_t size() const noexcept { return size_; }
  /// Appends `m`, which is left holding a used slot's buffers (its content is unspecified).
  void push(kafka::message& m);
  kafka::message& front() noexcept { return slots_[head_]; }
  void pop() noexcept;
  /// Forgets the records; keeps the slots.
  void clear() noexcept { head_ = size_ = 0; }

 private:
  std::vector<kafka::message> slots_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

class stream_thread final : kafka::rebalance_listener, public record_sender {
 public:
  stream_thread(thread_settings settings, const task_services& services,
                std::function<void(thread_state)> on_state_change);
  ~stream_thread() override;

  void start();
  /// Asks the loop to finish the records in hand, commit, close. Returns at once.
  void request_stop() noexcept { stop_.store(true); }
  void join();
  thread_state state() const noexcept { return state_.load(); }
  /// True from a retriable failure until the next successful commit: the thread is
  /// recovering (or retrying) and its tasks may be closed. Safe from any thread.
  bool degraded() const noexcept { return degraded_.load(); }
  const std::string& failure() const noexcept { return failure_; }

 private:
  struct restoring {
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
  };

  /// Pacing back-pressure for one partition; see release_held_records().
  struct held_input {
    held_queue records;
    bool consumer_paused = false;   ///< fetching stopped until the held records run low
    std::int64_t paused_at_ms = 0;  ///< wall clock when fetching stopped
  };

  /// An assigned source partition: the task it feeds and what is held for it.
  struct partition_input {
    stream_task* task = nullptr;
    held_input held;
  };

  void run();
  void loop_once();
  void set_state(thread_state s);
  void on_assigned(const std::vector<kafka::topic_partition>& parts) override;
  void on_revoked(const std::vector<kafka::topic_partition>& parts) override;
  void send(std::string_view topic, std::int32_t partition, const std::optional<std::string_view>& key,
            const std::optional<std::string_view>& value, std::int64_t timestamp,
            const sluice::headers& headers) override;

  void create_tasks(const std::vector<kafka::topic_partition>& parts);
  void begin_restoration(stream_task& task);
  void restore_step();
  void finish_restoration(stream_task& task);
  void log_restore_progress(bool force);
  void commit_all();
  void close_tasks(bool clean);
  /// Counts a retriable failure and marks the thread degraded; throws the message the thread
  /// stops with once failures have lasted task.timeout.ms without a commit.
  void note_failure(const std::exception& e);
  enum class recovery_attempt { now, next_loop };
  /// A failure `e` that reached the loop, classified in error_classification.hpp: fatal ones
  /// are rethrown (call it inside a catch), retriable ones noted, then, when `attempt` is
  /// now, the tasks are closed dirty and recovery is tried at once; a fenced consumer is
  /// recreated once and is fatal when fenced again within twin_fencing_window.
  void on_failure(const std::exception& e, recovery_attempt attempt);
  /// recover_from_failure(); a retriable failure of it is noted and left for the next loop.
  void try_recovery();
  /// Aborts the transaction, closes the tasks dirty, recreates the producer, recreates the
  /// tasks of the assignment and rewinds to the committed offsets. A retriable failure on
  /// the way leaves recovery_pending_ set for the next loop to try again.
  void recover_from_failure();
  void rewind_to_committed();
  void set_degraded(bool degraded);
  /// Feeds records held for paused tasks once their pause ends; pauses/resumes partitions
  /// in the consumer to bound what is held (see the .cpp).
  void release_held_records();
  /// Forgets held records and resumes every partition paused for them (tasks closing, rewind).
  void drop_held_records() noexcept;
  /// `cap`, shortened so that the poll returns when the next held record is due (0 when one
  /// is due now) or a partition paused in the consumer may be resumed.
  std::chrono::milliseconds until_next_release(std::int64_t now_ms, std::chrono::milliseconds cap) const;

  thread_settings settings_;
  const task_services& services_;
  std::function<void(thread_state)> on_state_change_;
  std::string label_;
  std::unique_ptr<record_collector> collector_;
  std::unique_ptr<kafka::consumer> consumer_;
  std::unique_ptr<kafka::consumer> restore_consumer_;
  std::map<std::string, std::unique_ptr<stream_task>> tasks_;
  std::map<std::pair<std::string, std::int32_t>, partition_input, partition_less> by_partition_;
  std::vector<restoring> restoring_;
  std::vector<kafka::topic_partition> assignment_;
  std::vector<kafka::message> batch_;
  std::vector<kafka::message> restore_batch_;
  std::map<std::pair<std::string, std::int32_t>, std::int64_t, partition_less> unread_;  // not taken: seek back here
  std::map<std::pair<std::string, std::int32_t>, std::int64_t, partition_less> seeking_;  // sought back: offset expected
  std::chrono::steady_clock::time_point last_commit_, last_checkpoint_, last_restore_log_, restore_started_;
  std::atomic<bool> stop_{false};
  std::atomic<thread_state> state_{thread_state::created};
  std::atomic<bool> degraded_{false};
  /// Since when failures have kept the thread from committing (task.timeout.ms counts from it).
  std::optional<std::chrono::steady_clock::time_point> failing_since_;
  std::string last_failure_;
  bool recovery_pending_ = false;
  bool consumer_fenced_ = false;  ///< recovery recreates the consumer too
  std::optional<std::chrono::steady_clock::time_point> last_member_fencing_;
  std::string failure_;
  std::thread thread_;
  void update_lag();

  counter& restored_records_;
  gauge& restore_remaining_;
  gauge& lag_;
  histogram& commit_latency_;
  counter& retries_;
  counter& recoveries_;
};

}  // namespace sluice::runtime
