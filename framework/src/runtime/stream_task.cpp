// One task: stores, nodes, stream time, punctuators and the error handlers' decisions.
#include "runtime/stream_task.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "runtime/error_classification.hpp"
#include "sluice/detail/dsl_nodes.hpp"
#include "sluice/error.hpp"

namespace sluice::runtime {

stream_task::stream_task(int subtopology, std::int32_t partition, const task_services& services, record_sender& sender,
                         std::string thread_label)
    : subtopology_(subtopology),
      partition_(partition),
      id_(std::to_string(subtopology) + "_" + std::to_string(partition)),
      services_(services),
      sender_(sender),
      label_(thread_label + ",task=\"" + id_ + "\""),
      processed_(services.metrics->get_counter("sluice_records_processed_total", label_)),
      skipped_(services.metrics->get_counter("sluice_records_skipped_total", label_)),
      dead_lettered_(services.metrics->get_counter("sluice_records_dead_lettered_total", label_)),
      e2e_latency_(services.metrics->get_histogram("sluice_end_to_end_latency_ms", label_)) {
  const auto& topo = *services_.topo;
  const auto& sub = topo.subtopologies().at(static_cast<std::size_t>(subtopology));
  open_stores();

  std::map<std::size_t, detail::node*> instance;
  for (auto i : sub.nodes) {
    nodes_.push_back(topo.nodes()[i].factory());
    instance[i] = nodes_.back().get();
  }
  for (auto i : sub.nodes) {
    const auto& spec = topo.nodes()[i];
    for (auto p : spec.parents) instance.at(p)->add_child(instance[i], spec.name);
    if (spec.kind == detail::node_kind::source)
      for (const auto& t : spec.topics) {
        inputs_.push_back({topology::resolve_topic(spec, t, services_.application_id), partition_});
        sources_.push_back(instance[i]);
        next_offsets_.push_back(-1);
      }
  }
}

stream_task::~stream_task() {
  if (!stores_.empty()) close(false);
}

void stream_task::open_stores() {
  const auto& topo = *services_.topo;
  const auto& sub = topo.subtopologies().at(static_cast<std::size_t>(subtopology_));
  bool persistent = std::any_of(sub.stores.begin(), sub.stores.end(), [&](const std::string& s) {
    return topo.find_store(s)->backend == detail::store_backend::rocksdb;
  }) && !services_.memory_stores_only;
  if (persistent) directory_.emplace(services_.state_dir, services_.application_id, id_);
  for (const auto& name : sub.stores) {
    const auto* spec = topo.find_store(name);
    state::store_options options;
    options.name = name;
    options.mode = services_.guarantee == processing_guarantee::exactly_once ? state::write_mode::hold_until_commit
                                                                              : state::write_mode::write_through;
    options.ttl = spec->ttl;
    // TTL runs on the task's stream time, for live writes and restored entries alike (the
    // changelog carries each write's stream time), so a restart changes no expiry: on the
    // wall clock, replaying old input after a crash forgot every restored entry.
    options.now_ms = [clock = stream_clock_] { return clock->load(std::memory_order_relaxed); };
    options.configure_rocksdb = spec->rocksdb_options;
    task_store ts;
    ts.spec = spec;
    std::unique_ptr<state::kv_store> storage;
    if (spec->backend == detail::store_backend::memory || services_.memory_stores_only) {
      storage = state::open_memory_store(options);
    } else {
      options.directory = directory_->path();
      try {
        storage = state::open_rocksdb_store(options, *services_.rocksdb);
      } catch (const sluice::error& e) {
        spdlog::warn("task {}: store '{}' cannot be opened ({}); wiping it and restoring from its changelog", id_,
                     name, e.what());
        directory_->wipe_store(name);
        storage = state::open_rocksdb_store(options, *services_.rocksdb);
      }
    }
    if (spec->logged) {
      ts.changelog_topic = services_.application_id + "-" + name + "-changelog";
      ts.changelog = std::make_unique<changelog_logger>(ts.changelog_topic, partition_, sender_);
    }
    // A store kind of its own is built over the storage; a plain key-value store is the storage.
    if (spec->make_store) {
      ts.store = spec->make_store(std::move(storage), ts.changelog.get());
      if (!ts.store || ts.store->name() != name)
        throw error(errc::invalid_topology, "store '" + name + "': its store factory must return a store named '" +
                                                name + "' (built over the storage it was given)");
    } else {
      ts.store = std::move(storage);
    }
    checkpointed_.push_back(ts.store->committed_offset().value_or(0));
    stores_.push_back(std::move(ts));
  }
}

void stream_task::start() {
  if (started_) return;
  for (auto& n : nodes_) n->init(*this);
  started_ = true;
}

detail::store_binding stream_task::store(std::string_view name) {
  for (auto& s : stores_)
    if (s.spec->name == name) return {s.store.get(), s.changelog.get()};
  throw error(errc::invalid_topology, "task " + id_ + ": no store named '" + std::string(name) +
                                          "'; declare it with add_state_store() and name it in process()");
}

const detail::global_view& stream_task::global_store(std::string_view name) {
  auto it = services_.global_views.find(std::string(name));
  if (it == services_.global_views.end())
    throw error(errc::invalid_topology, "no global store named '" + std::string(name) + "'; create it with global_table()");
  return *it->second;
}

cancellable stream_task::schedule(std::chrono::milliseconds interval, punctuation_type type,
                                  std::function<void(std::int64_t)> callback) {
  if (interval.count() <= 0)
    throw error(errc::invalid_topology, "schedule: the interval must be positive, got " +
                                            std::to_string(interval.count()) + " ms");
  auto cancelled = std::make_shared<bool>(false);
  std::int64_t base = type == punctuation_type::wall_clock ? wall_clock_ms() : std::max<std::int64_t>(stream_time_, 0);
  punctuators_.push_back({interval, type, base + interval.count(), std::move(callback), cancelled});
  return cancellable(cancelled);
}

void stream_task::send(std::string_view topic, const std::optional<std::string_view>& key,
                       const std::optional<std::string_view>& value, std::int64_t timestamp,
                       const sluice::headers& headers, std::int32_t partition) {
  sender_.send(topic, partition, key, value, timestamp, headers);
}

void stream_task::run_punctuators(punctuation_type type, std::int64_t now) {
  if (punctuators_.empty()) return;
  auto saved = metadata_;
  metadata_ = record_metadata{};
  // Index loop: a callback may schedule more punctuators (push_back invalidates iterators).
  for (std::size_t i = 0; i < punctuators_.size(); ++i) {
    if (punctuators_[i].type != type || *punctuators_[i].cancelled) continue;
    if (now < punctuators_[i].next_due) continue;
    auto interval = punctuators_[i].interval.count();
    // Fire once for the latest due time; skip intervals missed while idle.
    punctuators_[i].next_due += ((now - punctuators_[i].next_due) / interval + 1) * interval;
    auto callback = punctuators_[i].callback;
    callback(now);
  }
  std::erase_if(punctuators_, [](const punctuator& p) { return *p.cancelled; });
  metadata_ = saved;
}

void stream_task::punctuate_wall_clock(std::int64_t now_ms) {
  if (started_) run_punctuators(punctuation_type::wall_clock, now_ms);
}

std::size_t stream_task::input_index(std::string_view topic) {
  if (last_input_ < inputs_.size() && inputs_[last_input_].topic == topic) return last_input_;
  for (std::size_t i = 0; i < inputs_.size(); ++i)
    if (inputs_[i].topic == topic) return last_input_ = i;
  return inputs_.size();
}

void stream_task::process(const kafka::message& m) {
  const std::size_t input = input_index(m.topic);
  if (input == inputs_.size()) return;
  metadata_ = {inputs_[input].topic, m.partition, m.offset};
  detail::raw_record raw;
  if (m.key) raw.key = std::string_view(*m.key);
  if (m.value) raw.value = std::string_view(*m.value);
  raw.timestamp = m.timestamp;
  raw.headers = &m.headers;
  if (m.timestamp > stream_time_) {
    stream_time_ = m.timestamp;
    stream_clock_->store(stream_time_, std::memory_order_relaxed);
  }
  try {
    sources_[input]->process_raw(raw);
  } catch (const detail::deserialization_failure& e) {
    handle_failure(m, services_.on_deserialization_error, "deserialization", e.what());
  } catch (const std::exception& e) {
    if (classify_failure(e) != failure_kind::record) throw;
    handle_failure(m, services_.on_processing_error, "processing", e.what());
  }
  next_offsets_[input] = m.offset + 1;
  dirty_offsets_ = true;
  ++processed_total_;
  processed_.add();
  // End-to-end latency from a sample of records: one in 64 keeps the clock read off the
  // per-record path and still fills the histogram at any useful rate.
  if (processed_total_ % 64 == 1 && m.timestamp > 0) e2e_latency_.record(services_.wall_clock_ms() - m.timestamp);
  run_punctuators(punctuation_type::stream_time, stream_time_);
}

void stream_task::handle_failure(const kafka::message& m, error_policy policy, std::string_view kind,
                                 const std::string& what) {
  std::string where = m.topic + "[" + std::to_string(m.partition) + "]@" + std::to_string(m.offset);
  std::string handler = std::string(kind) + ".error.handler";
  switch (policy) {
    case error_policy::fail:
      throw error(kind == "deserialization" ? errc::serialization : errc::processing,
                  std::string(kind) + " error on record " + where + ": " + what + " (" + handler +
                      "=fail stops the job; set it to log_and_continue or dead_letter to skip such records)");
    case error_policy::log_and_continue: {
      skipped_.add();
      auto n = skipped_.value();
      if (n <= 10 || n % 1000 == 0)
        spdlog::warn("task {}: skipped record {} ({} error, {} so far): {}", id_, where, kind, n, what);
      return;
    }
    case error_policy::dead_letter: {
      sluice::headers h = m.headers;
      h.add("sluice.error.kind", std::string(kind));
      h.add("sluice.error.message", what);
      h.add("sluice.source.topic", m.topic);
      h.add("sluice.source.partition", std::to_string(m.partition));
      h.add("sluice.source.offset", std::to_string(m.offset));
      std::optional<std::string_view> k, v;
      if (m.key) k = *m.key;
      if (m.value) v = *m.value;
      sender_.send(services_.dead_letter_topic, -1, k, v, m.timestamp, h);
      skipped_.add();
      dead_lettered_.add();
      return;
    }
  }
}

std::int32_t stream_task::partition_count() const {
  auto it = services_.subtopology_partitions.find(subtopology_);
  // Unknown only when the app could not learn it (no external source); one task then.
  return it == services_.subtopology_partitions.end() ? 1 : it->second;
}

std::vector<kafka::topic_partition_offset> stream_task::offsets_to_commit() const {
  std::vector<kafka::topic_partition_offset> out;
  if (!dirty_offsets_) return out;
  for (std::size_t i = 0; i < inputs_.size(); ++i)
    if (next_offsets_[i] >= 0) out.push_back({inputs_[i].topic, inputs_[i].partition, next_offsets_[i]});
  return out;
}

void stream_task::mark_committed() {
  dirty_offsets_ = false;
  commit_requested_ = false;
}

void stream_task::commit_stores(
    const std::function<std::optional<std::int64_t>(const std::string&, std::int32_t)>& next_offset) {
  for (auto& s : stores_) {
    std::optional<std::int64_t> offset;
    if (!s.changelog_topic.empty()) offset = next_offset(s.changelog_topic, partition_);
    if (!offset) offset = s.store->committed_offset();
    if (s.changelog) s.changelog->reset();
    if (!offset && s.store->pending_bytes() == 0) continue;
    s.store->commit(offset.value_or(0));
  }
}

void stream_task::abort_stores() {
  for (auto& s : stores_) {
    s.store->abort();
    if (s.changelog) s.changelog->reset();
  }
}

void stream_task::checkpoint_stores() {
  for (std::size_t i = 0; i < stores_.size(); ++i) {
    stores_[i].store->flush();
    checkpointed_[i] = stores_[i].store->committed_offset().value_or(0);
  }
}

bool stream_task::checkpoint_due(double fraction, std::int64_t min_records) const {
  for (std::size_t i = 0; i < stores_.size(); ++i) {
    if (stores_[i].changelog_topic.empty()) continue;
    auto position = stores_[i].store->committed_offset().value_or(0);
    auto tail = position - checkpointed_[i];
    if (tail > std::max(min_records, static_cast<std::int64_t>(fraction * static_cast<double>(position)))) return true;
  }
  return false;
}

bool stream_task::commit_due(double fraction, std::int64_t min_records) const {
  for (const auto& s : stores_) {
    if (!s.changelog) continue;
    auto position = s.store->committed_offset().value_or(0);
    if (s.changelog->uncommitted() > std::max(min_records, static_cast<std::int64_t>(fraction * static_cast<double>(position))))
      return true;
  }
  return false;
}

void stream_task::close(bool clean) {
  if (started_) {
    for (auto& n : nodes_) {
      try {
        n->close();
      } catch (const std::exception& e) {
        spdlog::warn("task {}: a processor threw from close(): {}", id_, e.what());
      }
    }
    started_ = false;
  }
  for (auto& s : stores_) {
    try {
      if (!clean) s.store->abort();
      s.store->close();
    } catch (const std::exception& e) {
      spdlog::warn("task {}: closing store '{}' failed: {}", id_, s.spec->name, e.what());
    }
  }
  stores_.clear();
  checkpointed_.clear();
  nodes_.clear();
  directory_.reset();
}

}  // namespace sluice::runtime
