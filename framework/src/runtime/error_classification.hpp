// The one place that decides what an exception means for a running job: a record's own
// failure (the error handlers deal with it), a cluster fault the stream thread rides out
// (close its tasks dirty, recreate the producer, rewind to the committed offsets, retry
// for up to task.timeout.ms, as Kafka Streams does), or a fault no retry can fix (the
// instance stops with a message saying what to do). stream_task and stream_thread both ask
// here, so they never disagree.
//
// Threading: pure functions; any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <string>
#include <string_view>

namespace sluice::runtime {

enum class failure_kind {
  /// The record's own failure (a user function threw, a value does not decode): the
  /// processing or deserialization handler decides; fatal only when the handler is `fail`.
  record,
  /// The cluster, not the job: timeouts, leader and coordinator moves, all brokers down,
  /// an aborted or timed-out transaction, a producer fenced after an outage, a record not
  /// acknowledged in time. The thread recovers and retries for up to task.timeout.ms.
  retriable,
  /// The group coordinator fenced this thread's consumer (FENCED_INSTANCE_ID): another
  /// member joined with its group.instance.id. After an outage that member is this very
  /// consumer rejoining (librdkafka 2.0.2 fences its own stale member id); otherwise it is a
  /// twin instance with a copied instance.id. The thread recreates its consumer once; fenced
  /// again soon after, it is a twin, and the instance stops with the advice to fix it.
  member_fenced,
  /// Retrying cannot help (missing authorisation, a record Kafka refuses for good, a state or topology error):
  /// the instance stops with the message.
  fatal,
};

/// What `e` is; sluice::error by its errc and librdkafka's flags (fatal / retriable /
/// txn_requires_abort) and code, anything else (a user's exception) is `record`.
failure_kind classify_failure(const std::exception& e) noexcept;

/// How soon after its init_transactions a fenced producer counts toward a twin: 5 s, or half
/// of `transaction_timeout` if that is shorter. An outage fences a producer only once the
/// broker aborted its open transaction, transaction.timeout.ms after it began, so never this
/// soon; a twin's producer fences this one's within a second.
std::chrono::milliseconds producer_twin_window(std::chrono::milliseconds transaction_timeout) noexcept;

/// The advice a thread stops with when a twin keeps fencing its producers.
inline constexpr std::string_view producer_twin_advice =
    "another instance keeps fencing this one's producers with the same transactional.id (it has the same "
    "instance.id: a copied configuration); give every instance its own instance.id (and state.dir), then restart "
    "this one";

/// What a person should do about a fatal failure `e`, appended to the message the job stops
/// with ("another instance joined ... give each instance its own instance.id"); empty when
/// the error's own message already says it.
std::string fatal_advice(const std::exception& e);

/// Tells the fencings of a consumer's own stale member id apart from a twin instance.
///
/// The group coordinator fences a consumer whose group.instance.id another member joined
/// with. After a fault that member is this instance's own earlier incarnation (a consumer
/// cut off by the network, a process killed a moment ago): one fencing per fault, two when a
/// second fault follows within seconds. A twin instance with a copied instance.id instead
/// fences each new consumer within a heartbeat or two of its rejoining. Three consumers
/// fenced within 30 s are taken for a twin.
///
/// A fenced consumer repeats its fatal error on every later call until it is replaced (a
/// poll during a recovery's backoff, a close): those repeats are the same fencing, counted
/// once by the consumer's incarnation number.
///
/// The same count serves a thread's producers under exactly-once, fed only the fencings of a
/// producer that came within producer_twin_window() of its init_transactions: a twin's new
/// producer fences this one's at once (and a twin whose own init waits on this one's
/// transaction can keep its thread blocked in init_transactions for most of a minute, so the
/// consumer fencings of that twin can come half a minute apart).
///
/// Lifecycle and threading: one per stream thread and kind of client, used by that thread only.
class fencing_record {
 public:
  using clock_type = std::chrono::steady_clock;
  static constexpr auto twin_window = std::chrono::seconds(30);
  static constexpr std::size_t twin_fencings = 3;

  /// Notes that the consumer numbered `incarnation` (numbers grow with each consumer the
  /// thread makes) was fenced at `now`; true when the fencings within the window make a twin.
  bool twin_after(std::uint64_t incarnation, clock_type::time_point now);

  /// The fencings counted within the window, and the time from the first of them to the
  /// last, for the message the instance stops with.
  std::size_t count() const noexcept { return fencings_.size(); }
  std::chrono::seconds span() const noexcept;
  /// "3 <clients> fenced in 12 s, each <when>": the evidence of a twin, for the message the
  /// thread stops with.
  std::string twin_evidence(std::string_view clients, std::string_view when) const;

 private:
  std::deque<clock_type::time_point> fencings_;
  std::uint64_t last_incarnation_ = 0;
  bool any_ = false;
};

}  // namespace sluice::runtime
