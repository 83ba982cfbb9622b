// sluice::app: startup checks (configuration, co-partitioning, internal topics), global
// tables, stream threads, signals and the app state.
#include "sluice/app.hpp"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <optional>
#include <thread>

#include "http/instance_server.hpp"
#include "runtime/allocator.hpp"
#include "runtime/app_queries.hpp"
#include "kafka/admin.hpp"
#include "kafka/config.hpp"
#include "kafka/mock_cluster.hpp"
#include "runtime/config_checks.hpp"
#include "runtime/error_classification.hpp"
#include "runtime/global_tables.hpp"
#include "runtime/partition_counts.hpp"
#include "runtime/stream_thread.hpp"
#include "sluice/detail/internal_topics.hpp"
#include "sluice/error.hpp"
#include "sluice/state/task_directory.hpp"

namespace sluice {

using namespace std::chrono_literals;

const char* to_string(app_state s) noexcept {
  switch (s) {
    case app_state::created: return "created";
    case app_state::rebalancing: return "rebalancing";
    case app_state::restoring: return "restoring";
    case app_state::running: return "running";
    case app_state::pending_shutdown: return "pending_shutdown";
    case app_state::not_running: return "not_running";
    case app_state::error: return "error";
    case app_state::degraded: return "degraded";
  }
  return "unknown";
}

struct app::impl {
  topology topo;
  config cfg;
  metrics_registry metrics;
  std::unique_ptr<state::rocksdb_environment> rocksdb;
  std::atomic<const state::rocksdb_environment*> rocksdb_for_metrics{nullptr};  ///< rocksdb, once made
  std::unique_ptr<state::application_directory> state_lock;                     ///< held from start() to close()
  runtime::task_services services;
  std::unique_ptr<runtime::global_tables> globals;
  std::vector<std::unique_ptr<runtime::stream_thread>> threads;
  std::unique_ptr<runtime::app_queries> queries;  ///< made with the app; attached to the threads by start()
  std::unique_ptr<http::instance_server> http;
  std::string bootstrap;
  /// Set by run(): whether SIGTERM or SIGINT came while start() waits for the cluster.
  std::function<bool()> stop_requested_at_start;
  /// The thread in start(), if one is: close() from another thread waits for it to return
  /// (it stops at its next check, within about a second of a wait for the cluster).
  std::optional<std::thread::id> starting;
  std::mutex mutex;
  std::condition_variable changed;
  app_state state = app_state::created;
  /// Why the degraded threads are degraded, one "stream thread N: ..." per thread, "; "
  /// between them (guarded by mutex, kept by on_thread_state).
  std::string degraded_reason;
  std::string error;
  std::vector<std::function<void(app_state, app_state)>> listeners;
  bool closed = false;

  /// Whether start() is to stop: close() was called, or run()'s signal came.
  bool stop_at_start() {
    {
      std::lock_guard lock(mutex);
      if (closed) return true;
    }
    return stop_requested_at_start && stop_requested_at_start();
  }

  // app::start()'s steps that need the app's members (the others are free functions below).
  void create_internal_topics(kafka::admin& admin, const std::map<int, int>& sub_partitions,
                              const std::map<std::string, int>& repartition_partitions);
  void start_global_tables(const kafka::config_map& consumer, kafka::admin& admin);
  /// The allocator's and the stores' memory gauges, set when the metrics are read.
  void refresh_memory_gauges();
  void start_threads(const kafka::config_map& consumer_props, const kafka::config_map& producer_props,
                     const kafka::config_map& admin_props, const std::map<int, int>& sub_partitions);

  void set_state(app_state next) {
    app_state prev;
    {
      std::lock_guard lock(mutex);
      if (state == next || (state == app_state::error && next != app_state::not_running)) return;
      prev = state;
      state = next;
    }
    changed.notify_all();
    for (auto& l : listeners) l(prev, next);
  }

  void on_thread_state(int index, runtime::thread_state s) {
    if (s == runtime::thread_state::failed) {
      {
        std::lock_guard lock(mutex);
        if (error.empty()) error = threads.at(static_cast<std::size_t>(index))->failure();
      }
      set_state(app_state::error);
      return;
    }
    {
      std::lock_guard lock(mutex);
      if (state == app_state::pending_shutdown || state == app_state::error || state == app_state::not_running) return;
    }
    bool any_rebalancing = false, any_restoring = false, all_running = true, any_degraded = false;
    std::string reasons;
    for (std::size_t i = 0; i < threads.size(); ++i) {
      const auto& t = threads[i];
      if (t->degraded()) {
        any_degraded = true;
        if (auto reason = t->degraded_reason(); !reason.empty())
          reasons += (reasons.empty() ? "" : "; ") + ("stream thread " + std::to_string(i) + ": ") + reason;
      }
      auto ts = t->state();
      if (ts == runtime::thread_state::rebalancing || ts == runtime::thread_state::starting) any_rebalancing = true;
      if (ts == runtime::thread_state::restoring) any_restoring = true;
      if (ts != runtime::thread_state::running) all_running = false;
    }
    {
      std::lock_guard lock(mutex);
      degraded_reason = std::move(reasons);
    }
    if (any_degraded)
      set_state(app_state::degraded);
    else if (all_running && !threads.empty())
      set_state(app_state::running);
    else if (any_rebalancing)
      set_state(app_state::rebalancing);
    else if (any_restoring)
      set_state(app_state::restoring);
  }
};

namespace {

/// True when either handler that can dead-letter a record is set to dead_letter.
bool dead_letters(const config& cfg) {
  return cfg.get_error_policy("deserialization.error.handler") == error_policy::dead_letter ||
         cfg.get_error_policy("processing.error.handler") == error_policy::dead_letter;
}

/// Throws when records are dead-lettered into a topic the topology reads: each would be read
/// again, fail again and be dead-lettered again, without end; or into a global table's topic,
/// whose table would take the failed records as entries.
void check_dead_letter_topic(const topology& topo, const config& cfg) {
  if (!dead_letters(cfg)) return;
  const std::string dead_letter = cfg.dead_letter_topic();
  for (const auto& n : detail::topology_access::nodes(topo)) {
    if (n.kind != detail::node_kind::source) continue;
    for (const auto& t : n.topics) {
      if (detail::topology_access::resolve_topic(n, t, cfg.application_id()) != dead_letter) continue;
      throw error(errc::invalid_config,
                  "dead.letter.topic '" + dead_letter + "' is also read by node '" + n.name +
                      "': a dead-lettered record would be read again, fail again and be dead-lettered again, without "
                      "end; give dead.letter.topic a topic of its own (default <application.id>-dlq)");
    }
  }
  for (const auto& s : detail::topology_access::stores(topo)) {
    if (!s.global || s.source_topic != dead_letter) continue;
    throw error(errc::invalid_config, "dead.letter.topic '" + dead_letter + "' is also the topic of global table '" +
                                          s.name +
                                          "': the table would take every dead-lettered record as an entry; give "
                                          "dead.letter.topic a topic of its own (default <application.id>-dlq)");
  }
}

}  // namespace

app::app(topology t, config c) : impl_(std::make_unique<impl>()) {
  impl_->topo = std::move(t);
  impl_->cfg = std::move(c);
  impl_->queries = std::make_unique<runtime::app_queries>(impl_->topo);
  impl_->metrics.add_refresh([d = impl_.get()] { d->refresh_memory_gauges(); });
  runtime::validate_config(impl_->cfg);  // everything that can be checked before connecting
  check_dead_letter_topic(impl_->topo, impl_->cfg);
}

app::~app() {
  try {
    close(30s);
  } catch (const std::exception& e) {
    spdlog::error("closing the app failed: {}", e.what());
  }
}

namespace {

/// Which cluster the app talks to: on the in-process embedded cluster the app creates the
/// external topics it needs (a demo starts with no setup); against Kafka they must exist.
enum class cluster_kind { kafka, embedded };

/// The client configurations every part of the app starts from.
struct client_configs {
  kafka::config_map consumer, producer, admin;
  cluster_kind cluster = cluster_kind::kafka;
};

client_configs make_client_configs(const config& cfg) {
  client_configs c{cfg.client_properties("consumer"), cfg.client_properties("producer"), cfg.client_properties("admin"),
                   cfg.embedded() ? cluster_kind::embedded : cluster_kind::kafka};
  for (auto* props : {&c.consumer, &c.producer, &c.admin}) {
    (*props)["bootstrap.servers"] = cfg.bootstrap_servers();
    kafka::apply_embedded(*props);
  }
  return c;
}

/// Step 0: a broker answers. A job started before its cluster (a compose file, both restarted
/// at once) waits for it for up to task.timeout.ms, as the stream threads ride out an outage,
/// and says so every 10 s; then it stops with the client's error. `stop_requested` is asked
/// every second. False when the wait was stopped.
bool wait_for_cluster(kafka::admin& admin, const config& cfg, const std::string& bootstrap,
                      const std::function<bool()>& stop_requested) {
  const auto timeout = cfg.get_ms("task.timeout.ms");
  const auto started = std::chrono::steady_clock::now();
  auto next_report = started + 10s;
  for (;;) {
    const auto attempt = std::chrono::steady_clock::now();
    try {
      admin.reach(1s);
      return true;
    } catch (const error& e) {
      if (runtime::classify_failure(e) != runtime::failure_kind::retriable) throw;
      const auto waited = std::chrono::steady_clock::now() - started;
      if (waited >= timeout)
        throw error(errc::timeout,
                    std::string(e.what()) + "; no broker at bootstrap.servers=" + bootstrap + " answered in " +
                        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(waited).count()) +
                        " s (task.timeout.ms=" + std::to_string(timeout.count()) +
                        "): check the address and that the brokers are up, or raise task.timeout.ms to wait longer");
      if (std::chrono::steady_clock::now() >= next_report) {
        spdlog::warn("sluice: waiting for a broker at bootstrap.servers={} ({} s so far, up to task.timeout.ms={}): {}",
                     bootstrap, std::chrono::duration_cast<std::chrono::seconds>(waited).count(), timeout.count(),
                     e.what());
        next_report += 10s;
      }
    }
    if (stop_requested && stop_requested()) return false;
    std::this_thread::sleep_until(attempt + 1s);  // a refused connection fails at once
  }
}

/// Thrown by start() when close() was called, or run() got SIGTERM or SIGINT, while it
/// waited for the cluster (or before it started the threads).
struct stopped_at_start final : error {
  stopped_at_start()
      : error(errc::state,
              "the app was closed while it was starting (app::close(), SIGTERM or SIGINT); "
              "nothing was started") {}
};

/// Step 1: the external source topics exist (the embedded cluster creates them) and the
/// sources of one sub-topology have equal partition counts. Returns sub-topology id ->
/// partition count for the sub-topologies with an external source.
std::map<int, int> validate_source_topics(const topology& topo, kafka::admin& admin, cluster_kind cluster) {
  std::map<int, int> sub_partitions;
  for (const auto& sub : topo.subtopologies()) {
    std::string first_topic;
    int first_count = -1;
    for (auto i : sub.nodes) {
      const auto& n = detail::topology_access::nodes(topo)[i];
      if (n.kind != detail::node_kind::source || n.internal_topic) continue;
      for (const auto& t : n.topics) {
        auto count = admin.partition_count(t, 30s);
        if (!count && cluster == cluster_kind::embedded) {
          admin.create_topics({{.name = t, .partitions = 4}}, 30s);
          count = 4;
        }
        if (!count)
          throw error(errc::invalid_topology,
                      "source topic '" + t +
                          "' does not exist; create it (with as many "
                          "partitions as the topics it is processed with) before starting the job");
        if (first_count < 0) {
          first_topic = t;
          first_count = *count;
        } else if (*count != first_count) {
          throw error(errc::invalid_topology, "topic '" + first_topic + "' has " + std::to_string(first_count) +
                                                  " partitions but '" + t + "' has " + std::to_string(*count) +
                                                  "; co-partitioned sources need equal counts");
        }
      }
    }
    if (first_count > 0) sub_partitions[sub.id] = first_count;
  }
  return sub_partitions;
}

/// Sinks to external topics must exist (the embedded cluster creates them). Returns each
/// one's partition count (windowed keys are placed by their key without the window).
std::map<std::string, std::int32_t, std::less<>> validate_output_topics(const topology& topo, kafka::admin& admin,
                                                                        cluster_kind cluster) {
  std::map<std::string, std::int32_t, std::less<>> partitions;
  for (const auto& n : detail::topology_access::nodes(topo))
    if (n.kind == detail::node_kind::sink && !n.internal_topic) {
      if (auto count = admin.partition_count(n.topics[0], 30s)) {
        partitions[n.topics[0]] = *count;
        continue;
      }
      if (cluster != cluster_kind::embedded)
        throw error(errc::invalid_topology, "output topic '" + n.topics[0] + "' does not exist; create it first");
      admin.create_topics({{.name = n.topics[0], .partitions = 4}}, 30s);
      partitions[n.topics[0]] = 4;
    }
  return partitions;
}

/// The record size limits of every topic the app's tasks write records to (sinks, the
/// repartition topics among them, and the dead-letter topic): the producer's
/// message.max.bytes as the runtime's producer will use it, and each topic's
/// max.message.bytes as the broker describes it.
///
/// Batches are also capped below the smallest of those topic limits: a broker refuses a whole
/// record batch larger than the topic's max.message.bytes, and librdkafka fills a batch up to
/// batch.size whatever its topic, so every record of such a batch failed, the small ones too
/// (401 records of 1 KB to a topic limited to 20,000 bytes all failed). A record larger than
/// its topic's limit is caught before it is produced (stream_task::send).
runtime::record_size_limits learn_record_limits(const topology& topo, const config& cfg, kafka::admin& admin,
                                                kafka::config_map& producer) {
  runtime::record_size_limits limits(runtime::producer_max_message_bytes(cfg));
  std::set<std::string> topics;
  for (const auto& n : detail::topology_access::nodes(topo))
    if (n.kind == detail::node_kind::sink)
      topics.insert(detail::topology_access::resolve_topic(n, n.topics[0], cfg.application_id()));
  if (dead_letters(cfg)) topics.insert(cfg.dead_letter_topic());
  constexpr std::int64_t framing = 128;  // the batch header and one record's framing, with room to spare
  std::int64_t cap = std::numeric_limits<std::int64_t>::max();
  std::string smallest;
  for (const auto& topic : topics) {
    const auto configs = admin.describe_topic_configs(topic, 30s);
    const auto limit = configs.find("max.message.bytes");
    if (limit == configs.end()) continue;
    const auto bytes = std::stoll(limit->second);
    limits.set_topic_max_message_bytes(topic, bytes);
    if (bytes - framing < cap) {
      cap = bytes - framing;
      smallest = topic;
    }
  }
  const auto current = producer.contains("batch.size") ? std::stoll(producer.at("batch.size")) : 1000000;
  if (cap >= current) return limits;
  producer["batch.size"] = std::to_string(std::max<std::int64_t>(cap, 1));
  spdlog::info("sluice: producer batch.size {} (topic '{}' has max.message.bytes {})", producer["batch.size"], smallest,
               cap + framing);
  return limits;
}

/// On the embedded cluster the topics global tables read are created too, like sources: a
/// demo's global table starts empty instead of failing. Against Kafka they must exist (the
/// global-table reader says so).
void create_global_table_topics_on_embedded(const topology& topo, kafka::admin& admin, cluster_kind cluster) {
  if (cluster != cluster_kind::embedded) return;
  for (const auto& spec : detail::topology_access::stores(topo))
    if (spec.global && !admin.partition_count(spec.source_topic, 30s))
      admin.create_topics({{.name = spec.source_topic, .partitions = 4}}, 30s);
}

}  // namespace

std::map<std::string, int> runtime::infer_repartition_partitions(const topology& topo,
                                                                 std::map<int, int>& sub_partitions) {
  // A repartition topic takes the partition count of the sub-topology that writes it; a
  // sub-topology that reads only repartition topics takes theirs. Chains of any length
  // settle when a pass learns nothing new.
  std::map<std::string, int> counts;
  for (bool learned = true; learned;) {
    learned = false;
    for (const auto& sub : topo.subtopologies()) {
      auto known = sub_partitions.find(sub.id);
      for (auto i : sub.nodes) {
        const auto& n = detail::topology_access::nodes(topo)[i];
        if (!n.internal_topic) continue;
        const auto& name = n.topics[0];
        if (n.kind == detail::node_kind::sink && known != sub_partitions.end() && !counts.contains(name)) {
          counts[name] = known->second;
          learned = true;
        } else if (n.kind == detail::node_kind::source && known == sub_partitions.end() && counts.contains(name)) {
          known = sub_partitions.emplace(sub.id, counts[name]).first;
          learned = true;
        }
      }
    }
  }
  for (const auto& sub : topo.subtopologies()) {
    if (sub_partitions.contains(sub.id)) continue;
    std::string topics;
    for (auto i : sub.nodes) {
      const auto& n = detail::topology_access::nodes(topo)[i];
      if (n.kind == detail::node_kind::source)
        for (const auto& t : n.topics)
          topics +=
              (topics.empty() ? "'" : ", '") + detail::topology_access::resolve_topic(n, t, "<application.id>") + "'";
    }
    throw error(errc::invalid_topology,
                "sub-topology " + std::to_string(sub.id) + " reads " + (topics.empty() ? "no topic" : topics) +
                    ", whose partition count cannot be determined: no source topic of known size feeds it; read "
                    "the stream from an existing source topic before repartitioning it");
  }
  return counts;
}

void app::impl::create_internal_topics(kafka::admin& admin, const std::map<int, int>& sub_partitions,
                                       const std::map<std::string, int>& repartition_partitions) {
  // Created with the partitions their tasks need; one that exists with another count means
  // the sources changed since it was made, and tasks would lose state.
  const auto app_id = cfg.application_id();
  const int replication = runtime::internal_replication_factor(cfg);
  std::vector<kafka::new_topic> internal;
  auto add_internal = [&](std::string name, int count, kafka::config_map configs, const char* what) {
    if (auto existing = admin.partition_count(name, 30s); existing && *existing != count)
      throw sluice::error(errc::invalid_topology,
                          std::string(what) + " topic '" + name + "' has " + std::to_string(*existing) +
                              " partitions but its sources have " + std::to_string(count) +
                              "; the source topics changed: reset the application or restore the count");
    internal.push_back({.name = std::move(name),
                        .partitions = count,
                        .replication_factor = replication,
                        .configs = std::move(configs)});
  };
  for (const auto& [t, count] : repartition_partitions)
    add_internal(detail::repartition_topic(app_id, t), count, {}, "repartition");
  for (const auto& sub : topo.subtopologies())
    for (const auto& s : sub.stores)
      if (const auto* spec = detail::topology_access::find_store(topo, s); spec->logged) {
        kafka::config_map configs{{"cleanup.policy", "compact"}};
        if (spec->changelog_retention.count() > 0) {
          configs["cleanup.policy"] = "compact,delete";
          configs["retention.ms"] = std::to_string(spec->changelog_retention.count());
        }
        add_internal(detail::changelog_topic(app_id, s), sub_partitions.at(sub.id), std::move(configs), "changelog");
      }
  if (dead_letters(cfg)) {
    int count = 1;
    for (auto& [id, n] : sub_partitions) count = std::max(count, n);
    internal.push_back({.name = cfg.dead_letter_topic(), .partitions = count, .replication_factor = replication});
  }
  if (!internal.empty()) admin.create_topics(internal, 60s);
}

void app::impl::refresh_memory_gauges() {
  auto bytes = [](std::size_t n) { return static_cast<std::int64_t>(n); };
  if (const auto use = runtime::allocator::read()) {
    metrics.get_gauge("sluice_allocator_in_use_bytes").set(bytes(use->in_use));
    metrics.get_gauge("sluice_allocator_free_bytes").set(bytes(use->free_bytes));
  }
  if (const auto* env = rocksdb_for_metrics.load(std::memory_order_acquire)) {
    metrics.get_gauge("sluice_state_block_cache_bytes").set(bytes(env->cache_usage_bytes()));
    metrics.get_gauge("sluice_state_memtable_bytes").set(bytes(env->memtable_usage_bytes()));
  }
}

void app::impl::start_global_tables(const kafka::config_map& consumer, kafka::admin& admin) {
  state::rocksdb_environment_options env;
  env.memory_budget_bytes = static_cast<std::size_t>(runtime::state_memory_budget(cfg));
  rocksdb = std::make_unique<state::rocksdb_environment>(env);
  metrics.get_gauge("sluice_state_memory_budget_bytes").set(static_cast<std::int64_t>(env.memory_budget_bytes));
  rocksdb_for_metrics.store(rocksdb.get(), std::memory_order_release);
  globals = std::make_unique<runtime::global_tables>(topo, consumer, admin, metrics,
                                                     cfg.get_error_policy("deserialization.error.handler"),
                                                     [this](const std::string& message) {
                                                       {
                                                         std::lock_guard lock(mutex);
                                                         if (error.empty()) error = message;
                                                       }
                                                       set_state(app_state::error);
                                                     });
  globals->catch_up();
  globals->start_following();
}

void app::impl::start_threads(const kafka::config_map& consumer_props, const kafka::config_map& producer_props,
                              const kafka::config_map& admin_props, const std::map<int, int>& sub_partitions) {
  const auto app_id = cfg.application_id();
  const auto guarantee = cfg.guarantee();
  auto& s = services;
  runtime::read_task_settings(cfg, s);
  s.topo = &topo;
  s.state_dir = cfg.state_dir();
  s.rocksdb = rocksdb.get();
  s.metrics = &metrics;
  s.global_views = globals->views();
  // What processor_context::partition_count() reports (e.g. pace splits its rate by it).
  for (const auto& [sub_id, count] : sub_partitions) s.subtopology_partitions[sub_id] = count;
  s.wall_clock_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };

  runtime::thread_settings base;
  base.commit_interval = cfg.commit_interval();
  base.poll_timeout = cfg.get_ms("poll.ms");
  base.max_poll_records = static_cast<std::size_t>(cfg.get_int("max.poll.records", 1, 1000000));
  base.restore_log_interval = cfg.get_ms("restore.log.interval.ms");
  base.on_production_error = cfg.get_error_policy("production.error.handler");
  base.task_timeout = cfg.get_ms("task.timeout.ms");
  if (guarantee == processing_guarantee::exactly_once) base.transaction_timeout = cfg.transaction_timeout();
  for (const auto& sub : topo.subtopologies())
    for (auto i : sub.nodes) {
      const auto& n = detail::topology_access::nodes(topo)[i];
      if (n.kind != detail::node_kind::source) continue;
      for (const auto& t : n.topics) {
        auto resolved = detail::topology_access::resolve_topic(n, t, app_id);
        base.source_topics.push_back(resolved);
        base.topic_to_subtopology[resolved] = sub.id;
      }
    }
  const auto instance = cfg.instance_id();
  int thread_count = cfg.num_stream_threads();
  for (int i = 0; i < thread_count; ++i) {
    auto settings = base;
    settings.index = i;
    settings.consumer = consumer_props;
    settings.consumer["group.id"] = app_id;
    // Static membership: one stable member id per thread (a user-set id gets the thread
    // number appended, so threads never share it).
    if (auto user = settings.consumer.find("group.instance.id"); user != settings.consumer.end())
      user->second += "-" + std::to_string(i);
    else
      settings.consumer["group.instance.id"] = app_id + "-" + instance + "-" + std::to_string(i);
    if (!settings.consumer.contains("auto.offset.reset")) settings.consumer["auto.offset.reset"] = "earliest";
    if (guarantee == processing_guarantee::exactly_once) settings.consumer["isolation.level"] = "read_committed";
    // Partition ends tell an idling task that an empty input is caught up (max.task.idle.ms;
    // stream_thread.cpp, consumer_lags).
    settings.consumer["enable.partition.eof"] = "true";
    // The instance's application.server rides in the client.id: other instances read it back
    // from the group's description to route queries (http/instance_directory.hpp).
    if (auto server = cfg.get("application.server"); server && !server->empty()) {
      auto user = settings.consumer.find("client.id");
      settings.consumer["client.id"] = http::member_client_id(
          user != settings.consumer.end() ? user->second : settings.consumer["group.instance.id"], *server);
    }
    // librdkafka's statistics feed the sluice_kafka_* gauges (runtime/client_statistics.hpp)
    // every 15 s unless statistics.interval.ms says otherwise (0 turns them off). Not for
    // the restore consumer: it is polled only while restoring, and unpolled statistics
    // would pile up in its queue.
    settings.consumer.try_emplace("statistics.interval.ms", "15000");
    settings.restore_consumer = consumer_props;
    settings.restore_consumer["statistics.interval.ms"] = "0";
    settings.restore_consumer.erase("group.instance.id");
    settings.restore_consumer["isolation.level"] = "read_committed";
    settings.restore_consumer["enable.partition.eof"] = "true";
    // Half the group consumer's prefetch (kafka/consumer.cpp): a changelog's small records
    // cost librdkafka about 200 bytes each while queued, and a restore fetches far ahead of
    // what it applies. 2,000,000 records: peak RSS 398-418 -> 256-266 MB, wall within noise
    // (bench/README.md, "Restore"); consumer.queued.min.messages still sets it.
    settings.restore_consumer.try_emplace("queued.min.messages", "500000");
    // A restore ends at the changelog's end, where the broker holds each fetch for up to
    // fetch.wait.max.ms waiting for data that will not come (or for the abort of a crashed
    // instance's open transaction): librdkafka's 500 ms made a restart after SIGKILL take
    // 1.1 s to replay 20,000 records, 0.15 s with 20 ms (bench/README.md, "Restart after a
    // crash"). Mid-restore the data is there and fetches return at once, so the wait only
    // shortens the tail; consumer.fetch.wait.max.ms still sets it.
    settings.restore_consumer.try_emplace("fetch.wait.max.ms", "20");
    settings.producer = producer_props;
    settings.producer.try_emplace("statistics.interval.ms", "15000");
    // A crashed instance's open transaction holds back read_committed reads of every
    // partition it wrote (repartition topics included) until the broker aborts it after
    // transaction.timeout.ms: librdkafka's 60 s default stalls the new owner of the crashed
    // instance's partitions for a minute. Kafka Streams uses 10 s; so do we, unless set.
    if (guarantee == processing_guarantee::exactly_once)
      settings.producer["transaction.timeout.ms"] = std::to_string(settings.transaction_timeout.count());
    settings.transactional_id = app_id + "-" + instance + "-" + std::to_string(i);
    threads.push_back(std::make_unique<runtime::stream_thread>(
        std::move(settings), services, [this, i](runtime::thread_state st) { on_thread_state(i, st); }));
  }
  std::vector<runtime::query_inbox*> inboxes;
  for (auto& t : threads) inboxes.push_back(&t->queries());
  queries->attach(std::move(inboxes), s.subtopology_partitions);
  if (http) {
    http->set_directory(
        std::make_unique<http::instance_directory>(admin_props, app_id, topo, base.topic_to_subtopology));
  }
  set_state(app_state::rebalancing);
  for (auto& t : threads) t->start();
}

void app::start() {
  auto& d = *impl_;
  {
    std::lock_guard lock(d.mutex);
    if (d.closed) throw stopped_at_start();
    d.starting = std::this_thread::get_id();
  }
  struct started_or_not {
    impl& d;
    ~started_or_not() {
      {
        std::lock_guard lock(d.mutex);
        d.starting.reset();
      }
      d.changed.notify_all();
    }
  } done{d};
  // Before any Kafka client: a second instance on this state.dir would join the group with
  // the same group.instance.id and transactional.id and fence this one's twin.
  d.state_lock = std::make_unique<state::application_directory>(d.cfg.state_dir(), d.cfg.application_id());
  // Then the HTTP server, so liveness and readiness probes answer while the app connects and restores.
  d.http = http::instance_server::from_config(d.cfg, *this, *d.queries);
  if (d.http) d.http->start();
  const auto clients = make_client_configs(d.cfg);
  d.bootstrap = clients.admin.at("bootstrap.servers");
  if (clients.cluster == cluster_kind::embedded)
    spdlog::info("bootstrap.servers=embedded: using the in-process mock cluster at {}", d.bootstrap);
  kafka::admin admin(clients.admin);
  if (clients.cluster == cluster_kind::kafka &&
      !wait_for_cluster(admin, d.cfg, d.bootstrap, [&d] { return d.stop_at_start(); }))
    throw stopped_at_start();
  auto sub_partitions = validate_source_topics(d.topo, admin, clients.cluster);
  const auto repartition_partitions = runtime::infer_repartition_partitions(d.topo, sub_partitions);
  d.create_internal_topics(admin, sub_partitions, repartition_partitions);
  d.services.output_partitions = validate_output_topics(d.topo, admin, clients.cluster);
  create_global_table_topics_on_embedded(d.topo, admin, clients.cluster);
  d.start_global_tables(clients.consumer, admin);
  if (d.http) d.http->set_global_stores(d.globals->stores());
  auto producer = clients.producer;
  d.services.record_limits = learn_record_limits(d.topo, d.cfg, admin, producer);
  if (d.stop_at_start()) throw stopped_at_start();
  d.start_threads(clients.consumer, producer, clients.admin, sub_partitions);
}

void app::close(std::chrono::milliseconds timeout) {
  auto& d = *impl_;
  {
    std::unique_lock lock(d.mutex);
    if (d.closed) return;
    d.closed = true;
    // A start() on another thread stops at its next check and returns (throwing); not when
    // this is its own thread (a state listener closing the app), which would wait for itself.
    d.changed.wait(lock, [&] { return !d.starting || *d.starting == std::this_thread::get_id(); });
  }
  if (state() != app_state::error) d.set_state(app_state::pending_shutdown);
  for (auto& t : d.threads) t->request_stop();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool stopped = true;
  for (auto& t : d.threads) stopped = t->join_until(deadline) && stopped;
  if (!stopped) {
    // They go on closing; the app's destructor waits for them (and stops the server after).
    spdlog::warn("sluice: stream threads did not finish closing within {} ms", timeout.count());
    return;
  }
  d.queries->detach();
  if (d.http) d.http->stop();
  if (d.globals) d.globals->stop();
  d.threads.clear();
  d.state_lock.reset();
  if (state() != app_state::error) d.set_state(app_state::not_running);
}

void app::wait() {
  auto& d = *impl_;
  std::unique_lock lock(d.mutex);
  d.changed.wait(lock, [&] { return d.state == app_state::error || d.state == app_state::not_running || d.closed; });
}

int app::run() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  // Threads started from here inherit the mask, so only this thread receives the signals.
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  impl_->stop_requested_at_start = [&signals] {
    timespec now{0, 0};
    const int sig = sigtimedwait(&signals, nullptr, &now);
    if (sig != SIGINT && sig != SIGTERM) return false;
    spdlog::info("sluice: {} received while waiting for the cluster; stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
    return true;
  };
  try {
    start();
  } catch (const stopped_at_start&) {
    spdlog::info("sluice: stopped cleanly (before it started)");
    return 0;
  } catch (const std::exception& e) {
    spdlog::error("sluice: the job cannot start: {}", e.what());
    return 1;
  }
  timespec tick{0, 200 * 1000 * 1000};
  for (;;) {
    int sig = sigtimedwait(&signals, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM) {
      spdlog::info("sluice: {} received; finishing records in hand, committing and closing",
                   sig == SIGINT ? "SIGINT" : "SIGTERM");
      break;
    }
    if (state() == app_state::error) break;
  }
  close();
  if (state() == app_state::error) {
    spdlog::error("sluice: the job stopped on an error: {}", error_message());
    return 1;
  }
  spdlog::info("sluice: stopped cleanly");
  return 0;
}

app_state app::state() const noexcept {
  std::lock_guard lock(impl_->mutex);
  return impl_->state;
}

std::string app::error_message() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->error;
}

std::string app::degraded_reason() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->state == app_state::degraded ? impl_->degraded_reason : std::string();
}

app::status_snapshot app::status() const {
  std::lock_guard lock(impl_->mutex);
  status_snapshot s{impl_->state, {}};
  if (s.state == app_state::error) s.reason = impl_->error;
  if (s.state == app_state::degraded) s.reason = impl_->degraded_reason;
  return s;
}

metrics_registry& app::metrics() noexcept { return impl_->metrics; }
interactive_queries& app::queries() noexcept { return *impl_->queries; }
const topology& app::get_topology() const noexcept { return impl_->topo; }
void app::on_state_change(std::function<void(app_state, app_state)> listener) {
  impl_->listeners.push_back(std::move(listener));
}
std::string app::bootstrap_servers() const { return impl_->bootstrap; }

}  // namespace sluice
