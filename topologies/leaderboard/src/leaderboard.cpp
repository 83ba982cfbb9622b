// The leaderboard's logic on bytes: input validation, versions and tombstones, each user's
// efforts per board (for the next-best fallback), the boards in a ranked index, update
// records, the read-only view, its queries from an app and the HTTP endpoints. Store layouts are in the README
// ("Storage").
#include "sluice/topologies/leaderboard.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <limits>
#include <set>

#include "sluice/error.hpp"
#include "sluice/job_topics.hpp"
#include "sluice/http.hpp"
#include "sluice/serde/json.hpp"

namespace sluice::topologies {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

constexpr std::chrono::milliseconds min_retention{1000};
constexpr std::chrono::milliseconds max_retention{365LL * 24 * 3600 * 1000};
constexpr std::size_t max_json_depth = 32;

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_part(std::string& out, std::string_view part) {
  put_varint(out, part.size());
  out.append(part);
}

void put_ordered64(std::string& out, std::int64_t v) {
  auto u = static_cast<std::uint64_t>(v) ^ (std::uint64_t{1} << 63);
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>((u >> shift) & 0xff));
}

std::int64_t get_ordered64(std::string_view in, std::size_t at) {
  std::uint64_t u = 0;
  for (std::size_t i = 0; i < 8; ++i) u = (u << 8) | static_cast<unsigned char>(in[at + i]);
  return static_cast<std::int64_t>(u ^ (std::uint64_t{1} << 63));
}

[[noreturn]] void malformed(const std::string& why) { throw error(errc::processing, "leaderboard: " + why); }

/// Refuses JSON nested deeper than max_json_depth before the parser recurses into it.
void check_depth(std::string_view text) {
  if (json_nesting_depth(text, max_json_depth) > max_json_depth)
    malformed("the value nests deeper than " + std::to_string(max_json_depth) + " levels");
}

/// One input event, validated.
struct effort_event {
  std::string effort_id, segment_id, user_id;
  std::int64_t elapsed_ms = 0, started_at_ms = 0, version = 0;
  bool deleted = false;
  std::vector<std::string> boards;  // sorted, unique; empty when deleted
};

/// The longest id or attribute value taken, in bytes. An update record carries the segment
/// id, the board, the user id and the effort id twice: at this size each, JSON-escaped
/// (at most 6 bytes per byte), an update stays under 500 kB, within Kafka's default message
/// limit of 1 MB. Without the bound, an event whose update is too large to send had its
/// change applied to the boards while the record went to the dead-letter topic, and the
/// updates topic missed that change.
constexpr std::size_t max_id_bytes = 16384;

void check_id_size(std::string_view what, std::string_view text) {
  if (text.size() > max_id_bytes)
    malformed(std::string(what) + " is " + std::to_string(text.size()) + " bytes; at most " +
              std::to_string(max_id_bytes) + " are taken (an update record carries it)");
}

std::string required_string(const json& doc, const char* field) {
  auto it = doc.find(field);
  if (it == doc.end()) malformed(std::string("required field '") + field + "' is missing");
  if (!it->is_string()) malformed(std::string("field '") + field + "' must be a string, not " + it->type_name());
  auto s = it->get<std::string>();
  if (s.empty()) malformed(std::string("field '") + field + "' must not be empty");
  check_id_size(std::string("field '") + field + "'", s);
  return s;
}

std::int64_t required_integer(const json& doc, const char* field) {
  auto it = doc.find(field);
  if (it == doc.end()) malformed(std::string("required field '") + field + "' is missing");
  if (it->is_number_unsigned()) {
    auto u = it->get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(INT64_MAX)) malformed(std::string("field '") + field + "' is too large");
    return static_cast<std::int64_t>(u);
  }
  if (!it->is_number_integer())
    malformed(std::string("field '") + field + "' must be an integer, not " + it->type_name());
  return it->get<std::int64_t>();
}

effort_event parse_event(std::optional<std::string_view> key, std::optional<std::string_view> value,
                         const leaderboard_options& options) {
  if (!key) malformed("the record key is null; it must be the segment id");
  if (!value) malformed("the record value is null; it must be an effort JSON object");
  check_depth(*value);
  auto doc = json::parse(value->begin(), value->end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) malformed("the record value is not JSON");
  if (!doc.is_object()) malformed("the record value is not a JSON object");
  effort_event e;
  e.effort_id = required_string(doc, "effort_id");
  e.segment_id = required_string(doc, "segment_id");
  e.user_id = required_string(doc, "user_id");
  e.elapsed_ms = required_integer(doc, "elapsed_ms");
  e.started_at_ms = required_integer(doc, "started_at_ms");
  e.version = required_integer(doc, "version");
  if (e.elapsed_ms < 0) malformed("elapsed_ms " + std::to_string(e.elapsed_ms) + " is negative");
  if (auto it = doc.find("deleted"); it != doc.end() && !it->is_null()) {
    if (!it->is_boolean()) malformed(std::string("field 'deleted' must be a boolean, not ") + it->type_name());
    e.deleted = it->get<bool>();
  }
  if (e.segment_id != *key)
    malformed("segment_id '" + e.segment_id + "' differs from the record key '" + std::string(*key) +
              "'; produce efforts keyed by their segment id");
  const json* attributes = nullptr;
  if (auto it = doc.find("attributes"); it != doc.end() && !it->is_null()) {
    if (!it->is_object()) malformed(std::string("field 'attributes' must be an object, not ") + it->type_name());
    attributes = &*it;
  }
  if (e.deleted) return e;
  std::set<std::string> boards{std::string(overall_board)};
  if (attributes != nullptr) {
    for (const auto& name : options.boards) {
      auto it = attributes->find(name);
      if (it == attributes->end() || it->is_null()) continue;
      if (it->is_object() || it->is_array())
        malformed("attribute '" + name + "' must be a string, a number or a boolean, not " + it->type_name());
      std::string board = name + "=" + (it->is_string() ? it->get<std::string>() : it->dump());
      check_id_size("attribute '" + name + "'", board);
      boards.insert(std::move(board));
    }
  }
  e.boards.assign(boards.begin(), boards.end());
  return e;
}

/// What the efforts store keeps per live effort, and the tombstones store per deleted one.
struct stored_effort {
  std::int64_t version = 0;
  std::string user_id, segment_id;
  std::int64_t elapsed_ms = 0, started_at_ms = 0;
  std::vector<std::string> boards;
};

std::string encode_stored(const effort_event& e) {
  json j = {{"v", e.version}, {"u", e.user_id}, {"s", e.segment_id}};
  if (!e.deleted) {
    j["e"] = e.elapsed_ms;
    j["t"] = e.started_at_ms;
    j["b"] = e.boards;
  }
  return j.dump();
}

stored_effort decode_stored(const std::string& text) {
  auto j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("v") || !j.contains("u") || !j.contains("s"))
    throw error(errc::state, "leaderboard: a stored effort is corrupt: " + text);
  stored_effort s;
  s.version = j["v"].get<std::int64_t>();
  s.user_id = j["u"].get<std::string>();
  s.segment_id = j["s"].get<std::string>();
  if (j.contains("e")) {
    s.elapsed_ms = j["e"].get<std::int64_t>();
    s.started_at_ms = j["t"].get<std::int64_t>();
    s.boards = j["b"].get<std::vector<std::string>>();
  }
  return s;
}

/// The user_efforts key prefix of (segment, board, user); the score follows it.
std::string user_efforts_prefix(std::string_view segment, std::string_view board, std::string_view user) {
  std::string out;
  put_part(out, segment);
  put_part(out, board);
  put_part(out, user);
  return out;
}

ordered_json entry_json(const std::optional<board_entry>& e) {
  if (!e) return nullptr;
  ordered_json j;
  j["effort_id"] = e->effort_id;
  j["elapsed_ms"] = e->elapsed_ms;
  j["started_at_ms"] = e->started_at_ms;
  j["rank"] = e->rank;
  return j;
}

}  // namespace

void validate(const leaderboard_options& o) {
  if (o.tombstone_retention < min_retention || o.tombstone_retention > max_retention)
    throw error(errc::invalid_config, "leaderboard: tombstone retention " +
                                          std::to_string(o.tombstone_retention.count()) +
                                          " ms is out of range; allowed 1000 ms .. 31536000000 ms (365 days)");
  for (const auto& b : o.boards) {
    if (b.empty()) throw error(errc::invalid_config, "leaderboard: board attribute names must not be empty");
    if (b.find('=') != std::string::npos)
      throw error(errc::invalid_config,
                  "leaderboard: board attribute '" + b +
                      "' contains '='; name the attribute only (boards are named <attribute>=<value>)");
  }
  for (const auto* s : {&o.efforts_store, &o.tombstones_store, &o.user_efforts_store, &o.board_store})
    if (s->empty()) throw error(errc::invalid_config, "leaderboard: store names must not be empty");
}

void add_leaderboard_stores(streams_builder& builder, const leaderboard_options& o) {
  validate(o);
  builder.add_state_store({.name = o.efforts_store});
  builder.add_state_store({.name = o.tombstones_store, .ttl = o.tombstone_retention});
  builder.add_state_store({.name = o.user_efforts_store});
  // Its in-memory lists are charged to the process's share of state.memory.budget.bytes for
  // in-memory indexes (state/README.md, "Memory budget").
  builder.add_state_store(ranked_index_materialized(o.board_store));
}

topology leaderboard_job_topology(const std::string& input, const std::string& updates,
                                  const leaderboard_options& options) {
  check_job_topics({{"input.topic", input}}, {{"updates.topic", updates}});
  streams_builder b;
  using bytes = std::optional<std::string>;
  auto out = apply_leaderboard(b, b.stream<bytes, bytes>(input), options);
  if (!updates.empty()) out.to(updates);
  add_leaderboard_endpoints(b, options);
  return b.build();
}

namespace leaderboard_detail {

std::string index_key(std::string_view segment, std::string_view board) {
  std::string out;
  put_part(out, segment);
  out.append(board);
  return out;
}

std::string elapsed_prefix(std::int64_t elapsed_ms) {
  std::string out;
  put_ordered64(out, elapsed_ms);
  return out;
}

std::string encode_score(std::int64_t elapsed_ms, std::int64_t started_at_ms, std::string_view effort_id) {
  std::string out;
  out.reserve(16 + effort_id.size());
  put_ordered64(out, elapsed_ms);
  put_ordered64(out, started_at_ms);
  out.append(effort_id);
  return out;
}

board_entry decode_entry(std::string_view user, std::string_view score, std::uint64_t rank) {
  if (score.size() < 16) throw error(errc::state, "leaderboard: a stored board score is corrupt");
  return {std::string(user), std::string(score.substr(16)), get_ordered64(score, 0), get_ordered64(score, 8), rank};
}

engine::engine(const leaderboard_options& options) : options_(options) {}

void engine::bind_metrics(metrics_registry& m, std::string_view task_id) {
  std::string labels = "task=\"" + std::string(task_id) + "\"";
  applied_ = &m.get_counter("sluice_leaderboard_applied_total", labels);
  stale_ = &m.get_counter("sluice_leaderboard_stale_total", labels);
  updates_ = &m.get_counter("sluice_leaderboard_updates_total", labels);
  m.set_help("sluice_leaderboard_applied_total", "Effort events applied to the boards.");
  m.set_help("sluice_leaderboard_stale_total", "Effort events ignored: their version is not newer than one applied.");
  m.set_help("sluice_leaderboard_updates_total", "Update records: changes of a user's entry on a board.");
}

void engine::apply(std::optional<std::string_view> key, std::optional<std::string_view> value,
                   std::vector<update>& out) {
  out.clear();
  const effort_event e = parse_event(key, value, options_);

  std::optional<stored_effort> live;
  std::optional<stored_effort> tomb;
  if (auto text = efforts_->get(e.effort_id))
    live = decode_stored(*text);
  else if (auto t = tombstones_->get(e.effort_id))
    tomb = decode_stored(*t);
  const stored_effort* known = live ? &*live : tomb ? &*tomb : nullptr;
  if (known != nullptr && e.version <= known->version) {
    stale_->add();
    return;
  }
  if (known != nullptr && (known->user_id != e.user_id || known->segment_id != e.segment_id))
    malformed("effort '" + e.effort_id + "' belongs to user '" + known->user_id + "' on segment '" + known->segment_id +
              "'; an update may not change user_id or segment_id (got user '" + e.user_id + "', segment '" +
              e.segment_id + "')");

  // Everything is validated: from here on, writes.
  const std::string old_score = live ? encode_score(live->elapsed_ms, live->started_at_ms, e.effort_id) : "";
  const std::string new_score = e.deleted ? "" : encode_score(e.elapsed_ms, e.started_at_ms, e.effort_id);
  const std::vector<std::string> no_boards;
  const auto& old_boards = live ? live->boards : no_boards;
  std::vector<std::string> affected;
  std::set_union(old_boards.begin(), old_boards.end(), e.boards.begin(), e.boards.end(), std::back_inserter(affected));

  for (const auto& board : affected) {
    const std::string prefix = user_efforts_prefix(e.segment_id, board, e.user_id);
    if (std::binary_search(old_boards.begin(), old_boards.end(), board)) user_efforts_->remove(prefix + old_score);
    if (std::binary_search(e.boards.begin(), e.boards.end(), board)) user_efforts_->put(prefix + new_score, "");

    std::optional<std::string> best;
    {
      auto it = user_efforts_->prefix(prefix);
      if (it.valid()) best = it.key().substr(prefix.size());
    }
    const std::string index = index_key(e.segment_id, board);
    auto current = boards_->score(index, e.user_id);
    if (current == best) continue;

    std::optional<board_entry> previous_entry, current_entry;
    auto rank_of = [&](const std::string& score) { return boards_->count_below(index, score.substr(0, 8)) + 1; };
    if (current) previous_entry = decode_entry(e.user_id, *current, rank_of(*current));
    if (best) {
      boards_->upsert(index, e.user_id, *best);
      current_entry = decode_entry(e.user_id, *best, rank_of(*best));
    } else {
      boards_->remove(index, e.user_id);
    }
    ordered_json u;
    u["segment_id"] = e.segment_id;
    u["board"] = board;
    u["user_id"] = e.user_id;
    u["previous"] = entry_json(previous_entry);
    u["current"] = entry_json(current_entry);
    out.push_back({e.segment_id, u.dump(-1, ' ', false, ordered_json::error_handler_t::replace)});
    updates_->add();
  }

  if (e.deleted) {
    if (live) efforts_->remove(e.effort_id);
    tombstones_->put(e.effort_id, encode_stored(e));
  } else {
    efforts_->put(e.effort_id, encode_stored(e));
    if (tomb) tombstones_->remove(e.effort_id);
  }
  applied_->add();
}

}  // namespace leaderboard_detail

std::uint64_t leaderboard_view::rank_of(const std::string& index, std::string_view score) {
  return index_->count_below(index, score.substr(0, 8)) + 1;
}

board_page leaderboard_view::top(std::string_view segment, std::string_view board, std::uint64_t offset,
                                 std::uint64_t limit) {
  const std::string index = leaderboard_detail::index_key(segment, board);
  board_page page;
  page.total = index_->count(index);
  auto members = index_->range(index, offset, limit);
  // One rank query for the first entry; after it, an entry's rank is the previous one's when
  // their elapsed times tie, else its position + 1 (everything before it is strictly faster).
  std::int64_t previous_elapsed = 0;
  std::uint64_t rank = 0;
  for (std::size_t i = 0; i < members.size(); ++i) {
    auto entry = leaderboard_detail::decode_entry(members[i].member, members[i].score, 0);
    if (i == 0)
      rank = rank_of(index, members[i].score);
    else if (entry.elapsed_ms != previous_elapsed)
      rank = members[i].position + 1;
    entry.rank = rank;
    previous_elapsed = entry.elapsed_ms;
    page.entries.push_back(std::move(entry));
  }
  return page;
}

std::optional<board_entry> leaderboard_view::entry(std::string_view segment, std::string_view board,
                                                   std::string_view user) {
  const std::string index = leaderboard_detail::index_key(segment, board);
  auto score = index_->score(index, user);
  if (!score) return std::nullopt;
  return leaderboard_detail::decode_entry(user, *score, rank_of(index, *score));
}

std::vector<board_entry> leaderboard_view::around(std::string_view segment, std::string_view board,
                                                  std::string_view user, std::uint64_t n) {
  const std::string index = leaderboard_detail::index_key(segment, board);
  auto p = index_->position(index, user);
  if (!p) return {};
  const std::uint64_t from = *p >= n ? *p - n : 0;
  return top(segment, board, from, *p + n + 1 - from).entries;
}

std::uint64_t leaderboard_view::size(std::string_view segment, std::string_view board) {
  return index_->count(leaderboard_detail::index_key(segment, board));
}

namespace {

void check_page_limit(std::uint64_t value, const char* what) {
  if (value > max_page_limit)
    throw error(errc::invalid_config, std::string("leaderboard: ") + what + " " + std::to_string(value) +
                                          " is above the maximum " + std::to_string(max_page_limit) +
                                          "; ask for several pages with offset instead");
}

}  // namespace

std::int32_t leaderboard_queries::partition_of(std::string_view segment) const {
  auto p = queries_->partition_of(store_, segment);
  if (!p)
    throw query_error(
        query_outcome::unavailable,
        "the partitions of store '" + store_ +
            "' are not known: the app has not started yet, or no "
            "such store is in the topology (leaderboard_options::board_store names it); retry once it runs");
  return *p;
}

board_page leaderboard_queries::top(std::string_view segment, std::string_view board, std::uint64_t offset,
                                    std::uint64_t limit) const {
  check_page_limit(limit, "limit");
  return read(segment, [&](leaderboard_view& v) { return v.top(segment, board, offset, limit); });
}

std::optional<board_entry> leaderboard_queries::entry(std::string_view segment, std::string_view board,
                                                      std::string_view user) const {
  return read(segment, [&](leaderboard_view& v) { return v.entry(segment, board, user); });
}

std::vector<board_entry> leaderboard_queries::around(std::string_view segment, std::string_view board,
                                                     std::string_view user, std::uint64_t n) const {
  check_page_limit(n, "n");
  return read(segment, [&](leaderboard_view& v) { return v.around(segment, board, user, n); });
}

std::uint64_t leaderboard_queries::size(std::string_view segment, std::string_view board) const {
  return read(segment, [&](leaderboard_view& v) { return v.size(segment, board); });
}

// ---- HTTP endpoints -----------------------------------------------------------------------

namespace {

ordered_json http_entry(const board_entry& e) {
  ordered_json j;
  j["rank"] = e.rank;
  j["user_id"] = e.user_id;
  j["effort_id"] = e.effort_id;
  j["elapsed_ms"] = e.elapsed_ms;
  j["started_at_ms"] = e.started_at_ms;
  return j;
}

std::string dump(const ordered_json& j) { return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace); }

/// Runs `fn(view)` on the task holding the request's segment, on committed state. nullopt when
/// it ran; otherwise the answer to send: the owner's (when another instance runs the task) or
/// a refusal (503 + Retry-After while the partition restores or moves).
template <class F>
std::optional<http::response> on_owner(const http::request& req, const std::string& store, F&& fn) {
  auto& stores = req.stores();
  const auto segment = req.path_param("segment");
  auto p = stores.partition_of(store, segment);
  if (!p) return http::store_access::refusal(query_outcome::unavailable, store, -1);
  std::string failure;
  auto o = stores.run<ranked_index_store>(
      store, *p,
      [&](ranked_index_store& s) {
        leaderboard_view view(s.index());
        fn(view);
      },
      interactive_queries::default_timeout, &failure);
  if (o == query_outcome::done) return std::nullopt;
  if (o == query_outcome::not_local) return stores.forward(req, store, *p);
  return http::store_access::refusal(o, store, *p, failure);
}

ordered_json board_head(std::string_view segment, std::string_view board, std::uint64_t total) {
  ordered_json j;
  j["segment_id"] = segment;
  j["board"] = board;
  j["total"] = total;
  return j;
}

http::response not_on_board(std::string_view segment, std::string_view board, std::string_view user,
                            std::uint64_t total) {
  return http::response::error(http::status::not_found,
                               total == 0
                                   ? "segment '" + std::string(segment) + "' has no board '" + std::string(board) +
                                         "' (an unknown segment or board, or no live effort on it)"
                                   : "user '" + std::string(user) + "' is not on board '" + std::string(board) +
                                         "' of segment '" + std::string(segment) + "'");
}

}  // namespace

void add_leaderboard_endpoints(streams_builder& builder, const leaderboard_options& options) {
  validate(options);
  const std::string store = options.board_store;
  builder.add_endpoint("/leaderboards/{segment}/{board}", [store](const http::request& req) {
    http::response refusal;
    auto offset = req.whole_number_query("offset", 0, 0, std::numeric_limits<std::int64_t>::max(), refusal);
    if (!offset) return refusal;
    auto limit =
        req.whole_number_query("limit", 10, 0, max_page_limit, refusal, "; ask for several pages with offset instead");
    if (!limit) return refusal;
    const auto segment = req.path_param("segment"), board = req.path_param("board");
    board_page page;
    if (auto r = on_owner(req, store, [&](leaderboard_view& v) { page = v.top(segment, board, *offset, *limit); }))
      return std::move(*r);
    auto j = board_head(segment, board, page.total);
    j["entries"] = ordered_json::array();
    for (const auto& e : page.entries) j["entries"].push_back(http_entry(e));
    return http::response::json(http::status::ok, dump(j));
  });
  builder.add_endpoint("/leaderboards/{segment}/{board}/users/{user}", [store](const http::request& req) {
    const auto segment = req.path_param("segment"), board = req.path_param("board"), user = req.path_param("user");
    std::optional<board_entry> entry;
    std::uint64_t total = 0;
    if (auto r = on_owner(req, store, [&](leaderboard_view& v) {
          entry = v.entry(segment, board, user);
          total = v.size(segment, board);
        }))
      return std::move(*r);
    if (!entry) return not_on_board(segment, board, user, total);
    auto j = board_head(segment, board, total);
    j["entry"] = http_entry(*entry);
    return http::response::json(http::status::ok, dump(j));
  });
  builder.add_endpoint("/leaderboards/{segment}/{board}/users/{user}/around", [store](const http::request& req) {
    http::response refusal;
    auto n = req.whole_number_query("n", 5, 0, max_page_limit, refusal);
    if (!n) return refusal;
    const auto segment = req.path_param("segment"), board = req.path_param("board"), user = req.path_param("user");
    std::vector<board_entry> entries;
    std::uint64_t total = 0;
    if (auto r = on_owner(req, store, [&](leaderboard_view& v) {
          entries = v.around(segment, board, user, *n);
          total = v.size(segment, board);
        }))
      return std::move(*r);
    if (entries.empty()) return not_on_board(segment, board, user, total);
    auto j = board_head(segment, board, total);
    j["entries"] = ordered_json::array();
    for (const auto& e : entries) j["entries"].push_back(http_entry(e));
    return http::response::json(http::status::ok, dump(j));
  });
}

}  // namespace sluice::topologies
