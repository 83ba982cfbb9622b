// sluice::kafka::consumer: a librdkafka consumer (group or manually assigned) that hands
// out framework-owned messages and calls a rebalance listener on assignment changes.
#pragma once

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kafka/config.hpp"
#include "kafka/handles.hpp"
#include "kafka/types.hpp"

namespace sluice::kafka {

class mock_cluster;

/// Told about assignment changes of a subscribed consumer. Called from inside poll(),
/// poll_batch() or close(), on the thread that called them. An exception thrown here is
/// caught (the assignment change still happens) and rethrown from the next poll.
struct rebalance_listener {
  virtual ~rebalance_listener() = default;
  /// `parts` were added to this member's assignment (all of it under the eager protocol,
  /// the increment under cooperative).
  virtual void on_assigned(const std::vector<topic_partition>& parts) = 0;
  /// `parts` are about to be taken away; commit what was processed of them now.
  virtual void on_revoked(const std::vector<topic_partition>& parts) = 0;
  /// `parts` were lost (session timeout, fenced): another member may already own them, so
  /// committing is pointless. Default: on_revoked.
  virtual void on_lost(const std::vector<topic_partition>& parts) { on_revoked(parts); }
};

/// Called for each partition that reached its end (needs enable.partition.eof=true).
/// `offset` is the next offset that will be written to the partition.
using partition_eof_callback = std::function<void(std::string_view topic, std::int32_t partition, std::int64_t offset)>;

/// A Kafka consumer.
///
/// Defaults set unless the config sets them: enable.auto.commit=false,
/// enable.auto.offset.store=false, partition.assignment.strategy=range. With group.id it
/// can subscribe() and commit; without, it is assign-only (subscribe, commit, committed
/// and group_metadata throw errc::invalid_config).
///
/// Errors that arrive as messages: _PARTITION_EOF goes to the partition EOF callback;
/// fatal errors throw sluice::error(errc::kafka_fatal); others are logged (once per code
/// per 10 s) and consumption continues.
///
/// Threading: not thread-safe; one thread owns it and every callback runs on that thread.
/// Neither copyable nor movable (librdkafka holds a pointer to it).
class consumer {
 public:
  /// `on_statistics` (may be empty) receives the statistics JSON every
  /// statistics.interval.ms, from inside poll() / poll_batch().
  explicit consumer(const config_map& config, statistics_callback on_statistics = {});
  /// Calls close(); never throws.
  ~consumer();
  consumer(const consumer&) = delete;
  consumer& operator=(const consumer&) = delete;

  /// Joins the group with `topics`. `listener` (may be null) must outlive the consumer or
  /// the next subscribe().
  void subscribe(const std::vector<std::string>& topics, rebalance_listener* listener = nullptr);
  void unsubscribe();

  /// Manual assignment; offsets may be logical (offset_beginning, offset_end, offset_stored).
  void assign(const std::vector<topic_partition_offset>& parts);
  void unassign();
  /// Assign-only consumers: add or remove partitions while the others keep what librdkafka
  /// already fetched for them (assign() replaces the assignment and drops it).
  void assign_more(const std::vector<topic_partition_offset>& parts);
  void unassign_some(const std::vector<topic_partition>& parts);
  /// Asks the broker for `topics`' metadata and waits up to `timeout` for the answer, which
  /// gives their assigned partitions a leader to fetch from at once. librdkafka 2.0.2 asks
  /// for the metadata of a topic that a manual assignment names for the first time only in
  /// its once-a-second topic scan, so without this the first fetch waits up to a second.
  /// One request names all of `topics` and every other topic this client knows (librdkafka
  /// 2.0.2 asks for one topic, all the cluster's, or the known ones): for the restore
  /// consumer, the changelog topics it was assigned before, the topics its own periodic
  /// refresh asks for too. Returns false (and the scan still finds the leaders) when the
  /// broker did not answer. With no topics, asks for the known ones alone.
  bool learn_leaders(const std::vector<std::string>& topics, std::chrono::milliseconds timeout);
  std::vector<topic_partition> assignment() const;

  /// Pauses are counted per partition: several holders (a restoring task, a full queue) may
  /// pause one partition, and it fetches again when the last of them resumes it. resume() of
  /// a partition no pause() holds does nothing.
  void pause(const std::vector<topic_partition>& parts);
  void resume(const std::vector<topic_partition>& parts);
  /// Moves the fetch position of an assigned partition; waits up to `timeout`. A zero
  /// timeout seeks asynchronously: records fetched before the seek may still be returned.
  void seek(const topic_partition_offset& to, std::chrono::milliseconds timeout);

  /// Synchronous commit; offsets are the next to consume (last processed + 1).
  void commit(const std::vector<topic_partition_offset>& offsets);
  /// Committed offsets of `parts` (offset_invalid where none is committed).
  std::vector<topic_partition_offset> committed(const std::vector<topic_partition>& parts,
                                                std::chrono::milliseconds timeout) const;
  /// The next offset to be fetched for each of `parts` (offset_invalid if unknown).
  std::vector<topic_partition_offset> position(const std::vector<topic_partition>& parts) const;
  /// Low and high watermark (high = offset the next record will get), asked of the broker.
  std::pair<std::int64_t, std::int64_t> watermarks(const std::string& topic, std::int32_t partition,
                                                   std::chrono::milliseconds timeout) const;

  /// Low and high watermarks of each of `parts`, in their order: two requests to each leader
  /// (ListOffsets for the earliest and for the latest offset of all its partitions at once)
  /// where watermarks() asks twice per partition. Throws when the broker does not answer
  /// within `timeout` (each request has it) or refuses a partition.
  std::vector<std::pair<std::int64_t, std::int64_t>> watermarks(const std::vector<topic_partition>& parts,
                                                                std::chrono::milliseconds timeout) const;

  /// The high watermark the last fetch response reported (no broker call), if known.
  std::optional<std::int64_t> cached_high_watermark(const std::string& topic, std::int32_t partition) const;

  /// poll_batch() and poll_lent() call this when they found nothing (public for tests).
  /// librdkafka before 2.3.0 stops fetching once its queue passes queued.min.messages or
  /// queued.max.messages.kbytes, and a broker thread with nothing to fetch sleeps until a
  /// request, a reply or its one-second timer wakes it: a consumer that drains the queue in
  /// less than a second waits out the rest of that second while records wait on the broker
  /// (bench/README.md, "Consumer prefetch"). If an
  /// assigned partition that this consumer has not paused has records past its position
  /// (by the high watermark of its last fetch; more than one, since a transaction marker
  /// last leaves the position one short), this asks that partition's leader for its
  /// watermarks, which wakes the broker thread that fetches it. One partition a call, in
  /// turn; not again for 20 ms, doubling up to a second while polls find nothing (a record
  /// that poll_batch() or poll_lent() returns resets it). Waits up to `timeout` for the
  /// answer, which it does not use; a failure is ignored. Returns true when it asked.
  bool wake_stalled_fetch(std::chrono::milliseconds timeout);
  /// How many times wake_stalled_fetch() asked (since this consumer was made).
  std::uint64_t fetch_wakes() const noexcept { return fetch_wakes_; }

  /// True from librdkafka's report that every broker is down (_ALL_BROKERS_DOWN, which its
  /// error callback gets inside this consumer's polls) until a poll returns a record or
  /// check_brokers_back() hears a broker. An idle consumer has no other sign of an outage: it
  /// has nothing to commit, so no call fails.
  bool brokers_down() const noexcept { return brokers_down_; }
  /// While brokers_down(): asks, waiting up to `timeout`, the group coordinator for the
  /// committed offset of the first of `assigned`, or (no group or nothing assigned) any broker
  /// for the metadata of `topics`; an answer clears brokers_down(). The coordinator first: the
  /// group keeps its connection, where librdkafka connects to other brokers only while a
  /// request waits for them, and a request given up after `timeout` can miss the moment its
  /// reconnect back-off ends. Returns brokers_down() after the call; asks nothing when it is
  /// false.
  bool check_brokers_back(const std::vector<topic_partition>& assigned, const std::vector<std::string>& topics,
                          std::chrono::milliseconds timeout);

  /// One message, or nullopt if none arrived within `timeout`.
  std::optional<message> poll(std::chrono::milliseconds timeout);
  /// Up to `max` messages into `out`, reusing its elements (and their string capacity);
  /// `out` is resized to the count read. Waits up to `timeout` for the first message or
  /// partition end (enable.partition.eof) only. Returns true when at least one message was read.
  bool poll_batch(std::vector<message>& out, std::size_t max, std::chrono::milliseconds timeout);

  /// Like poll_batch(), without copying: takes up to `max` records from librdkafka at once
  /// (waiting up to `timeout` for the first only, as poll_batch() does), lends them to
  /// `apply` in runs of consecutive records of one partition, in order, and destroys them
  /// before it returns (also when `apply` throws). For records used at once and never kept:
  /// the restore consumer writes them into stores. Partition ends and errors among them are
  /// handled as poll_batch() handles them, before the runs are lent. Returns true when at
  /// least one record was lent.
  bool poll_lent(std::size_t max, std::chrono::milliseconds timeout,
                 const std::function<void(std::span<const raw_view>)>& apply);

  /// Sets the callback for partition ends (needs enable.partition.eof=true).
  void on_partition_eof(partition_eof_callback callback) { on_eof_ = std::move(callback); }

  /// For send_offsets_to_transaction.
  consumer_group_metadata group_metadata() const;
  /// True once the group has moved on without this member (its session timed out, or it
  /// was fenced) and before the rebalance listener's on_lost() has run: the assignment may
  /// already be another member's.
  bool assignment_lost() const;

  /// Makes a poll() or poll_batch() blocked on another thread return now (with what it has,
  /// possibly nothing). Thread-safe; the only member that is. A wake with no poll blocked
  /// cuts the next one short.
  void wake() noexcept;

  /// Leaves the group (revoking through the listener) and stops fetching. Idempotent.
  void close();
  bool closed() const noexcept { return closed_; }

  const std::string& name() const noexcept { return name_; }
  rd_kafka_t* native() const noexcept { return rk_.get(); }

 private:
  static void on_rebalance_c(rd_kafka_t* rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* parts,
                             void* opaque);
  static void on_error_c(rd_kafka_t* rk, int err, const char* reason, void* opaque);
  static int on_statistics_c(rd_kafka_t* rk, char* json, size_t json_len, void* opaque);
  void on_rebalance(rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* parts);
  void rethrow_pending();
  /// Throws for a failed call: _FATAL (the consumer is in a fatal state, e.g. fenced by the
  /// coordinator after an outage) as the fatal error itself (make_fatal_error: its code,
  /// FENCED_INSTANCE_ID, and reason), so that callers can tell what to do; others as they are.
  void throw_if_failed(rd_kafka_resp_err_t code, std::string_view what) const;
  /// Handles an error message; returns normally if consumption may continue.
  void handle_error_message(const rd_kafka_message_t& m);
  rd_kafka_message_t* next(int timeout_ms);
  void require_group(const char* what) const;
  /// After poll_batch() or poll_lent(): resets the wake-up's back-off when records came,
  /// else wakes a stalled fetcher (wake_stalled_fetch, up to 100 ms for the answer).
  void after_poll(bool got_records);

  /// On a mock cluster, which cannot describe groups: tells it this member's assignment.
  void report_membership();

  rebalance_listener* listener_ = nullptr;
  partition_eof_callback on_eof_;
  statistics_callback on_statistics_;
  std::exception_ptr pending_;
  bool fatal_ = false;
  bool brokers_down_ = false;  // see brokers_down()
  bool closed_ = false;
  bool has_group_ = false;
  log_throttle throttle_;
  std::string name_;
  mock_cluster* mock_ = nullptr;  // the mock cluster this group consumer is connected to, if any
  group_member membership_;       // what report_membership tells it (client.id, assignment)
  std::string group_;
  std::map<topic_partition, int> paused_;  // pause() calls not yet resumed, per partition: not woken
  std::chrono::steady_clock::time_point next_wake_{};
  std::chrono::milliseconds wake_interval_{0};
  std::size_t wake_turn_ = 0;  // which lagging partition the next wake asks about
  std::uint64_t fetch_wakes_ = 0;
  std::vector<message> spare_;                 // messages poll_batch shrank off, buffers kept for reuse
  std::vector<rd_kafka_message_t*> lent_raw_;  // poll_lent: what librdkafka handed out
  std::vector<raw_view> lent_;                 // poll_lent: views of the records among them
  handle_ptr rk_;
  queue_ptr wake_queue_;  // the queue consumer_poll serves; released before rk_
};

}  // namespace sluice::kafka
