// One task: stores, nodes, stream time, punctuators and the error handlers' decisions.
#include "runtime/stream_task.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "runtime/error_classification.hpp"
#include "sluice/detail/dsl_nodes.hpp"
#include "sluice/error.hpp"

namespace sluice::runtime {

void read_task_settings(const config& cfg, task_services& s) {
  s.application_id = cfg.application_id();
  s.guarantee = cfg.guarantee();
  s.on_deserialization_error = cfg.get_error_policy("deserialization.error.handler");
  s.on_processing_error = cfg.get_error_policy("processing.error.handler");
  s.dead_letter_topic = cfg.dead_letter_topic();
  s.max_task_idle_ms = cfg.max_task_idle_ms();
  s.changelog_buffer_bytes = cfg.get_int("statestore.changelog.buffer.bytes");
  s.read_cache_bytes = cfg.get_int("statestore.read.cache.bytes");
}

stream_task::stream_task(runtime::task_id id, const task_services& services, record_sender& sender,
                         std::string thread_label)
    : stream_task(id, services, sender, std::move(thread_label), open_task_storage(id, services)) {}

stream_task::stream_task(runtime::task_id id, const task_services& services, record_sender& sender,
                         std::string thread_label, task_storage storage)
    : id_(id),
      name_(id.to_string()),
      services_(services),
      sender_(sender),
      stream_clock_(storage.stream_clock),
      stores_(id, services, sender, std::move(storage)),
      label_(thread_label + ",task=\"" + name_ + "\""),
      processed_(services.metrics->get_counter("sluice_records_processed_total", label_)),
      dead_lettered_truncated_(services.metrics->get_counter("sluice_records_dead_lettered_truncated_total", label_)),
      e2e_latency_(services.metrics->get_histogram("sluice_end_to_end_latency_ms", label_)),
      enforced_processing_(services.metrics->get_counter("sluice_enforced_processing_total", label_)) {
  for (auto reason : {failure_reason::deserialization, failure_reason::processing}) {
    const auto labels = label_ + ",reason=\"" + std::string(to_string(reason)) + "\"";
    skipped_[static_cast<std::size_t>(reason)] = &services.metrics->get_counter("sluice_records_skipped_total", labels);
    dead_lettered_[static_cast<std::size_t>(reason)] =
        &services.metrics->get_counter("sluice_records_dead_lettered_total", labels);
  }
  const auto& topo = *services_.topo;
  const auto& sub = topo.subtopologies().at(static_cast<std::size_t>(id.subtopology));

  std::map<std::size_t, detail::node*> instance;
  for (auto i : sub.nodes) {
    nodes_.push_back(detail::topology_access::nodes(topo)[i].factory());
    instance[i] = nodes_.back().get();
  }
  for (auto i : sub.nodes) {
    const auto& spec = detail::topology_access::nodes(topo)[i];
    for (auto p : spec.parents) instance.at(p)->add_child(instance[i], spec.name);
    if (spec.kind == detail::node_kind::source)
      for (const auto& t : spec.topics) {
        inputs_.push_back({detail::topology_access::resolve_topic(spec, t, services_.application_id), id_.partition});
        queued_.add_partition(inputs_.back());
        sources_.push_back(instance[i]);
        next_offsets_.push_back(-1);
        first_input_of_node_.push_back(
            static_cast<std::size_t>(std::find(sources_.begin(), sources_.end(), instance[i]) - sources_.begin()));
        decoded_.emplace_back();
      }
  }
  // Co-partitioned inputs interleave by timestamp; with an extractor that is the extracted
  // one (as in Kafka Streams), which takes decoding the partitions' head records first.
  const bool extracted =
      std::any_of(sources_.begin(), sources_.end(), [](const detail::node* s) { return s->extracts_timestamp(); });
  if (inputs_.size() > 1 && extracted)
    queued_.order_by([this](std::size_t input, const kafka::message& m) { return order_time(input, m); });
}

std::int64_t stream_task::order_time(std::size_t input, const kafka::message& m) {
  // A record that does not decode or extract is ordered by its own timestamp; processing it
  // decodes again and hands the failure to the handlers.
  try {
    return decode(input, m, true);
  } catch (const std::exception&) {
    return m.timestamp;
  }
}

std::int64_t stream_task::decode(std::size_t input, const kafka::message& m, bool hold) {
  // An offset names one record of the task's partition of that input: the bytes are the same
  // whenever it is fetched again (after a rewind), so a held decode stays valid.
  auto& held = decoded_[first_input_of_node_[input]];
  if (held.offset == m.offset && held.input == input) {
    if (!hold) held.offset = -1;
    return held.timestamp;
  }
  held.offset = -1;  // the node's decoded record is replaced; if decoding fails, nothing is held
  const std::int64_t ts = sources_[input]->decode_raw(raw_of(m));
  if (hold) held = {input, m.offset, ts};
  return ts;
}

detail::raw_record stream_task::raw_of(const kafka::message& m) {
  detail::raw_record raw;
  if (m.key) raw.key = std::string_view(*m.key);
  if (m.value) raw.value = std::string_view(*m.value);
  raw.timestamp = m.timestamp;
  raw.headers = &m.headers;
  return raw;
}

stream_task::~stream_task() {
  if (!closed_) close(close_mode::dirty);
}

void stream_task::start() {
  if (started_) return;
  for (auto& n : nodes_) n->init(*this);
  started_ = true;
}

detail::store_binding stream_task::store(std::string_view name) {
  if (auto* s = stores_.find(name)) return {s->store.get(), s->changelog.get(), s->spec->format};
  throw error(errc::invalid_topology, "task " + name_ + ": no store named '" + std::string(name) +
                                          "'; declare it with add_state_store() and name it in process()");
}

const detail::global_view& stream_task::global_store(std::string_view name) {
  auto it = services_.global_views.find(std::string(name));
  if (it == services_.global_views.end())
    throw error(errc::invalid_topology,
                "no global store named '" + std::string(name) + "'; create it with global_table()");
  return *it->second;
}

cancellable stream_task::schedule(std::chrono::milliseconds interval, punctuation_type type,
                                  std::function<void(std::int64_t)> callback) {
  if (interval.count() <= 0)
    throw error(errc::invalid_topology,
                "schedule: the interval must be positive, got " + std::to_string(interval.count()) + " ms");
  auto cancelled = std::make_shared<bool>(false);
  // As Kafka Streams: wall-clock punctuators first fire one interval from now; stream-time
  // ones are due at 0 (aligned to the epoch), so the first fires with the first record
  // processed after scheduling and later ones on the grid of multiples of the interval.
  std::int64_t first_due = type == punctuation_type::wall_clock ? wall_clock_ms() + interval.count() : 0;
  punctuators_.push_back({interval, type, first_due, std::move(callback), cancelled});
  return cancellable(cancelled);
}

void stream_task::send(std::string_view topic, const std::optional<std::string_view>& key,
                       const std::optional<std::string_view>& value, std::int64_t timestamp,
                       const sluice::headers& headers, std::int32_t partition) {
  // Checked here, not left to the producer: under exactly-once the broker's refusal of a
  // record over the topic's max.message.bytes fails the whole transaction, and the same
  // record fails it again after every rewind. Here it is the processing error of its input.
  if (const auto bytes = record_wire_bytes(key, value, headers); !services_.record_limits.fits_everywhere(bytes))
    if (bytes > services_.record_limits.limit(topic).bytes)
      throw error(errc::processing, services_.record_limits.oversized_message(topic, bytes));
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
  // Decode and extract the timestamp first: stream time follows the extracted timestamp,
  // and a record that fails here (bytes, extractor, negative time) never moves it.
  bool decoded = false;
  try {
    const std::int64_t ts = decode(input, m, false);
    decoded = true;
    if (ts > stream_time_) {
      stream_time_ = ts;
      stream_clock_->store(stream_time_, std::memory_order_relaxed);
    }
    sources_[input]->forward_decoded();
  } catch (const detail::deserialization_failure& e) {
    if (decoded)
      throw_or_handle_processing(m, e);
    else
      handle_failure(m, services_.on_deserialization_error, failure_reason::deserialization, e.what());
  } catch (const std::exception& e) {
    throw_or_handle_processing(m, e);
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

void stream_task::throw_or_handle_processing(const kafka::message& m, const std::exception& e) {
  if (classify_failure(e) != failure_kind::record) throw;
  handle_failure(m, services_.on_processing_error, failure_reason::processing, e.what());
}

void stream_task::process_queued(std::int64_t now_ms, const lag_source& lags) {
  while (process_next_queued(now_ms, lags)) {}
}

bool stream_task::process_next_queued(std::int64_t now_ms, const lag_source& lags) {
  if (queued_.empty() || input_paused(now_ms)) return false;
  switch (queued_.ready(now_ms, services_.max_task_idle_ms, lags)) {
    case readiness::waiting: return false;
    case readiness::enforced: enforced_processing_.add(); break;
    case readiness::ready: break;
  }
  process(queued_.next());
  queued_.pop_next();
  return true;
}

namespace {
/// A dead letter keeps its record's timestamp; a negative one (the reason it is dead, when
/// the timestamp is invalid) becomes 0, which the producer replaces with the current time.
std::int64_t dead_letter_timestamp(const kafka::message& m) { return m.timestamp < 0 ? 0 : m.timestamp; }
}  // namespace

void stream_task::handle_failure(const kafka::message& m, error_policy policy, failure_reason reason,
                                 const std::string& what) {
  const std::string_view kind = to_string(reason);
  counter& skipped = *skipped_[static_cast<std::size_t>(reason)];
  counter& dead_lettered = *dead_lettered_[static_cast<std::size_t>(reason)];
  // The key names the record for its owner (a table's row, a customer), not only its offset.
  std::string where = m.topic + "[" + std::to_string(m.partition) + "]@" + std::to_string(m.offset) + " with key " +
                      printable_key(m.key);
  std::string handler = std::string(kind) + ".error.handler";
  switch (policy) {
    case error_policy::fail:
      throw error(reason == failure_reason::deserialization ? errc::serialization : errc::processing,
                  std::string(kind) + " error on record " + where + ": " + what + " (" + handler +
                      "=fail stops the job; set it to log_and_continue or dead_letter to skip such records)");
    case error_policy::log_and_continue: {
      skipped.add();
      auto n = skipped.value();
      if (n <= 10 || n % 1000 == 0)
        spdlog::warn("task {}: skipped record {} ({} error, {} so far): {}", name_, where, kind, n, what);
      return;
    }
    case error_policy::dead_letter: {
      skipped.add();
      if (send_dead_letter(m, reason, what)) dead_lettered.add();
      return;
    }
  }
}

bool stream_task::send_dead_letter(const kafka::message& m, failure_reason reason, const std::string& what) {
  const std::string_view kind = to_string(reason);
  const auto& topic = services_.dead_letter_topic;
  auto error_headers = [&](sluice::headers& h, std::string_view message) {
    h.add("sluice.error.kind", std::string(kind));
    h.add("sluice.error.message", std::string(message));
    h.add("sluice.source.topic", m.topic);
    h.add("sluice.source.partition", std::to_string(m.partition));
    h.add("sluice.source.offset", std::to_string(m.offset));
  };
  std::optional<std::string_view> key, value;
  if (m.key) key = *m.key;
  if (m.value) value = *m.value;
  const auto limit = services_.record_limits.limit(topic);
  {
    sluice::headers h = m.headers;
    error_headers(h, what);
    const auto whole = record_wire_bytes(key, value, h);
    if (whole <= limit.bytes) {
      try {
        sender_.send(topic, -1, key, value, dead_letter_timestamp(m), h);
        return true;
      } catch (const sluice::error& e) {
        // The limits were not known after all (the producer refused it at once).
        if (e.kafka().code != RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE) throw;
      }
    }
  }
  // The copy with its error headers is larger than the dead-letter topic takes (a record near
  // 1 MB that its source topic took, or a producer or topic limit set lower). Send a copy cut
  // to fit, which says so: a record is never left unaccounted and never stops the job. The
  // budget for key and value is the limit less every header and the framing; original
  // headers are kept when the key and value still get room, the error message is shortened
  // only when nothing else fits.
  const std::size_t key_size = m.key ? m.key->size() : 0, value_size = m.value ? m.value->size() : 0;
  std::size_t original_header_bytes = 0;
  for (const auto& h : m.headers) original_header_bytes += h.key.size() + (h.value ? h.value->size() : 0);
  const auto note = [&](std::size_t key_kept, std::size_t value_kept, bool headers_kept) {
    return "the whole dead-letter copy exceeds " + limit.setting + "; sent: key " + std::to_string(key_kept) + " of " +
           std::to_string(key_size) + " bytes, value " + std::to_string(value_kept) + " of " +
           std::to_string(value_size) + " bytes, original headers " +
           (headers_kept ? "kept"
                         : "dropped (" + std::to_string(m.headers.size()) + " headers, " +
                               std::to_string(original_header_bytes) + " bytes)");
  };
  const auto cut_headers = [&](bool keep_original, std::size_t message_bytes, std::string truncation) {
    sluice::headers h = keep_original ? m.headers : sluice::headers{};
    error_headers(h, std::string_view(what).substr(0, message_bytes));
    h.add("sluice.truncated", std::move(truncation));
    if (m.key) h.add("sluice.original.key.bytes", std::to_string(key_size));
    if (m.value) h.add("sluice.original.value.bytes", std::to_string(value_size));
    return h;
  };
  struct attempt {
    bool keep_original;
    std::size_t message_bytes;
  };
  // Original headers and the whole error message; then without the original headers; then
  // the message cut to 256 bytes. Original headers stay only when they leave the key and
  // value whole or at least 1 KiB of them.
  for (const attempt a : {attempt{true, what.size()}, attempt{false, what.size()}, attempt{false, 256}}) {
    if (a.keep_original && m.headers.size() == 0) continue;
    // Sized with the note's largest numbers (kept sizes equal the originals), so the note
    // written with the real ones is never longer.
    const auto header_only =
        record_wire_bytes(std::nullopt, std::nullopt,
                          cut_headers(a.keep_original, a.message_bytes, note(key_size, value_size, a.keep_original)));
    const std::int64_t room = limit.bytes - header_only;
    const bool last = a.message_bytes == 256;
    if (room <= 0 || (!last && room < 1024 && key_size + value_size > static_cast<std::size_t>(room))) continue;
    auto budget = static_cast<std::size_t>(room);
    // The key first when it is the smaller part (an id), else half each.
    const std::size_t key_kept = std::min(key_size, std::max(budget / 2, budget - std::min(budget, value_size)));
    const std::size_t value_kept = std::min(value_size, budget - key_kept);
    std::optional<std::string_view> k, v;
    if (key) k = key->substr(0, key_kept);
    if (value) v = value->substr(0, value_kept);
    auto sent = note(key_kept, value_kept, a.keep_original);
    auto h = cut_headers(a.keep_original, a.message_bytes, sent);
    try {
      sender_.send(topic, -1, k, v, dead_letter_timestamp(m), h);
    } catch (const sluice::error& e) {
      if (e.kafka().code != RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE) throw;
      break;
    }
    auto& truncated = dead_lettered_truncated_;
    truncated.add();
    if (truncated.value() <= 10 || truncated.value() % 1000 == 0)
      spdlog::warn("task {}: dead-lettered record {}[{}]@{} truncated ({} error): {}", name_, m.topic, m.partition,
                   m.offset, kind, sent);
    return true;
  }
  // Not even the error headers fit (a limit near message.max.bytes' minimum of 1000).
  spdlog::error(
      "task {}: record {}[{}]@{} could not be dead-lettered even truncated ({} is too small for its error headers); "
      "skipped and counted in sluice_records_skipped_total ({} error): {}",
      name_, m.topic, m.partition, m.offset, limit.setting, kind, what);
  return false;
}

std::int32_t stream_task::partition_count() const {
  auto it = services_.subtopology_partitions.find(id_.subtopology);
  // Unknown only when the app could not learn it (no external source); one task then.
  return it == services_.subtopology_partitions.end() ? 1 : it->second;
}

std::int32_t stream_task::output_partitions(std::string_view topic) const {
  if (auto it = services_.output_partitions.find(topic); it != services_.output_partitions.end()) return it->second;
  throw error(errc::invalid_topology, "topic '" + std::string(topic) + "' is not an output topic of the topology");
}

std::vector<kafka::topic_partition_offset> stream_task::offsets_to_commit(bool every_known) const {
  std::vector<kafka::topic_partition_offset> out;
  if (!dirty_offsets_ && !every_known) return out;
  for (std::size_t i = 0; i < inputs_.size(); ++i)
    if (next_offsets_[i] >= 0) out.push_back({inputs_[i].topic, inputs_[i].partition, next_offsets_[i]});
  return out;
}

std::vector<kafka::topic_partition> stream_task::inputs_without_offset() const {
  std::vector<kafka::topic_partition> out;
  if (start_offsets_learned_) return out;
  for (std::size_t i = 0; i < inputs_.size(); ++i)
    if (next_offsets_[i] < 0) out.push_back(inputs_[i]);
  return out;
}

void stream_task::learn_start_offsets(const std::vector<kafka::topic_partition_offset>& committed) {
  start_offsets_learned_ = true;
  for (const auto& c : committed) {
    auto i = input_index(c.topic);
    if (i < inputs_.size() && c.partition == inputs_[i].partition && next_offsets_[i] < 0 && c.offset >= 0)
      next_offsets_[i] = c.offset;
  }
}

void stream_task::mark_committed() {
  dirty_offsets_ = false;
  commit_requested_ = false;
}

void stream_task::prepare_commit() {
  if (started_)
    for (auto& hook : commit_hooks_) hook();
  stores_.send_changelogs();
}

void stream_task::close(close_mode mode) {
  commit_hooks_.clear();
  if (started_) {
    for (auto& n : nodes_) {
      try {
        n->close();
      } catch (const std::exception& e) {
        spdlog::warn("task {}: a processor threw from close(): {}", name_, e.what());
      }
    }
    started_ = false;
  }
  stores_.close(mode);
  nodes_.clear();
  closed_ = true;
}

}  // namespace sluice::runtime
