// sluice::kafka::topic_scan: a consumer without a group that reads whole topics from their
// beginning and knows when it has read every partition to its end.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <span>
#include <string_view>
#include <string>
#include <utility>
#include <vector>

#include "kafka/config.hpp"
#include "kafka/consumer.hpp"
#include "kafka/types.hpp"

namespace sluice::kafka {

/// Reads every partition of a set of topics from offset 0 (the log start) on, tracking per
/// partition whether the last poll left it at its end. The reading behind
/// `topic_reader::read_to_end` (clients and tests) and the global tables' catch-up.
///
/// "At the end" means: the consumer reported the partition's end (enable.partition.eof) at
/// some offset, or a poll returned the record just below the high watermark that a fetch
/// reported, or the partition was empty when the scan began (its watermarks, asked by the
/// constructor); and no record at or past that offset has been returned since. A record
/// written later makes the partition not at the end again as soon as a poll returns it.
/// Offsets, not the order of events within a poll, decide, so a batch holding a partition's
/// last records and its end report in either order is read right.
///
/// Lifecycle: assigned in the constructor, polled until destroyed. Threading: one thread
/// at a time, like the consumer it owns.
class topic_scan {
 public:
  /// `config` is a consumer's configuration: group.id and group.instance.id are dropped
  /// and enable.partition.eof is set. `partitions` are the partitions to read (each topic's
  /// partitions, 0 to its count - 1). Asks the partitions' watermarks first (up to 5 s; if
  /// the broker does not answer, the end reports alone decide).
  topic_scan(config_map config, const std::vector<topic_partition>& partitions);

  /// Up to `max` records into `out` (as consumer::poll_batch), updating the end tracking.
  /// Returns true when at least one record was read. A poll that reads nothing while a
  /// partition has records left wakes its fetcher (consumer::wake_stalled_fetch), as
  /// poll_lent() does.
  bool poll_batch(std::vector<message>& out, std::size_t max, std::chrono::milliseconds timeout);

  /// Up to `max` records lent to `apply` without a copy (as consumer::poll_lent: runs of
  /// consecutive records of one partition, valid only during the call), updating the end
  /// tracking as poll_batch() does, before each run is lent (so an `apply` that throws leaves
  /// it right). Returns true when at least one record was lent.
  bool poll_lent(std::size_t max, std::chrono::milliseconds timeout,
                 const std::function<void(std::span<const raw_view>)>& apply);

  /// How many times a poll woke a stalled fetcher (consumer::fetch_wakes).
  std::uint64_t fetch_wakes() const noexcept { return consumer_.fetch_wakes(); }

  /// True when every partition is at its end (see the class comment); true with none.
  bool at_end() const noexcept { return not_at_end_ == 0; }

  /// Stops fetching (consumer::close). Idempotent; the destructor does it too.
  void close() { consumer_.close(); }

 private:
  using end_map = std::map<std::pair<std::string, std::int32_t>, std::int64_t, std::less<>>;

  /// Marks a partition at its end at `offset` (an end report, or an empty partition's watermarks).
  void note_end(std::string_view topic, std::int32_t partition, std::int64_t offset);
  /// Marks a partition at its end when `next` (its last returned record's offset + 1)
  /// reached the high watermark of the last fetch.
  void end_if_caught_up(end_map::iterator it, std::int64_t next);
  /// Asks the partitions' watermarks before they are assigned; marks the empty ones at their
  /// end; returns the assignment (each partition at its log start).
  std::vector<topic_partition_offset> learn_ends(const std::vector<topic_partition>& partitions);

  /// Per partition: the offset at which its end was reported, -1 while not at the end.
  end_map end_;
  std::pair<std::string, std::int32_t> run_partition_;  // poll_lent: the run's, its storage reused
  std::size_t not_at_end_ = 0;
  consumer consumer_;  // last: its end callback uses the members above
};

/// Every partition of `topics` (0 to its partition count - 1) as `counts` gives them.
std::vector<topic_partition> all_partitions(const std::vector<std::pair<std::string, int>>& counts);

}  // namespace sluice::kafka
