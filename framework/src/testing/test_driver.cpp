// The TopologyTestDriver: production tasks, a captured producer, a FIFO of records to
// process, a wall clock the test moves.
#include "sluice/test_driver.hpp"

#include <deque>
#include <filesystem>
#include <set>
#include <stdexcept>

#include "kafka/types.hpp"
#include "runtime/config_checks.hpp"
#include "runtime/global_tables.hpp"
#include "runtime/read_only_context.hpp"
#include "runtime/stream_task.hpp"
#include "sluice/detail/internal_topics.hpp"
#include "sluice/error.hpp"
#include "sluice/state/rocksdb_store.hpp"

namespace sluice::testing {

namespace {

/// interactive_queries over the driver's tasks: runs each query at once, on the caller's
/// (the test's) thread, on the state committed after the last record.
class driver_queries final : public interactive_queries {
 public:
  driver_queries(const topology& topo, std::int32_t partitions,
                 std::map<runtime::task_id, std::unique_ptr<runtime::stream_task>>& tasks)
      : topo_(topo), partitions_(partitions), tasks_(tasks) {}

  std::optional<std::int32_t> partition_of(std::string_view store, std::string_view key_bytes) const override {
    if (!known(store)) return std::nullopt;
    return detail::murmur2_partition(key_bytes, partitions_);
  }
  std::int32_t partitions(std::string_view store) const override { return known(store) ? partitions_ : 0; }

  outcome run_binding(std::string_view store, std::int32_t partition, binding_reader fn, std::chrono::milliseconds,
                      std::string* failure) override {
    if (!known(store)) return outcome::unknown_store;
    for (auto& [id, task] : tasks_) {
      if (id.partition != partition) continue;
      auto* s = task->stores().find(store);
      if (!s) continue;
      const std::string name(store);
      runtime::read_only_context context(*task, name);
      runtime::read_only_changelog changelog(name);
      try {
        fn(detail::store_binding{s->store.get(), &changelog, s->spec->format}, context);
      } catch (const std::exception& e) {
        if (failure) *failure = e.what();
        return outcome::failed;
      }
      return outcome::done;
    }
    return outcome::not_local;
  }

 private:
  bool known(std::string_view store) const {
    const auto* spec = detail::topology_access::find_store(topo_, store);
    return spec && !spec->global;
  }

  const topology& topo_;
  std::int32_t partitions_;
  std::map<runtime::task_id, std::unique_ptr<runtime::stream_task>>& tasks_;
};

/// The driver holds all input locally: nothing is ever on a broker, so every empty input
/// of a task is caught up (Kafka Streams' TopologyTestDriver also gives each partition a
/// lag of 0). With max.task.idle.ms=0 (the default) a record is therefore processed when it
/// is piped, in the order piped; with a positive value a task whose other inputs are empty
/// holds it until the driver's wall clock has moved that far or they receive records.
class all_input_local final : public runtime::lag_source {
 public:
  runtime::fetched_lag lag(const kafka::topic_partition&, std::int64_t) const override {
    return runtime::fetched_lag::zero;
  }
};

}  // namespace

struct topology_test_driver::impl final : runtime::record_sender {
  topology topo;
  config cfg;
  driver_options options;
  std::size_t processed_since_commit = 0;  // records since the last commit()
  metrics_registry own_metrics;
  metrics_registry* metrics = &own_metrics;  // or driver_options::metrics
  std::filesystem::path state_dir;
  std::unique_ptr<state::rocksdb_environment> rocksdb;
  runtime::task_services services;
  std::map<std::string, std::unique_ptr<runtime::global_table_store>> globals;  // by topic
  std::map<std::string, const detail::store_spec*> global_specs;                // by topic
  std::map<std::pair<std::string, std::int32_t>, std::int64_t> global_offsets;  // next offset per partition
  std::map<runtime::task_id, std::unique_ptr<runtime::stream_task>> tasks;
  std::map<std::string, int> topic_to_sub;  // resolved source topics
  std::map<std::string, std::deque<raw_message>> topics;
  std::map<std::pair<std::string, std::int32_t>, std::int64_t> next_offset;
  struct pending {
    std::string topic;
    std::int32_t partition;
    raw_message message;
  };
  std::deque<pending> queue;
  std::int64_t wall = 0;
  std::int64_t last_ts = 0;
  std::unique_ptr<driver_queries> queries;
  kafka::message scratch;
  all_input_local lags;

  std::int32_t place(const std::optional<std::string_view>& key, std::int32_t partition) const {
    if (partition >= 0) {
      if (partition >= options.partitions)
        throw error(errc::invalid_config, "partition " + std::to_string(partition) +
                                              " does not exist: the driver has " + std::to_string(options.partitions) +
                                              " partition(s) per topic");
      return partition;
    }
    if (!key) return 0;
    return detail::murmur2_partition(*key, options.partitions);
  }

  void send(std::string_view topic, std::int32_t partition, const std::optional<std::string_view>& key,
            const std::optional<std::string_view>& value, std::int64_t timestamp,
            const sluice::headers& headers) override {
    std::string name(topic);
    auto p = place(key, partition);
    raw_message m;
    m.topic = name;
    m.partition = p;
    m.offset = next_offset[{name, p}]++;
    m.timestamp = timestamp;
    if (key) m.key = std::string(*key);
    if (value) m.value = std::string(*value);
    m.headers = headers;
    if (topic_to_sub.contains(name)) queue.push_back({name, p, m});
    topics[name].push_back(std::move(m));
  }

  /// Hands queued records to their tasks in order. A task whose input is paused
  /// (pause_input_until) keeps them in its partition_group, as the stream thread does:
  /// what Kafka would keep unread, released by advance_wall_clock() once the pause is over.
  /// A task reading several partitions takes each record through its partition_group, which
  /// may hold it while the task idles (max.task.idle.ms; all_input_local).
  void drain() {
    while (!queue.empty()) {
      auto item = std::move(queue.front());
      queue.pop_front();
      auto sub = topic_to_sub.find(item.topic);
      if (sub == topic_to_sub.end()) continue;
      auto& task = *tasks.at({sub->second, item.partition});
      auto& queued = task.queued();
      fill(scratch, item);
      if (queued.empty() && queued.partitions() == 1 && !task.input_paused(wall)) {
        process(task, scratch);
        continue;
      }
      std::size_t input = 0;
      while (input < queued.partitions() && queued.partition(input).topic != item.topic) ++input;
      queued.push(input, scratch);
      // What this processes goes to the back of `queue`, after what was piped before it.
      while (task.process_next_queued(wall, lags)) processed_one();
    }
  }

  /// Feeds queued records, lowest timestamp first, to tasks whose pause or idling is over,
  /// until they pause or idle again.
  void release_held() {
    for (auto& [key, task] : tasks)
      while (task->process_next_queued(wall, lags)) {
        processed_one();
        drain();
      }
  }

  /// The earliest end of a pause or of an idling that holds records, if it is after now and
  /// at or before `limit` (strictly after now, so advance_wall_clock's loop always moves the
  /// clock).
  std::optional<std::int64_t> next_release(std::int64_t limit) const {
    std::optional<std::int64_t> out;
    for (const auto& [key, task] : tasks) {
      const auto& queued = task->queued();
      if (queued.empty()) continue;
      auto until = task->input_paused_until();
      if (until <= wall)
        if (auto due = queued.idle_deadline_ms()) until = *due;
      if (until > wall && until <= limit && (!out || until < *out)) out = until;
    }
    return out;
  }

  static void fill(kafka::message& out, const pending& item) {
    out.topic = item.topic;
    out.partition = item.partition;
    out.offset = item.message.offset;
    out.timestamp = item.message.timestamp;
    out.key = item.message.key;
    out.value = item.message.value;
    out.headers = item.message.headers;
  }

  void process(runtime::stream_task& task, const kafka::message& m) {
    task.process(m);
    processed_one();
  }

  void processed_one() {
    if (++processed_since_commit >= options.commit_every_records) commit();
  }

  void commit() {
    for (auto& [id, task] : tasks) task->prepare_commit();
    auto offsets = [this](const std::string& topic, std::int32_t partition) -> std::optional<state::changelog_offset> {
      auto it = next_offset.find({topic, partition});
      if (it == next_offset.end()) return std::nullopt;
      return state::changelog_offset(it->second);
    };
    for (auto& [id, task] : tasks) {
      task->stores().commit(offsets);
      task->mark_committed();
    }
    processed_since_commit = 0;
  }
};

topology_test_driver::topology_test_driver(topology t, config c, driver_options options)
    : impl_(std::make_unique<impl>()) {
  auto& d = *impl_;
  d.topo = std::move(t);
  d.cfg = std::move(c);
  d.options = options;
  d.wall = options.start_wall_clock_ms;
  if (options.partitions < 1) throw error(errc::invalid_config, "driver_options.partitions must be at least 1");
  if (options.commit_every_records < 1)
    throw error(errc::invalid_config,
                "driver_options.commit_every_records must be at least 1 (1 commits after every record)");
  d.queries = std::make_unique<driver_queries>(d.topo, options.partitions, d.tasks);
  if (!d.cfg.contains("application.id")) d.cfg.set("application.id", "test-driver");
  runtime::validate_config(d.cfg);  // refuses exactly what sluice::app refuses

  auto& s = d.services;
  // Stores hold writes until the commit under exactly-once, as in a job (the driver has no
  // transactions to abort: every commit succeeds).
  runtime::read_task_settings(d.cfg, s);
  s.topo = &d.topo;
  // The producer's limit as the app's producer would use it; the driver's topics have no
  // max.message.bytes of their own.
  s.record_limits = runtime::record_size_limits(runtime::producer_max_message_bytes(d.cfg));
  if (options.metrics) d.metrics = options.metrics;
  s.metrics = d.metrics;
  s.memory_stores_only = !options.rocksdb_stores;
  s.wall_clock_ms = [&d] { return d.wall; };
  for (const auto& sub : d.topo.subtopologies()) s.subtopology_partitions[sub.id] = options.partitions;
  for (const auto& n : detail::topology_access::nodes(d.topo))
    if (n.kind == detail::node_kind::sink && !n.internal_topic) s.output_partitions[n.topics[0]] = options.partitions;
  // Always made, from the config's state.memory.budget.bytes: in-memory store kinds charge
  // their structures to its index_memory() as in the app.
  d.rocksdb = std::make_unique<state::rocksdb_environment>(state::rocksdb_environment_options{
      .memory_budget_bytes = static_cast<std::size_t>(runtime::state_memory_budget(d.cfg))});
  s.rocksdb = d.rocksdb.get();
  if (options.rocksdb_stores) {
    static std::atomic<int> counter{0};
    d.state_dir = std::filesystem::temp_directory_path() /
                  ("sluice-driver-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    s.state_dir = d.state_dir;
  }
  for (const auto& spec : detail::topology_access::stores(d.topo)) {
    if (!spec.global) continue;
    // The driver's topics all have options.partitions partitions.
    auto store = std::make_unique<runtime::global_table_store>(d.options.partitions);
    s.global_views[spec.name] = store.get();
    d.globals[spec.source_topic] = std::move(store);
    d.global_specs[spec.source_topic] = &spec;
  }
  for (const auto& sub : d.topo.subtopologies())
    for (auto i : sub.nodes) {
      const auto& n = detail::topology_access::nodes(d.topo)[i];
      if (n.kind == detail::node_kind::source)
        for (const auto& topic : n.topics)
          d.topic_to_sub[detail::topology_access::resolve_topic(n, topic, s.application_id)] = sub.id;
    }
  for (const auto& sub : d.topo.subtopologies())
    for (std::int32_t p = 0; p < options.partitions; ++p) {
      auto task = std::make_unique<runtime::stream_task>(runtime::task_id{sub.id, p}, d.services, d, "driver=\"1\"");
      task->start();
      d.tasks[{sub.id, p}] = std::move(task);
    }
}

topology_test_driver::~topology_test_driver() {
  for (auto& [id, task] : impl_->tasks) task->close(runtime::close_mode::clean);
  impl_->tasks.clear();
  if (!impl_->state_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(impl_->state_dir, ec);
  }
}

void topology_test_driver::pipe_raw(const std::string& topic, const std::optional<std::string_view>& key,
                                    const std::optional<std::string_view>& value, std::int64_t timestamp,
                                    const sluice::headers& headers, std::int32_t partition) {
  auto& d = *impl_;
  d.last_ts = timestamp;
  if (auto g = d.globals.find(topic); g != d.globals.end()) {
    // As the app's global thread: decoded when read, under the deserialization handler.
    raw_view m;
    m.topic = topic;
    m.partition = partition < 0 ? 0 : partition;
    m.offset = d.global_offsets[{topic, m.partition}]++;
    m.timestamp = timestamp;
    m.key = key;
    m.value = value;
    auto& skipped = d.metrics->get_counter("sluice_records_skipped_total", "global=\"true\"");
    if (!key ||
        !runtime::accept_global_record(*d.global_specs.at(topic), m, d.services.on_deserialization_error, skipped))
      return;
    g->second->apply(*m.key, m.value);
    return;
  }
  if (!d.topic_to_sub.contains(topic))
    throw error(errc::invalid_topology,
                "the topology does not read topic '" + topic + "'; pipe into one of its sources");
  d.send(topic, partition, key, value, timestamp, headers);
  // send() kept a copy as the topic's record; inputs are not outputs.
  d.topics[topic].pop_back();
  d.drain();
}

void topology_test_driver::advance_wall_clock(std::chrono::milliseconds by) {
  auto& d = *impl_;
  auto target = d.wall + by.count();
  // The clock stops at every time within the step at which a paused task with held input
  // may resume, as a real clock would pass it, so held records come out at the pace the
  // pausing processor set, not all at the end of the step.
  while (auto next = d.next_release(target)) {
    d.wall = *next;
    for (auto& [id, task] : d.tasks) task->punctuate_wall_clock(d.wall);
    d.release_held();
    d.drain();
    d.commit();
  }
  d.wall = target;
  for (auto& [id, task] : d.tasks) task->punctuate_wall_clock(d.wall);
  d.release_held();
  d.drain();
  d.commit();
}

std::int64_t topology_test_driver::wall_clock_ms() const noexcept { return impl_->wall; }

std::deque<raw_message>& topology_test_driver::records(const std::string& topic) { return impl_->topics[topic]; }

raw_message topology_test_driver::take_record(const std::string& topic) {
  auto& q = records(topic);
  if (q.empty()) throw std::out_of_range("no unread record in topic '" + topic + "'");
  raw_message m = std::move(q.front());
  q.pop_front();
  return m;
}

void topology_test_driver::throw_undecodable(const std::string& topic, const raw_message& m, const char* part,
                                             const serialization_error& cause) {
  throw serialization_error("reading topic '" + topic + "' (partition " + std::to_string(m.partition) + ", offset " +
                            std::to_string(m.offset) + "): the record's " + part +
                            " does not decode as the type this output_topic reads it with (check the template "
                            "arguments against the topology's serdes): " +
                            cause.what());
}

void topology_test_driver::check_written_topic(const std::string& topic) const {
  const auto& d = *impl_;
  const auto& app_id = d.services.application_id;
  std::set<std::string> written{d.services.dead_letter_topic};
  for (const auto& n : detail::topology_access::nodes(d.topo))
    if (n.kind == detail::node_kind::sink)
      for (const auto& t : n.topics) written.insert(detail::topology_access::resolve_topic(n, t, app_id));
  for (const auto& spec : detail::topology_access::stores(d.topo))
    if (spec.logged && !spec.global) written.insert(detail::changelog_topic(app_id, spec.name));
  if (written.contains(topic)) return;
  std::string list;
  for (const auto& t : written) list += (list.empty() ? "'" : ", '") + t + "'";
  throw error(errc::invalid_topology, "the topology never writes topic '" + topic + "'; it writes " + list);
}

std::vector<std::string> topology_test_driver::topics() const {
  std::vector<std::string> out;
  for (const auto& [name, q] : impl_->topics) out.push_back(name);
  return out;
}

const std::string& topology_test_driver::application_id() const noexcept { return impl_->services.application_id; }
metrics_registry& topology_test_driver::metrics() noexcept { return *impl_->metrics; }
interactive_queries& topology_test_driver::queries() noexcept { return *impl_->queries; }
std::int64_t topology_test_driver::last_timestamp() const noexcept { return impl_->last_ts; }

std::pair<detail::store_binding, detail::task_context*> topology_test_driver::store_binding(const std::string& name,
                                                                                            std::int32_t partition) {
  for (auto& [id, task] : impl_->tasks) {
    if (id.partition != partition) continue;
    if (task->stores().find(name)) return {task->store(name), task.get()};
  }
  throw error(errc::invalid_topology, "no store named '" + name + "' on partition " + std::to_string(partition));
}

}  // namespace sluice::testing
