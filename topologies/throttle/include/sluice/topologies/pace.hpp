// sluice::topologies::pace: outbound pacing. Delays records, never drops them, so a released
// backlog leaves at a set rate instead of flooding what is downstream (seed 003: six
// million queued pushes sent in 40 minutes brought the client API down).
//
//   auto out = b.stream<std::string, std::string>("pushes");
//   out.process(sluice::topologies::pace<std::string, std::string>(2000.0)).to("pushes-out");
//
// The rate is per job, split over the tasks of the sub-topology the pace processor is in,
// in proportion to their partitions: each task gets rate / partition_count(). An idle or
// slow partition's share is NOT lent to the others, so the job reaches `rate` only while
// every partition has a backlog; with skewed input it goes slower. We chose that over a
// shared budget because tasks share nothing (they may run in other processes) and the
// bound must hold with no coordination.
//
// How: a token bucket per task on the wall clock (GCRA form), holding up to `burst` worth
// of records (at least one). A record that reaches the processor is forwarded at once,
// unchanged (key, value, headers and timestamp). When the bucket is empty the processor
// pauses the task's input (processor_context::pause_input_until) until the bucket is half
// full again, so a wake-up that comes a little late loses no tokens. Meanwhile the task is
// fed nothing: the stream thread keeps what its consumer already fetched for the task (a
// bounded queue per partition, beyond which it stops fetching the partition) and the rest
// stays in Kafka, so nothing piles up in memory and no record is held by the processor:
// its offset is committed only after it was forwarded, as for any record, and
// at-least-once and exactly-once hold unchanged. Upstream processors of the same task
// (e.g. the throttle) are paused with it.
//
// The bound: for any interval of length W, a task forwards at most share * W + B records,
// B = max(1, floor(share * burst)); the job at most rate * W + sum of B (for W = 1 s and the
// default burst of 10 ms: rate * 1.01, plus one record per task at low rates). A record that
// does not fit (only when one input record makes several records reach the pace processor,
// e.g. a flat_map before it, or a punctuator forwards) is forwarded anyway and its tokens
// are owed: the pause lasts until they are repaid, so the average stays at the rate.
//
// Threading: one processor per task, called from the task's thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "sluice/processor.hpp"

namespace sluice::topologies {

struct pace_options {
  /// Records per second the whole job may forward, split over the sub-topology's tasks by
  /// partition count. Must be positive and finite.
  /// Default: 0 (invalid; set it).
  double records_per_second = 0;

  /// How much sending a task may bunch: its bucket holds B = max(1, share * burst) records
  /// and a paused task wakes up when it holds ceil(B / 2). Larger bursts mean fewer wake-ups
  /// of the stream thread (one per B / 2 records), more tolerance for a late wake-up before
  /// the rate suffers, and a looser bound over short windows. Must be within [0, 10 s].
  /// Default: 10 ms (at most rate * 1.01 over any second, leaving room for the jitter a
  /// broker adds downstream).
  std::chrono::milliseconds burst{10};
};

/// Throws sluice::error(errc::invalid_config) naming the bad value and its allowed range.
void validate(const pace_options& options);

namespace pace_detail {

/// A token bucket in GCRA form on a millisecond wall clock: `theoretical` is when the bucket
/// will be full again. One per task.
class bucket {
 public:
  /// `records_per_second` is this task's share.
  bucket(double records_per_second, std::chrono::milliseconds burst);

  /// Takes a token for one record forwarded at `now_ms`. Returns the wall-clock time until
  /// which input should pause (the bucket holds ceil(B / 2) records again then), or 0 when
  /// the next record may pass now.
  std::int64_t take(std::int64_t now_ms) noexcept;

  /// Records the bucket holds when full (B).
  double capacity() const noexcept { return capacity_; }

 private:
  double interval_ms_;   // 1000 / share: one token's worth of time
  double capacity_;      // B
  double tolerance_ms_;  // (B - 1) * interval: how far ahead of now `theoretical` may be
  double half_full_ms_;  // floor(B / 2) * interval: the bucket holds ceil(B / 2) this long before full
  double theoretical_ = 0;
  bool started_ = false;
};

template <class K, class V>
class pace_processor final : public processor<K, V> {
 public:
  explicit pace_processor(const pace_options& options) : options_(options) {}

  void init(typename processor<K, V>::context_type& ctx) override {
    processor<K, V>::init(ctx);
    auto partitions = ctx.partition_count() > 0 ? ctx.partition_count() : 1;
    bucket_.emplace(options_.records_per_second / partitions, options_.burst);
  }

  void process(const record<K, V>& r) override {
    auto& ctx = this->context();
    ctx.forward(r);
    if (auto until = bucket_->take(ctx.wall_clock_ms()); until > 0) ctx.pause_input_until(until);
  }

 private:
  pace_options options_;
  std::optional<bucket> bucket_;
};

}  // namespace pace_detail

/// The processor supplier for kstream<K, V>::process(supplier). Validates the options.
template <class K, class V>
auto pace(pace_options options) {
  validate(options);
  return [options] { return std::make_unique<pace_detail::pace_processor<K, V>>(options); };
}

/// pace<K, V>({.records_per_second = rate}).
template <class K, class V>
auto pace(double records_per_second) {
  return pace<K, V>(pace_options{.records_per_second = records_per_second});
}

}  // namespace sluice::topologies
