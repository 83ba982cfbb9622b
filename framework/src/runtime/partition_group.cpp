// One task's queued input: per-partition rings, lowest timestamp first, fetch pauses, and
// the task idling rule (max.task.idle.ms).
#include "runtime/partition_group.hpp"

#include <algorithm>

namespace sluice::runtime {

void held_queue::push(kafka::message& m) {
  if (size_ == slots_.size()) {
    // Full: unroll the ring so the oldest is first, and add a slot at the end.
    std::rotate(slots_.begin(), slots_.begin() + static_cast<std::ptrdiff_t>(head_), slots_.end());
    head_ = 0;
    slots_.emplace_back();
  }
  std::swap(slots_[(head_ + size_) % slots_.size()], m);
  ++size_;
}

void held_queue::pop() noexcept {
  head_ = (head_ + 1) % slots_.size();
  --size_;
}

std::size_t partition_group::add_partition(kafka::topic_partition tp) {
  queues_.push_back({std::move(tp)});
  return queues_.size() - 1;
}

void partition_group::push(std::size_t input, kafka::message& m) {
  auto& q = queues_[input];
  if (q.records.empty()) ++non_empty_;
  q.delivered_end = std::max(q.delivered_end, m.offset + 1);
  q.idle_deadline = none;  // it has records: its idling is over
  q.records.push(m);
  ++queued_;
}

partition_group::delivery partition_group::accept(std::size_t input, std::int64_t offset) noexcept {
  auto& q = queues_[input];
  if (q.delivered_end != none && offset < q.delivered_end) {
    const bool first = !q.redelivering;
    q.redelivering = true;
    return first ? delivery::again_first : delivery::again;
  }
  q.redelivering = false;
  q.delivered_end = offset + 1;
  return delivery::fresh;
}

std::int64_t partition_group::head_time(std::size_t input) {
  auto& q = queues_[input];
  if (!order_time_) return q.records.front().timestamp;
  if (!q.head_time_known) {
    q.head_time = order_time_(input, q.records.front());
    q.head_time_known = true;
  }
  return q.head_time;
}

kafka::message& partition_group::next() {
  if (queues_.size() == 1) {
    next_ = 0;
    return queues_[0].records.front();
  }
  std::size_t best = queues_.size();
  std::int64_t best_time = 0;
  for (std::size_t i = 0; i < queues_.size(); ++i) {
    if (queues_[i].records.empty()) continue;
    const auto t = head_time(i);
    if (best == queues_.size() || t < best_time) {
      best = i;
      best_time = t;
    }
  }
  next_ = best;
  return queues_[best].records.front();
}

void partition_group::pop_next() noexcept {
  queues_[next_].records.pop();
  queues_[next_].head_time_known = false;
  if (queues_[next_].records.empty()) --non_empty_;
  --queued_;
}

void partition_group::note_end(std::size_t input, std::int64_t end_offset) noexcept {
  auto& q = queues_[input];
  q.end_offset = std::max(q.end_offset, end_offset);
}

fetched_lag partition_group::lag_of(queue& q, const lag_source& lags) {
  // The end noted is later than every record delivered: nothing more was on the broker when
  // the fetcher got there. (A record at or past it is new data, and the next end settles it.)
  if (q.end_offset != none && q.delivered_end <= q.end_offset) return fetched_lag::zero;
  const auto lag = lags.lag(q.tp, q.delivered_end);
  if (lag == fetched_lag::zero && q.delivered_end != none) q.end_offset = q.delivered_end;
  return lag;
}

readiness partition_group::ready(std::int64_t now_ms, std::int64_t max_idle_ms, const lag_source& lags) {
  if (non_empty_ == queues_.size()) return readiness::ready;
  if (max_idle_ms < 0) return readiness::ready;
  if (non_empty_ == 0) return readiness::waiting;
  bool waiting = false, enforced = false;
  for (auto& q : queues_) {
    if (!q.records.empty()) continue;
    if (lag_of(q, lags) != fetched_lag::zero) {
      // Its records are on their way (or may be): an older one may be among them.
      q.idle_deadline = none;
      waiting = true;
      continue;
    }
    // Caught up: give producers max.task.idle.ms to add an older record, from when the
    // partition was first found so (Kafka Streams counts per partition as well).
    if (q.idle_deadline == none) q.idle_deadline = now_ms + max_idle_ms;
    if (now_ms < q.idle_deadline)
      waiting = true;
    else
      enforced = true;
  }
  if (waiting) return readiness::waiting;
  return enforced ? readiness::enforced : readiness::ready;
}

std::optional<std::int64_t> partition_group::idle_deadline_ms() const noexcept {
  std::optional<std::int64_t> due;
  for (const auto& q : queues_)
    if (q.records.empty() && q.idle_deadline != none && (!due || q.idle_deadline < *due)) due = q.idle_deadline;
  return due;
}

void partition_group::update_fetch(std::int64_t now_ms, std::size_t high_mark, fetch_changes& out) {
  for (auto& q : queues_) {
    if (!q.fetch_paused && q.records.size() >= high_mark) {
      out.pause.push_back(q.tp);
      q.fetch_paused = true;
      q.paused_at_ms = now_ms;
      ++fetch_paused_;
    } else if (q.fetch_paused && q.records.size() <= high_mark * 3 / 4 &&
               now_ms - q.paused_at_ms >= min_fetch_pause_ms) {
      out.resume.push_back(q.tp);
      q.fetch_paused = false;
      --fetch_paused_;
    }
  }
}

std::optional<std::int64_t> partition_group::resume_due_ms() const noexcept {
  std::optional<std::int64_t> due;
  for (const auto& q : queues_)
    if (q.fetch_paused && q.records.empty() && (!due || q.paused_at_ms + min_fetch_pause_ms < *due))
      due = q.paused_at_ms + min_fetch_pause_ms;
  return due;
}

void partition_group::clear(fetch_changes& out) {
  for (auto& q : queues_) {
    q.records.clear();
    q.head_time_known = false;
    // What is fetched next follows a seek or a new owner: ends noted before say nothing of it.
    q.delivered_end = q.end_offset = q.idle_deadline = none;
    q.redelivering = false;
    if (!q.fetch_paused) continue;
    q.fetch_paused = false;
    out.resume.push_back(q.tp);
  }
  queued_ = 0;
  non_empty_ = 0;
  fetch_paused_ = 0;
}

}  // namespace sluice::runtime
