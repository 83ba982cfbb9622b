// The stream thread's loop: poll, restore, process, punctuate, commit; rebalances and
// recovery from retriable failures (see error_classification.hpp).
#include "runtime/stream_thread.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "runtime/error_classification.hpp"
#include "sluice/error.hpp"

namespace sluice::runtime {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

std::string parts_text(const std::vector<kafka::topic_partition>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p.topic + "-" + std::to_string(p.partition);
  return out.empty() ? "none" : out;
}

/// The least time a partition stays paused in the consumer. Each resume starts a fetch and
/// each pause throws away what librdkafka prefetched: a task that takes its held records
/// much faster than max.poll.records per second would otherwise flap every few
/// milliseconds.
constexpr std::int64_t min_consumer_pause_ms = 250;

/// A consumer fenced again this soon after it rejoined is not fencing its own stale member
/// id after an outage (that happens once per outage) but competing with a twin instance that
/// has the same group.instance.id: each rejoin fences the other within a heartbeat or two.
constexpr auto twin_fencing_window = std::chrono::seconds(30);

}  // namespace

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

stream_thread::stream_thread(thread_settings settings, const task_services& services,
                             std::function<void(thread_state)> on_state_change)
    : settings_(std::move(settings)),
      services_(services),
      on_state_change_(std::move(on_state_change)),
      label_("thread=\"" + std::to_string(settings_.index) + "\""),
      restored_records_(services.metrics->get_counter("sluice_restored_records_total", label_)),
      restore_remaining_(services.metrics->get_gauge("sluice_restore_remaining_records", label_)),
      lag_(services.metrics->get_gauge("sluice_consumer_lag_records", label_)),
      commit_latency_(services.metrics->get_histogram("sluice_commit_latency_ms", label_)),
      retries_(services.metrics->get_counter("sluice_task_retries_total", label_)),
      recoveries_(services.metrics->get_counter("sluice_task_recoveries_total", label_)) {}

stream_thread::~stream_thread() {
  request_stop();
  join();
}

void stream_thread::start() {
  set_state(thread_state::starting);
  thread_ = std::thread([this] { run(); });
}

void stream_thread::join() {
  if (thread_.joinable()) thread_.join();
}

void stream_thread::set_state(thread_state s) {
  state_.store(s);
  if (on_state_change_) on_state_change_(s);
}

void stream_thread::send(std::string_view topic, std::int32_t partition, const std::optional<std::string_view>& key,
                         const std::optional<std::string_view>& value, std::int64_t timestamp,
                         const sluice::headers& headers) {
  collector_->send(topic, partition, key, value, timestamp, headers);
}

void stream_thread::run() {
  try {
    collector_ = std::make_unique<record_collector>(settings_.producer, services_.guarantee, settings_.transactional_id,
                                                    settings_.on_production_error, *services_.metrics, label_);
    restore_consumer_ = std::make_unique<kafka::consumer>(settings_.restore_consumer);
    // The end is noted here and applied by restore_step() after the batch: this callback runs
    // inside poll_batch(), before the batch's records of the same partition are written.
    restore_consumer_->on_partition_eof([this](std::string_view topic, std::int32_t partition, std::int64_t offset) {
      for (auto& r : restoring_)
        if (!r.done && r.topic == topic && r.partition == partition) r.eof = std::max(r.eof, offset);
    });
    consumer_ = std::make_unique<kafka::consumer>(settings_.consumer);
    consumer_->subscribe(settings_.source_topics, this);
    set_state(thread_state::rebalancing);
    last_commit_ = last_checkpoint_ = last_restore_log_ = clock_type::now();
    while (!stop_.load()) loop_once();
    set_state(thread_state::pending_shutdown);
    bool committed = false;
    if (!recovery_pending_) {
      try {
        commit_all();
        committed = true;
      } catch (const std::exception& e) {
        if (classify_failure(e) != failure_kind::retriable) throw;
        // Nothing is lost: the next owner of the tasks resumes from the last commit.
        spdlog::warn("stream thread {}: the final commit failed ({}); closing the tasks without it", settings_.index,
                     e.what());
        collector_->abort_transaction();
      }
    }
    close_tasks(committed);
    consumer_->close();
    set_state(thread_state::dead);
  } catch (const std::exception& e) {
    failure_ = e.what();
    if (auto advice = fatal_advice(e); !advice.empty()) failure_ += "; " + advice;
    spdlog::error("stream thread {} stops: {}", settings_.index, failure_);
    try {
      if (collector_) collector_->abort_transaction();
      close_tasks(false);
      if (consumer_) consumer_->close();
    } catch (const std::exception& inner) {
      spdlog::warn("stream thread {}: cleanup after failure also failed: {}", settings_.index, inner.what());
    }
    set_state(thread_state::failed);
  }
}

void stream_thread::loop_once() {
  if (recovery_pending_) {
    // The cluster was still away at the last attempt: wait a little (a stop request cuts
    // it short), then try again; nothing is processed meanwhile.
    try {
      auto until = clock_type::now() + settings_.recovery_backoff;
      while (!stop_.load() && clock_type::now() < until) {
        // Keeps the group membership and rebalances going; what it fetches is read again
        // after the rewind.
        consumer_->poll_batch(batch_, settings_.max_poll_records, 100ms);
      }
      if (!stop_.load()) recover_from_failure();
    } catch (const std::exception& e) {
      on_failure(e, recovery_attempt::next_loop);
    }
    return;
  }
  try {
    auto timeout = restoring_.empty() ? settings_.poll_timeout : 0ms;
    timeout = until_next_release(services_.wall_clock_ms(), timeout);
    consumer_->poll_batch(batch_, settings_.max_poll_records, timeout);
    auto batch_time = services_.wall_clock_ms();
    for (auto& m : batch_) {
      const partition_ref tp{m.topic, m.partition};
      auto it = by_partition_.find(tp);
      if (it == by_partition_.end()) continue;
      auto& input = it->second;
      // After an asynchronous seek back to X, records fetched before the seek may still
      // arrive: drop them until X itself comes (it was delivered once, so it exists).
      if (!seeking_.empty()) {
        if (auto s = seeking_.find(tp); s != seeking_.end()) {
          if (m.offset != s->second) continue;
          seeking_.erase(s);
        }
      }
      // Not running yet (restoring): leave the record in Kafka; the seek below re-reads it.
      if (!input.task->running() || (!unread_.empty() && unread_.contains(tp))) {
        unread_.try_emplace({m.topic, m.partition}, m.offset);
        continue;
      }
      // Paused by pacing, or records of this partition already wait: keep it, in order.
      if (input.task->input_paused(batch_time) || !input.held.records.empty()) {
        input.held.records.push(m);
        continue;
      }
      input.task->process(m);
    }
    release_held_records();
    if (!restoring_.empty()) restore_step();
    auto now = services_.wall_clock_ms();
    for (auto& [id, task] : tasks_) task->punctuate_wall_clock(now);
    // Asynchronous: librdkafka 2.0.2's waiting seek times out when repeated on a busy
    // partition (seen under pacing); seeking_ filters what was fetched before it.
    for (const auto& [tp, offset] : unread_) {
      consumer_->seek({tp.first, tp.second, offset}, 0ms);
      seeking_[tp] = offset;
    }
    unread_.clear();
    collector_->poll();
    // Commit at the interval, on request, or, under exactly-once, early when a store's open
    // transaction outgrows the checkpoint bound: a crash then replays a tail of the
    // changelog, whatever the rate. (At-least-once stores are written through and
    // checkpointed at commits; a crash replays at most one commit interval.)
    const bool bound_transactions = services_.guarantee == processing_guarantee::exactly_once;
    bool due = std::any_of(tasks_.begin(), tasks_.end(), [&](auto& t) {
      return t.second->commit_requested() ||
             (bound_transactions &&
              t.second->commit_due(settings_.checkpoint_tail_fraction, settings_.checkpoint_min_records));
    });
    if (due || clock_type::now() - last_commit_ >= settings_.commit_interval) commit_all();
  } catch (const std::exception& e) {
    on_failure(e, recovery_attempt::now);
  }
}

void stream_thread::on_assigned(const std::vector<kafka::topic_partition>& parts) {
  spdlog::info("stream thread {}: assigned {}", settings_.index, parts_text(parts));
  set_state(thread_state::rebalancing);
  assignment_ = parts;
  seeking_.clear();
  create_tasks(parts);
}

void stream_thread::on_revoked(const std::vector<kafka::topic_partition>& parts) {
  spdlog::info("stream thread {}: revoked {}", settings_.index, parts_text(parts));
  try {
    commit_all();
    close_tasks(true);
  } catch (const std::exception& e) {
    spdlog::warn("stream thread {}: commit on revocation failed ({}); closing tasks without it", settings_.index,
                 e.what());
    if (collector_) collector_->abort_transaction();
    close_tasks(false);
    if (services_.guarantee == processing_guarantee::exactly_once) collector_->recreate();
  }
  assignment_.clear();
}

void stream_thread::create_tasks(const std::vector<kafka::topic_partition>& parts) {
  for (const auto& p : parts) {
    auto sub = settings_.topic_to_subtopology.find(p.topic);
    if (sub == settings_.topic_to_subtopology.end()) continue;
    std::string id = std::to_string(sub->second) + "_" + std::to_string(p.partition);
    auto it = tasks_.find(id);
    if (it == tasks_.end()) {
      auto task = std::make_unique<stream_task>(sub->second, p.partition, services_, *this, label_);
      it = tasks_.emplace(id, std::move(task)).first;
      begin_restoration(*it->second);
    }
    by_partition_[{p.topic, p.partition}].task = it->second.get();
  }
  set_state(restoring_.empty() ? thread_state::running : thread_state::restoring);
}

void stream_thread::begin_restoration(stream_task& task) {
  bool any = false;
  for (auto& s : task.stores()) {
    if (s.changelog_topic.empty()) continue;
    auto [low, high] = restore_consumer_->watermarks(s.changelog_topic, task.partition(), 30s);
    auto from = s.store->committed_offset().value_or(low);
    if (from < low) from = low;  // compaction or retention removed the head: start at what exists
    if (from >= high) continue;
    restoring_.push_back({&task, &s, s.changelog_topic, task.partition(), from, high, from});
    any = true;
  }
  if (!any) {
    task.start();
    return;
  }
  spdlog::info("task {}: restoring {} store partition(s) before processing", task.id(),
               std::count_if(restoring_.begin(), restoring_.end(), [&](auto& r) { return r.task == &task; }));
  if (restore_started_ == clock_type::time_point{}) restore_started_ = clock_type::now();
  // Only this task's changelogs: the partitions already restoring keep what was prefetched.
  std::vector<kafka::topic_partition_offset> assign;
  for (auto& r : restoring_)
    if (r.task == &task && !r.done) assign.push_back({r.topic, r.partition, r.next});
  restore_consumer_->assign_more(assign);
}

void stream_thread::restore_step() {
  restore_consumer_->poll_batch(restore_batch_, 10000, 10ms);
  // Apply contiguous runs of one partition as one write batch.
  std::vector<state::restore_record> run;
  std::size_t i = 0;
  while (i < restore_batch_.size()) {
    const auto& first = restore_batch_[i];
    auto r = std::find_if(restoring_.begin(), restoring_.end(), [&](auto& x) {
      return !x.done && x.topic == first.topic && x.partition == first.partition;
    });
    std::size_t j = i;
    run.clear();
    while (j < restore_batch_.size() && restore_batch_[j].topic == first.topic &&
           restore_batch_[j].partition == first.partition) {
      const auto& m = restore_batch_[j];
      if (m.key) {
        state::restore_record rec;
        rec.key = *m.key;
        if (m.value) rec.value = std::string_view(*m.value);
        rec.timestamp_ms = m.timestamp;
        run.push_back(rec);
      }
      ++j;
    }
    if (r != restoring_.end()) {
      auto next = restore_batch_[j - 1].offset + 1;
      r->store->store->restore(run, next);
      r->restored += j - i;
      r->next = next;
      restored_records_.add(j - i);
      if (r->next >= r->end) r->done = true;
    }
    i = j;
  }
  for (auto& r : restoring_) {
    if (r.done || r.eof < 0) continue;
    if (r.eof > r.next) r.store->store->restore({}, r.eof);  // past aborted records and markers
    r.next = std::max(r.next, r.eof);
    r.done = true;
  }
  std::int64_t remaining = 0;
  for (auto& r : restoring_)
    if (!r.done) remaining += std::max<std::int64_t>(0, r.end - r.next);
  restore_remaining_.set(remaining);
  log_restore_progress(false);

  // Tasks whose stores are all done start processing.
  std::vector<stream_task*> finished;
  for (auto& r : restoring_) {
    bool all = std::all_of(restoring_.begin(), restoring_.end(), [&](auto& x) { return x.task != r.task || x.done; });
    if (all && std::find(finished.begin(), finished.end(), r.task) == finished.end()) finished.push_back(r.task);
  }
  // Finished changelogs leave the restore consumer one by one; the others keep their
  // prefetched records (a full reassignment dropped them and stalled about 0.5 s each time).
  std::vector<kafka::topic_partition> finished_changelogs;
  for (auto& r : restoring_)
    if (std::find(finished.begin(), finished.end(), r.task) != finished.end())
      finished_changelogs.push_back({r.topic, r.partition});
  for (auto* t : finished) finish_restoration(*t);
  if (restoring_.empty())
    restore_consumer_->unassign();
  else
    restore_consumer_->unassign_some(finished_changelogs);
  if (restoring_.empty()) {
    restore_started_ = {};
    set_state(thread_state::running);
  }
}

void stream_thread::finish_restoration(stream_task& task) {
  for (auto& r : restoring_) {
    if (r.task != &task) continue;
    spdlog::info("restored store '{}' partition {} of task {}: {} records (offsets {}..{})", r.store->spec->name,
                 r.partition, task.id(), r.restored, r.start, r.next);
  }
  std::erase_if(restoring_, [&](auto& r) { return r.task == &task; });
  // Make the restored tail durable: a crash soon after must not replay it again.
  task.checkpoint_stores();
  task.start();
}

void stream_thread::log_restore_progress(bool force) {
  auto now = clock_type::now();
  if (!force && now - last_restore_log_ < settings_.restore_log_interval) return;
  last_restore_log_ = now;
  double seconds = std::chrono::duration<double>(now - restore_started_).count();
  for (auto& r : restoring_) {
    if (r.done) continue;
    auto total = r.end - r.start;
    auto done = r.next - r.start;
    double rate = seconds > 0 ? static_cast<double>(r.restored) / seconds : 0;
    double eta = rate > 0 ? static_cast<double>(r.end - r.next) / rate : 0;
    spdlog::info("restoring store '{}' partition {}: {}/{} records, {:.0f} records/s, ETA {:.0f} s",
                 r.store->spec->name, r.partition, done, total, rate, std::ceil(eta));
  }
}

void stream_thread::commit_all() {
  last_commit_ = clock_type::now();
  std::vector<kafka::topic_partition_offset> offsets;
  for (auto& [id, task] : tasks_) {
    if (!task->running()) continue;
    auto o = task->offsets_to_commit();
    offsets.insert(offsets.end(), o.begin(), o.end());
  }
  auto next_offset = [this](const std::string& topic, std::int32_t partition) {
    return collector_->next_changelog_offset(topic, partition);
  };
  auto started = clock_type::now();
  if (services_.guarantee == processing_guarantee::exactly_once) {
    if (offsets.empty() && !collector_->transaction_open()) return;
    collector_->commit_transaction(offsets, consumer_->group_metadata());
  } else {
    collector_->flush();
    if (!offsets.empty()) consumer_->commit(offsets);
  }
  if (!offsets.empty() || services_.guarantee == processing_guarantee::exactly_once) {
    // Progress: whatever failed before has been ridden out.
    failing_since_.reset();
    set_degraded(false);
  }
  commit_latency_.record(std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - started).count());
  for (auto& [id, task] : tasks_) {
    if (!task->running()) continue;
    task->commit_stores(next_offset);
    task->mark_committed();
  }
  collector_->reset_changelog_offsets();
  update_lag();
  bool interval_passed = clock_type::now() - last_checkpoint_ >= settings_.checkpoint_interval;
  if (interval_passed) last_checkpoint_ = clock_type::now();
  for (auto& [id, task] : tasks_)
    if (task->running() &&
        (interval_passed || task->checkpoint_due(settings_.checkpoint_tail_fraction, settings_.checkpoint_min_records)))
      task->checkpoint_stores();
}

void stream_thread::update_lag() {
  // Lag = records fetched-ahead by the broker's high watermark minus our position, summed
  // over the assigned partitions; cached watermarks, so no broker round trip.
  std::int64_t lag = 0;
  for (const auto& p : consumer_->position(assignment_)) {
    auto high = consumer_->cached_high_watermark(p.topic, p.partition);
    if (high && p.offset >= 0 && *high > p.offset) lag += *high - p.offset;
  }
  lag_.set(lag);
}

void stream_thread::release_held_records() {
  // Pacing back-pressure. Records a paused task cannot take yet wait here, in order, and go
  // to the task once its pause ends (the poll returns in time: until_next_release). Short
  // pauses touch nothing in the consumer: what librdkafka already fetched is kept, not
  // thrown away and fetched again. A partition holding max.poll.records (H) or more is
  // paused in the consumer, so at most 2H - 1 records are held per partition (a batch may
  // land on a queue just under the mark). No seek: on resume librdkafka fetches from the
  // record after the last one it delivered, i.e. the last one held. It is resumed while
  // 3H/4 are still held (and min_consumer_pause_ms after the pause): librdkafka 2.0.2 takes
  // up to about a second to deliver a resumed partition again when its broker thread had
  // nothing to fetch (measured 0.05 .. 0.95 s), and what is held must last until then.
  auto now = services_.wall_clock_ms();
  for (auto& [tp, input] : by_partition_) {
    auto& held = input.held;
    if ((held.records.empty() && !held.consumer_paused) || !input.task->running()) continue;
    while (!held.records.empty() && !input.task->input_paused(now)) {
      input.task->process(held.records.front());
      held.records.pop();
    }
    if (!held.consumer_paused && held.records.size() >= settings_.max_poll_records) {
      consumer_->pause({{tp.first, tp.second}});
      held.consumer_paused = true;
      held.paused_at_ms = now;
    } else if (held.consumer_paused && held.records.size() <= settings_.max_poll_records * 3 / 4 &&
               now - held.paused_at_ms >= min_consumer_pause_ms) {
      consumer_->resume({{tp.first, tp.second}});
      held.consumer_paused = false;
    }
  }
}

void stream_thread::drop_held_records() noexcept {
  for (auto& [tp, input] : by_partition_) {
    input.held.records.clear();
    if (!input.held.consumer_paused) continue;
    input.held.consumer_paused = false;
    try {
      consumer_->resume({{tp.first, tp.second}});
    } catch (const std::exception& e) {
      spdlog::debug("stream thread {}: resume {}-{}: {}", settings_.index, tp.first, tp.second, e.what());
    }
  }
}

std::chrono::milliseconds stream_thread::until_next_release(std::int64_t now_ms, std::chrono::milliseconds cap) const {
  auto until = [&](std::int64_t due_ms) {
    cap = std::min(cap, std::chrono::milliseconds(std::max<std::int64_t>(0, due_ms - now_ms)));
  };
  for (const auto& [tp, input] : by_partition_) {
    if (!input.task->running()) continue;
    if (!input.held.records.empty()) until(input.task->input_paused_until());
    // All released before the partition may be resumed (a share far above max.poll.records/s).
    if (input.held.records.empty() && input.held.consumer_paused) until(input.held.paused_at_ms + min_consumer_pause_ms);
  }
  return cap;
}

void stream_thread::close_tasks(bool clean) {
  // Held records were never processed: their offsets are not committed, the next owner
  // (or the rewind) reads them again.
  if (consumer_) drop_held_records();
  for (auto& [id, task] : tasks_) {
    if (clean && task->running()) task->checkpoint_stores();
    task->close(clean);
  }
  tasks_.clear();
  by_partition_.clear();
  restoring_.clear();
  if (restore_consumer_) restore_consumer_->unassign();
}

void stream_thread::note_failure(const std::exception& e) {
  const auto now = clock_type::now();
  if (!failing_since_) failing_since_ = now;
  retries_.add();
  last_failure_ = e.what();
  set_degraded(true);
  const auto failing_for = std::chrono::duration_cast<std::chrono::milliseconds>(now - *failing_since_);
  if (failing_for >= settings_.task_timeout)
    throw sluice::error(errc::timeout,
                        "stream thread " + std::to_string(settings_.index) + " has not committed for " +
                            std::to_string(failing_for.count() / 1000) + " s of retriable failures (task.timeout.ms=" +
                            std::to_string(settings_.task_timeout.count()) + "); the last one: " + last_failure_ +
                            ". Check that the brokers at bootstrap.servers are up and reachable, then restart the job "
                            "(it resumes from its last commit); raise task.timeout.ms to ride out longer outages");
}

void stream_thread::on_failure(const std::exception& e, recovery_attempt attempt) {
  switch (classify_failure(e)) {
    case failure_kind::member_fenced: {
      const auto now = clock_type::now();
      if (last_member_fencing_ && now - *last_member_fencing_ < twin_fencing_window) {
        // Fenced again right after rejoining: a twin instance keeps taking the identity back.
        auto* se = dynamic_cast<const sluice::error*>(&e);
        throw sluice::error(errc::kafka_fatal,
                            std::string(e.what()) + "; fenced again " +
                                std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                                   now - *last_member_fencing_).count()) +
                                " s after the consumer rejoined",
                            se ? se->kafka() : kafka_flags{});
      }
      last_member_fencing_ = now;
      consumer_fenced_ = true;
      break;
    }
    case failure_kind::retriable:
      break;
    default:
      throw;  // rethrows the exception being handled by the caller's catch
  }
  note_failure(e);
  if (attempt == recovery_attempt::next_loop) {
    spdlog::warn("stream thread {}: recovery failed ({}); retrying in {} ms", settings_.index, last_failure_,
                 settings_.recovery_backoff.count());
    return;
  }
  spdlog::warn("stream thread {}: {}; closing its tasks, recreating the {} and resuming from the last committed "
               "offsets (retrying for up to task.timeout.ms={})",
               settings_.index, last_failure_, consumer_fenced_ ? "consumer and the producer" : "producer",
               settings_.task_timeout.count());
  if (services_.guarantee == processing_guarantee::exactly_once)
    services_.metrics->get_counter("sluice_transaction_aborts_total", label_).add();
  collector_->abort_transaction();
  close_tasks(false);
  recovery_pending_ = true;
  try_recovery();
}

void stream_thread::try_recovery() {
  try {
    recover_from_failure();
  } catch (const std::exception& e) {
    on_failure(e, recovery_attempt::next_loop);
  }
}

void stream_thread::recover_from_failure() {
  close_tasks(false);
  if (consumer_fenced_) {
    // A fenced consumer stays fenced: a new one joins the group under the same
    // group.instance.id and resumes from the committed offsets of what it is assigned.
    assignment_.clear();
    seeking_.clear();
    unread_.clear();
    consumer_->close();  // its revocation finds no task left to commit
    consumer_.reset();
    consumer_ = std::make_unique<kafka::consumer>(settings_.consumer);
    consumer_->subscribe(settings_.source_topics, this);
    consumer_fenced_ = false;
    set_state(thread_state::rebalancing);
  }
  collector_->recreate();
  if (!assignment_.empty()) create_tasks(assignment_);  // none after a new consumer: it rejoins
  rewind_to_committed();
  recovery_pending_ = false;
  recoveries_.add();
  spdlog::info("stream thread {}: recovered; resuming from the last committed offsets", settings_.index);
}

void stream_thread::set_degraded(bool degraded) {
  if (degraded_.exchange(degraded) == degraded) return;
  if (on_state_change_) on_state_change_(state_.load());
}

void stream_thread::rewind_to_committed() {
  seeking_.clear();
  drop_held_records();
  if (assignment_.empty()) return;
  for (const auto& c : consumer_->committed(assignment_, 30s)) {
    auto offset = c.offset >= 0 ? c.offset : kafka::offset_beginning;
    try {
      consumer_->seek({c.topic, c.partition, offset}, 10s);
    } catch (const std::exception& e) {
      spdlog::warn("stream thread {}: seek {}-{} to {} failed: {}", settings_.index, c.topic, c.partition, offset,
                   e.what());
    }
  }
}

}  // namespace sluice::runtime
