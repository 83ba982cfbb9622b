// One task's stores: open, commit with offsets, abort, checkpoint, close.
#include "runtime/state_manager.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "runtime/stream_task.hpp"
#include "sluice/detail/internal_topics.hpp"
#include "sluice/error.hpp"
#include "sluice/state/rocksdb_store.hpp"

namespace sluice::runtime {

namespace {
/// How far a store's changelog has been applied, in records (0 for a new store): the
/// yardstick of the checkpoint and early-commit policies.
std::int64_t changelog_position(const state::state_store& store) {
  return store.committed_offset().value_or(state::changelog_offset(0)).value();
}
}  // namespace

changelog_logger::changelog_logger(std::string topic, std::int32_t partition, record_sender& sender,
                                   changelog_batching batching, changelog_buffer_budget* budget)
    : topic_(std::move(topic)),
      partition_(partition),
      sender_(sender),
      batching_(budget == nullptr || budget->bound <= 0 ? changelog_batching::per_write : batching),
      budget_(budget) {}

changelog_logger::~changelog_logger() = default;

void changelog_logger::add_bytes(std::int64_t delta) noexcept {
  buffered_bytes_ += delta;
  budget_->used += delta;
}

void changelog_logger::log(std::string_view key, const std::optional<std::string_view>& value, std::int64_t timestamp) {
  if (timestamp < 0) timestamp = 0;
  if (batching_ == changelog_batching::per_write) {
    sender_.send_changelog(topic_, partition_, key, value, timestamp);
    ++sent_;
    return;
  }
  entry* e = nullptr;
  if (batching_ == changelog_batching::every_write_per_commit) {
    e = &append(key);
  } else if (auto it = index_.find(key); it != index_.end()) {
    e = &buffer_[it->second];
    add_bytes(-bytes_of(*e));
  } else {
    e = &append(key);
    index_.emplace(std::string_view(e->key), live_ - 1);
  }
  e->tombstone = !value.has_value();
  if (value)
    e->value.assign(*value);
  else
    e->value.clear();
  e->timestamp = timestamp;
  add_bytes(bytes_of(*e));
  if (budget_->used > budget_->bound) send();
}

changelog_logger::entry& changelog_logger::append(std::string_view key) {
  // Entries past live_ are kept from earlier commits, their strings' storage with them.
  entry& e = live_ < buffer_.size() ? buffer_[live_] : buffer_.emplace_back();
  ++live_;
  e.key.assign(key);
  return e;
}

void changelog_logger::send() {
  for (std::size_t i = 0; i < live_; ++i) {
    const auto& e = buffer_[i];
    std::optional<std::string_view> value;
    if (!e.tombstone) value = e.value;
    sender_.send_changelog(topic_, partition_, e.key, value, e.timestamp);
  }
  sent_ += static_cast<std::int64_t>(live_);
  clear_buffer();
}

void changelog_logger::drop() noexcept {
  clear_buffer();
  sent_ = 0;
}

void changelog_logger::clear_buffer() noexcept {
  index_.clear();
  // Entries kept for reuse: as many as this buffer just held. A steady load reuses them all;
  // a burst's (hundreds of thousands of small writes under the byte bound) goes with the next
  // smaller commit instead of staying for the life of the task.
  if (buffer_.size() > live_) {
    buffer_.resize(live_);
  }
  live_ = 0;
  if (budget_ != nullptr) add_bytes(-buffered_bytes_);
}

namespace {
/// Opens the key-value storage of one store (wiping and reopening a corrupt RocksDB store).
std::unique_ptr<state::kv_store> open_storage(const detail::store_spec& spec, const task_services& services,
                                              const std::string& task_name, task_storage& t,
                                              task_storage::store& opened) {
  state::store_options options;
  options.name = spec.name;
  options.mode = services.guarantee == processing_guarantee::exactly_once ? state::write_mode::hold_until_commit
                                                                          : state::write_mode::write_through;
  options.ttl = spec.ttl;
  options.read_cache_bytes = static_cast<std::size_t>(services.read_cache_bytes);
  // TTL runs on the task's stream time, for live writes and restored entries alike (the
  // changelog carries each write's stream time), so a restart changes no expiry: on the
  // wall clock, replaying old input after a crash forgot every restored entry.
  options.now_ms = [clock = t.stream_clock] { return clock->load(std::memory_order_relaxed); };
  options.configure_rocksdb = spec.rocksdb_options;
  // A RocksDB store found holding values of another layout (an aggregation's store written
  // before aggregations kept timestamps) wipes itself at open: the changelog restores it.
  options.format = spec.format;
  if (options.mode == state::write_mode::write_through) {
    // Bound by make_store once the store's changelog logger exists (on the task's thread).
    opened.before_write_through = std::make_shared<std::function<void()>>();
    options.before_write_through = [hook = opened.before_write_through] {
      if (*hook) (*hook)();
    };
  }
  if (spec.backend == store_backend::memory || services.memory_stores_only) return state::open_memory_store(options);
  options.directory = t.directory->path();
  try {
    return state::open_rocksdb_store(options, *services.rocksdb);
  } catch (const state::out_of_space_error&) {
    throw;  // the files are sound: wiping them would only cost a full restore later
  } catch (const sluice::error& e) {
    spdlog::warn("task {}: store '{}' cannot be opened ({}); wiping it and restoring from its changelog", task_name,
                 spec.name, e.what());
    t.directory->wipe_store(spec.name);
    return state::open_rocksdb_store(options, *services.rocksdb);
  }
}
}  // namespace

task_storage open_task_storage(task_id id, const task_services& services,
                               std::shared_ptr<std::atomic<std::int64_t>> stream_clock) {
  task_storage t;
  t.stream_clock = stream_clock ? std::move(stream_clock) : std::make_shared<std::atomic<std::int64_t>>(-1);
  const auto name = id.to_string();
  const auto& topo = *services.topo;
  const auto& sub = topo.subtopologies().at(static_cast<std::size_t>(id.subtopology));
  bool persistent =
      std::any_of(sub.stores.begin(), sub.stores.end(),
                  [&](const std::string& s) {
                    return detail::topology_access::find_store(topo, s)->backend == store_backend::rocksdb;
                  }) &&
      !services.memory_stores_only;
  try {
    if (persistent) t.directory.emplace(services.state_dir, services.application_id, name);
  } catch (...) {
    t.directory_failure = std::current_exception();
    return t;
  }
  for (const auto& store : sub.stores) {
    auto& opened = t.stores.emplace_back();
    try {
      opened.storage = open_storage(*detail::topology_access::find_store(topo, store), services, name, t, opened);
    } catch (...) {
      opened.failure = std::current_exception();
      break;
    }
  }
  return t;
}

state_manager::state_manager(task_id id, const task_services& services, record_sender& sender, task_storage storage)
    : id_(id), name_(id.to_string()), services_(services), sender_(sender), stream_clock_(storage.stream_clock) {
  if (storage.directory_failure) std::rethrow_exception(storage.directory_failure);
  directory_ = std::move(storage.directory);
  changelog_budget_.bound = services_.changelog_buffer_bytes;
  const auto& topo = *services_.topo;
  const auto& sub = topo.subtopologies().at(static_cast<std::size_t>(id.subtopology));
  // A local: what a failure leaves unused closes before the directory's lock is released.
  auto opened = std::move(storage.stores);
  for (std::size_t i = 0; i < sub.stores.size() && i < opened.size(); ++i) {
    if (opened[i].failure) std::rethrow_exception(opened[i].failure);
    auto ts = make_store(*detail::topology_access::find_store(topo, sub.stores[i]), std::move(opened[i].storage),
                         opened[i].before_write_through);
    checkpointed_.push_back(changelog_position(*ts.store));
    stores_.push_back(std::move(ts));
  }
}

state_manager::state_manager(task_id id, const task_services& services, record_sender& sender,
                             std::shared_ptr<std::atomic<std::int64_t>> stream_clock)
    : state_manager(id, services, sender, open_task_storage(id, services, std::move(stream_clock))) {}

state_manager::~state_manager() {
  if (!stores_.empty()) close(close_mode::dirty);
}

task_store state_manager::make_store(const detail::store_spec& spec, std::unique_ptr<state::kv_store> storage,
                                     const std::shared_ptr<std::function<void()>>& before_write_through) {
  task_store ts;
  ts.spec = &spec;
  if (spec.logged) {
    ts.changelog_topic = detail::changelog_topic(services_.application_id, spec.name);
    // Only a plain key-value store's restore is last-write-wins per key whatever the order of
    // writes to different keys; every other kind (queue, window, ranked index, custom) logs
    // each write, in order, so its restore stays exactly what it was. A key-value store may
    // ask for the same (materialized::log_every_write). Under at-least-once those writes wait
    // for the commit too: each changelog record waits for the outputs sent before it
    // (record_collector::send_changelog), once per commit rather than once per write.
    auto batching = changelog_batching::last_write_per_commit;
    if (spec.make_store || spec.log_every_write)
      batching = services_.guarantee == processing_guarantee::at_least_once ? changelog_batching::every_write_per_commit
                                                                            : changelog_batching::per_write;
    ts.changelog =
        std::make_unique<changelog_logger>(ts.changelog_topic, id_.partition, sender_, batching, &changelog_budget_);
  }
  // Under at-least-once a store past its write-through bound applies its pending writes to
  // storage before the commit: a pop or a handled offset would then survive a restart while
  // the output sent before it might not be delivered. Its changelog is sent first, which
  // waits for those outputs (record_collector::send_changelog); a failed output stops the
  // write as it stops the commit.
  if (ts.changelog && before_write_through)
    *before_write_through = [changelog = ts.changelog.get()] { changelog->send(); };
  // A store kind of its own is built over the storage; a plain key-value store is the storage.
  if (spec.make_store) {
    ts.store = spec.make_store(std::move(storage), ts.changelog.get());
    if (!ts.store || ts.store->name() != spec.name)
      throw error(errc::invalid_topology, "store '" + spec.name + "': its store factory must return a store named '" +
                                              spec.name + "' (built over the storage it was given)");
    // A kind keeping memory beside its storage (a ranked index's lists) is charged to the
    // process's share of state.memory.budget.bytes for it (state/README.md, "Memory budget").
    if (auto* charged = dynamic_cast<state::memory_charged_store*>(ts.store.get())) {
      if (services_.rocksdb == nullptr)
        throw error(errc::invalid_topology,
                    "store '" + spec.name +
                        "' keeps memory of its own but the runtime has no "
                        "state environment to charge it to (task_services::rocksdb is not set)");
      charged->charge_memory_to(services_.rocksdb->index_memory());
    }
  } else {
    ts.store = std::move(storage);
  }
  return ts;
}

task_store* state_manager::find(std::string_view name) noexcept {
  for (auto& s : stores_)
    if (s.spec->name == name) return &s;
  return nullptr;
}

void state_manager::commit(const changelog_offsets& next_offset) {
  for (auto& s : stores_) {
    std::optional<state::changelog_offset> offset;
    if (!s.changelog_topic.empty()) offset = next_offset(s.changelog_topic, id_.partition);
    if (!offset) offset = s.store->committed_offset();
    if (s.changelog) s.changelog->reset();
    if (!offset && s.store->pending_bytes() == 0) continue;
    s.store->commit(offset.value_or(state::changelog_offset(0)));
  }
}

void state_manager::send_changelogs() {
  for (auto& s : stores_)
    if (s.changelog) s.changelog->send();
}

void state_manager::abort() {
  for (auto& s : stores_) {
    s.store->abort();
    if (s.changelog) s.changelog->drop();
  }
}

void state_manager::checkpoint() {
  for (std::size_t i = 0; i < stores_.size(); ++i) {
    stores_[i].store->flush();
    checkpointed_[i] = changelog_position(*stores_[i].store);
  }
}

bool state_manager::begin_checkpoint() {
  bool ready = true;
  for (auto& s : stores_) ready = s.store->begin_flush() && ready;  // every store starts, ready or not
  return ready;
}

bool state_manager::checkpoint_due(double fraction, std::int64_t min_records) const {
  for (std::size_t i = 0; i < stores_.size(); ++i) {
    if (stores_[i].changelog_topic.empty()) continue;
    auto position = changelog_position(*stores_[i].store);
    auto tail = position - checkpointed_[i];
    auto bound = std::max(min_records, static_cast<std::int64_t>(fraction * static_cast<double>(position)));
    if (tail <= bound) continue;
    // The tail counts in what a crash would take from the store, not in changelog records:
    // a store rewriting a few keys in place (the overflow buffer's customers, written at
    // every commit) has a long tail over few unflushed entries, and flushing it would write
    // those few entries and leave an empty memtable into which the next commits insert every
    // key anew. Its tail is bounded by the timed checkpoint instead. A store writing new keys
    // holds about one entry per record, so its rule is unchanged.
    auto entries = stores_[i].store->unflushed_entries();
    if (!entries || *entries > static_cast<std::uint64_t>(bound)) return true;
  }
  return false;
}

bool state_manager::commit_due(double fraction, std::int64_t min_records) const {
  for (const auto& s : stores_) {
    if (!s.changelog) continue;
    auto position = changelog_position(*s.store);
    if (s.changelog->uncommitted() >
        std::max(min_records, static_cast<std::int64_t>(fraction * static_cast<double>(position))))
      return true;
  }
  return false;
}

void state_manager::close(close_mode mode) noexcept {
  for (auto& s : stores_) {
    try {
      if (mode == close_mode::dirty) s.store->abort();
      // Buffered changelog writes: a clean close follows a commit that sent them; a dirty
      // one drops them with the transaction (or uncommitted input) they belong to.
      if (s.changelog) s.changelog->drop();
      s.store->close();
    } catch (const std::exception& e) {
      spdlog::warn("task {}: closing store '{}' failed: {}", name_, s.spec->name, e.what());
    }
  }
  stores_.clear();
  checkpointed_.clear();
  directory_.reset();
}

}  // namespace sluice::runtime
