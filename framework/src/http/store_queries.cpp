// Interactive queries of stores over HTTP: the /stores/... and /metadata endpoints.
#include "http/store_queries.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <nlohmann/json.hpp>
#include <variant>

#include "http/client.hpp"
#include "kafka/producer.hpp"
#include "sluice/detail/store_codec.hpp"
#include "sluice/state/big_endian.hpp"
#include "sluice/state/window_store.hpp"

namespace sluice::http {

namespace {

std::string bytes_as_json(std::string_view bytes) {
  return nlohmann::json(std::string(bytes)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

struct store_entry {
  nlohmann::json key;  ///< for ordering entries merged from several partitions and instances
  std::string key_json;
  std::string value_json;
  std::int32_t partition;
};

/// Renders a key and value through the store's codec (raw bytes as JSON strings for
/// untyped stores of the Processor API).
store_entry render(const detail::store_codec* codec, std::string_view key, std::string_view value,
                   std::int32_t partition) {
  auto key_json = codec ? codec->key_to_json(key) : bytes_as_json(key);
  auto value_json = codec ? codec->value_to_json(value) : bytes_as_json(value);
  return {nlohmann::json::parse(key_json), std::move(key_json), std::move(value_json), partition};
}

class store_endpoints {
 public:
  store_endpoints(store_access& stores, const topology& topo, std::shared_ptr<const owner_forwarding> forwarding,
                  const global_store_slot& globals)
      : stores_(stores), topo_(topo), forwarding_(std::move(forwarding)), globals_(globals) {}

  /// The stores a path reads: /stores/{store}/keys/{key}, /range and /prefix key-value stores
  /// (global tables among them), .../windows window and session stores, and
  /// /metadata/stores/{store}/keys/{key} any store, whose partition it names.
  enum class store_kind { key_value, window, any };

  /// What the key paths need to know of their key: the store, the key's bytes and the
  /// partition it lives in.
  struct resolved_key {
    std::string store;
    const detail::store_spec* spec = nullptr;
    std::string bytes;
    std::int32_t partition = -1;  ///< of the store's tasks; of the table's topic for a global table
    const runtime::global_table_store* global = nullptr;  ///< set for a global table: read it here
  };

  response key(const request& req) {
    auto resolved = resolve_key(req, store_kind::key_value);
    if (auto* refusal = std::get_if<response>(&resolved)) return std::move(*refusal);
    const auto& k = std::get<resolved_key>(resolved);
    if (!k.global && !k.spec->codec) return untyped_key(req, k);
    std::optional<std::string> value;
    if (k.global) {
      if (std::string v; k.global->get(k.bytes, v)) value = std::move(v);
    } else {
      std::string failure;
      auto outcome = stores_.run(
          k.store, k.partition, [&](state::kv_store& s) { value = s.get(k.bytes); }, std::chrono::seconds(5), &failure);
      if (outcome == store_access::outcome::not_local) return forward_or_refuse(req, k.store, k.partition);
      if (outcome != store_access::outcome::done)
        return stamp(store_access::refusal(outcome, k.store, k.partition, failure));
    }
    if (!value)
      return stamp(response::error(status::not_found, "no key '" + std::string(req.path_param("key")) + "' in " +
                                                          (k.global ? "global table '" : "store '") + k.store +
                                                          "' (partition " + std::to_string(k.partition) + ")"));
    return key_answer(k, k.partition, *value);
  }

  /// A key of an untyped store (a processor's, added with add_state_store): see search_untyped.
  response untyped_key(const request& req, const resolved_key& k) {
    auto found = search_untyped(
        req, k,
        [&](const std::vector<std::int32_t>& order, std::size_t slots) {
          std::vector<std::optional<std::string>> values(slots);
          auto outcomes = stores_.run_each(
              k.store, order,
              [&](std::int32_t p, state::kv_store& s) { values.at(static_cast<std::size_t>(p)) = s.get(k.bytes); },
              std::chrono::seconds(5));
          return lookups(outcomes, [&](std::int32_t p) -> std::optional<response> {
            const auto& value = values.at(static_cast<std::size_t>(p));
            if (value) return key_answer(k, p, *value);
            return std::nullopt;
          });
        },
        [](const response& r) { return r.status != static_cast<int>(status::not_found); });
    if (found) return std::move(*found);
    return stamp(response::error(status::not_found, "no key '" + std::string(req.path_param("key")) + "' in store '" +
                                                        k.store + "' (any partition)"));
  }

  /// What looking a key up in one partition found: the answer when the key is there.
  struct partition_lookup {
    std::int32_t partition = -1;
    store_access::outcome outcome = store_access::outcome::done;
    std::string failure;
    std::optional<response> answer;
  };

  /// The lookups of run_each's outcomes: `answer(p)` for each partition that answered.
  template <class Answer>
  static std::vector<partition_lookup> lookups(std::vector<store_access::partition_outcome>& outcomes,
                                               Answer&& answer) {
    std::vector<partition_lookup> out;
    for (auto& o : outcomes) {
      auto& l = out.emplace_back(partition_lookup{o.partition, o.result, std::move(o.failure), std::nullopt});
      if (l.outcome == store_access::outcome::done) l.answer = answer(o.partition);
    }
    return out;
  }

  /// Finds a key of an untyped store (a processor's, added with add_state_store). Its bytes
  /// need not be the records' key (a processor keys its store as it likes, e.g. the
  /// throttle's encoded keys), so the partition murmur2 of the bytes picks may not hold it.
  /// `look(order, slots)` looks in this instance's partitions, all at once (one wait for the
  /// stream threads, not one per partition), each partition p in `order` filling slot p of
  /// `slots`, and the answer of the partition murmur2 picks wins,
  /// then the lowest; then (unless this request was forwarded) each other instance that owns
  /// partitions of the store is asked the same request once, and looks in its own;
  /// `found_remotely` tells whether its answer found the key. As Kafka Streams'
  /// store.get(key) looks in every local store of the name. The answer found, or a refusal;
  /// nullopt when no partition holds the key.
  std::optional<response> search_untyped(
      const request& req, const resolved_key& k,
      const std::function<std::vector<partition_lookup>(const std::vector<std::int32_t>&, std::size_t)>& look,
      const std::function<bool(const response&)>& found_remotely) {
    std::vector<std::int32_t> order{k.partition}, missing;
    for (auto p : stores_.every_partition(k.store))
      if (p != k.partition) order.push_back(p);
    const auto slots = static_cast<std::size_t>(*std::max_element(order.begin(), order.end()) + 1);
    for (auto& l : look(order, slots)) {
      if (l.outcome == store_access::outcome::not_local) {
        missing.push_back(l.partition);
        continue;
      }
      if (l.outcome != store_access::outcome::done)
        return stamp(store_access::refusal(l.outcome, k.store, l.partition, l.failure));
      if (l.answer) return std::move(l.answer);
    }
    if (!missing.empty() && !req.header(forwarded_header)) {
      auto owners = owners_of(k.store, missing);
      if (auto* refusal = std::get_if<response>(&owners)) return stamp(std::move(*refusal));
      for (const auto& [owner, parts] : std::get<partitions_by_owner>(owners)) {
        auto r = forward_get(owner, std::string(req.target()), forwarding_->forward_headers(), std::chrono::seconds(3));
        if (found_remotely(r)) return stamp(std::move(r));
      }
    }
    return std::nullopt;
  }

  /// The answer to a key found in `partition` with `value`.
  response key_answer(const resolved_key& k, std::int32_t partition, std::string_view value) const {
    auto e = render(k.spec->codec.get(), k.bytes, value, partition);
    return stamp(response::json(status::ok, "{\"store\": " + bytes_as_json(k.store) +
                                                ", \"partition\": " + std::to_string(partition) +
                                                ", \"key\": " + e.key_json + ", \"value\": " + e.value_json + "}"));
  }

  /// /range (from/to) and /prefix/{prefix}: every partition of the store, merged in key order.
  enum class scan { range, prefix };
  response scan_all(const request& req, scan kind) {
    const auto store = std::string(req.path_param("store"));
    const detail::store_spec* spec = nullptr;
    if (auto r = find(store, spec, store_kind::key_value)) return stamp(std::move(*r));
    response refusal;
    auto limit = req.whole_number_query("limit", default_query_limit, 1, max_query_limit, refusal,
                                        "; page with from= set past the last key returned");
    if (!limit) return stamp(std::move(refusal));
    std::string from, to, prefix;
    bool everything = false;
    if (kind == scan::range) {
      auto f = req.query("from"), t = req.query("to");
      if (f.has_value() != t.has_value())
        return stamp(
            response::error(status::bad_request, "give both from= and to= (inclusive), or neither for every key"));
      everything = !f;
      if (f) {
        auto fb = key_bytes(spec, store, *f), tb = key_bytes(spec, store, *t);
        if (!fb) return stamp(response::error(status::bad_request, fb.error));
        if (!tb) return stamp(response::error(status::bad_request, tb.error));
        from = fb.bytes;
        to = tb.bytes;
      }
    } else {
      if (spec->codec && spec->codec->key_kind != "string")
        return stamp(response::error(status::bad_request, "store '" + store + "' has " + spec->codec->key_kind +
                                                              " keys; prefix queries need string keys"));
      prefix = std::string(req.path_param("prefix"));
    }
    if (spec->global) return global_scan(store, *spec, kind, everything, from, to, prefix, *limit);
    const auto all = stores_.every_partition(store);
    if (all.empty()) return stamp(store_access::refusal(store_access::outcome::unavailable, store, -1));
    // Every partition at once; each fills its own slot.
    std::vector<std::vector<std::pair<std::string, std::string>>> raw(all.size());
    auto outcomes = stores_.run_each(
        store, all,
        [&](std::int32_t p, state::kv_store& s) {
          auto& mine = raw.at(static_cast<std::size_t>(p));
          auto it = kind == scan::prefix ? s.prefix(prefix) : everything ? s.all() : s.range(from, to);
          for (; it.valid() && mine.size() < *limit; it.next()) mine.emplace_back(it.key(), it.value());
        },
        std::chrono::seconds(5));
    std::vector<store_entry> entries;
    std::vector<std::int32_t> missing;
    for (const auto& o : outcomes) {
      if (o.result == store_access::outcome::not_local) {
        missing.push_back(o.partition);
        continue;
      }
      if (o.result != store_access::outcome::done)
        return stamp(store_access::refusal(o.result, store, o.partition, o.failure));
      for (auto& [k, v] : raw[static_cast<std::size_t>(o.partition)])
        entries.push_back(render(spec->codec.get(), k, v, o.partition));
    }
    if (!missing.empty() && !req.header(forwarded_header)) {
      auto take = [&](const nlohmann::json& e, std::int32_t p) {
        entries.push_back({e["key"], e["key"].dump(), e["value"].dump(), p});
        return true;
      };
      if (auto refused = gather_remote(req, store, missing, "entries", take)) return stamp(std::move(*refused));
    }
    return stamp(scan_answer(store, std::move(entries), *limit, missing));
  }

  /// /stores/{store}/keys/{key}/windows?from=&to=: the windows of a key in a window store, as
  /// Kafka Streams' ReadOnlyWindowStore.fetch(key, from, to) (windows starting in [from,
  /// to]) and ReadOnlySessionStore.findSessions(key, from, to) (sessions ending at or after
  /// `from` and starting at or before `to`). Both bounds are optional, in ms since the epoch.
  response windows(const request& req) {
    auto resolved = resolve_key(req, store_kind::window);
    if (auto* refusal = std::get_if<response>(&resolved)) return std::move(*refusal);
    const auto& k = std::get<resolved_key>(resolved);
    const auto& store = k.store;
    const auto* spec = k.spec;
    response refusal;
    auto times = time_range(req, refusal);
    if (!times) return stamp(std::move(refusal));
    const std::int64_t from = times->first, to = times->second;
    // Looks in `partitions` at once; per partition: its windows of the key, and whether the
    // store is a window store at all.
    auto look = [&](const std::vector<std::int32_t>& partitions, std::size_t slots) {
      std::vector<std::vector<state::window_entry>> entries(slots);
      std::vector<char> window_store(slots, 1);
      auto outcomes = stores_.run_bindings(
          store, partitions,
          [&](std::int32_t p, const detail::store_binding& binding, detail::task_context&) {
            auto* w = dynamic_cast<state::window_store*>(binding.store);
            if (!w) {
              window_store.at(static_cast<std::size_t>(p)) = 0;
              return;
            }
            // A session is stored under its end, so its end decides which are read.
            w->fetch(k.bytes, from,
                     spec->codec && spec->codec->sessions ? std::numeric_limits<std::int64_t>::max() : to,
                     entries.at(static_cast<std::size_t>(p)));
          },
          std::chrono::seconds(5));
      return lookups(outcomes, [&](std::int32_t p) -> std::optional<response> {
        const auto slot = static_cast<std::size_t>(p);
        if (!window_store[slot])
          return stamp(response::error(status::bad_request, "store '" + store +
                                                                "' is not a window store (a queue or ranked-index "
                                                                "store): read it through an endpoint the topology "
                                                                "adds (streams_builder::add_endpoint)"));
        if (spec->codec || !entries[slot].empty()) return windows_answer(k, p, entries[slot], to);
        return std::nullopt;
      });
    };
    if (spec->codec) {
      auto l = std::move(look({k.partition}, static_cast<std::size_t>(k.partition) + 1).front());
      if (l.outcome == store_access::outcome::not_local) return forward_or_refuse(req, store, k.partition);
      if (l.outcome != store_access::outcome::done)
        return stamp(store_access::refusal(l.outcome, store, k.partition, l.failure));
      return std::move(*l.answer);
    }
    auto found = search_untyped(req, k, look, [](const response& r) {
      if (r.status != static_cast<int>(status::ok)) return true;
      auto j = nlohmann::json::parse(r.body, nullptr, false);
      return j.is_discarded() || !j.contains("windows") || !j["windows"].empty();
    });
    if (found) return std::move(*found);
    return windows_answer(k, std::nullopt, {}, to);
  }

  /// One window of /stores/{store}/windows: read raw on the stream thread (`value` its
  /// bytes), rendered (`key_json`, `value_json`) after, or taken from another instance's answer.
  struct window_row {
    std::string key;  ///< the key's bytes: the answer's order is the store's (key bytes, then start)
    std::int64_t start = 0;
    std::string end_json;
    std::string value;
    std::string key_json, value_json;
    std::int32_t partition = -1;
  };
  static bool window_order(const window_row& a, const window_row& b) {
    return a.key != b.key ? a.key < b.key : a.start < b.start;
  }
  /// Keeps the first `n` of `rows` in window_order (unsorted).
  static void keep_first(std::vector<window_row>& rows, std::size_t n) {
    if (rows.size() <= n) return;
    std::nth_element(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(n), rows.end(), window_order);
    rows.resize(n);
  }

  /// /stores/{store}/windows?from=&to=&key_from=&key_to=&after_start=&limit=: the windows of
  /// every key of a window store, across every partition (asking the instances that own the
  /// others), as Kafka Streams' ReadOnlyWindowStore.fetchAll(from, to) (windows starting in
  /// [from, to]) or, with key_from / key_to (inclusive, each optional), fetch(keyFrom, keyTo,
  /// from, to); for a session store, sessions ending at or after from and starting at or
  /// before to. Ordered by key (the store's byte order, as a range scan) then start; the
  /// first `limit`, with "more" telling whether others follow: the next page is asked with
  /// key_from= the last key and after_start= its last start.
  response all_windows(const request& req) {
    const auto store = std::string(req.path_param("store"));
    const detail::store_spec* spec = nullptr;
    if (auto r = find(store, spec, store_kind::window)) return stamp(std::move(*r));
    response refusal;
    auto limit = req.whole_number_query("limit", default_query_limit, 1, max_query_limit, refusal,
                                        "; page with key_from= the last key returned and after_start= its last start");
    if (!limit) return stamp(std::move(refusal));
    auto times = time_range(req, refusal);
    if (!times) return stamp(std::move(refusal));
    const std::int64_t from = times->first, to = times->second;
    std::optional<std::string> key_from, key_to;
    for (auto [name, bound] : {std::pair{"key_from", &key_from}, std::pair{"key_to", &key_to}}) {
      auto text = req.query(name);
      if (!text) continue;
      auto bytes = key_bytes(spec, store, *text);
      if (!bytes) return stamp(response::error(status::bad_request, std::string(name) + ": " + bytes.error));
      *bound = std::move(bytes.bytes);
    }
    std::optional<std::int64_t> after_start;
    if (req.query("after_start")) {
      after_start = time_query(req, "after_start", 0, refusal);
      if (!after_start) return stamp(std::move(refusal));
      if (!key_from)
        return stamp(response::error(status::bad_request,
                                     "after_start= continues the windows of the key given as key_from=: give both"));
    }
    const auto all = stores_.every_partition(store);
    if (all.empty()) return stamp(store_access::refusal(store_access::outcome::unavailable, store, -1));
    const auto* codec = spec->codec.get();
    // Each partition keeps its first limit + 1 (one more than answered: whether more follow).
    const std::size_t keep = *limit + 1;
    std::vector<std::vector<window_row>> found(all.size());
    std::vector<char> window_store(all.size(), 1);
    auto outcomes = stores_.run_bindings(
        store, all,
        [&](std::int32_t p, const detail::store_binding& binding, detail::task_context&) {
          auto* w = dynamic_cast<state::window_store*>(binding.store);
          if (!w) {
            window_store[static_cast<std::size_t>(p)] = 0;
            return;
          }
          auto& mine = found[static_cast<std::size_t>(p)];
          // A session is stored under its end, so its end decides which are read.
          const auto last = codec && codec->sessions ? std::numeric_limits<std::int64_t>::max() : to;
          w->fetch_all(from, last, [&](std::string_view key, std::int64_t start, std::string_view value) {
            if ((key_from && key < *key_from) || (key_to && key > *key_to)) return;
            auto shown = show_window(codec, start, value, to);
            if (!shown || (after_start && key == *key_from && shown->start <= *after_start)) return;
            mine.push_back({std::string(key), shown->start, std::move(shown->end_json), std::string(value), {}, {}, p});
            if (mine.size() >= 2 * keep) keep_first(mine, keep);
          });
          keep_first(mine, keep);
        },
        std::chrono::seconds(5));
    std::vector<window_row> rows;
    std::vector<std::int32_t> missing;
    for (const auto& o : outcomes) {
      const auto slot = static_cast<std::size_t>(o.partition);
      if (o.result == store_access::outcome::not_local) {
        missing.push_back(o.partition);
        continue;
      }
      if (o.result != store_access::outcome::done)
        return stamp(store_access::refusal(o.result, store, o.partition, o.failure));
      if (!window_store[slot])
        return stamp(response::error(status::bad_request, "store '" + store +
                                                              "' is not a window store (a queue or ranked-index "
                                                              "store): read it through an endpoint the topology "
                                                              "adds (streams_builder::add_endpoint)"));
      for (auto& row : found[slot]) {
        row.key_json = codec ? codec->key_to_json(row.key) : bytes_as_json(row.key);
        row.value_json = codec ? codec->value_to_json(row.value) : bytes_as_json(row.value);
        rows.push_back(std::move(row));
      }
    }
    bool more = false;
    if (!missing.empty() && !req.header(forwarded_header)) {
      auto take = [&](const nlohmann::json& e, std::int32_t p) -> bool {
        const auto& key = e["key"];
        auto bytes =
            key.is_string() ? key_bytes(spec, store, key.get<std::string>()) : key_bytes(spec, store, key.dump());
        if (!bytes || !e.contains("start") || !e["start"].is_number_integer() || !e.contains("end")) return false;
        rows.push_back({std::move(bytes.bytes),
                        e["start"].get<std::int64_t>(),
                        e["end"].dump(),
                        {},
                        key.dump(),
                        e["value"].dump(),
                        p});
        return true;
      };
      if (auto refused = gather_remote(req, store, missing, "windows", take, &more)) return stamp(std::move(*refused));
    }
    std::sort(rows.begin(), rows.end(), window_order);
    if (rows.size() > *limit) {
      more = true;
      rows.resize(*limit);
    }
    std::string body = "{\"store\": " + bytes_as_json(store) + ", \"windows\": [";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      body += (i ? ", " : "") + std::string("{\"key\": ") + r.key_json + ", \"start\": " + std::to_string(r.start) +
              ", \"end\": " + r.end_json + ", \"value\": " + r.value_json +
              ", \"partition\": " + std::to_string(r.partition) + "}";
    }
    body += std::string("], \"more\": ") + (more ? "true" : "false") + ", \"partitions_not_local\": [";
    for (std::size_t i = 0; i < missing.size(); ++i) body += (i ? ", " : "") + std::to_string(missing[i]);
    body += "]}";
    return stamp(response::json(status::ok, std::move(body)));
  }

 private:
  /// The window queries' `from` and `to` (ms since the epoch, each optional, inclusive); nullopt
  /// with `refusal` set when one is not a whole number or from is after to.
  static std::optional<std::pair<std::int64_t, std::int64_t>> time_range(const request& req, response& refusal) {
    auto from = time_query(req, "from", 0, refusal);
    if (!from) return std::nullopt;
    auto to = time_query(req, "to", std::numeric_limits<std::int64_t>::max(), refusal);
    if (!to) return std::nullopt;
    if (*from > *to) {
      refusal = response::error(status::bad_request, "from " + std::to_string(*from) + " is after to " +
                                                         std::to_string(*to) + ": give from <= to");
      return std::nullopt;
    }
    return std::pair{*from, *to};
  }

  /// A time in ms since the epoch from query parameter `name`: `fallback` when absent;
  /// nullopt with `refusal` set when it is not a whole number.
  static std::optional<std::int64_t> time_query(const request& req, std::string_view name, std::int64_t fallback,
                                                response& refusal) {
    auto text = req.query(name);
    if (!text) return fallback;
    std::int64_t v = 0;
    auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
    if (ec == std::errc{} && end == text->data() + text->size()) return v;
    refusal = response::error(status::bad_request, std::string(name) + " '" + std::string(*text) +
                                                       "' is not a time: give whole milliseconds since the epoch");
    return std::nullopt;
  }

  /// How a stored window shows in an answer: its start, and its end as JSON (null when the
  /// store's windows are not known: a Processor API store). A session is stored under its end
  /// with its start in the value's first 8 bytes: nullopt for one starting after `to` (or a
  /// value too short to hold a start).
  struct shown_window {
    std::int64_t start = 0;
    std::string end_json;
  };
  static std::optional<shown_window> show_window(const detail::store_codec* codec, std::int64_t stored_start,
                                                 std::string_view value, std::int64_t to) {
    if (codec && codec->sessions) {
      if (value.size() < 8) return std::nullopt;
      const auto session_start = static_cast<std::int64_t>(state::read_u64(value));
      if (session_start > to) return std::nullopt;
      return shown_window{session_start, std::to_string(stored_start)};
    }
    // A windowed aggregation's codec knows its windows' size (0 for sliding windows of no
    // time difference: [t, t]).
    if (codec) return shown_window{stored_start, std::to_string(stored_start + codec->window_size_ms)};
    return shown_window{stored_start, "null"};
  }

  /// The answer of a windows query: `entries` of key `k` found in `partition` (none: found in
  /// no partition of an untyped store), each with its start, end (when the store's windows
  /// are known: a DSL aggregation's) and value. Sessions ending at or after the query's from
  /// were read; those starting after `to` are left out here.
  response windows_answer(const resolved_key& k, std::optional<std::int32_t> partition,
                          const std::vector<state::window_entry>& entries, std::int64_t to) const {
    const auto* codec = k.spec->codec.get();
    std::string body = "{\"store\": " + bytes_as_json(k.store) +
                       ", \"partition\": " + (partition ? std::to_string(*partition) : std::string("null")) +
                       ", \"key\": " + (codec ? codec->key_to_json(k.bytes) : bytes_as_json(k.bytes)) +
                       ", \"windows\": [";
    bool first = true;
    for (const auto& e : entries) {
      auto shown = show_window(codec, e.start, e.value, to);
      if (!shown) continue;
      body += (first ? "" : ", ") + std::string("{\"start\": ") + std::to_string(shown->start) +
              ", \"end\": " + shown->end_json +
              ", \"value\": " + (codec ? codec->value_to_json(e.value) : bytes_as_json(e.value)) + "}";
      first = false;
    }
    body += "]}";
    return stamp(response::json(status::ok, std::move(body)));
  }

  /// The answer of a range or prefix scan: the first `limit` of `entries` in key order.
  static response scan_answer(const std::string& store, std::vector<store_entry> entries, std::size_t limit,
                              const std::vector<std::int32_t>& missing) {
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
    if (entries.size() > limit) entries.resize(limit);
    std::string body = "{\"store\": " + bytes_as_json(store) + ", \"entries\": [";
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const auto& e = entries[i];
      body += (i ? ", " : "") + std::string("{\"key\": ") + e.key_json + ", \"value\": " + e.value_json +
              ", \"partition\": " + std::to_string(e.partition) + "}";
    }
    body += "], \"partitions_not_local\": [";
    for (std::size_t i = 0; i < missing.size(); ++i) body += (i ? ", " : "") + std::to_string(missing[i]);
    body += "]}";
    return response::json(status::ok, std::move(body));
  }

  /// The store of global table `store`, or the 503 (with Retry-After) while the tables catch up.
  const runtime::global_table_store* global_table(const std::string& store, response& refusal) const {
    const auto* table = globals_.find(store);
    if (!table) refusal = stamp(store_access::refusal(store_access::outcome::unavailable, store, -1));
    return table;
  }

  /// The store, key and partition of a key request, or the answer refusing it (stamped): 404
  /// for an unknown store, 400 for a store of another kind than the path reads (find) or a key
  /// that is not one of the store's, 503 + Retry-After while the partition counts are unknown
  /// (the app starting) or the global tables catch up.
  std::variant<resolved_key, response> resolve_key(const request& req, store_kind kind) {
    resolved_key k;
    k.store = std::string(req.path_param("store"));
    if (auto r = find(k.store, k.spec, kind)) return stamp(std::move(*r));
    auto key = key_bytes(k.spec, k.store, req.path_param("key"));
    if (!key) return stamp(response::error(status::bad_request, key.error));
    k.bytes = std::move(key.bytes);
    std::optional<std::int32_t> partition;
    if (k.spec->global) {
      response refusal;
      k.global = global_table(k.store, refusal);
      if (!k.global) return refusal;
      partition = kafka::murmur2_partition(k.bytes, k.global->partitions());
    } else {
      partition = stores_.partition_of(k.store, k.bytes);
    }
    if (!partition) return stamp(store_access::refusal(store_access::outcome::unavailable, k.store, -1));
    k.partition = *partition;
    return k;
  }

  /// A range or prefix scan of a global table, from this instance alone; `partition` in each
  /// entry is the table topic's partition of the key.
  response global_scan(const std::string& store, const detail::store_spec& spec, scan kind, bool everything,
                       const std::string& from, const std::string& to, const std::string& prefix, std::size_t limit) {
    response refusal;
    const auto* table = global_table(store, refusal);
    if (!table) return refusal;
    std::vector<std::pair<std::string, std::string>> raw;
    std::optional<std::string_view> start;
    if (kind == scan::prefix)
      start = prefix;
    else if (!everything)
      start = from;
    table->scan(start, [&](std::string_view k, std::string_view v) {
      if (kind == scan::prefix && !k.starts_with(prefix)) return false;
      if (kind == scan::range && !everything && k > std::string_view(to)) return false;
      raw.emplace_back(k, v);
      return raw.size() < limit;
    });
    std::vector<store_entry> entries;
    entries.reserve(raw.size());
    for (const auto& [k, v] : raw)
      entries.push_back(render(spec.codec.get(), k, v, kafka::murmur2_partition(k, table->partitions())));
    return stamp(scan_answer(store, std::move(entries), limit, {}));
  }

  struct parsed_key {
    std::string bytes;
    std::string error;
    explicit operator bool() const { return error.empty(); }
  };

  /// The spec of store `store`, or the refusal: 404 when the topology has no store of the
  /// name, 400 when it is not of the `kind` the path reads.
  std::optional<response> find(const std::string& store, const detail::store_spec*& spec, store_kind kind) {
    spec = detail::topology_access::find_store(topo_, store);
    static constexpr const char* kind_names[] = {"key-value store", "window store", "store"};
    if (!spec)
      return response::error(status::not_found, "no " + std::string(kind_names[static_cast<int>(kind)]) + " '" + store +
                                                    "' in this topology");
    if (kind == store_kind::window && !spec->make_store)
      return response::error(status::bad_request, "store '" + store + "' is a key-value " +
                                                      (spec->global ? "store (a global table)" : "store") +
                                                      ": read its keys with /stores/" + store + "/keys/{key}");
    if (kind == store_kind::key_value && spec->make_store)
      return response::error(status::bad_request,
                             "store '" + store +
                                 "' is not a key-value store (a window, queue or ranked-index store): read a window "
                                 "store's windows with /stores/" +
                                 store +
                                 "/keys/{key}/windows; read the other kinds in C++ with app::queries().run<H> and "
                                 "their kind's handle, or through an endpoint the topology adds "
                                 "(streams_builder::add_endpoint)");
    return std::nullopt;
  }

  static parsed_key key_bytes(const detail::store_spec* spec, const std::string& store, std::string_view text) {
    if (!spec->codec) return {std::string(text), {}};
    if (auto b = spec->codec->key_from_text(text)) return {std::move(*b), {}};
    if (spec->codec->key_kind == "other")
      return {{}, "store '" + store + "' has keys that cannot be written in a URL (not a string or an integer)"};
    return {{},
            "'" + std::string(text) + "' is not a valid " + spec->codec->key_kind + " key of store '" + store + "'"};
  }

  response stamp(response r) const { return forwarding_->stamp(std::move(r)); }

  response forward_or_refuse(const request& req, const std::string& store, std::int32_t partition) {
    return forwarding_->forward(req, store, partition);
  }

  /// Asks the owners of `missing` partitions for the same scan and passes each element of
  /// their answer's `array` that belongs to those partitions to `take(element, partition)`
  /// (false: malformed); sets `*more` when an answer says more follow. A refusal when some
  /// partition has no reachable owner or an owner answers malformed JSON.
  template <class Take>
  std::optional<response> gather_remote(const request& req, const std::string& store,
                                        const std::vector<std::int32_t>& missing, const char* array, Take&& take,
                                        bool* more = nullptr) {
    auto owners = owners_of(store, missing);
    if (auto* refusal = std::get_if<response>(&owners)) return std::move(*refusal);
    for (const auto& [owner, parts] : std::get<partitions_by_owner>(owners)) {
      auto r = forward_get(owner, std::string(req.target()), forwarding_->forward_headers(), std::chrono::seconds(3));
      if (r.status != 200) return r;
      auto j = nlohmann::json::parse(r.body, nullptr, false);
      // (owner is a structured binding: clang 14 cannot capture one in a lambda.)
      const std::string malformed_text = "instance " + owner + " answered the scan with malformed JSON";
      const auto malformed = [&malformed_text] { return response::error(status::bad_gateway, malformed_text); };
      if (j.is_discarded() || !j.contains(array) || !j[array].is_array() || !j.contains("partitions_not_local"))
        return malformed();
      for (auto& e : j[array]) {
        const auto p = e.is_object() ? e.value("partition", -1) : -1;
        if (std::find(parts.begin(), parts.end(), p) == parts.end()) continue;
        if (!e.contains("key") || !e.contains("value") || !take(e, p)) return malformed();
      }
      if (more && j.value("more", false)) *more = true;
      for (const nlohmann::json& elsewhere : j["partitions_not_local"]) {
        const auto p = elsewhere.is_number_integer() ? elsewhere.get<std::int32_t>() : -1;
        if (std::find(parts.begin(), parts.end(), p) != parts.end())
          return store_access::refusal(store_access::outcome::unavailable, store, p);
      }
    }
    return std::nullopt;
  }

  /// The other instances that own the `missing` partitions of `store`, each with its
  /// partitions; or the refusal when a partition has no owner but this instance (it is
  /// moving) or the owners cannot be known.
  using partitions_by_owner = std::map<std::string, std::vector<std::int32_t>>;
  std::variant<partitions_by_owner, response> owners_of(const std::string& store,
                                                        const std::vector<std::int32_t>& missing) {
    auto* directory = forwarding_->directory();
    if (!directory) return store_access::refusal(store_access::outcome::unavailable, store, missing.front());
    partitions_by_owner by_owner;
    try {
      auto view = directory->view();
      for (auto p : missing) {
        auto owner = view->owner(store, p);
        if (!owner || *owner == forwarding_->self())
          return store_access::refusal(store_access::outcome::unavailable, store, p);
        by_owner[*owner].push_back(p);
      }
    } catch (const std::exception& e) {
      return forwarding_->owners_unknown("which instances own the store", e);
    }
    return by_owner;
  }

  /// The group as described now for a query about `store`, or the answer refusing it (stamped):
  /// 503 when this instance has no view of its group, or (with Retry-After) when the
  /// coordinator cannot be asked (a broker outage, a group coordinator moving).
  std::variant<std::shared_ptr<const group_view>, response> described(std::string_view store) const {
    auto* directory = forwarding_->directory();
    if (!directory) return stamp(store_access::refusal(store_access::outcome::unavailable, store, -1));
    try {
      return directory->view(true);
    } catch (const std::exception& e) {
      return forwarding_->owners_unknown("the application's instances", e);
    }
  }

 public:
  response metadata() {
    auto group = described("-");
    if (auto* refusal = std::get_if<response>(&group)) return std::move(*refusal);
    const auto& v = std::get<std::shared_ptr<const group_view>>(group);
    nlohmann::json j;
    j["group_state"] = v->state;
    j["instances"] = nlohmann::json::array();
    for (const auto& i : v->instances) {
      nlohmann::json inst;
      inst["application_server"] = i.application_server;
      inst["partitions"] = nlohmann::json::array();
      for (const auto& tp : i.partitions)
        inst["partitions"].push_back({{"topic", tp.topic}, {"partition", tp.partition}});
      inst["stores"] = nlohmann::json::object();
      for (const auto& [store, parts] : i.stores) inst["stores"][store] = parts;
      j["instances"].push_back(std::move(inst));
    }
    return stamp(response::json(status::ok, j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
  }

  response key_metadata(const request& req) {
    auto resolved = resolve_key(req, store_kind::any);
    if (auto* refusal = std::get_if<response>(&resolved)) return std::move(*refusal);
    const auto& k = std::get<resolved_key>(resolved);
    nlohmann::json j;
    j["store"] = k.store;
    j["key"] = nlohmann::json::parse(k.spec->codec ? k.spec->codec->key_to_json(k.bytes) : bytes_as_json(k.bytes));
    j["partition"] = k.partition;
    if (k.global) {
      // Every instance holds a global table whole: the one asked owns every key.
      j["instance"] = forwarding_->self();
      j["global"] = true;
    } else {
      auto group = described(k.store);
      if (auto* refusal = std::get_if<response>(&group)) return std::move(*refusal);
      const auto& v = std::get<std::shared_ptr<const group_view>>(group);
      auto owner = v->owner(k.store, k.partition);
      j["instance"] = owner ? nlohmann::json(*owner) : nlohmann::json(nullptr);
      j["group_state"] = v->state;
    }
    return stamp(response::json(status::ok, j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
  }

 private:
  store_access& stores_;
  const topology& topo_;
  std::shared_ptr<const owner_forwarding> forwarding_;
  const global_store_slot& globals_;
};

}  // namespace

void add_store_endpoints(router& routes, store_access& stores, const topology& topo,
                         std::shared_ptr<const owner_forwarding> forwarding, const global_store_slot& globals) {
  auto e = std::make_shared<store_endpoints>(stores, topo, std::move(forwarding), globals);
  routes.add("/metadata", [e](const request&) { return e->metadata(); });
  routes.add("/metadata/stores/{store}/keys/{key}", [e](const request& r) { return e->key_metadata(r); });
  routes.add("/stores/{store}/keys/{key}", [e](const request& r) { return e->key(r); });
  routes.add("/stores/{store}/keys/{key}/windows", [e](const request& r) { return e->windows(r); });
  routes.add("/stores/{store}/windows", [e](const request& r) { return e->all_windows(r); });
  routes.add("/stores/{store}/range", [e](const request& r) { return e->scan_all(r, store_endpoints::scan::range); });
  routes.add("/stores/{store}/prefix/{prefix}",
             [e](const request& r) { return e->scan_all(r, store_endpoints::scan::prefix); });
}

}  // namespace sluice::http
