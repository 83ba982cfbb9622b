// sluice::topologies::throttle: exact per-key sliding-window limits as a processor.
//
// For each throttle key, a record's effective time is max(its timestamp, the effective time
// of the previous record of that key). A record passes if and only if fewer than `limit`
// records of that key have passed with effective time in (t - window, t], t its effective
// time. Passed records go out unchanged; throttled ones are dropped and counted, or sent to
// a second outlet with the header `sluice-throttle-reason`. See topologies/throttle/README.md.
//
//   sluice::streams_builder b;
//   auto in = b.stream<std::string, std::string>("notifications");
//   sluice::topologies::throttle_options o{.window = std::chrono::minutes(1), .limit = 3,
//                                          .key_fields = {"workflow", "recipient"},
//                                          .on_throttled = sluice::topologies::throttled_action::forward};
//   auto out = sluice::topologies::apply_throttle(b, in, o);
//   out.passed.to("notifications-out");
//   out.throttled->to("notifications-throttled");
//
// Lower level, for hand-wired topologies: add_throttle_stores(b, o) declares the store (and
// the rules global table), throttle<K, V>(o) is the processor supplier for
// kstream::process(supplier, o.store_name[, o.rules_store]). With throttled_action::forward
// the processor sends passed records to its first child and throttled ones to its second
// (children in the order the DSL created them); apply_throttle wires exactly that.
//
// Threading: one processor per task, called from the task's thread only (as every processor).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sluice/builder.hpp"
#include "sluice/processor.hpp"
#include "sluice/serde/serde.hpp"

namespace sluice::topologies {

/// The header a throttled record carries when it is forwarded: JSON
/// {"key":"…","limit":N,"window_ms":W}, the throttle key as text and the rule that applied.
inline constexpr std::string_view throttle_reason_header = "sluice-throttle-reason";

/// Bounds of the options (and of per-key rules), from the seed's product: 1 s .. 31 days.
inline constexpr std::chrono::milliseconds min_throttle_window{1000};
inline constexpr std::chrono::milliseconds max_throttle_window{31LL * 24 * 3600 * 1000};
inline constexpr std::int64_t min_throttle_limit = 1;
inline constexpr std::int64_t max_throttle_limit = 1'000'000;

/// What happens to a record that does not pass.
enum class throttled_action {
  drop,     ///< dropped and counted in sluice_throttle_throttled_total
  forward,  ///< sent to the processor's second child with the sluice-throttle-reason header (and counted)
};

struct throttle_options {
  /// The sliding window. Must be within [1 s, 31 days].
  /// Default: 1 minute.
  std::chrono::milliseconds window{60'000};

  /// How many records of a key may pass per window. Must be within [1, 1,000,000].
  /// Default: 1.
  std::int64_t limit = 1;

  /// The throttle key: empty = the record key's bytes; otherwise these top-level fields of
  /// the value (which must be a JSON object), in order. String fields count by their text,
  /// other JSON values by their compact JSON text. A record that is not a JSON object or
  /// lacks a field (or has it null) is a processing error (processing.error.handler decides).
  /// Default: empty (the record key).
  std::vector<std::string> key_fields{};

  /// Throttled records are dropped, or forwarded to the second outlet.
  /// Default: throttled_action::drop.
  throttled_action on_throttled = throttled_action::drop;

  /// Topic of per-key rules (a global table): key = the value of the first key field (the
  /// record key when key_fields is empty), value = JSON {"window_ms": W, "limit": N}. A key
  /// without a rule uses window and limit above; a malformed rule is counted in
  /// sluice_throttle_invalid_rules_total and the defaults apply.
  /// Default: empty (no rules).
  std::string rules_topic{};

  /// Largest window a rule may set (a bigger one is invalid, see rules_topic). It sizes the
  /// store's TTL when rules are on, so lower it to let idle keys go sooner.
  /// Default: 31 days.
  std::chrono::milliseconds max_rule_window = max_throttle_window;

  /// How far a record may arrive behind the task's stream time (out of order) while decisions
  /// stay exact: the store keeps an entry for window + grace of stream time (its TTL), see the
  /// README's "Exactness and TTL". Must be within [0, 31 days].
  /// Default: 24 hours.
  std::chrono::milliseconds retention_grace{24LL * 3600 * 1000};

  /// The store of passed effective times (RocksDB, with a changelog).
  /// Default: "throttle-log".
  std::string store_name = "throttle-log";

  /// The global store that holds the rules (when rules_topic is set).
  /// Default: "throttle-rules".
  std::string rules_store = "throttle-rules";
};

/// Throws sluice::error(errc::invalid_config) naming the bad value and its allowed range.
void validate(const throttle_options& options);

/// The TTL the log store is declared with: (rules on ? max_rule_window : window) + grace.
std::chrono::milliseconds throttle_store_ttl(const throttle_options& options);

/// Declares the log store (RocksDB, changelog, TTL) and, with rules_topic, the rules global
/// table. Validates the options first.
void add_throttle_stores(streams_builder& builder, const throttle_options& options);

namespace throttle_detail {

/// A store key: varint(length of throttle key) + throttle key + tag [+ 8-byte big-endian seq].
/// The length prefix makes keys unambiguous; the layout is in the README.
struct log_key {
  std::string_view throttle_key;
  bool meta = false;  ///< the key's meta entry rather than one passed time
  std::uint64_t seq = 0;
};
struct log_key_serde {
  using value_type = log_key;
  static void serialize(const log_key& k, std::string& out);
  /// Keys are only written, never read back as keys; returns a view into `in`.
  static log_key deserialize(std::string_view in);
};

/// How many passed times a key's meta value holds itself; a key with more in its window (a
/// limit above this) keeps them as entries of their own. See the README's "Storage".
inline constexpr std::size_t log_inline_capacity = 16;

/// Per key: the effective time of its last record and its passed times in the window, oldest
/// first: held in the value itself (`times[0, count)`, the usual case), or, once more than
/// log_inline_capacity are in the window, as entries of their own with the live sequence
/// range [head, tail) (`spilled`, until half the capacity or fewer are left). Spilled is the
/// only form before the times were folded in, so stores written by that layout read as
/// spilled keys and move into the value at their next decision with few enough times.
struct log_meta {
  std::int64_t last_effective = 0;
  bool spilled = false;
  std::uint64_t head = 0;   ///< spilled only
  std::uint64_t tail = 0;   ///< spilled only
  std::uint32_t count = 0;  ///< held times (not spilled)
  std::array<std::int64_t, log_inline_capacity> times{};
};
/// Spilled: last effective time, head, tail (24 bytes, 8 each big-endian). Held: the byte
/// 0x01, the last effective time, then each held time (9 + 8 n bytes, never 24).
struct log_meta_serde {
  using value_type = log_meta;
  static void serialize(const log_meta& m, std::string& out);
  /// Throws serialization_error naming the size for any other form.
  static log_meta deserialize(std::string_view in);
};

/// One passed record's effective time, 8 bytes big-endian.
struct log_time_serde {
  using value_type = std::int64_t;
  static void serialize(const std::int64_t& t, std::string& out);
  static std::int64_t deserialize(std::string_view in);
};

/// The fast path of key extraction: validates `json` as a JSON object and finds its top-level
/// members named `fields` without building a document. Returns true, with values[i] a view
/// into `json` of the text of field i's last occurrence, only when the whole text is
/// well-formed JSON as nlohmann's parser reads it and every field's last occurrence is a
/// string without escapes, whose text is then its bytes. Returns false (no verdict: parse with
/// nlohmann, which decides the value or the error) for everything else: escapes, numbers with
/// exponents or more than 18 characters, missing or non-string fields, malformed text. Pure.
bool scan_key_fields(std::string_view json, const std::vector<std::string>& fields,
                     std::vector<std::string_view>& values);

/// Builds a record's throttle key: the record key's bytes, or the key fields of its JSON
/// value (length-prefixed parts), with the forms the header and the rules table use. Holds
/// reused buffers; one per task (or per repartitioning sink).
class key_builder {
 public:
  key_builder(std::vector<std::string> key_fields, bool rules_on)
      : key_fields_(std::move(key_fields)), rules_on_(rules_on) {}

  /// Throws sluice::error(errc::processing) when the value is null, not a JSON object,
  /// nested deeper than max_json_nesting, or lacks a key field.
  void build(std::string_view key_bytes, std::optional<std::string_view> value_json);
  /// The throttle key's bytes (store form).
  const std::string& key() const noexcept { return key_; }
  /// The throttle key as text (header form: parts joined by ',').
  const std::string& display_key() const noexcept { return display_key_; }
  /// The rules table key: the first key field, or the record key.
  const std::string& rule_key() const noexcept { return rule_key_; }

 private:
  void build_from_document(std::string_view value_json);
  void append_part(std::string_view text, bool first);

  std::vector<std::string> key_fields_;
  bool rules_on_;
  std::string key_, display_key_, rule_key_;
  std::vector<std::string_view> scanned_;
};

/// A rule in force for one record.
struct rule {
  std::int64_t window_ms = 0;
  std::int64_t limit = 0;
};

/// Parses a rules-table value, JSON {"window_ms": W, "limit": N}; a member left out keeps
/// its value from `defaults`. nullopt when the text is not such an object, a member is not
/// an integer, or a value is outside [min_throttle_window, max_window] / [min_throttle_limit,
/// max_throttle_limit]. Pure; any thread.
std::optional<rule> parse_rule(std::string_view text, const rule& defaults, std::chrono::milliseconds max_window);

struct decision {
  bool passed = false;
  std::int64_t effective_time = 0;
};

/// The throttle's logic on bytes, independent of the record types. One per task.
class engine {
 public:
  explicit engine(const throttle_options& options);

  /// Binds the stores and counters of the task; call from the processor's init().
  template <class Ctx>
  void bind(Ctx& ctx) {
    meta_.emplace(ctx.template store<log_key, log_meta, log_key_serde, log_meta_serde>(options_.store_name));
    times_.emplace(ctx.template store<log_key, std::int64_t, log_key_serde, log_time_serde>(options_.store_name));
    if (!options_.rules_topic.empty())
      rules_.emplace(ctx.template global_store<std::string, std::string>(options_.rules_store));
    bind_metrics(ctx.metrics(), ctx.task_id());
  }

  /// Builds the throttle key (and its display form) from the record key bytes and the
  /// value's JSON bytes. Throws sluice::error(errc::processing) when a key field is missing.
  void extract_key(std::string_view key_bytes, std::optional<std::string_view> value_json);
  /// The rule for the current key (rules table, else defaults).
  rule current_rule();
  /// Decides for the current key and records a pass in the store.
  decision decide(std::int64_t timestamp, const rule& r);
  /// The sluice-throttle-reason header value for the current key and `r`.
  std::string reason(const rule& r) const;
  /// The same, written into `out` (its storage reused).
  void reason(const rule& r, std::string& out) const;

  void count_passed() noexcept { passed_->add(); }
  void count_throttled() noexcept { throttled_->add(); }

 private:
  void bind_metrics(metrics_registry& m, std::string_view task_id);
  /// Moves a key's held times into entries of their own (log_meta::spilled).
  void spill(log_meta& m);
  /// Moves a spilled key's entries back into its value (log_inline_capacity / 2 or fewer left).
  void hold(log_meta& m);

  throttle_options options_;
  key_builder keys_;
  std::optional<key_value_store<log_key, log_meta, log_key_serde, log_meta_serde>> meta_;
  std::optional<key_value_store<log_key, std::int64_t, log_key_serde, log_time_serde>> times_;
  std::optional<global_store_view<std::string, std::string>> rules_;
  counter* passed_ = nullptr;
  counter* throttled_ = nullptr;
  counter* invalid_rules_ = nullptr;
  std::unordered_map<std::string, std::optional<rule>> parsed_rules_;  // raw rule JSON -> parsed
};

/// The processor: the same record type in and out.
template <class K, class V>
class throttle_processor final : public processor<K, V> {
 public:
  explicit throttle_processor(const throttle_options& options)
      : engine_(options),
        forward_(options.on_throttled == throttled_action::forward),
        needs_value_(!options.key_fields.empty()) {}

  void init(typename processor<K, V>::context_type& ctx) override {
    processor<K, V>::init(ctx);
    engine_.bind(ctx);
    if (forward_) {
      const auto& children = ctx.child_names();
      if (children.size() != 2)
        throw error(errc::invalid_topology,
                    "throttle: with throttled_action::forward the processor needs exactly two children (passed, "
                    "throttled) but has " +
                        std::to_string(children.size()) + "; use apply_throttle()");
      passed_child_ = children[0];
      throttled_child_ = children[1];
    }
  }

  void process(const record<K, V>& r) override {
    auto key = sluice::detail::encode_field<sluice::detail::topic_serde_t<K>, K>(r.key, key_buf_);
    std::optional<std::string_view> value;
    if (needs_value_) value = sluice::detail::encode_field<sluice::detail::topic_serde_t<V>, V>(r.value, value_buf_);
    engine_.extract_key(key.value_or(std::string_view{}), value);
    auto rule = engine_.current_rule();
    if (engine_.decide(r.timestamp, rule).passed) {
      engine_.count_passed();
      if (forward_)
        this->context().forward(r, passed_child_);
      else
        this->context().forward(r);
      return;
    }
    engine_.count_throttled();
    if (!forward_) return;
    // Most records are throttled at a tight limit: their copy with the reason is one reused
    // record, so its key, value and header strings keep their storage from record to record.
    throttled_.key = r.key;
    throttled_.value = r.value;
    throttled_.timestamp = r.timestamp;
    auto& items = throttled_.headers.items();
    const auto& in = r.headers.items();
    items.resize(in.size() + 1);
    std::copy(in.begin(), in.end(), items.begin());  // assigns over the kept headers' strings
    auto& reason = items.back();
    reason.key.assign(throttle_reason_header);
    if (!reason.value) reason.value.emplace();
    engine_.reason(rule, *reason.value);
    this->context().forward(throttled_, throttled_child_);
  }

 private:
  engine engine_;
  bool forward_;
  bool needs_value_;
  std::string passed_child_, throttled_child_;
  std::string key_buf_, value_buf_;
  record<K, V> throttled_;  // the throttled record with its reason header, reused
};

}  // namespace throttle_detail

/// The processor supplier for kstream<K, V>::process(supplier, o.store_name[, o.rules_store]).
/// Declare the stores with add_throttle_stores(b, o) first. Validates the options.
template <class K, class V>
auto throttle(throttle_options options) {
  validate(options);
  return [options] { return std::make_unique<throttle_detail::throttle_processor<K, V>>(options); };
}

/// The outlets of apply_throttle: passed records, and throttled ones when on_throttled is
/// throttled_action::forward (nullopt when they are dropped).
template <class K, class V>
struct throttle_outlets {
  kstream<K, V> passed;
  std::optional<kstream<K, V>> throttled;
};

/// Declares the stores, adds the throttle after `in` and returns its outlets.
///
/// One task must see every record of a throttle key. With key_fields, the record key does
/// not determine the throttle key, so the records go through the repartition topic
/// "<application.id>-<store_name>-repartition", partitioned by murmur2 of the throttle key
/// (key, value, headers and timestamp unchanged); a record whose throttle key cannot be
/// built is a processing error there. Without key_fields the throttle key is the record
/// key and the input is used as it is partitioned (after a key-changing operation, it is
/// repartitioned by the record key first).
template <class K, class V>
throttle_outlets<K, V> apply_throttle(streams_builder& builder, const kstream<K, V>& in,
                                      const throttle_options& options) {
  add_throttle_stores(builder, options);
  auto by_throttle_key = [&] {
    if (options.key_fields.empty()) return in.repartitioned(options.store_name);
    auto throttle_key = [keys = throttle_detail::key_builder(options.key_fields, false), buf = std::string()](
                            const K&, const V& value) mutable -> std::string_view {
      keys.build({}, sluice::detail::encode_field<sluice::detail::topic_serde_t<V>, V>(value, buf));
      return keys.key();
    };
    return in.repartition_by(options.store_name, std::move(throttle_key));
  };
  const kstream<K, V> by_key = by_throttle_key();
  auto throttled = options.rules_topic.empty()
                       ? by_key.process(throttle<K, V>(options), options.store_name)
                       : by_key.process(throttle<K, V>(options), options.store_name, options.rules_store);
  auto all = [](const K&, const V&) { return true; };
  if (options.on_throttled == throttled_action::drop) return {throttled, std::nullopt};
  // Created in this order, so they are the processor's first and second children.
  auto passed = throttled.filter(all);
  auto rejected = throttled.filter(all);
  return {passed, rejected};
}

/// The sluice-throttle job's topology: records of `input` (bytes; null keys count as the
/// empty key) -> throttle -> `output`; throttled records to `throttled`, or dropped when it
/// is empty (on_throttled is set from it). With pace_records_per_second > 0 the passed
/// records go through pace() on their way to `output` (see sluice/topologies/pace.hpp):
/// the whole task's input is paused while it is over its share, throttled output included.
/// Throws invalid_topology when `output` or `throttled` is `input` or the rules topic, or the
/// rules topic is `input` (sluice/job_topics.hpp).
topology throttle_job_topology(const std::string& input, const std::string& output, const std::string& throttled,
                               throttle_options options, double pace_records_per_second = 0);

}  // namespace sluice::topologies
