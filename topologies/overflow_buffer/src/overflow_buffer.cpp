// The overflow buffer: direct path, per-customer buffers in a queue store, the wall-clock
// drain over a wake-up schedule of buffering customers, TTL, metrics and backlog alarms.
// The semantics are the README's; the reasons for the mechanism are next to it here.
#include "sluice/topologies/overflow_buffer.hpp"

#include <nlohmann/json.hpp>
#include <rocksdb/options.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <utility>

#include "sluice/error.hpp"
#include "sluice/job_topics.hpp"

namespace sluice::topologies {
namespace {

using overflow_detail::buffered_record;
using overflow_detail::bytes;
using overflow_detail::customer_state;

// A customer waiting for a token, a scheduled time or a rate change is looked at again at
// least this often: a rate read from the table applies from then on.
constexpr std::int64_t max_wait_ms = 1000;
// How often the gauges and the backlog alarms are computed (a pass over buffering
// customers, in memory).
constexpr std::int64_t report_interval_ms = 1000;
// Tokens are doubles; refills of a fractional rate over whole milliseconds add up to 1 only
// approximately, so "a token" is anything within this of 1.
constexpr double token_epsilon = 1e-9;

// Buffered entries of one customer live in two queues of the queue store: the line (records
// due at once, in input order: sequence = {partition, offset}) and the scheduled ones
// (sequence = {deliver_at_ms, offset}). Emission merges the two by due time.
std::string line_queue(std::string_view customer) {
  std::string q;
  q.reserve(1 + customer.size());
  q.push_back('l');
  q.append(customer);
  return q;
}
std::string scheduled_queue(std::string_view customer) {
  std::string q;
  q.reserve(1 + customer.size());
  q.push_back('s');
  q.append(customer);
  return q;
}

void put_be64(std::string& out, std::uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}
std::uint64_t get_be64(std::string_view in, std::size_t at) {
  if (at + 8 > in.size()) throw serialization_error("overflow buffer: truncated state record");
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(in[at + i]);
  return v;
}
void put_bytes(std::string& out, const std::optional<std::string>& b) {
  if (!b) {
    put_be64(out, std::numeric_limits<std::uint64_t>::max());
    return;
  }
  put_be64(out, b->size());
  out.append(*b);
}
std::optional<std::string> get_bytes(std::string_view in, std::size_t& at) {
  const auto n = get_be64(in, at);
  at += 8;
  if (n == std::numeric_limits<std::uint64_t>::max()) return std::nullopt;
  if (at + n > in.size()) throw serialization_error("overflow buffer: truncated state record");
  std::string s(in.substr(at, n));
  at += n;
  return s;
}

std::string with_thousands(std::uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string format_rate(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", r);
  return buf;
}

std::string format_minutes(std::int64_t ms) {
  const auto min = static_cast<std::int64_t>(std::ceil(static_cast<double>(ms) / 60000.0));
  return std::to_string(min) + " min";
}

}  // namespace

void validate(const overflow_buffer_options& o) {
  if (!(o.default_rate_per_second >= 0) || !std::isfinite(o.default_rate_per_second))
    throw error(errc::invalid_config, "overflow buffer: the default rate " + format_rate(o.default_rate_per_second) +
                                          " is invalid; use a number of records per second >= 0");
  if (o.default_ttl.count() <= 0)
    throw error(errc::invalid_config,
                "overflow buffer: the default TTL must be > 0 ms (got " + std::to_string(o.default_ttl.count()) + ")");
  if (o.drain_interval.count() < 1 || o.drain_interval.count() > 60'000)
    throw error(errc::invalid_config, "overflow buffer: the drain interval " +
                                          std::to_string(o.drain_interval.count()) +
                                          " ms is out of range; allowed 1 .. 60000 ms");
  if (o.alarm_interval.count() < 0)
    throw error(errc::invalid_config, "overflow buffer: the alarm interval must be >= 0 ms");
  if (o.top_backlogs > 1000)
    throw error(errc::invalid_config, "overflow buffer: top backlogs " + std::to_string(o.top_backlogs) +
                                          " is out of range; allowed 0 .. 1000");
  for (const auto* name : {&o.buffer_store, &o.customer_store})
    if (name->empty()) throw error(errc::invalid_config, "overflow buffer: store names must not be empty");
  if (!o.rates_topic.empty() && o.rates_store.empty())
    throw error(errc::invalid_config, "overflow buffer: the rates store name must not be empty");
}

void add_overflow_buffer_stores(streams_builder& builder, const overflow_buffer_options& o) {
  validate(o);
  builder.add_state_store(queue_store_materialized(o.buffer_store));
  // Every direct record rewrites its customer's state (33 bytes stored, always the same size),
  // so each commit writes every active customer once. In place, a write of a customer already
  // in the memtable overwrites its entry instead of adding a version: the memtable keeps one
  // entry per customer and each commit's writes search thousands of keys, not every version
  // of them (bench/README.md, "Direct path: instruction counts"). In-place values are not
  // snapshot-consistent for iterators; nothing iterates this store (gets only, on the task's
  // thread). Its changelog gets the last state per customer of each commit (the default of a
  // key-value store), in the commit that carries the emissions it counts: under exactly-once
  // the same transaction, so the token bucket and handled offset survive a crash exactly;
  // under at-least-once a crash loses the states written since the last commit, and the
  // records handled since then are emitted again (at-least-once), as the inputs are replayed
  // from that commit's offsets. A customer written k times in a commit costs one changelog
  // record, not k (README.md, "Accounting"; bench/README.md, "Direct path").
  builder.add_state_store({.name = o.customer_store, .rocksdb_options = [](rocksdb::Options& ro) {
                             ro.inplace_update_support = true;
                             ro.allow_concurrent_memtable_write = false;
                           }});
  if (!o.rates_topic.empty()) builder.global_table<std::string, std::string>(o.rates_topic, o.rates_store);
}

std::function<std::unique_ptr<overflow_detail::processor>()> overflow_buffer(overflow_buffer_options options) {
  validate(options);
  return [options] { return std::make_unique<overflow_detail::processor>(options); };
}

overflow_buffer_outlets apply_overflow_buffer(streams_builder& builder,
                                              const kstream<overflow_detail::bytes, overflow_detail::bytes>& in,
                                              const overflow_buffer_options& options) {
  add_overflow_buffer_stores(builder, options);
  if (options.http_endpoints) add_overflow_buffer_endpoints(builder, options);
  // A customer's buffer and token bucket live in one task: when the stream is not partitioned
  // by its key (e.g. after the throttle repartitioned it by throttle key), bring it back.
  const auto by_customer = in.repartitioned(options.buffer_store);
  auto buffered = options.rates_topic.empty()
                      ? by_customer.process(overflow_buffer(options), options.buffer_store, options.customer_store)
                      : by_customer.process(overflow_buffer(options), options.buffer_store, options.customer_store,
                                            options.rates_store);
  auto all = [](const bytes&, const bytes&) { return true; };
  // Created in this order, so they are the processor's first and second children.
  auto emitted = buffered.filter(all);
  if (!options.forward_expired) return {emitted, std::nullopt};
  auto expired = buffered.filter(all);
  return {emitted, expired};
}

topology overflow_buffer_job_topology(const std::string& input, const std::string& output, const std::string& expired,
                                      overflow_buffer_options options) {
  check_job_topics({{"input.topic", input}, {"rates.topic", options.rates_topic}},
                   {{"output.topic", output}, {"expired.topic", expired}});
  options.forward_expired = !expired.empty();
  streams_builder b;
  auto out = apply_overflow_buffer(b, b.stream<bytes, bytes>(input), options);
  out.emitted.to(output);
  if (out.expired) out.expired->to(expired);
  return b.build();
}

namespace overflow_detail {

void buffered_record::serialize(std::string& out) const {
  out.clear();
  out.push_back(0x02);  // format version: 0x01 had no flags byte
  out.push_back(key_absent ? 0x01 : 0x00);
  put_be64(out, static_cast<std::uint64_t>(input_timestamp));
  put_be64(out, static_cast<std::uint64_t>(offset));
  put_be64(out, static_cast<std::uint64_t>(buffered_at));
  put_be64(out, static_cast<std::uint64_t>(deliver_at));
  put_be64(out, static_cast<std::uint64_t>(ttl_ms));
  put_bytes(out, value);
  put_be64(out, headers.size());
  for (const auto& h : headers) {
    put_bytes(out, h.key);
    put_bytes(out, h.value);
  }
}

buffered_record buffered_record::deserialize(std::string_view in) {
  // 0x01: the first format, written before keyless records were told apart (they come back
  // keyed ""); 0x02: a flags byte follows the version.
  if (in.empty() || (in[0] != 0x01 && in[0] != 0x02) || (in[0] == 0x02 && in.size() < 2))
    throw serialization_error("overflow buffer: unknown buffered record format");
  buffered_record b;
  std::size_t at = 1;
  if (in[0] == 0x02) b.key_absent = (static_cast<std::uint8_t>(in[at++]) & 0x01) != 0;
  b.input_timestamp = static_cast<std::int64_t>(get_be64(in, at));
  b.offset = static_cast<std::int64_t>(get_be64(in, at + 8));
  b.buffered_at = static_cast<std::int64_t>(get_be64(in, at + 16));
  b.deliver_at = static_cast<std::int64_t>(get_be64(in, at + 24));
  b.ttl_ms = static_cast<std::int64_t>(get_be64(in, at + 32));
  at += 40;
  b.value = get_bytes(in, at);
  const auto n = get_be64(in, at);
  at += 8;
  for (std::uint64_t i = 0; i < n; ++i) {
    auto k = get_bytes(in, at);
    auto v = get_bytes(in, at);
    b.headers.add(k.value_or(""), std::move(v));
  }
  return b;
}

void customer_state::serialize(std::string& out) const {
  out.clear();
  put_be64(out, static_cast<std::uint64_t>(handled_offset));
  std::uint64_t bits = 0;
  std::memcpy(&bits, &tokens, sizeof bits);
  put_be64(out, bits);
  put_be64(out, static_cast<std::uint64_t>(refilled_at));
  std::memcpy(&bits, &rate, sizeof bits);
  put_be64(out, bits);
}

// 24 bytes (without the rate, as first written) or 32.
customer_state customer_state::deserialize(std::string_view in) {
  if (in.size() != 24 && in.size() != 32) throw serialization_error("overflow buffer: malformed customer state");
  customer_state s;
  s.handled_offset = static_cast<std::int64_t>(get_be64(in, 0));
  auto bits = get_be64(in, 8);
  std::memcpy(&s.tokens, &bits, sizeof bits);
  s.refilled_at = static_cast<std::int64_t>(get_be64(in, 16));
  if (in.size() == 32) {
    bits = get_be64(in, 24);
    std::memcpy(&s.rate, &bits, sizeof bits);
  }
  s.fresh = false;
  return s;
}

std::optional<double> parse_rate(std::string_view json) {
  auto doc = nlohmann::json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return std::nullopt;
  auto it = doc.find("rate_per_second");
  if (it == doc.end() || !it->is_number()) return std::nullopt;
  const double r = it->get<double>();
  if (!std::isfinite(r) || r < 0) return std::nullopt;
  return r;
}

std::string alarm_line(std::string_view customer, std::uint64_t buffered, double rate, std::int64_t drain_ms,
                       std::int64_t ttl_ms) {
  std::string drain = rate > 0 ? "drain in " + format_minutes(drain_ms) : "not draining (rate 0)";
  // An id of printable ASCII shows as it is (the documented line); any other is quoted and
  // escaped, so a key cannot break the log line or forge another.
  const std::string shown = printable_as_is(customer) ? std::string(customer) : printable_key(customer);
  return "customer " + shown + ": " + with_thousands(buffered) + " buffered at " + format_rate(rate) + "/s " + drain +
         "; TTL " + format_minutes(ttl_ms) + ": records will expire";
}

namespace {
// The task's gauges: set at each report, retired when the task closes here.
constexpr const char* buffered_now_metric = "sluice_overflow_buffered";
constexpr const char* customers_buffering_metric = "sluice_overflow_customers_buffering";
constexpr const char* oldest_age_metric = "sluice_overflow_oldest_buffered_age_ms";
}  // namespace

processor::processor(const overflow_buffer_options& options) : options_(options) {}

void processor::init(context_type& ctx) {
  sluice::processor<bytes, bytes>::init(ctx);
  buffer_.emplace(ctx.template state_store<queue_store_handle>(options_.buffer_store));
  customers_.emplace(ctx.template store<std::string, std::string>(options_.customer_store));
  if (!options_.rates_topic.empty())
    rates_.emplace(ctx.template global_store<std::string, std::string>(options_.rates_store));
  const auto& children = ctx.child_names();
  const std::size_t want = options_.forward_expired ? 2 : 1;
  if (children.size() != want)
    throw error(errc::invalid_topology, "overflow buffer: the processor needs " + std::to_string(want) +
                                            " children (emitted" + (want == 2 ? ", expired" : "") + ") but has " +
                                            std::to_string(children.size()) + "; use apply_overflow_buffer()");
  emitted_child_ = children[0];
  if (want == 2) expired_child_ = children[1];

  auto& m = ctx.metrics();
  const std::string labels = "task=\"" + std::string(ctx.task_id()) + "\"";
  direct_ = &m.get_counter("sluice_overflow_direct_total", labels);
  buffered_ = &m.get_counter("sluice_overflow_buffered_total", labels);
  drained_ = &m.get_counter("sluice_overflow_drained_total", labels);
  expired_ = &m.get_counter("sluice_overflow_expired_total", labels);
  expired_dropped_ = &m.get_counter("sluice_overflow_expired_dropped_total", labels);
  replays_skipped_ = &m.get_counter("sluice_overflow_replays_skipped_total", labels);
  invalid_rates_ = &m.get_counter("sluice_overflow_invalid_rates_total", labels);
  alarms_ = &m.get_counter("sluice_overflow_alarms_total", labels);
  buffered_now_ = &m.get_gauge(buffered_now_metric, labels);
  customers_buffering_ = &m.get_gauge(customers_buffering_metric, labels);
  oldest_age_ = &m.get_gauge(oldest_age_metric, labels);
  // Help by the names /metrics shows (gauges in ms are shown in seconds).
  for (const auto& [name, help] : std::initializer_list<std::pair<const char*, const char*>>{
           {"sluice_overflow_direct_total", "Records emitted at once, their customer under its rate."},
           {"sluice_overflow_buffered_total", "Records parked in the buffer (over the rate, or scheduled)."},
           {"sluice_overflow_drained_total", "Buffered records emitted by a drain, at their customer's rate."},
           {"sluice_overflow_expired_total", "Records that reached their TTL before they could be emitted."},
           {"sluice_overflow_expired_dropped_total", "Of the expired records, those dropped (expired.topic empty)."},
           {"sluice_overflow_replays_skipped_total",
            "Replayed input records recognised as handled (at or below the customer's handled offset) and skipped."},
           {"sluice_overflow_invalid_rates_total",
            "Rates-table values that were not a rate; the default rate applied."},
           {"sluice_overflow_alarms_total", "Backlog alarm lines: a customer's backlog cannot drain before its TTL."},
           {"sluice_overflow_buffered", "Records buffered now."},
           {"sluice_overflow_customers_buffering", "Customers with records buffered now."},
           {"sluice_overflow_oldest_buffered_age_seconds", "Age of the oldest record buffered now, seconds."},
           {"sluice_overflow_top_backlog", "Records buffered now by the customers with the largest backlogs."}})
    m.set_help(name, help);
  task_labels_ = labels;
  top_.clear();

  // The buffer survives restarts (restored before init): every customer with entries gets a
  // look at the first drain, which sets its real wake-up time.
  const std::int64_t now = ctx.wall_clock_ms();
  waiting_.clear();
  wake_queue_.clear();
  buffered_total_ = 0;
  std::vector<std::string> customers;
  for (const auto& q : buffer_->non_empty_queues()) {
    std::string customer = q.substr(1);
    if (customers.empty() || customers.back() != customer) customers.push_back(std::move(customer));
  }
  for (auto& customer : customers) {
    auto& w = waiting_[customer];
    recount(customer, w);
    w.wake_at = now;
    wake_queue_.emplace(now, std::move(customer));
  }
  next_report_ = now;
  ctx.schedule(options_.drain_interval, punctuation_type::wall_clock, [this](std::int64_t t) { drain(t); });
  live_.clear();
  dirty_.clear();
  ctx.before_commit([this] { write_back(context().wall_clock_ms()); });
}

void processor::recount(const std::string& customer, waiting& w) {
  const std::uint64_t before = w.buffered();
  w.line = buffer_->size(line_queue(customer));
  w.scheduled = buffer_->size(scheduled_queue(customer));
  w.earliest_scheduled = std::numeric_limits<std::int64_t>::max();
  if (w.scheduled > 0) {
    if (auto head = buffer_->front(scheduled_queue(customer)))
      w.earliest_scheduled = buffered_record::deserialize(head->value).deliver_at;
  }
  buffered_total_ = buffered_total_ - std::min(buffered_total_, before) + w.buffered();
}

void processor::close() {
  // The task may go on in another instance: its gauges here would show stale values beside
  // the live ones there. The counters stay, as Prometheus counters do.
  auto& m = context().metrics();
  for (const char* name : {buffered_now_metric, customers_buffering_metric, oldest_age_metric})
    m.retire_gauge(name, task_labels_);
  remove_top_backlogs();
  live_.clear();  // a clean close's last commit wrote them back; a dirty one drops them
  dirty_.clear();
  waiting_.clear();
  wake_queue_.clear();
  last_alarm_.clear();
}

double processor::rate_for(std::string_view customer) {
  if (!rates_) return options_.default_rate_per_second;
  auto raw = rates_->get(std::string(customer));
  if (!raw) return options_.default_rate_per_second;
  auto cached = parsed_rates_.find(*raw);
  if (cached == parsed_rates_.end()) {
    if (parsed_rates_.size() >= 4096) parsed_rates_.clear();  // bounded: distinct rate texts are few
    cached = parsed_rates_.emplace(*raw, parse_rate(*raw)).first;
  }
  if (!cached->second) {
    invalid_rates_->add();
    return options_.default_rate_per_second;
  }
  return *cached->second;
}

std::uint64_t live_state_table::hash(std::string_view customer) noexcept {
  // std::hash's murmur-style hash, spread so the high half (the tag) and the low bits (the
  // slot) are both well mixed.
  const std::uint64_t h = std::hash<std::string_view>{}(customer)*0x9E3779B97F4A7C15ULL;
  return h ^ (h >> 29);
}

std::optional<std::uint32_t> live_state_table::find(std::string_view customer) const {
  if (index_.empty()) return std::nullopt;
  const std::uint64_t h = hash(customer);
  const auto tag = static_cast<std::uint32_t>(h >> 32);
  const std::size_t mask = index_.size() - 1;
  for (std::size_t i = h & mask;; i = (i + 1) & mask) {
    const slot& s = index_[i];
    if (s.number == 0) return std::nullopt;
    if (s.tag == tag && entries_[s.number - 1].customer == customer) return s.number - 1;
  }
}

std::uint32_t live_state_table::insert(std::string_view customer, const live_state& live) {
  if ((entries_.size() + 1) * 2 > index_.size()) grow();
  const auto number = static_cast<std::uint32_t>(entries_.size());
  entries_.push_back({std::string(customer), live});
  place(number);
  return number;
}

void live_state_table::place(std::uint32_t number) {
  const std::uint64_t h = hash(entries_[number].customer);
  const std::size_t mask = index_.size() - 1;
  std::size_t i = h & mask;
  while (index_[i].number != 0) i = (i + 1) & mask;  // at most half full: an empty slot comes
  index_[i] = {static_cast<std::uint32_t>(h >> 32), number + 1};
}

void live_state_table::grow() {
  index_.assign(std::max<std::size_t>(64, index_.size() * 2), slot{});
  for (std::uint32_t n = 0; n < entries_.size(); ++n) place(n);
}

void live_state_table::clear() {
  // The index keeps its size (zeroed): a task holds about as many customers after a clear.
  std::fill(index_.begin(), index_.end(), slot{});
  entries_.clear();
}

std::uint32_t processor::live_state_of(std::string_view customer) {
  if (auto found = live_.find(customer)) return *found;
  if (live_.size() >= live_state_limit) {
    write_back(context().wall_clock_ms());
    live_.clear();
  }
  live_state fresh;
  if (auto raw = customers_->get(std::string(customer))) {
    fresh.st = customer_state::deserialize(*raw);
    fresh.stored = fresh.st;
  }
  return live_.insert(customer, fresh);
}

void processor::save_state(std::uint32_t number, const customer_state& st) {
  live_state& live = live_[number].live;
  live.st = st;
  live.st.fresh = false;  // as the store gives it back
  if (!live.dirty) {
    live.dirty = true;
    dirty_.push_back(number);
  }
}

bool processor::bucket_full(const customer_state& st, std::int64_t now) {
  if (st.rate < 0) return false;  // not known (a state written before the rate was kept)
  const double elapsed_s = static_cast<double>(std::max<std::int64_t>(0, now - st.refilled_at)) / 1000.0;
  return st.tokens + st.rate * elapsed_s >= std::max(1.0, st.rate);
}

void processor::write_back(std::int64_t now) {
  const bool full_needs_no_write = context().exactly_once();
  for (const std::uint32_t number : dirty_) {
    auto& [customer, live] = live_[number];
    live.dirty = false;
    if (full_needs_no_write && !live.stored.fresh && live.st.rate == live.stored.rate &&
        bucket_full(live.stored, now) && bucket_full(live.st, now))
      continue;
    live.st.serialize(scratch_);
    customers_->put(customer, scratch_);
    live.stored = live.st;
  }
  dirty_.clear();
}

// Token bucket of rate r and burst max(1, r): a new customer starts full.
void processor::refill(customer_state& st, double rate, std::int64_t now) {
  st.rate = rate;
  const double burst = std::max(1.0, rate);
  if (st.fresh) {
    st.tokens = burst;
    st.refilled_at = now;
    st.fresh = false;
    return;
  }
  if (now > st.refilled_at) {
    st.tokens = std::min(burst, st.tokens + rate * static_cast<double>(now - st.refilled_at) / 1000.0);
    st.refilled_at = now;
  } else {
    st.tokens = std::min(burst, st.tokens);
  }
}

namespace {
void assign_decimal(std::optional<std::string>& out, std::int64_t v) {
  char digits[24];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, v);
  if (!out) out.emplace();
  out->assign(digits, end);
}
}  // namespace

void processor::forward_emitted(std::optional<std::string_view> key, const bytes& value, const sluice::headers& headers,
                                std::int64_t now, std::int64_t input_timestamp, std::int64_t delay_ms) {
  if (!key) {
    out_.key.reset();
  } else {
    if (!out_.key) out_.key.emplace();
    out_.key->assign(*key);
  }
  out_.value = value;
  out_.timestamp = now;
  // Element-wise assignment into a vector of the final size reuses each header's buffers.
  auto& items = out_.headers.items();
  const auto& in = headers.items();
  items.resize(in.size() + 2);
  std::copy(in.begin(), in.end(), items.begin());
  items[in.size()].key.assign(overflow_input_timestamp_header);
  assign_decimal(items[in.size()].value, input_timestamp);
  items[in.size() + 1].key.assign(overflow_delay_header);
  assign_decimal(items[in.size() + 1].value, delay_ms);
  context().forward(out_, emitted_child_);
}

void processor::emit_direct(const record<bytes, bytes>& r, std::int64_t now) {
  // The record's key is the customer; an absent key (the customer "") stays absent.
  forward_emitted(r.key ? std::optional<std::string_view>(*r.key) : std::nullopt, r.value, r.headers, now, r.timestamp,
                  0);
  direct_->add();
}

void processor::emit(std::string_view customer, const buffered_record& b, std::int64_t now) {
  const std::int64_t waited_from = std::max(b.buffered_at, b.deliver_at);
  forward_emitted(b.key_absent ? std::nullopt : std::optional<std::string_view>(customer), b.value, b.headers, now,
                  b.input_timestamp, std::max<std::int64_t>(0, now - waited_from));
  drained_->add();
}

void processor::expire(std::string_view customer, const buffered_record& b, std::int64_t now, std::int64_t ttl_ms,
                       std::int64_t reference) {
  expired_->add();
  if (expired_child_.empty()) {
    expired_dropped_->add();
    return;
  }
  nlohmann::json j = {{"customer", std::string(customer)}, {"age_ms", now - reference}, {"ttl_ms", ttl_ms}};
  record<bytes, bytes> out{b.key_absent ? bytes{} : bytes{std::string(customer)}, b.value, now, b.headers};
  out.headers.add(std::string(overflow_expired_header),
                  j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  context().forward(out, expired_child_);
}

void processor::schedule_at(const std::string& customer, std::int64_t wake_at) {
  auto [it, inserted] = waiting_.try_emplace(customer);
  if (!inserted && it->second.wake_at <= wake_at) return;
  if (!inserted) {
    auto [lo, hi] = wake_queue_.equal_range(it->second.wake_at);
    for (auto w = lo; w != hi; ++w) {
      if (w->second == customer) {
        wake_queue_.erase(w);
        break;
      }
    }
  }
  it->second.wake_at = wake_at;
  wake_queue_.emplace(wake_at, customer);
}

void processor::process(const record<bytes, bytes>& r) {
  const auto fields = parse_fields(r.value);  // throws for the processing error handler
  const std::string customer = r.key.value_or(std::string());
  const std::int64_t offset = context().metadata().offset;
  const std::int64_t now = context().wall_clock_ms();
  const std::uint32_t slot = live_state_of(customer);
  customer_state st = live_[slot].live.st;
  if (!st.fresh && offset >= 0 && offset <= st.handled_offset) {
    replays_skipped_->add();  // at-least-once replay of a record already handled
    return;
  }
  if (offset >= 0) st.handled_offset = offset;

  buffered_record b;
  b.input_timestamp = r.timestamp;
  b.offset = offset;
  b.buffered_at = now;
  b.ttl_ms = std::min<std::int64_t>(options_.default_ttl.count(), fields.ttl_ms.value_or(options_.default_ttl.count()));
  const bool scheduled = fields.deliver_at_ms && *fields.deliver_at_ms > now;
  if (fields.deliver_at_ms) b.deliver_at = *fields.deliver_at_ms;
  b.key_absent = !r.key;
  const std::int64_t reference = b.deliver_at != 0 ? b.deliver_at : b.input_timestamp;

  if (b.expires_at() <= now) {  // expired on arrival
    b.value = r.value;
    b.headers = r.headers;
    expire(customer, b, now, b.ttl_ms, reference);
    save_state(slot, st);
    return;
  }
  // "Nothing buffered": no record waiting in the line and no scheduled record due. A
  // scheduled record for later does not hold back the customer's other records.
  auto known = waiting_.find(customer);
  const bool buffering = known != waiting_.end() && (known->second.line > 0 || known->second.earliest_scheduled <= now);
  if (!scheduled && !buffering) {
    const double rate = rate_for(customer);
    refill(st, rate, now);
    if (rate > 0 && st.tokens >= 1.0 - token_epsilon) {
      st.tokens = std::max(0.0, st.tokens - 1.0);
      save_state(slot, st);
      emit_direct(r, now);
      return;
    }
  }
  b.value = r.value;
  b.headers = r.headers;
  b.serialize(scratch_);
  const auto partition = static_cast<std::uint64_t>(std::max<std::int32_t>(0, context().metadata().partition));
  const auto seq_offset = static_cast<std::uint64_t>(std::max<std::int64_t>(0, offset));
  const auto result = scheduled ? buffer_->append(scheduled_queue(customer),
                                                  {static_cast<std::uint64_t>(b.deliver_at), seq_offset}, scratch_)
                                : buffer_->append(line_queue(customer), {partition, seq_offset}, scratch_);
  save_state(slot, st);
  if (result != state::append_result::appended) {
    replays_skipped_->add();
    return;
  }
  buffered_->add();
  ++buffered_total_;
  auto [it, inserted] = waiting_.try_emplace(customer);
  if (inserted) it->second.wake_at = std::numeric_limits<std::int64_t>::max();
  if (scheduled) {
    ++it->second.scheduled;
    it->second.earliest_scheduled = std::min(it->second.earliest_scheduled, b.deliver_at);
    schedule_at(customer, b.deliver_at);
  } else {
    it->second.line_tail_ttl_ms = b.ttl_ms;
    it->second.line_tail_expires_at = b.expires_at();
    if (it->second.line++ == 0) schedule_at(customer, now);  // a line that was empty: look at the next tick
  }
}

// Reads one queue of a customer in batches: one peek per batch, one pop per batch of what
// was taken (a range delete), instead of a seek and a pop per record.
class processor::queue_cursor {
 public:
  queue_cursor(queue_store_handle& buffer, std::string queue, std::size_t batch)
      : buffer_(&buffer), queue_(std::move(queue)), batch_(std::max<std::size_t>(1, batch)) {
    load();
  }
  const std::optional<buffered_record>& head() const noexcept { return head_; }
  /// Takes the head (emitted or expired) and loads the next one.
  void take() {
    ++next_;
    ++taken_;
    ++total_taken_;
    load();
  }
  /// Pops what was taken and not yet popped; returns the entries taken in all.
  std::uint64_t finish() {
    if (taken_ > 0) buffer_->pop(queue_, taken_);
    taken_ = 0;
    return total_taken_;
  }

 private:
  void load() {
    if (next_ >= entries_.size()) {
      if (exhausted_) {
        head_.reset();
        return;
      }
      finish();
      buffer_->peek(queue_, batch_, entries_);
      next_ = 0;
      exhausted_ = entries_.size() < batch_;
      batch_ = std::min<std::size_t>(batch_ * 2, max_batch);  // a long backlog: larger steps
      if (entries_.empty()) {
        head_.reset();
        return;
      }
    }
    head_ = buffered_record::deserialize(entries_[next_].value);
  }

  static constexpr std::size_t max_batch = 1024;
  queue_store_handle* buffer_;
  std::string queue_;
  std::size_t batch_;
  std::vector<state::queue_entry> entries_;
  std::size_t next_ = 0;
  std::size_t taken_ = 0;
  std::uint64_t total_taken_ = 0;
  bool exhausted_ = false;
  std::optional<buffered_record> head_;
};

std::optional<std::int64_t> processor::service(const std::string& customer, std::int64_t now) {
  const double rate = rate_for(customer);
  const std::uint32_t slot = live_state_of(customer);
  customer_state st = live_[slot].live.st;
  refill(st, rate, now);
  // The first batch holds what the tokens allow (plus one to see what comes next); expired
  // heads need no token, so a cursor fetches more as it goes.
  const auto first_batch = static_cast<std::size_t>(std::min(st.tokens, 1023.0)) + 1;
  queue_cursor line(*buffer_, line_queue(customer), first_batch);
  queue_cursor sched(*buffer_, scheduled_queue(customer), first_batch);
  std::optional<std::int64_t> wake;
  bool spent = false;  // the bucket was looked at: its refill is saved
  for (;;) {
    const auto& line_head = line.head();
    const auto& sched_head = sched.head();
    // Expired heads go first, whatever the tokens: an expired record is never emitted.
    if (line_head && line_head->expires_at() <= now) {
      expire(customer, *line_head, now, line_head->ttl_ms, line_head->input_timestamp);
      line.take();
      continue;
    }
    if (sched_head && sched_head->expires_at() <= now) {
      expire(customer, *sched_head, now, sched_head->ttl_ms, sched_head->deliver_at);
      sched.take();
      continue;
    }
    const bool sched_due = sched_head && sched_head->deliver_at <= now;
    if (!line_head && !sched_due) break;
    // The due scheduled record joins the line by its delivery time (ties by offset).
    bool take_sched = sched_due;
    if (sched_due && line_head) {
      take_sched = std::pair(sched_head->deliver_at, sched_head->offset) <
                   std::pair(line_head->input_timestamp, line_head->offset);
    }
    spent = true;
    if (!(rate > 0 && st.tokens >= 1.0 - token_epsilon)) {
      if (rate > 0) {
        const auto ms = static_cast<std::int64_t>(std::ceil((1.0 - st.tokens) * 1000.0 / rate - 1e-6));
        wake = now + std::max<std::int64_t>(1, ms);
      }
      break;
    }
    st.tokens = std::max(0.0, st.tokens - 1.0);
    if (take_sched) {
      emit(customer, *sched_head, now);
      sched.take();
    } else {
      emit(customer, *line_head, now);
      line.take();
    }
  }
  if (spent) save_state(slot, st);
  const std::uint64_t from_line = line.finish();
  const std::uint64_t from_sched = sched.finish();
  if (from_line + from_sched > 0) {
    auto& w = waiting_[customer];
    const std::uint64_t before = w.buffered();
    w.line -= std::min(w.line, from_line);
    w.scheduled -= std::min(w.scheduled, from_sched);
    w.earliest_scheduled = sched.head() ? sched.head()->deliver_at : std::numeric_limits<std::int64_t>::max();
    buffered_total_ = buffered_total_ - std::min(buffered_total_, before) + w.buffered();
  }
  const auto& line_head = line.head();
  const auto& sched_head = sched.head();
  if (!line_head && !sched_head) return std::nullopt;
  // Look again when a token comes, the next scheduled record is due or a head expires, and
  // at least every max_wait_ms (rate changes).
  std::int64_t next = now + max_wait_ms;
  if (wake) next = std::min(next, *wake);
  if (sched_head) next = std::min(next, std::max(now + 1, std::min(sched_head->deliver_at, sched_head->expires_at())));
  if (line_head) next = std::min(next, std::max(now + 1, line_head->expires_at()));
  return next;
}

void processor::drain(std::int64_t now) {
  // Only customers whose time has come: a tick costs work proportional to them.
  while (!wake_queue_.empty() && wake_queue_.begin()->first <= now) {
    auto node = wake_queue_.extract(wake_queue_.begin());
    std::string customer = std::move(node.mapped());
    auto next = service(customer, now);
    if (!next) {
      waiting_.erase(customer);
      last_alarm_.erase(customer);
      continue;
    }
    auto& w = waiting_[customer];
    w.wake_at = *next;
    wake_queue_.emplace(*next, std::move(customer));
  }
  if (now >= next_report_) {
    next_report_ = now + report_interval_ms;
    report(now);
  }
}

// Gauges and alarms: one pass over the buffering customers (in memory, plus one head read
// each for the oldest age), once per report interval, not per tick.
void processor::report(std::int64_t now) {
  // The schedule is derived from the buffer; if the store rolled back (an aborted
  // transaction restores popped entries), a customer with entries may be missing from it.
  // The queue store keeps its set of non-empty queues right across aborts: resync from it.
  for (const auto& q : buffer_->non_empty_queues()) {
    std::string_view customer = std::string_view(q).substr(1);
    if (waiting_.find(std::string(customer)) == waiting_.end()) {
      std::string c(customer);
      auto& w = waiting_[c];
      recount(c, w);
      w.wake_at = now;
      wake_queue_.emplace(now, std::move(c));
    }
  }
  buffered_now_->set(static_cast<std::int64_t>(buffered_total_));
  customers_buffering_->set(static_cast<std::int64_t>(waiting_.size()));
  std::vector<std::pair<std::uint64_t, const std::string*>> sizes;
  sizes.reserve(waiting_.size());
  std::int64_t oldest = 0;
  for (const auto& [customer, w] : waiting_) {
    sizes.emplace_back(w.buffered(), &customer);
    if (auto head = buffer_->front(line_queue(customer))) {
      oldest = std::max(oldest, now - buffered_record::deserialize(head->value).buffered_at);
    }
    // The line's last record is emitted last: it expires before the backlog drains when
    // now + drain time passes its expiry (its own ttl_ms counts). Its TTL is not known after
    // a restart until the next record joins the line: the default TTL stands in for it.
    const double rate = rate_for(customer);
    const std::int64_t drain_ms = rate > 0
                                      ? static_cast<std::int64_t>(static_cast<double>(w.buffered()) * 1000.0 / rate)
                                      : std::numeric_limits<std::int64_t>::max();
    const bool tail_known = w.line > 0 && w.line_tail_ttl_ms > 0;
    const std::int64_t ttl = tail_known ? w.line_tail_ttl_ms : options_.default_ttl.count();
    const bool will_expire = tail_known ? drain_ms > w.line_tail_expires_at - now : drain_ms > ttl;
    if (will_expire) {
      auto [a, inserted] = last_alarm_.try_emplace(customer, now);
      if (inserted || now - a->second >= options_.alarm_interval.count()) {
        a->second = now;
        alarms_->add();
        spdlog::warn("overflow buffer: {}", alarm_line(customer, w.buffered(), rate, drain_ms, ttl));
      }
    }
  }
  oldest_age_->set(oldest);
  publish_top_backlogs(sizes);
}

namespace {
constexpr const char* top_backlog_metric = "sluice_overflow_top_backlog";
std::string top_backlog_labels(const std::string& task_labels, std::string_view customer) {
  return task_labels + ",customer=\"" + prometheus_label_value(customer) + "\"";
}
}  // namespace

// One series per customer among the N largest backlogs, so at most N customer label values
// per task at any time: a customer leaving the top N loses its series (removed, not kept
// hidden, as the customers passing through the top N over a run are not bounded). Ties go
// by customer id, so equal backlogs do not swap series from one report to the next.
void processor::publish_top_backlogs(std::vector<std::pair<std::uint64_t, const std::string*>>& sizes) {
  const std::size_t n = std::min(options_.top_backlogs, sizes.size());
  std::partial_sort(
      sizes.begin(), sizes.begin() + static_cast<std::ptrdiff_t>(n), sizes.end(),
      [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : *a.second < *b.second; });
  std::map<std::string, gauge*> next;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string& customer = *sizes[i].second;
    gauge* g = nullptr;
    if (auto kept = top_.find(customer); kept != top_.end()) {
      g = kept->second;
      top_.erase(kept);
    } else {
      g = &context().metrics().get_gauge(top_backlog_metric, top_backlog_labels(task_labels_, customer));
    }
    g->set(static_cast<std::int64_t>(sizes[i].first));
    next.emplace(customer, g);
  }
  remove_top_backlogs();  // the customers that left the top N
  top_ = std::move(next);
}

void processor::remove_top_backlogs() {
  for (const auto& [customer, g] : top_)
    context().metrics().remove_gauge(top_backlog_metric, top_backlog_labels(task_labels_, customer));
  top_.clear();
}

}  // namespace overflow_detail
}  // namespace sluice::topologies
