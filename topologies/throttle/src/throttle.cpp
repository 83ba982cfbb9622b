// The throttle's logic on bytes: option checks, key extraction, rules, and the per-key log of
// passed effective times (a FIFO per key in the store; see the README's "Storage").
#include "sluice/topologies/throttle.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <limits>
#include <utility>

#include "sluice/error.hpp"
#include "sluice/job_topics.hpp"
#include "sluice/serde/json.hpp"
#include "sluice/topologies/pace.hpp"

namespace sluice::topologies {
namespace {

std::string describe_ms(std::chrono::milliseconds d) {
  auto ms = d.count();
  std::string s = std::to_string(ms) + " ms";
  if (ms % (24LL * 3600 * 1000) == 0 && ms != 0)
    s += " (" + std::to_string(ms / (24LL * 3600 * 1000)) + " days)";
  else if (ms % 1000 == 0 && ms != 0)
    s += " (" + std::to_string(ms / 1000) + " s)";
  return s;
}

void check_range(std::string_view what, std::chrono::milliseconds v, std::chrono::milliseconds lo,
                 std::chrono::milliseconds hi) {
  if (v < lo || v > hi)
    throw error(errc::invalid_config, "throttle: " + std::string(what) + " " + describe_ms(v) +
                                          " is out of range; allowed " + describe_ms(lo) + " .. " + describe_ms(hi));
}

void put_be64(std::string& out, std::uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}

std::uint64_t get_be64(std::string_view in, std::size_t at) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(in[at + i]);
  return v;
}

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

constexpr char meta_tag = 'm';
constexpr char time_tag = 't';
// A meta value holding its key's passed times starts with this byte; the spilled form (the
// only one before) is exactly 24 bytes, which a held value never is (9 + 8 n).
constexpr char held_meta_tag = 0x01;
constexpr std::size_t spilled_meta_size = 24;

}  // namespace

void validate(const throttle_options& o) {
  check_range("window", o.window, min_throttle_window, max_throttle_window);
  if (o.limit < min_throttle_limit || o.limit > max_throttle_limit)
    throw error(errc::invalid_config, "throttle: limit " + std::to_string(o.limit) + " is out of range; allowed " +
                                          std::to_string(min_throttle_limit) + " .. " +
                                          std::to_string(max_throttle_limit));
  check_range("retention grace", o.retention_grace, std::chrono::milliseconds(0), max_throttle_window);
  if (!o.rules_topic.empty())
    check_range("max rule window", o.max_rule_window, min_throttle_window, max_throttle_window);
  for (const auto& f : o.key_fields)
    if (f.empty()) throw error(errc::invalid_config, "throttle: key fields must not be empty names");
  if (o.store_name.empty()) throw error(errc::invalid_config, "throttle: the store name must not be empty");
  if (!o.rules_topic.empty() && o.rules_store.empty())
    throw error(errc::invalid_config, "throttle: the rules store name must not be empty");
}

std::chrono::milliseconds throttle_store_ttl(const throttle_options& o) {
  auto widest = o.rules_topic.empty() ? o.window : std::max(o.window, o.max_rule_window);
  return widest + o.retention_grace;
}

void add_throttle_stores(streams_builder& builder, const throttle_options& o) {
  validate(o);
  builder.add_state_store({.name = o.store_name, .ttl = throttle_store_ttl(o)});
  if (!o.rules_topic.empty()) builder.global_table<std::string, std::string>(o.rules_topic, o.rules_store);
}

topology throttle_job_topology(const std::string& input, const std::string& output, const std::string& throttled,
                               throttle_options options, double pace_records_per_second) {
  check_job_topics({{"input.topic", input}, {"throttle.rules.topic", options.rules_topic}},
                   {{"output.topic", output}, {"throttled.topic", throttled}});
  options.on_throttled = throttled.empty() ? throttled_action::drop : throttled_action::forward;
  streams_builder b;
  using bytes = std::optional<std::string>;
  auto out = apply_throttle(b, b.stream<bytes, bytes>(input), options);
  if (pace_records_per_second > 0)
    out.passed.process(pace<bytes, bytes>(pace_records_per_second)).to(output);
  else
    out.passed.to(output);
  if (out.throttled) out.throttled->to(throttled);
  return b.build();
}

namespace throttle_detail {
namespace {

// A validating scanner over a subset of JSON whose reading is unambiguous: strings without
// escapes (bytes 0x20.. and well-formed UTF-8, as nlohmann's lexer accepts them), numbers of at
// most 18 characters without an exponent (finite whatever their digits), true, false, null,
// objects and arrays, the four whitespace bytes. It never judges: anything outside the subset
// is `false`, and nlohmann decides.
class key_field_scanner {
 public:
  key_field_scanner(std::string_view json, const std::vector<std::string>& fields,
                    std::vector<std::string_view>& values)
      : p_(reinterpret_cast<const unsigned char*>(json.data())),
        end_(p_ + json.size()),
        fields_(fields),
        values_(values) {}

  bool run() {
    values_.assign(fields_.size(), std::string_view{});  // data() == nullptr: not (or not a string) yet
    skip_ws();
    if (p_ == end_ || *p_ != '{') return false;
    if (!top_object()) return false;
    skip_ws();
    if (p_ != end_) return false;
    return std::all_of(values_.begin(), values_.end(), [](std::string_view v) { return v.data() != nullptr; });
  }

 private:
  void skip_ws() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }

  bool expect(char c) {
    skip_ws();
    if (p_ == end_ || *p_ != static_cast<unsigned char>(c)) return false;
    ++p_;
    return true;
  }

  // Moves p_ to the first byte that is not plain (or the end).
  void skip_plain() { p_ = serde_detail::json::skip_plain_string_bytes(p_, end_); }

  // At the opening quote; leaves p_ after the closing one.
  bool string(std::string_view& text) {
    const unsigned char* begin = ++p_;
    while (p_ != end_) {
      skip_plain();
      if (p_ == end_) break;
      const unsigned char c = *p_;
      if (c == '"') {
        text = std::string_view(reinterpret_cast<const char*>(begin), static_cast<std::size_t>(p_ - begin));
        ++p_;
        return true;
      }
      if (c < 0x80) return false;  // a backslash or a control byte
      const std::size_t n = serde_detail::json::utf8_sequence_length(p_, end_);
      if (n == 0) return false;
      p_ += n;
    }
    return false;
  }

  bool number() {
    const unsigned char* begin = p_;
    if (*p_ == '-') ++p_;
    if (p_ == end_) return false;
    if (*p_ == '0') {
      ++p_;
    } else if (*p_ >= '1' && *p_ <= '9') {
      while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    } else {
      return false;
    }
    if (p_ != end_ && *p_ == '.') {
      ++p_;
      const unsigned char* digits = p_;
      while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
      if (p_ == digits) return false;
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) return false;
    return p_ - begin <= 18;
  }

  bool literal(std::string_view word) {
    if (static_cast<std::size_t>(end_ - p_) < word.size() || std::memcmp(p_, word.data(), word.size()) != 0)
      return false;
    p_ += word.size();
    return true;
  }

  bool value() {
    skip_ws();
    if (p_ == end_) return false;
    std::string_view ignored;
    switch (*p_) {
      case '{': return object();
      case '[': return array();
      case '"': return string(ignored);
      case 't': return literal("true");
      case 'f': return literal("false");
      case 'n': return literal("null");
      default: return number();
    }
  }

  // The elements of an object or an array up to `close`, separated by commas; `element` reads
  // one (a member, a value). p_ is at the opening bracket. Nesting is bounded by the caller's
  // json_nesting_depth check.
  template <class Element>
  bool elements(char close, Element element) {
    ++p_;
    skip_ws();
    if (p_ != end_ && *p_ == close) {
      ++p_;
      return true;
    }
    for (;;) {
      if (!element()) return false;
      skip_ws();
      if (p_ == end_) return false;
      if (*p_ == close) {
        ++p_;
        return true;
      }
      if (*p_ != ',') return false;
      ++p_;
    }
  }

  // A member's name and the colon after it.
  bool member_name(std::string_view& name) {
    skip_ws();
    return p_ != end_ && *p_ == '"' && string(name) && expect(':');
  }

  bool object() {
    return elements('}', [this] {
      std::string_view name;
      return member_name(name) && value();
    });
  }

  bool array() {
    return elements(']', [this] { return value(); });
  }

  // The top-level object: as object(), noting the key fields. A repeated member counts by its
  // last occurrence, as in nlohmann's document.
  bool top_object() {
    return elements('}', [this] {
      std::string_view name;
      if (!member_name(name)) return false;
      skip_ws();
      if (p_ == end_) return false;
      std::size_t field = 0;
      while (field < fields_.size() && fields_[field] != name) ++field;
      if (field < fields_.size() && *p_ == '"') {
        return string(values_[field]);  // a view into the text: data() is never null
      }
      if (field < fields_.size()) values_[field] = {};  // null, a number, ...: nlohmann's verdict
      return value();
    });
  }

  const unsigned char* p_;
  const unsigned char* end_;
  const std::vector<std::string>& fields_;
  std::vector<std::string_view>& values_;
};

}  // namespace

bool scan_key_fields(std::string_view json, const std::vector<std::string>& fields,
                     std::vector<std::string_view>& values) {
  return key_field_scanner(json, fields, values).run();
}

void log_key_serde::serialize(const log_key& k, std::string& out) {
  out.clear();
  put_varint(out, k.throttle_key.size());
  out.append(k.throttle_key);
  if (k.meta) {
    out.push_back(meta_tag);
  } else {
    out.push_back(time_tag);
    put_be64(out, k.seq);
  }
}

log_key log_key_serde::deserialize(std::string_view in) {
  std::uint64_t len = 0;
  std::size_t i = 0;
  for (int shift = 0; i < in.size(); shift += 7) {
    auto b = static_cast<unsigned char>(in[i++]);
    len |= std::uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) break;
  }
  if (i + len + 1 > in.size()) throw serialization_error("throttle: malformed log key");
  log_key k{in.substr(i, len), in[i + len] == meta_tag, 0};
  if (!k.meta && i + len + 9 <= in.size()) k.seq = get_be64(in, i + len + 1);
  return k;
}

void log_meta_serde::serialize(const log_meta& m, std::string& out) {
  out.clear();
  if (m.spilled) {
    put_be64(out, static_cast<std::uint64_t>(m.last_effective));
    put_be64(out, m.head);
    put_be64(out, m.tail);
    return;
  }
  out.push_back(held_meta_tag);
  put_be64(out, static_cast<std::uint64_t>(m.last_effective));
  for (std::uint32_t i = 0; i < m.count; ++i) put_be64(out, static_cast<std::uint64_t>(m.times[i]));
}

log_meta log_meta_serde::deserialize(std::string_view in) {
  log_meta m;
  if (in.size() == spilled_meta_size) {
    m.last_effective = static_cast<std::int64_t>(get_be64(in, 0));
    m.spilled = true;
    m.head = get_be64(in, 8);
    m.tail = get_be64(in, 16);
    return m;
  }
  const std::size_t held = in.size() < 9 ? 0 : (in.size() - 9) / 8;
  if (in.size() < 9 || in[0] != held_meta_tag || (in.size() - 9) % 8 != 0 || held > log_inline_capacity)
    throw serialization_error("throttle: malformed log meta (" + std::to_string(in.size()) +
                              " bytes; expected 24, or 9 + 8 n with n <= " + std::to_string(log_inline_capacity) +
                              " starting with byte 0x01): the store was written by an incompatible throttle; "
                              "reset the application (a new application.id, or delete the state directory and "
                              "the changelog topic)");
  m.last_effective = static_cast<std::int64_t>(get_be64(in, 1));
  m.count = static_cast<std::uint32_t>(held);
  for (std::size_t i = 0; i < held; ++i) m.times[i] = static_cast<std::int64_t>(get_be64(in, 9 + 8 * i));
  return m;
}

void log_time_serde::serialize(const std::int64_t& t, std::string& out) {
  out.clear();
  put_be64(out, static_cast<std::uint64_t>(t));
}

std::int64_t log_time_serde::deserialize(std::string_view in) {
  if (in.size() != 8)
    throw serialization_error("throttle: malformed log time (" + std::to_string(in.size()) + " bytes)");
  return static_cast<std::int64_t>(get_be64(in, 0));
}

engine::engine(const throttle_options& options)
    : options_(options), keys_(options.key_fields, !options.rules_topic.empty()) {}

void engine::bind_metrics(metrics_registry& m, std::string_view task_id) {
  std::string labels = "task=\"" + std::string(task_id) + "\"";
  passed_ = &m.get_counter("sluice_throttle_passed_total", labels);
  throttled_ = &m.get_counter("sluice_throttle_throttled_total", labels);
  invalid_rules_ = &m.get_counter("sluice_throttle_invalid_rules_total", labels);
  m.set_help("sluice_throttle_passed_total", "Records the throttle let through to the output topic.");
  m.set_help("sluice_throttle_throttled_total",
             "Records over their key's limit: sent to throttled.topic, or dropped when it is empty.");
  m.set_help("sluice_throttle_invalid_rules_total",
             "Rules-table values that were not a valid rule; the default window and limit applied.");
}

void key_builder::build(std::string_view key_bytes, std::optional<std::string_view> value_json) {
  key_.clear();
  display_key_.clear();
  if (key_fields_.empty()) {
    key_.assign(key_bytes);
    display_key_.assign(key_bytes);
    if (rules_on_) rule_key_.assign(key_bytes);
    return;
  }
  if (!value_json)
    throw error(errc::processing, "throttle: the record has a null value but the throttle key is read from its fields");
  // Bounded before parsing: writing a key field out (dump) recurses once per level.
  if (json_nesting_depth(*value_json) > max_json_nesting)
    throw error(errc::processing, "throttle: the record value nests arrays and objects deeper than " +
                                      std::to_string(max_json_nesting) + " levels (" +
                                      std::to_string(value_json->size()) +
                                      " bytes); the throttle key needs a JSON object of ordinary depth");
  // Most values are plain objects with string key fields: scanned in place, no document built
  // (the parse was most of the throttle's cost). Anything else goes to nlohmann, which decides.
  if (scan_key_fields(*value_json, key_fields_, scanned_)) {
    for (std::size_t i = 0; i < scanned_.size(); ++i) append_part(scanned_[i], i == 0);
    return;
  }
  build_from_document(*value_json);
}

void key_builder::append_part(std::string_view text, bool first) {
  // Length-prefixed parts: ("a,b", "c") and ("a", "b,c") are different keys.
  put_varint(key_, text.size());
  key_.append(text);
  if (!first) display_key_.push_back(',');
  display_key_.append(text);
  if (first && rules_on_) rule_key_.assign(text);
}

void key_builder::build_from_document(std::string_view value_json) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(value_json.begin(), value_json.end());
  } catch (const nlohmann::json::exception& e) {
    // nlohmann quotes the token it stopped in, which may be most of a large value.
    std::string_view why = e.what();
    std::string shown(why.substr(0, 200));
    if (why.size() > shown.size()) shown += "...";
    throw error(errc::processing, "throttle: the record value is not valid JSON (" + shown +
                                      "); the throttle key needs a JSON object's fields");
  }
  if (!doc.is_object())
    throw error(errc::processing, std::string("throttle: the record value is JSON of type ") + doc.type_name() +
                                      ", not an object; the throttle key needs a JSON object's fields");
  bool first = true;
  for (const auto& field : key_fields_) {
    auto it = doc.find(field);
    if (it == doc.end() || it->is_null())
      throw error(errc::processing, "throttle: key field '" + field + "' is missing (or null) in the record value");
    append_part(it->is_string() ? it->get<std::string>() : it->dump(), first);
    first = false;
  }
}

std::optional<rule> parse_rule(std::string_view text, const rule& defaults, std::chrono::milliseconds max_window) {
  auto doc = json_nesting_depth(text) > max_json_nesting
                 ? nlohmann::json()  // not an object: an invalid rule
                 : nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return std::nullopt;
  rule r = defaults;
  bool ok = true;
  auto read = [&](const char* name, std::int64_t& into, std::int64_t lo, std::int64_t hi) {
    auto it = doc.find(name);
    if (it == doc.end()) return;
    if (!it->is_number_integer()) {
      ok = false;
      return;
    }
    auto v = it->get<std::int64_t>();
    if (v < lo || v > hi) ok = false;
    into = v;
  };
  read("window_ms", r.window_ms, min_throttle_window.count(), max_window.count());
  read("limit", r.limit, min_throttle_limit, max_throttle_limit);
  if (!ok) return std::nullopt;
  return r;
}

void engine::extract_key(std::string_view key_bytes, std::optional<std::string_view> value_json) {
  keys_.build(key_bytes, value_json);
}

rule engine::current_rule() {
  rule defaults{options_.window.count(), options_.limit};
  if (!rules_) return defaults;
  auto raw = rules_->get(keys_.rule_key());
  if (!raw) return defaults;
  auto cached = parsed_rules_.find(*raw);
  if (cached == parsed_rules_.end()) {
    auto parsed = parse_rule(*raw, defaults, options_.max_rule_window);
    if (parsed_rules_.size() >= 4096) parsed_rules_.clear();  // bounded: distinct rule texts are few
    cached = parsed_rules_.emplace(std::move(*raw), parsed).first;
  }
  if (!cached->second) {
    invalid_rules_->add();
    return defaults;
  }
  return *cached->second;
}

decision engine::decide(std::int64_t timestamp, const rule& r) {
  const log_key meta_key{keys_.key(), true, 0};
  auto current = meta_->get(meta_key);
  log_meta m = current ? *current : log_meta{};
  if (!current) m.last_effective = timestamp;
  const std::int64_t t = std::max(timestamp, m.last_effective);
  bool changed = !current || t != m.last_effective;
  m.last_effective = t;

  // Drop the passed times that left (t - window, t]. Effective times of a key never decrease,
  // so the times are sorted and what leaves the window never returns: each is read and
  // dropped once. A spilled entry missing before its turn expired by TTL, which (README,
  // "Exactness and TTL") only happens to entries already outside every window that can
  // still be asked.
  const std::int64_t lower = t - r.window_ms;  // excluded bound
  if (m.spilled) {
    const std::uint64_t head_before = m.head;
    while (m.head < m.tail) {
      log_key k{keys_.key(), false, m.head};
      auto passed_at = times_->get(k);
      if (passed_at && *passed_at > lower) break;
      if (passed_at) times_->remove(k);
      ++m.head;
    }
    changed = changed || m.head != head_before;
    if (m.tail - m.head <= log_inline_capacity / 2) {
      hold(m);
      changed = true;
    }
  } else {
    std::uint32_t left = 0;
    while (left < m.count && m.times[left] <= lower) ++left;
    if (left > 0) {
      std::copy(m.times.begin() + left, m.times.begin() + m.count, m.times.begin());
      m.count -= left;
      changed = true;
    }
  }

  const std::uint64_t in_window = m.spilled ? m.tail - m.head : m.count;
  const bool passed = in_window < static_cast<std::uint64_t>(r.limit);
  if (passed) {
    if (!m.spilled && m.count < log_inline_capacity) {
      m.times[m.count++] = t;
    } else {
      if (!m.spilled) spill(m);
      times_->put(log_key{keys_.key(), false, m.tail}, t);
      ++m.tail;
    }
    changed = true;
  }
  if (changed) meta_->put(meta_key, m);
  return {passed, t};
}

void engine::hold(log_meta& m) {
  // Half the capacity or fewer left (a key written by the layout before the fold, or one whose
  // window emptied after a spill): the entries go back into the value. The head entry is in
  // the window, so all are (the times are sorted); a missing one expired by TTL, as above.
  // Half, not full: a key hovering at the capacity does not spill and hold on every record.
  log_meta held;
  held.last_effective = m.last_effective;
  for (std::uint64_t seq = m.head; seq < m.tail; ++seq) {
    const log_key k{keys_.key(), false, seq};
    auto passed_at = times_->get(k);
    if (!passed_at) continue;
    times_->remove(k);
    held.times[held.count++] = *passed_at;
  }
  m = held;
}

void engine::spill(log_meta& m) {
  // More than log_inline_capacity times in the window (a limit above it): the held times
  // become entries 0 .. count-1. None is left from an earlier spill: a key returns to holding
  // its times only after reading and removing every entry.
  for (std::uint32_t i = 0; i < m.count; ++i) times_->put(log_key{keys_.key(), false, i}, m.times[i]);
  m.spilled = true;
  m.head = 0;
  m.tail = m.count;
  m.count = 0;
}

std::string engine::reason(const rule& r) const {
  std::string out;
  reason(r, out);
  return out;
}

void engine::reason(const rule& r, std::string& out) const {
  // The text nlohmann writes for a key of printable ASCII without quotes or backslashes (the
  // members in its order); any other key is escaped by nlohmann.
  const std::string& key = keys_.display_key();
  if (std::all_of(key.begin(), key.end(), [](char c) { return c >= 0x20 && c <= 0x7e && c != '"' && c != '\\'; })) {
    char digits[20];
    out.assign("{\"key\":\"").append(key).append("\",\"limit\":");
    out.append(digits, static_cast<std::size_t>(std::to_chars(digits, digits + sizeof digits, r.limit).ptr - digits));
    out.append(",\"window_ms\":");
    out.append(digits,
               static_cast<std::size_t>(std::to_chars(digits, digits + sizeof digits, r.window_ms).ptr - digits));
    out.push_back('}');
    return;
  }
  nlohmann::json j = {{"key", keys_.display_key()}, {"limit", r.limit}, {"window_ms", r.window_ms}};
  out = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace throttle_detail
}  // namespace sluice::topologies
