// partition_group: the records of one task's input partitions that wait to be processed,
// one queue per partition. The next record is the oldest head by timestamp across the
// task's partitions (Kafka Streams' PartitionGroup), so co-partitioned inputs interleave
// in time order rather than poll order. It also decides the fetch back-pressure of
// pacing: a partition holding `high_mark` records is paused in the consumer and resumed
// once three quarters of that remain. And it decides whether the task may take a record now
// while some of its partitions have nothing queued (task idling, max.task.idle.ms: ready()).
//
// The stream thread queues a record here only when the task cannot take it at once (its
// stores restore, a processor paused its input, older records of it wait, or the task reads
// several partitions); a lone partition with nothing waiting goes straight to the task.
// The TopologyTestDriver holds paused input in the same class.
//
// Lifecycle: owned by its stream_task; partitions added when the task is made, records
// queued and taken while it lives, clear() when its thread drops what it holds.
//
// Threading: used by the task's stream thread (or the driver) only.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "kafka/types.hpp"

namespace sluice::runtime {

/// Records of one partition, oldest first. A ring of message slots that keeps its slots,
/// and their string capacity, after records leave: push() swaps the record out of the poll
/// batch and hands the batch a used slot to fill next time, so holding and releasing a
/// steady paced stream allocates nothing per record. Single-threaded.
class held_queue {
 public:
  bool empty() const noexcept { return size_ == 0; }
  std::size_t size() const noexcept { return size_; }
  /// Appends `m`, which is left holding a used slot's buffers (its content is unspecified).
  void push(kafka::message& m);
  kafka::message& front() noexcept { return slots_[head_]; }
  const kafka::message& front() const noexcept { return slots_[head_]; }
  void pop() noexcept;
  /// Forgets the records; keeps the slots.
  void clear() noexcept { head_ = size_ = 0; }

 private:
  std::vector<kafka::message> slots_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

/// Partitions whose fetching should stop or start again; filled by partition_group,
/// applied to the consumer by the stream thread.
struct fetch_changes {
  std::vector<kafka::topic_partition> pause;
  std::vector<kafka::topic_partition> resume;
  bool empty() const noexcept { return pause.empty() && resume.empty(); }
  void clear() noexcept {
    pause.clear();
    resume.clear();
  }
};

/// What is known of the records a partition has on the broker beyond those delivered to its
/// task: Kafka Streams' "fetched lag" (KIP-695), as far as librdkafka tells it.
enum class fetched_lag {
  unknown,   ///< no fetch has answered yet: records may be on the broker
  positive,  ///< the broker has records the task has not been handed yet
  zero,      ///< the last fetch found nothing beyond what was delivered
};

/// Where partition_group::ready() learns the lag of an input with nothing queued, when no
/// partition end (note_end()) has settled it: the stream thread asks its consumer's cached
/// watermarks, the TopologyTestDriver (all input local) answers zero, tests answer at will.
class lag_source {
 public:
  /// The lag of `tp`, whose records delivered so far end at `delivered_end` (the offset after
  /// the last one delivered; -1 when none has been).
  virtual fetched_lag lag(const kafka::topic_partition& tp, std::int64_t delivered_end) const = 0;

 protected:
  ~lag_source() = default;
};

/// partition_group::ready()'s answer.
enum class readiness {
  ready,     ///< every partition has records queued, or idling is off (max.task.idle.ms=-1)
  waiting,   ///< hold the records: an empty partition has (or may have) older records on the broker
  enforced,  ///< process although an empty partition may get older records: it was idle max.task.idle.ms
};

class partition_group {
 public:
  /// max.task.idle.ms' value that turns idling off: process whatever is queued at once.
  static constexpr std::int64_t idling_off = -1;

  /// The least time a partition stays paused in the consumer. Each resume starts a fetch
  /// and each pause throws away what librdkafka prefetched: a task that takes its held
  /// records much faster than high_mark per second would otherwise flap every few
  /// milliseconds.
  static constexpr std::int64_t min_fetch_pause_ms = 250;

  /// Adds an input partition; returns its index (the task's input order).
  std::size_t add_partition(kafka::topic_partition tp);
  std::size_t partitions() const noexcept { return queues_.size(); }
  const kafka::topic_partition& partition(std::size_t input) const { return queues_[input].tp; }

  bool empty() const noexcept { return queued_ == 0; }
  /// Records queued over all partitions, or of one.
  std::size_t queued() const noexcept { return queued_; }
  std::size_t queued(std::size_t input) const noexcept { return queues_[input].records.size(); }
  /// Queues `m` behind the records of partition `input`; `m` is left holding a used slot.
  void push(std::size_t input, kafka::message& m);
  /// What a record the consumer just delivered is to this task.
  enum class delivery {
    fresh,        ///< new: to be processed
    again_first,  ///< delivered before; the first of a run of such records
    again,        ///< delivered before, after another such record
  };
  /// Whether a record at `offset` of partition `input` is new to this task: not when its
  /// offset is below the one after the last record accepted (or pushed) since the task was
  /// created or clear() (a seek) ran. Such a record was handed to the task already and must
  /// not be processed twice. A safety net: librdkafka 2.0.2 restarts a partition's fetch from
  /// its last pause when an unpaused partition is resumed (librdkafka #4637, #4686), which
  /// kafka::consumer's counted pauses rule out; a consumer that goes back for any other
  /// reason is caught here, counted (redelivered_metric) and logged.
  delivery accept(std::size_t input, std::int64_t offset) noexcept;
  /// The counter of the records accept() turned away, and the name the stream thread's
  /// warning about them carries (the reliability suite finds it in the instances' logs).
  static constexpr std::string_view redelivered_metric = "sluice_redelivered_records_skipped_total";
  /// The time a queued record of partition `input` is ordered by. Kafka Streams orders by the
  /// extracted timestamp; by default (no function) the record's own timestamp is used, which
  /// is the same without extractors. Asked once per record while it heads its partition.
  using order_time_fn = std::function<std::int64_t(std::size_t input, const kafka::message&)>;
  void order_by(order_time_fn f) { order_time_ = std::move(f); }
  /// The queued record with the lowest order time: the oldest head over the partitions
  /// (a tie goes to the earlier input). Requires !empty().
  kafka::message& next();
  /// Removes the record next() returned.
  void pop_next() noexcept;

  /// Whether the task may process next() at `now_ms` (wall clock) under max.task.idle.ms =
  /// `max_idle_ms`, the rule of Kafka Streams 3.9 (KIP-695). Every partition has records:
  /// ready. Some have none: with idling off, ready; otherwise each empty one is asked of
  /// its lag (a partition end noted since its last record settles it as zero, else `lags`
  /// answers): unknown or positive waits (its records are being fetched); zero waits until
  /// `max_idle_ms` of wall time has passed since the partition was first found empty at zero
  /// lag, then enforced. Requires !empty(). Never blocks: waiting only tells the caller to
  /// leave the records queued and come back after the next poll.
  readiness ready(std::int64_t now_ms, std::int64_t max_idle_ms, const lag_source& lags);
  /// The consumer reached the end of partition `input` at `end_offset` (librdkafka's
  /// partition EOF: its fetcher is at the log end, or under read_committed at the last
  /// stable offset, past any transaction marker). Records delivered before the event have
  /// lower offsets; a record at `end_offset` or later (new data) ends what it says.
  void note_end(std::size_t input, std::int64_t end_offset) noexcept;
  /// The last partition end noted for `input`, or -1 if none since the last clear().
  std::int64_t noted_end(std::size_t input) const noexcept { return queues_[input].end_offset; }
  /// The earliest wall time at which a partition whose task waits at zero lag stops being
  /// waited for (enforced processing), if one is counting down.
  std::optional<std::int64_t> idle_deadline_ms() const noexcept;

  /// Pacing back-pressure at `now_ms`: a partition with `high_mark` or more queued goes to
  /// `out.pause`; a paused one with at most 3/4 of `high_mark` left, paused at least
  /// min_fetch_pause_ms ago, goes to `out.resume`. So at most 2 * high_mark - 1 records are
  /// held per partition (a batch may land on a queue just under the mark); it is resumed
  /// while records remain because librdkafka 2.0.2 takes up to about a second to deliver a
  /// resumed partition again (measured 0.05 .. 0.95 s) and what is held must last until then.
  void update_fetch(std::int64_t now_ms, std::size_t high_mark, fetch_changes& out);
  /// True while a partition is paused by update_fetch().
  bool fetch_paused() const noexcept { return fetch_paused_ > 0; }
  /// The earliest time a paused partition with nothing queued may be resumed, if any.
  std::optional<std::int64_t> resume_due_ms() const noexcept;
  /// Forgets every queued record (never processed: their offsets are not committed), what
  /// was learned of the partitions' ends, and moves the partitions paused by update_fetch()
  /// to `out.resume`.
  void clear(fetch_changes& out);

 private:
  static constexpr std::int64_t none = -1;
  struct queue {
    kafka::topic_partition tp;
    held_queue records;
    bool fetch_paused = false;
    std::int64_t paused_at_ms = 0;
    std::int64_t delivered_end = none;  ///< offset after the last record accept()ed or pushed
    bool redelivering = false;          ///< the last record delivered was one delivered before
    std::int64_t end_offset = none;     ///< the last partition end noted (or learned from `lags`)
    std::int64_t idle_deadline = none;  ///< wall time; set while empty at zero lag
    std::int64_t head_time = none;      ///< order time of records.front(), once asked
    bool head_time_known = false;
  };
  std::int64_t head_time(std::size_t input);
  /// The lag of empty input `q`; a zero from `lags` is remembered as an end at delivered_end.
  fetched_lag lag_of(queue& q, const lag_source& lags);
  std::vector<queue> queues_;
  order_time_fn order_time_;
  std::size_t queued_ = 0;
  std::size_t non_empty_ = 0;  // queues with records
  std::size_t next_ = 0;       // the queue next() chose
  std::size_t fetch_paused_ = 0;
};

}  // namespace sluice::runtime
