// Restoration of a thread's stores from their changelogs.
#include "runtime/changelog_reader.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "runtime/stream_task.hpp"
#include "sluice/state/big_endian.hpp"

namespace sluice::runtime {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {
kafka::config_map read_uncommitted(kafka::config_map c) {
  c["isolation.level"] = "read_uncommitted";
  return c;
}
}  // namespace

changelog_reader::changelog_reader(const kafka::config_map& restore_consumer, std::chrono::milliseconds log_interval,
                                   restore_metrics metrics, std::chrono::milliseconds open_transaction_wait)
    : consumer_(std::make_unique<kafka::consumer>(restore_consumer)),
      end_offsets_config_(read_uncommitted(restore_consumer)),
      log_interval_(log_interval),
      open_transaction_wait_(open_transaction_wait),
      last_log_(clock_type::now()),
      metrics_(metrics) {
  end_offsets_ = std::make_unique<kafka::consumer>(end_offsets_config_);
  // The end is noted here and applied by restore() after the batch: this callback runs
  // inside poll_lent(), before the batch's records of the same partition are written.
  consumer_->on_partition_eof([this](std::string_view topic, std::int32_t partition, std::int64_t offset) {
    for (auto& e : entries_)
      if (!e.done && e.topic == topic && e.partition == partition) e.eof = std::max(e.eof, offset);
  });
}

std::vector<std::pair<std::int64_t, std::int64_t>> changelog_reader::end_offsets(
    const std::vector<kafka::topic_partition>& parts) {
  try {
    return end_offsets_->watermarks(parts, 30s);
  } catch (const sluice::error& e) {
    // This client fetches nothing, so nothing refreshes its view of the partition leaders
    // after a leader moves but librdkafka's periodic refresh (topic.metadata.refresh.interval.ms,
    // 5 minutes): the fault suite saw NOT_LEADER_FOR_PARTITION for 5 minutes after a broker
    // kill, until the job gave up. A new client learns the leaders afresh.
    spdlog::info("end offsets of {} changelog partition(s): {}; asking again with a new client", parts.size(),
                 e.what());
    end_offsets_ = std::make_unique<kafka::consumer>(end_offsets_config_);
    return end_offsets_->watermarks(parts, 30s);
  }
}

bool changelog_reader::add(stream_task& task) {
  std::vector<stream_task*> one{&task};
  return add(one).front();
}

std::vector<bool> changelog_reader::add(const std::vector<stream_task*>& tasks) {
  // The offsets of every logged store of every task at once: two requests to each leader,
  // where one store partition at a time cost two round trips each (8 stores: 16 before the
  // first record was processed).
  std::vector<kafka::topic_partition> parts;
  for (auto* task : tasks)
    for (auto& s : task->stores().all())
      if (!s.changelog_topic.empty()) parts.push_back({s.changelog_topic, task->partition()});
  const auto offsets = end_offsets(parts);
  std::vector<bool> restoring;
  std::vector<stream_task*> to_read;
  std::size_t i = 0;
  for (auto* task : tasks) {
    bool any = false;
    for (auto& s : task->stores().all()) {
      if (s.changelog_topic.empty()) continue;
      const auto [low, high] = offsets[i++];
      any = add_store(*task, s, low, high) || any;
    }
    restoring.push_back(any);
    if (any) to_read.push_back(task);
  }
  start_reading(to_read);
  return restoring;
}

bool changelog_reader::add_store(stream_task& task, task_store& s, std::int64_t low, std::int64_t high) {
  auto from = s.store->committed_offset().value_or(state::changelog_offset(low)).value();
  if (from < low) from = low;  // compaction or retention removed the head: start at what exists
  if (from >= high) return false;
  begin_restore_if_idle();
  entries_.push_back({&task, &s, s.changelog_topic, task.partition(), from, high, from});
  restore_total_ += high - from;
  return true;
}

void changelog_reader::start_reading(const std::vector<stream_task*>& tasks) {
  if (tasks.empty()) return;
  publish();  // /ready and /metrics show the total at once
  // Only these tasks' changelogs, all in one assignment and one leaders lookup: the
  // partitions already restoring keep what was prefetched.
  std::vector<kafka::topic_partition_offset> assign;
  for (auto* task : tasks) {
    const auto before = assign.size();
    for (auto& e : entries_)
      if (e.task == task && !e.done) assign.push_back({e.topic, e.partition, e.next});
    spdlog::info("task {}: restoring {} store partition(s) before processing", task->name(), assign.size() - before);
  }
  consumer_->assign_more(assign);
  std::vector<std::string> new_topics;
  for (const auto& a : assign)
    if (topics_led_.insert(a.topic).second) new_topics.push_back(a.topic);
  if (!new_topics.empty() && !consumer_->learn_leaders(new_topics, 1s)) {
    // Not fatal: librdkafka's own topic scan finds the leaders within a second.
    for (const auto& t : new_topics) topics_led_.erase(t);
  }
}

void changelog_reader::restore(std::vector<stream_task*>& restored) {
  // Each run of one partition is written as one restore batch straight from librdkafka's
  // buffers: no copy into framework records first.
  consumer_->poll_lent(10000, 10ms, [&](std::span<const raw_view> run) {
    const auto& first = run.front();
    auto r = std::find_if(entries_.begin(), entries_.end(),
                          [&](auto& x) { return !x.done && x.topic == first.topic && x.partition == first.partition; });
    if (r == entries_.end()) return;
    run_.clear();
    if (r->store->spec->format == detail::value_format::timestamped) {
      // The changelog holds each value alone with its timestamp as the record's: the store
      // keeps the timestamp in front (detail::value_format), as Kafka Streams' timestamped
      // stores restore. A changelog written before sluice kept timestamps restores the same
      // way, each aggregate stamped with the time its record was logged at.
      timestamped_.resize(std::max(timestamped_.size(), run.size()));
      std::size_t i = 0;
      for (const auto& m : run) {
        if (!m.key) continue;
        std::optional<std::string_view> value;
        if (m.value) {
          auto& bytes = timestamped_[i++];
          bytes.clear();
          state::append_u64(bytes, static_cast<std::uint64_t>(m.timestamp));
          bytes.append(*m.value);
          value = bytes;
        }
        run_.push_back({*m.key, value, m.timestamp});
      }
    } else {
      for (const auto& m : run) {
        if (m.key) run_.push_back({*m.key, m.value, m.timestamp});
      }
    }
    const auto next = run.back().offset + 1;
    r->store->store->restore(run_, state::changelog_offset(next));
    r->restored += run.size();
    r->next = next;
    restore_records_ += run.size();
    metrics_.restored_records->add(run.size());
    if (r->next >= r->end) r->done = true;
  });
  for (auto& e : entries_) {
    if (e.done || e.eof < 0) continue;
    // Under read_committed the partition ends at its last stable offset. Below the end taken
    // when the restore began, a transaction is still open there (a previous owner's, which may
    // yet commit together with the input offsets of its records): restoring only to the stable
    // offset would leave those records out of the store while the input that made them is
    // never read again. Wait for its outcome; its records or its abort marker move the end.
    if (e.eof < e.end) {
      const auto now = clock_type::now();
      if (!e.waiting) {
        spdlog::info(
            "store '{}' partition {} of task {}: changelog stable to offset {} of {}; waiting for the open "
            "transaction there to commit or abort",
            e.store->spec->name, e.partition, e.task->name(), e.eof, e.end);
        e.waiting = true;
        e.waiting_since = now;
      }
      if (now - e.waiting_since < open_transaction_wait_) continue;
      spdlog::warn(
          "store '{}' partition {} of task {}: the transaction open in changelog {}[{}] at offset {} did not "
          "end within {} ms; the store is restored to that stable offset. A transaction the broker never "
          "ends is a hanging one: find it with kafka-transactions.sh find-hanging and abort it",
          e.store->spec->name, e.partition, e.task->name(), e.topic, e.partition, e.eof,
          open_transaction_wait_.count());
    }
    if (e.eof > e.next)
      e.store->store->restore({}, state::changelog_offset(e.eof));  // past aborted records and markers
    e.next = std::max(e.next, e.eof);
    e.done = true;
  }
  publish();
  if (clock_type::now() - last_log_ >= log_interval_) log_progress();

  // Tasks whose stores are all done leave the reader.
  const auto first_new = restored.size();
  for (auto& e : entries_) {
    bool all = std::all_of(entries_.begin(), entries_.end(), [&](auto& x) { return x.task != e.task || x.done; });
    if (all &&
        std::find(restored.begin() + static_cast<std::ptrdiff_t>(first_new), restored.end(), e.task) == restored.end())
      restored.push_back(e.task);
  }
  if (restored.size() == first_new) return;
  // Finished changelogs leave the restore consumer one by one; the others keep their
  // prefetched records (a full reassignment dropped them and stalled about 0.5 s each time).
  std::vector<kafka::topic_partition> finished;
  for (auto t = restored.begin() + static_cast<std::ptrdiff_t>(first_new); t != restored.end(); ++t) {
    for (auto& e : entries_) {
      if (e.task != *t) continue;
      spdlog::info("restored store '{}' partition {} of task {}: {} records (offsets {}..{})", e.store->spec->name,
                   e.partition, e.task->name(), e.restored, e.start, e.next);
      finished.push_back({e.topic, e.partition});
      retire_entry(e);
    }
    std::erase_if(entries_, [&](auto& e) { return e.task == *t; });
  }
  if (entries_.empty()) {
    consumer_->unassign();
  } else {
    consumer_->unassign_some(finished);
  }
  end_restore_if_empty();
}

void changelog_reader::remove(const stream_task& task) {
  std::vector<kafka::topic_partition> leaving;
  for (auto& e : entries_)
    if (e.task == &task) {
      leaving.push_back({e.topic, e.partition});
      retire_entry(e);
    }
  if (leaving.empty()) return;
  std::erase_if(entries_, [&](auto& e) { return e.task == &task; });
  if (entries_.empty()) {
    consumer_->unassign();
  } else {
    consumer_->unassign_some(leaving);
  }
  end_restore_if_empty();
}

void changelog_reader::clear() {
  for (const auto& e : entries_) retire_entry(e);
  entries_.clear();
  consumer_->unassign();
  end_restore_if_empty();
}

void changelog_reader::begin_restore_if_idle() {
  if (in_restore_) return;
  in_restore_ = true;
  started_ = clock_type::now();
  last_log_ = started_;  // the first progress line one interval in: a short restore logs none
  restore_total_ = retired_done_ = 0;
  restore_records_ = 0;
}

void changelog_reader::retire_entry(const entry& e) {
  const auto reached = std::min(e.next, e.end);
  if (e.done) {
    retired_done_ += e.end - e.start;
  } else {
    retired_done_ += reached - e.start;
    restore_total_ -= e.end - reached;  // will not be restored here: no longer part of this restore
  }
}

void changelog_reader::end_restore_if_empty() {
  if (!entries_.empty() || !in_restore_) return;
  in_restore_ = false;
  started_ = {};
  publish();
}

restore_progress changelog_reader::progress() const {
  restore_progress p;
  p.total = restore_total_;
  p.done = retired_done_;
  for (const auto& e : entries_) {
    p.done += (e.done ? e.end : std::min(e.next, e.end)) - e.start;
    if (e.waiting && !e.done) ++p.waiting_for_transactions;
  }
  if (!in_restore_) return p;
  double seconds = std::chrono::duration<double>(clock_type::now() - started_).count();
  p.records_per_second = seconds > 0 ? static_cast<double>(restore_records_) / seconds : 0;
  p.eta_seconds = p.records_per_second > 0 ? static_cast<double>(p.total - p.done) / p.records_per_second : 0;
  return p;
}

void changelog_reader::publish() {
  std::int64_t remaining = 0;
  for (const auto& e : entries_)
    if (!e.done) remaining += std::max<std::int64_t>(0, e.end - e.next);
  const auto p = progress();
  metrics_.remaining->set(remaining);
  metrics_.done->set(p.done);
  metrics_.total->set(p.total);
  metrics_.rate->set(static_cast<std::int64_t>(std::llround(p.records_per_second)));
}

void changelog_reader::log_progress() {
  auto now = clock_type::now();
  last_log_ = now;
  double seconds = std::chrono::duration<double>(now - started_).count();
  for (auto& e : entries_) {
    if (e.done) continue;
    auto total = e.end - e.start;
    auto done = e.next - e.start;
    double rate = seconds > 0 ? static_cast<double>(e.restored) / seconds : 0;
    double eta = rate > 0 ? static_cast<double>(e.end - e.next) / rate : 0;
    spdlog::info("restoring store '{}' partition {}: {}/{} records, {:.0f} records/s, ETA {:.0f} s",
                 e.store->spec->name, e.partition, done, total, rate, std::ceil(eta));
  }
}

}  // namespace sluice::runtime
