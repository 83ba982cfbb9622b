// One task's queued input: per-partition rings, lowest timestamp first, fetch pauses.
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
  queues_[input].records.push(m);
  ++queued_;
}

kafka::message& partition_group::next() noexcept {
  if (queues_.size() == 1) {
    next_ = 0;
    return queues_[0].records.front();
  }
  std::size_t best = queues_.size();
  for (std::size_t i = 0; i < queues_.size(); ++i) {
    if (queues_[i].records.empty()) continue;
    if (best == queues_.size() || queues_[i].records.front().timestamp < queues_[best].records.front().timestamp)
      best = i;
  }
  next_ = best;
  return queues_[best].records.front();
}

void partition_group::pop_next() noexcept {
  queues_[next_].records.pop();
  --queued_;
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
    if (!q.fetch_paused) continue;
    q.fetch_paused = false;
    out.resume.push_back(q.tp);
  }
  queued_ = 0;
  fetch_paused_ = 0;
}

}  // namespace sluice::runtime
