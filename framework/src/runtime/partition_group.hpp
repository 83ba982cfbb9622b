// partition_group: the records of one task's input partitions that wait to be processed,
// one queue per partition. The next record is the oldest head by timestamp across the
// task's partitions (Kafka Streams' PartitionGroup), so co-partitioned inputs interleave
// in time order rather than poll order. It also decides the fetch back-pressure of
// pacing: a partition holding `high_mark` records is paused in the consumer and resumed
// once three quarters of that remain.
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

class partition_group {
 public:
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
  /// The queued record with the lowest timestamp: the oldest head over the partitions
  /// (a tie goes to the earlier input). Requires !empty().
  kafka::message& next() noexcept;
  /// Removes the record next() returned.
  void pop_next() noexcept;

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
  /// Forgets every queued record (never processed: their offsets are not committed) and
  /// moves the partitions paused by update_fetch() to `out.resume`.
  void clear(fetch_changes& out);

 private:
  struct queue {
    kafka::topic_partition tp;
    held_queue records;
    bool fetch_paused = false;
    std::int64_t paused_at_ms = 0;
  };
  std::vector<queue> queues_;
  std::size_t queued_ = 0;
  std::size_t next_ = 0;  // the queue next() chose
  std::size_t fetch_paused_ = 0;
};

}  // namespace sluice::runtime
