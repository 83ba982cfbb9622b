// The stream thread's loop: poll, restore, process, punctuate, commit; rebalances and
// recovery from retriable failures (see error_classification.hpp).
#include "runtime/stream_thread.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "runtime/allocator.hpp"
#include "runtime/error_classification.hpp"
#include "runtime/sliced_wait.hpp"
#include "sluice/error.hpp"
#include "sluice/state/kv_backed_store.hpp"

namespace sluice::runtime {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

/// How often the process gives its allocator's free memory back (runtime/allocator.hpp).
constexpr auto allocator_release_interval = 10s;

/// How often the lag and store size gauges are set (a scrape interval is seconds at least).
constexpr auto partition_gauges_interval = 1s;

/// While the consumer reports every broker down: how often watch_brokers() asks whether one
/// answers again, and how long it waits for the answer (the loop is blocked meanwhile).
constexpr auto brokers_check_interval = 1s;
constexpr auto brokers_check_timeout = 200ms;

/// A partition's lag gauge is labelled by the partition alone: whichever thread owns it.
std::string lag_labels(const kafka::topic_partition& p) {
  return "topic=\"" + p.topic + "\",partition=\"" + std::to_string(p.partition) + "\"";
}

std::string parts_text(const std::vector<kafka::topic_partition>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p.topic + "-" + std::to_string(p.partition);
  return out.empty() ? "none" : out;
}

/// The lag of a task's empty input as its consumer knows it, for task idling
/// (partition_group::ready(), max.task.idle.ms).
///
/// Kafka Streams reads a partition's lag from every fetch response: end offset (the last
/// stable offset under read_committed) minus the position, which the Java consumer moves past
/// transaction markers. librdkafka 2.0.2 offers neither: rd_kafka_position() is the offset
/// after the last record handed to the application, which stays one short of the end when
/// the end is a commit marker (librdkafka #2539, #3917), and the cached watermarks hold the
/// high watermark only, not the last stable offset. A rule "position < end: wait" would hold
/// a task reading transactional input forever. Two signals instead, each sound:
/// - the partition end event (enable.partition.eof, which the runtime forces on the group
///   consumer; partition_group::note_end()). librdkafka emits it when a fetch answers with
///   the fetcher's next offset equal to the end offset (the last stable offset under
///   read_committed), and the fetcher's offset moves past control batches: so it comes after
///   the last record whatever markers follow it. It is queued behind the records fetched
///   before it, and it is emitted once per end offset, but that memory is reset by every
///   pause, resume, seek and assignment (a new fetch version), which also drops what was
///   queued before; so a partition at its end that is fetched gets the event again.
/// - here: the cached high watermark of the last fetch response, when the records delivered
///   reach it (nothing beyond them at all, marker or record). Only a shortcut: with a marker
///   last it says "positive", and the partition end settles it.
/// Why a task cannot idle forever: it waits only on an empty partition whose lag is unknown
/// or positive. An empty partition is never paused by pacing for long (update_fetch resumes
/// it after min_fetch_pause_ms) and a running task's inputs are not paused for restoration,
/// so its fetcher keeps fetching: either records come (the partition is no longer empty) or
/// the fetcher reaches the end and the end event comes, within about fetch.wait.max.ms of
/// the last record. Zero lag waits at most max.task.idle.ms. While a task idles, the thread
/// keeps polling, processing the other tasks, punctuating and committing.
class consumer_lags final : public lag_source {
 public:
  explicit consumer_lags(const kafka::consumer& consumer) : consumer_(consumer) {}
  fetched_lag lag(const kafka::topic_partition& tp, std::int64_t delivered_end) const override {
    const auto high = consumer_.cached_high_watermark(tp.topic, tp.partition);
    if (!high || delivered_end < 0) return fetched_lag::unknown;
    return delivered_end >= *high ? fetched_lag::zero : fetched_lag::positive;
  }

 private:
  const kafka::consumer& consumer_;
};

}  // namespace

stream_thread::stream_thread(thread_settings settings, const task_services& services,
                             std::function<void(thread_state)> on_state_change)
    : settings_(std::move(settings)),
      services_(services),
      on_state_change_(std::move(on_state_change)),
      label_("thread=\"" + std::to_string(settings_.index) + "\""),
      consumer_statistics_(*services.metrics, label_, client_kind::consumer),
      restore_metrics_{&services.metrics->get_counter("sluice_restored_records_total", label_),
                       &services.metrics->get_gauge("sluice_restore_remaining_records", label_),
                       &services.metrics->get_gauge("sluice_restore_done_records", label_),
                       &services.metrics->get_gauge("sluice_restore_total_records", label_),
                       &services.metrics->get_gauge("sluice_restore_rate_records_per_second", label_)},
      commit_latency_(services.metrics->get_histogram("sluice_commit_latency_ms", label_)),
      retries_(services.metrics->get_counter("sluice_task_retries_total", label_)),
      recoveries_(services.metrics->get_counter("sluice_task_recoveries_total", label_)),
      aborts_(services.metrics->get_counter("sluice_transaction_aborts_total", label_)),
      redelivered_(services.metrics->get_counter(std::string(partition_group::redelivered_metric), label_)),
      group_fetch_wakes_(services.metrics->get_counter("sluice_fetch_wakes_total", label_ + ",consumer=\"group\"")),
      restore_fetch_wakes_(
          services.metrics->get_counter("sluice_fetch_wakes_total", label_ + ",consumer=\"restore\"")) {
  producer_twin_window_ = producer_twin_window(settings_.transaction_timeout);
}

stream_thread::~stream_thread() {
  request_stop();
  join();
}

void stream_thread::start() {
  set_state(thread_state::starting);
  thread_ = std::thread([this] {
    run();
    {
      std::lock_guard lock(finished_mutex_);
      finished_ = true;
    }
    finished_changed_.notify_all();
  });
}

void stream_thread::join() {
  if (thread_.joinable()) thread_.join();
}

bool stream_thread::join_until(std::chrono::steady_clock::time_point deadline) {
  if (!thread_.joinable()) return true;
  {
    std::unique_lock lock(finished_mutex_);
    if (!finished_changed_.wait_until(lock, deadline, [this] { return finished_; })) return false;
  }
  thread_.join();
  return true;
}

void stream_thread::set_state(thread_state s) {
  state_.store(s);
  if (on_state_change_) on_state_change_(s);
}

void stream_thread::run() {
  try {
    collector_ =
        std::make_unique<record_collector>(settings_.producer, services_.guarantee, settings_.transactional_id,
                                           settings_.on_production_error, *services_.metrics, label_, stop_requested_);
    reader_ = std::make_unique<changelog_reader>(settings_.restore_consumer, settings_.restore_log_interval,
                                                 restore_metrics_);
    consumer_ = make_consumer();
    queries_.set_waker([c = consumer_.get()] { c->wake(); });
    tasks_ = std::make_unique<task_manager>(services_, settings_.topic_to_subtopology, *collector_, *reader_,
                                            *consumer_, label_);
    consumer_->subscribe(settings_.source_topics, this);
    set_state(thread_state::rebalancing);
    last_commit_ = last_checkpoint_ = clock_type::now();
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
    close_tasks(committed ? close_mode::clean : close_mode::dirty);
    consumer_->close();
    retire_partition_gauges();
    queries_.close();
    set_state(thread_state::dead);
  } catch (const std::exception& e) {
    if (!collector_ && stop_.load() && classify_failure(e) == failure_kind::retriable) {
      // Stopped while the first producer waited on the coordinator: nothing ran yet.
      spdlog::info("stream thread {}: stopped before its producer was ready ({})", settings_.index, e.what());
      queries_.close();
      set_state(thread_state::dead);
      return;
    }
    failure_ = e.what();
    if (auto advice = fatal_advice(e); !advice.empty()) failure_ += "; " + advice;
    spdlog::error("stream thread {} stops: {}", settings_.index, failure_);
    try {
      if (collector_) collector_->abort_transaction();
      close_tasks(close_mode::dirty);
      if (consumer_) consumer_->close();
      retire_partition_gauges();
    } catch (const std::exception& inner) {
      spdlog::warn("stream thread {}: cleanup after failure also failed: {}", settings_.index, inner.what());
    }
    queries_.close();
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
        if (consumer_fenced_) {
          // A fenced consumer answers every call with its fatal error; the recovery replaces it.
          std::this_thread::sleep_for(std::min<clock_type::duration>(100ms, until - clock_type::now()));
          continue;
        }
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
    // Interactive queries (query_inbox.hpp): under exactly-once only outside a transaction,
    // under at-least-once here and between the records of the batch.
    const bool serve_between_records = services_.guarantee == processing_guarantee::at_least_once;
    if (queries_.pending() &&
        !(services_.guarantee == processing_guarantee::exactly_once && collector_->transaction_open()))
      queries_.serve(tasks_->tasks());
    auto timeout = tasks_->restoring() ? 0ms : settings_.poll_timeout;
    timeout = until_next_release(services_.wall_clock_ms(), timeout);
    // A dry poll also wakes a fetcher librdkafka left asleep (kafka::consumer::wake_stalled_fetch).
    consumer_->poll_batch(batch_, settings_.max_poll_records, timeout);
    group_fetch_wakes_.observe(consumer_->fetch_wakes());
    tasks_->pause_restoring_inputs();
    auto batch_time = services_.wall_clock_ms();
    for (auto& m : batch_) {
      auto* input = tasks_->find({m.topic, m.partition});
      if (!input) continue;
      auto& task = *input->task;
      auto& queued = task.queued();
      if (const auto d = queued.accept(input->index, m.offset); d != partition_group::delivery::fresh) {
        // The consumer went back: the task had this record already (partition_group::accept).
        if (d == partition_group::delivery::again_first)
          spdlog::warn(
              "stream thread {}: the consumer delivered {}-{} from offset {} again; skipping what the task "
              "has had already ({})",
              settings_.index, m.topic, m.partition, m.offset, partition_group::redelivered_metric);
        redelivered_.add();
        continue;
      }
      // Straight to the task when it reads one partition and nothing of it waits. Else it
      // queues: the task is still restoring (fetched before the pause took effect), paused
      // by pacing, has older records waiting, or picks by timestamp across its partitions.
      if (queued.empty() && queued.partitions() == 1 && task.running() && !task.input_paused(batch_time)) {
        task.process(m);
      } else {
        queued.push(input->index, m);
      }
      if (serve_between_records && queries_.pending()) queries_.serve(tasks_->tasks());
    }
    release_held_records();
    if (tasks_->restoring()) {
      tasks_->restore();
      restore_fetch_wakes_.observe(reader_->fetch_wakes());
      if (!tasks_->restoring()) set_state(thread_state::running);
    }
    auto now = services_.wall_clock_ms();
    for (auto& [id, task] : tasks_->tasks()) task->punctuate_wall_clock(now);
    collector_->poll();
    // Commit at the interval, on request, or, under exactly-once, early when a store's open
    // transaction outgrows the checkpoint bound: a crash then replays a tail of the
    // changelog, whatever the rate. (At-least-once stores are written through and
    // checkpointed at commits; a crash replays at most one commit interval.)
    const bool bound_transactions = services_.guarantee == processing_guarantee::exactly_once;
    const auto& tasks = tasks_->tasks();
    bool due = std::any_of(tasks.begin(), tasks.end(), [&](auto& t) {
      return t.second->commit_requested() ||
             (bound_transactions &&
              t.second->stores().commit_due(settings_.checkpoint_tail_fraction, settings_.early_commit_min_records));
    });
    if (due || commit_after_recovery_ || clock_type::now() - last_commit_ >= settings_.commit_interval) commit_all();
    watch_brokers();
    // Not at each commit: at-least-once commits every 30 s by default, exactly-once ten times a second.
    if (clock_type::now() - partition_gauges_set_ >= partition_gauges_interval) update_partition_gauges();
    // The prefetch queues' and the producer's bursts leave freed memory mapped; give it back.
    allocator::release_free_memory_every(allocator_release_interval);
  } catch (const std::exception& e) {
    on_failure(e, recovery_attempt::now);
  }
}

void stream_thread::on_assigned(const std::vector<kafka::topic_partition>& parts) {
  spdlog::info("stream thread {}: assigned {}", settings_.index, parts_text(parts));
  set_state(thread_state::rebalancing);
  assignment_ = parts;
  // Inside the rebalance callback: the pauses of restoring inputs wait for the next poll.
  tasks_->assign(parts);
  set_state_from_tasks();
}

void stream_thread::on_revoked(const std::vector<kafka::topic_partition>& parts) {
  spdlog::info("stream thread {}: revoked {}", settings_.index, parts_text(parts));
  enter_rebalance();
  try {
    commit_all();
    close_tasks(close_mode::clean);
  } catch (const std::exception& e) {
    spdlog::warn("stream thread {}: commit on revocation failed ({}); closing tasks without it", settings_.index,
                 e.what());
    drop_uncommitted(producer_after_abort::recreate);
  }
  retire_partition_gauges();
  assignment_.clear();
}

void stream_thread::on_lost(const std::vector<kafka::topic_partition>& parts) {
  // Lost, not revoked: the group has moved on without this instance (its session timed out
  // while it was stopped or cut off), and another member may be processing the partitions
  // already. Nothing since the last commit may commit now: the open transaction is aborted
  // and the tasks close dirty, as Kafka Streams does with lost tasks.
  spdlog::warn(
      "stream thread {}: lost {} (the group moved on without this instance); what was not committed is "
      "dropped, the next owner processes it",
      settings_.index, parts_text(parts));
  enter_rebalance();
  drop_uncommitted(producer_after_abort::recreate);
  retire_partition_gauges();
  assignment_.clear();
}

void stream_thread::enter_rebalance() {
  // The eager protocol takes every partition away until the assignment: the thread owns no
  // task from here on, so it is not running (/ready answers 503) until on_assigned. A
  // revocation while stopping is the consumer's close: the thread stays pending_shutdown.
  if (!stop_.load()) set_state(thread_state::rebalancing);
}

void stream_thread::create_tasks(const std::vector<kafka::topic_partition>& parts) {
  tasks_->assign(parts);
  tasks_->pause_restoring_inputs();
  set_state_from_tasks();
}

void stream_thread::set_state_from_tasks() {
  set_state(tasks_->restoring() ? thread_state::restoring : thread_state::running);
}

void stream_thread::commit_all() {
  last_commit_ = clock_type::now();
  auto offsets = running_offsets(false);
  auto& tasks = tasks_->tasks();
  // Processors write back what they hold for the commit (processor_context::before_commit),
  // then the stores' buffered changelog writes go out, into the transaction about to commit
  // (exactly-once) or ahead of the flush the offset commit waits for (at-least-once; there
  // the collector delivers the interval's outputs before the first of them, so none counts
  // an emission that a crash could still lose: record_collector::send_changelog).
  for (auto& [id, task] : tasks)
    if (task->running()) task->prepare_commit();
  auto next_offset = [this](const std::string& topic, std::int32_t partition) {
    return collector_->next_changelog_offset(topic, partition);
  };
  auto started = clock_type::now();
  const bool after_recovery = std::exchange(commit_after_recovery_, false);
  if (services_.guarantee == processing_guarantee::exactly_once) {
    if (offsets.empty() && !collector_->transaction_open()) {
      if (after_recovery) note_progress();
      return;
    }
    if (offsets.empty()) offsets = fencing_offsets();
    auto group = consumer_->group_metadata();
    if (consumer_->assignment_lost())  // after the metadata: a lost flag set later finds it stale
      throw sluice::error(errc::fenced,
                          "the consumer group moved on without this instance (its session timed out); the open "
                          "transaction is aborted, the partitions' next owner processes what it held");
    collector_->commit_transaction(offsets, group);
  } else {
    collector_->flush();
    if (!offsets.empty()) consumer_->commit(offsets);
  }
  // Progress: whatever failed before has been ridden out. (An at-least-once commit without
  // offsets talked to no broker, unless a recovery just did.)
  if (!offsets.empty() || services_.guarantee == processing_guarantee::exactly_once || after_recovery) note_progress();
  commit_latency_.record(std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - started).count());
  for (auto& [id, task] : tasks) {
    if (!task->running()) continue;
    task->stores().commit(next_offset);
    task->mark_committed();
  }
  if (queries_.pending()) queries_.serve(tasks_->tasks());  // right after the commit: committed state only
  collector_->reset_changelog_offsets();
  bool interval_passed = clock_type::now() - last_checkpoint_ >= settings_.checkpoint_interval;
  if (interval_passed) last_checkpoint_ = clock_type::now();
  for (auto& [id, task] : tasks)
    if (task->running() && (interval_passed || task->stores().checkpoint_due(settings_.checkpoint_tail_fraction,
                                                                             settings_.checkpoint_min_records)))
      task->stores().checkpoint();
}

std::vector<kafka::topic_partition_offset> stream_thread::fencing_offsets() {
  // A transaction with output but no new input (a wall-clock punctuation's: an overflow
  // buffer's drain) still carries offsets: they go with the consumer group's generation, and
  // the broker refuses them from an instance the group has moved on from (one stopped past
  // its session timeout, or cut off). Without them such a zombie's transaction would commit
  // beside the new owner's, and its output and changelog writes would count twice. One
  // offset suffices; they are the tasks' own (re-committing an offset changes nothing). When
  // no task has processed a record yet, the group's committed offsets are asked for, once per task
  // (a group that has committed nothing yet leaves the transaction without offsets).
  if (auto offsets = running_offsets(true); !offsets.empty()) return offsets;
  std::vector<kafka::topic_partition> unknown;
  for (auto& [id, task] : tasks_->tasks())
    if (task->running())
      for (auto& p : task->inputs_without_offset()) unknown.push_back(std::move(p));
  if (unknown.empty()) return {};
  auto committed = committed_offsets(unknown);
  for (auto& [id, task] : tasks_->tasks())
    if (task->running()) task->learn_start_offsets(committed);
  auto offsets = running_offsets(true);
  if (offsets.empty())
    spdlog::debug("stream thread {}: a transaction carries no offset (the group has committed none yet)",
                  settings_.index);
  return offsets;
}

std::vector<kafka::topic_partition_offset> stream_thread::running_offsets(bool every_known) {
  std::vector<kafka::topic_partition_offset> offsets;
  for (auto& [id, task] : tasks_->tasks()) {
    if (!task->running()) continue;
    auto o = task->offsets_to_commit(every_known);
    offsets.insert(offsets.end(), o.begin(), o.end());
  }
  return offsets;
}

void stream_thread::drop_uncommitted(producer_after_abort after) {
  const bool open = collector_ && collector_->transaction_open();
  if (open) {
    if (services_.guarantee == processing_guarantee::exactly_once) aborts_.add();
    collector_->abort_transaction();
  }
  close_tasks(close_mode::dirty);
  // The abort may have failed (the coordinator away): a new producer starts clean.
  if (open && after == producer_after_abort::recreate && services_.guarantee == processing_guarantee::exactly_once)
    collector_->recreate();
}

void stream_thread::update_partition_gauges() {
  partition_gauges_set_ = clock_type::now();
  // Lag of each assigned partition = the broker's high watermark minus our position; cached
  // watermarks (the last fetch response's), so no broker round trip.
  for (const auto& p : consumer_->position(assignment_)) {
    auto high = consumer_->cached_high_watermark(p.topic, p.partition);
    auto offset = p.offset;
    // No record consumed since the assignment (an idle partition after a restart): the
    // fetcher's partition end, if it reached one, is where the consumer stands.
    if (offset < 0)
      if (const auto* input = tasks_->find({p.topic, p.partition}))
        offset = input->task->queued().noted_end(input->index);
    if (!high || offset < 0) continue;  // nothing fetched yet: no figure rather than a wrong one
    services_.metrics->get_gauge("sluice_consumer_lag_records", lag_labels({p.topic, p.partition}))
        .set(std::max<std::int64_t>(0, *high - offset));
  }
  // State sizes: each store's entries and (RocksDB) bytes, estimates from its own counters.
  for (auto& [id, task] : tasks_->tasks()) {
    if (!task->running()) continue;
    for (auto& s : task->stores().all()) {
      auto* storage = dynamic_cast<state::kv_store*>(s.store.get());
      if (auto* backed = dynamic_cast<state::kv_backed_store*>(s.store.get())) storage = &backed->storage();
      if (!storage) continue;
      auto labels = "task=\"" + task->name() + "\",store=\"" + s.spec->name + "\"";
      services_.metrics->get_gauge("sluice_state_store_entries", labels)
          .set(static_cast<std::int64_t>(storage->approximate_count()));
      if (auto bytes = storage->approximate_bytes())
        services_.metrics->get_gauge("sluice_state_store_bytes", labels).set(static_cast<std::int64_t>(*bytes));
      store_size_labels_.insert(std::move(labels));
    }
  }
}

std::unique_ptr<kafka::consumer> stream_thread::make_consumer() {
  ++consumer_incarnation_;
  auto c = std::make_unique<kafka::consumer>(
      settings_.consumer, [this](std::string_view json) { consumer_statistics_.on_statistics(json); });
  // Partition ends settle an idling task's wait (consumer_lags above).
  c->on_partition_eof([this](std::string_view topic, std::int32_t partition, std::int64_t offset) {
    if (!tasks_) return;
    if (auto* input = tasks_->find({topic, partition})) input->task->queued().note_end(input->index, offset);
  });
  return c;
}

void stream_thread::retire_partition_gauges() {
  // A partition that left this instance is another's to report.
  for (const auto& p : assignment_) services_.metrics->retire_gauge("sluice_consumer_lag_records", lag_labels(p));
  // The tasks' stores go with their partitions; the next owner reports them.
  for (const auto& labels : store_size_labels_) {
    services_.metrics->retire_gauge("sluice_state_store_entries", labels);
    services_.metrics->retire_gauge("sluice_state_store_bytes", labels);
  }
  store_size_labels_.clear();
}

void stream_thread::release_held_records() {
  // Queued records go to their task, lowest timestamp first, until a processor pauses its
  // input (the poll returns in time for the pause's end: until_next_release). Short pauses
  // touch nothing in the consumer: what librdkafka already fetched is kept, not thrown away
  // and fetched again; a partition holding max.poll.records is paused in the consumer
  // (partition_group::update_fetch). No seek: on resume librdkafka fetches from the record
  // after the last one it delivered, i.e. the last one queued.
  auto now = services_.wall_clock_ms();
  const consumer_lags lags(*consumer_);
  for (auto& [id, task] : tasks_->tasks()) {
    auto& queued = task->queued();
    if ((queued.empty() && !queued.fetch_paused()) || !task->running()) continue;
    task->process_queued(now, lags);
    queued.update_fetch(now, settings_.max_poll_records, fetch_changes_);
  }
  apply_fetch_changes();
}

void stream_thread::apply_fetch_changes() {
  if (fetch_changes_.empty()) return;
  if (!fetch_changes_.pause.empty()) consumer_->pause(fetch_changes_.pause);
  if (!fetch_changes_.resume.empty()) consumer_->resume(fetch_changes_.resume);
  fetch_changes_.clear();
}

void stream_thread::drop_held_records() noexcept {
  if (!tasks_) return;
  try {
    for (auto& [id, task] : tasks_->tasks()) task->queued().clear(fetch_changes_);
    apply_fetch_changes();
  } catch (const std::exception& e) {
    fetch_changes_.clear();
    spdlog::debug("stream thread {}: resuming partitions paused for queued records: {}", settings_.index, e.what());
  }
}

std::chrono::milliseconds stream_thread::until_next_release(std::int64_t now_ms, std::chrono::milliseconds cap) const {
  auto until = [&](std::int64_t due_ms) {
    cap = std::min(cap, std::chrono::milliseconds(std::max<std::int64_t>(0, due_ms - now_ms)));
  };
  for (const auto& [id, task] : tasks_->tasks()) {
    if (!task->running()) continue;
    auto& queued = task->queued();
    // Records left queued: a processor paused the input (due at the pause's end), or the task
    // idles, at zero lag until its idle deadline, else until a fetch brings records or a
    // partition end, which ends the poll.
    if (!queued.empty()) {
      if (task->input_paused(now_ms))
        until(task->input_paused_until());
      else if (auto due = queued.idle_deadline_ms())
        until(*due);
    }
    // All released before the partition may be resumed (a share far above max.poll.records/s).
    if (queued.fetch_paused())
      if (auto due = queued.resume_due_ms()) until(*due);
  }
  return cap;
}

void stream_thread::close_tasks(close_mode mode) {
  // Held records were never processed: their offsets are not committed, the next owner
  // (or the rewind) reads them again.
  if (consumer_) drop_held_records();
  if (tasks_) tasks_->close_all(mode);
}

void stream_thread::note_failure(const std::exception& e) {
  const auto now = clock_type::now();
  if (!failing_since_) failing_since_ = now;
  retries_.add();
  last_failure_ = e.what();
  set_failing(true);
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
      if (fencings_.twin_after(consumer_incarnation_, clock_type::now())) {
        // Fenced again and again right after rejoining: a twin keeps taking the identity back.
        auto* se = dynamic_cast<const sluice::error*>(&e);
        throw sluice::error(
            errc::kafka_fatal,
            std::string(e.what()) + "; " + fencings_.twin_evidence("consumers", "right after rejoining"),
            se ? se->kafka() : kafka_flags{});
      }
      consumer_fenced_ = true;
      break;
    }
    case failure_kind::retriable:
      if (twin_fenced_producer(e)) {
        throw sluice::error(errc::kafka_fatal,
                            std::string(e.what()) + "; " +
                                producer_fencings_.twin_evidence("producers", "within seconds of its start") + "; " +
                                std::string(producer_twin_advice));
      }
      break;
    default: throw;  // rethrows the exception being handled by the caller's catch
  }
  note_failure(e);
  if (attempt == recovery_attempt::next_loop) {
    if (stop_.load()) {
      spdlog::info("stream thread {}: stopping with its recovery cut short ({})", settings_.index, last_failure_);
      return;
    }
    spdlog::warn("stream thread {}: recovery failed ({}); retrying in {} ms", settings_.index, last_failure_,
                 settings_.recovery_backoff.count());
    return;
  }
  spdlog::warn(
      "stream thread {}: {}; closing its tasks, recreating the {} and resuming from the last committed "
      "offsets (retrying for up to task.timeout.ms={})",
      settings_.index, last_failure_, consumer_fenced_ ? "consumer and the producer" : "producer",
      settings_.task_timeout.count());
  drop_uncommitted(producer_after_abort::keep);  // recovery recreates it
  recovery_pending_ = true;
  try_recovery();
}

bool stream_thread::twin_fenced_producer(const std::exception& e) {
  auto* se = dynamic_cast<const sluice::error*>(&e);
  if (!se || se->code() != errc::fenced || !collector_) return false;
  const auto now = clock_type::now();
  // A fencing long after the producer started is an outage's (its transaction timed out):
  // it is left out, and it does not end a twin's run of quick fencings either.
  if (now - collector_->producer_ready_at() >= producer_twin_window_) return false;
  return producer_fencings_.twin_after(collector_->producer_incarnation(), now);
}

void stream_thread::try_recovery() {
  try {
    recover_from_failure();
  } catch (const std::exception& e) {
    on_failure(e, recovery_attempt::next_loop);
  }
}

void stream_thread::recover_from_failure() {
  close_tasks(close_mode::dirty);
  if (consumer_fenced_) {
    // A fenced consumer stays fenced: a new one joins the group under the same
    // group.instance.id and resumes from the committed offsets of what it is assigned.
    // Its revocation (inside close) finds no task left to commit; the task manager,
    // which pauses and resumes through the consumer, is recreated with it.
    retire_partition_gauges();
    assignment_.clear();
    consumer_->close();
    tasks_.reset();
    queries_.set_waker({});
    consumer_.reset();
    consumer_ = make_consumer();
    queries_.set_waker([c = consumer_.get()] { c->wake(); });
    tasks_ = std::make_unique<task_manager>(services_, settings_.topic_to_subtopology, *collector_, *reader_,
                                            *consumer_, label_);
    consumer_->subscribe(settings_.source_topics, this);
    consumer_fenced_ = false;
    set_state(thread_state::rebalancing);
  }
  collector_->recreate();
  if (!assignment_.empty()) create_tasks(assignment_);  // none after a new consumer: it rejoins
  rewind_to_committed();
  recovery_pending_ = false;
  commit_after_recovery_ = true;
  recoveries_.add();
  spdlog::info("stream thread {}: recovered; resuming from the last committed offsets", settings_.index);
}

std::vector<kafka::topic_partition_offset> stream_thread::committed_offsets(
    const std::vector<kafka::topic_partition>& parts) {
  return wait_in_slices(30s, stop_requested_,
                        [&](std::chrono::milliseconds slice) { return consumer_->committed(parts, slice); });
}

void stream_thread::note_progress() {
  failing_since_.reset();
  set_failing(false);
}

void stream_thread::set_failing(bool failing) {
  failing_ = failing;
  publish_degraded();
}

void stream_thread::set_brokers_down(bool down) {
  brokers_down_ = down;
  publish_degraded();
}

void stream_thread::publish_degraded() {
  // Every commit clears failing_: nothing to publish when nothing was degraded.
  if (!failing_ && !brokers_down_ && !degraded_.load()) return;
  std::string reason;
  if (brokers_down_)
    reason = "no broker at bootstrap.servers answers";
  else if (failing_)
    reason = "retrying after: " + last_failure_;
  bool reason_changed = false;
  {
    std::lock_guard lock(degraded_reason_mutex_);
    if (reason != degraded_reason_) degraded_reason_ = std::move(reason), reason_changed = true;
  }
  const bool degraded = failing_ || brokers_down_;
  if (degraded_.exchange(degraded) == degraded && !reason_changed) return;
  if (on_state_change_) on_state_change_(state_.load());
}

std::string stream_thread::degraded_reason() const {
  std::lock_guard lock(degraded_reason_mutex_);
  return degraded_reason_;
}

void stream_thread::watch_brokers() {
  bool down = consumer_->brokers_down();
  if (down && clock_type::now() - brokers_checked_ >= brokers_check_interval) {
    brokers_checked_ = clock_type::now();
    down = consumer_->check_brokers_back(assignment_, settings_.source_topics, brokers_check_timeout);
  }
  if (down == brokers_down_) return;
  if (down)
    spdlog::warn(
        "stream thread {}: no broker at bootstrap.servers answers; degraded until one does (nothing is lost: "
        "the thread resumes from where it stands)",
        settings_.index);
  else
    spdlog::info("stream thread {}: the brokers answer again", settings_.index);
  set_brokers_down(down);
}

void stream_thread::rewind_to_committed() {
  drop_held_records();
  if (assignment_.empty()) return;
  for (const auto& c : committed_offsets(assignment_)) {
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
