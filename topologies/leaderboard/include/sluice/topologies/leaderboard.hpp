// sluice::topologies::leaderboard: per (segment, board, user) the user's best effort, with
// competition ranks, top-N pages and neighbours from a ranked index, out of effort events
// that arrive out of order, duplicated or deleted. See topologies/leaderboard/README.md.
//
// Input: record key = segment id, value = JSON
//   {"effort_id","segment_id","user_id","elapsed_ms","started_at_ms","version","deleted"?,"attributes"?}
// An effort is on the board `overall` and on `<attribute>=<value>` for each attribute named in
// leaderboard_options::boards that it carries. Per effort_id, only a version greater than every
// version applied so far counts (else it is counted as stale); a deletion remembers its
// version for tombstone_retention. A user's entry on a board is their live effort there that
// is first by (elapsed_ms, started_at_ms, effort_id); rank = 1 + users whose best elapsed_ms
// is strictly smaller. Each change of an entry produces one record on the updates outlet.
//
//   sluice::streams_builder b;
//   sluice::topologies::leaderboard_options o{.boards = {"gender", "age_group"}};
//   auto updates = sluice::topologies::apply_leaderboard(b, b.stream<bytes, bytes>("efforts"), o);
//   updates.to("leaderboard-updates");
//
// Stores (all RocksDB with changelogs): o.efforts_store (live efforts by effort_id),
// o.tombstones_store (deleted efforts' versions, TTL = tombstone_retention),
// o.user_efforts_store (every live effort per (segment, board, user), ordered, for the
// next-best fallback) and o.board_store (the ranked index: per (segment, board) the users
// by their best effort).
//
// Queries: leaderboard_queries answers for the segments this instance owns, from a running app
// (app.queries()) or a TopologyTestDriver (driver.queries()), on committed state.
//
// Threading: one processor per task, called from the task's thread only. leaderboard_view
// reads one task's ranked index and is used from that task's thread (leaderboard_queries runs
// it there); leaderboard_queries is safe from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/builder.hpp"
#include "sluice/processor.hpp"
#include "sluice/queries.hpp"
#include "sluice/ranked_index_store.hpp"
#include "sluice/state/ranked_index.hpp"

namespace sluice::topologies {

/// The board every effort is on.
inline constexpr std::string_view overall_board = "overall";

/// Most entries a page answers (`limit` of top), and most neighbours on each side (`n` of
/// around); more is refused (page with offset instead).
inline constexpr std::uint64_t max_page_limit = 1000;

struct leaderboard_options {
  /// Attributes with a board per value (`<attribute>=<value>`), besides `overall`.
  /// Default: none.
  std::vector<std::string> boards{};

  /// How long a deleted effort's version is remembered, so that a late older update cannot
  /// bring it back. Must be within [1 s, 365 days].
  /// Default: 7 days.
  std::chrono::milliseconds tombstone_retention{7LL * 24 * 3600 * 1000};

  /// Store names. Defaults: "leaderboard-efforts", "leaderboard-tombstones",
  /// "leaderboard-user-efforts", "leaderboard-boards".
  std::string efforts_store = "leaderboard-efforts";
  std::string tombstones_store = "leaderboard-tombstones";
  std::string user_efforts_store = "leaderboard-user-efforts";
  std::string board_store = "leaderboard-boards";
};

/// Throws sluice::error(errc::invalid_config) naming the bad value.
void validate(const leaderboard_options& options);

/// Declares the four stores. Validates the options first.
void add_leaderboard_stores(streams_builder& builder, const leaderboard_options& options);

/// A user's entry on a board.
struct board_entry {
  std::string user_id;
  std::string effort_id;
  std::int64_t elapsed_ms = 0;
  std::int64_t started_at_ms = 0;
  std::uint64_t rank = 0;  ///< competition rank, 1-based
  friend bool operator==(const board_entry&, const board_entry&) = default;
};

/// A page of a board.
struct board_page {
  std::uint64_t total = 0;  ///< users on the board
  std::vector<board_entry> entries;
};

namespace leaderboard_detail {

/// The ranked-index key of (segment, board): varint(segment length), segment, board.
std::string index_key(std::string_view segment, std::string_view board);
/// The index score of an effort: elapsed and start as 8-byte big-endian with the sign bit
/// flipped (so bytewise order is numeric order), then the effort id.
std::string encode_score(std::int64_t elapsed_ms, std::int64_t started_at_ms, std::string_view effort_id);
/// The 8-byte primary part of a score for elapsed_ms (competition ranks compare only it).
std::string elapsed_prefix(std::int64_t elapsed_ms);
/// The entry a score and user stand for, with `rank`.
board_entry decode_entry(std::string_view user, std::string_view score, std::uint64_t rank);

/// The leaderboard's logic on bytes. One per task.
class engine {
 public:
  explicit engine(const leaderboard_options& options);

  template <class Ctx>
  void bind(Ctx& ctx) {
    efforts_.emplace(ctx.template store<std::string, std::string>(options_.efforts_store));
    tombstones_.emplace(ctx.template store<std::string, std::string>(options_.tombstones_store));
    user_efforts_.emplace(ctx.template store<std::string, std::string>(options_.user_efforts_store));
    boards_.emplace(ctx.template state_store<ranked_index_store>(options_.board_store));
    bind_metrics(ctx.metrics(), ctx.task_id());
  }

  /// One update record (JSON) for the updates outlet.
  struct update {
    std::string segment;
    std::string json;
  };

  /// Applies one input record. Throws sluice::error(errc::processing) for a malformed one,
  /// before any store is written. Fills `out` with the update records (cleared first).
  void apply(std::optional<std::string_view> key, std::optional<std::string_view> value, std::vector<update>& out);

 private:
  void bind_metrics(metrics_registry& m, std::string_view task_id);

  leaderboard_options options_;
  std::optional<key_value_store<std::string, std::string>> efforts_;
  std::optional<key_value_store<std::string, std::string>> tombstones_;
  std::optional<key_value_store<std::string, std::string>> user_efforts_;
  std::optional<ranked_index_store> boards_;
  counter* applied_ = nullptr;
  counter* stale_ = nullptr;
  counter* updates_ = nullptr;
};

template <class K, class V>
class leaderboard_processor final : public processor<K, V, std::string, std::string> {
 public:
  explicit leaderboard_processor(const leaderboard_options& options) : engine_(options) {}

  void init(typename processor<K, V, std::string, std::string>::context_type& ctx) override {
    processor<K, V, std::string, std::string>::init(ctx);
    engine_.bind(ctx);
  }

  void process(const record<K, V>& r) override {
    auto key = sluice::detail::encode_field<sluice::detail::topic_serde_t<K>, K>(r.key, key_buf_);
    auto value = sluice::detail::encode_field<sluice::detail::topic_serde_t<V>, V>(r.value, value_buf_);
    engine_.apply(key, value, updates_);
    for (auto& u : updates_)
      this->context().forward(
          record<std::string, std::string>{std::move(u.segment), std::move(u.json), r.timestamp, {}});
  }

 private:
  engine engine_;
  std::string key_buf_, value_buf_;
  std::vector<engine::update> updates_;
};

}  // namespace leaderboard_detail

/// The processor supplier for kstream<K, V>::process(supplier, <the four store names>).
/// Declare the stores with add_leaderboard_stores(b, o) first. Validates the options.
template <class K, class V>
auto leaderboard(leaderboard_options options) {
  validate(options);
  return [options] { return std::make_unique<leaderboard_detail::leaderboard_processor<K, V>>(options); };
}

/// Declares the stores, adds the leaderboard after `in` and returns the stream of update
/// records (key = segment id, value = the update JSON).
template <class K, class V>
kstream<std::string, std::string> apply_leaderboard(streams_builder& builder, const kstream<K, V>& in,
                                                    const leaderboard_options& options) {
  add_leaderboard_stores(builder, options);
  return in.process(leaderboard<K, V>(options), options.efforts_store, options.tombstones_store,
                    options.user_efforts_store, options.board_store);
}

/// The sluice-leaderboard job's topology: `input` (bytes) -> leaderboard -> `updates`
/// (none when empty), with the HTTP endpoints (add_leaderboard_endpoints). Throws
/// invalid_topology when `updates` is `input` (the job would read its updates as efforts;
/// sluice/job_topics.hpp).
topology leaderboard_job_topology(const std::string& input, const std::string& updates,
                                  const leaderboard_options& options);

/// Adds the leaderboard's read endpoints to the instance HTTP server (on when
/// application.server is set). Any instance answers for any segment: one that does not run the
/// segment's partition forwards the request once to the instance that does (the rule of the
/// /stores endpoints, http::store_access::forward).
///   GET /leaderboards/{segment}/{board}?offset=0&limit=10
///       -> 200
///       {"segment_id","board","total","entries":[{"rank","user_id","effort_id","elapsed_ms","started_at_ms"}...]}
///   GET /leaderboards/{segment}/{board}/users/{user}
///       -> 200 {"segment_id","board","total","entry":{...}}; 404 {"error"} when the user is not on
///          the board or the segment (board) is unknown
///   GET /leaderboards/{segment}/{board}/users/{user}/around?n=5
///       -> 200 {"segment_id","board","total","entries":[...]} (positions -n .. +n); 404 likewise
/// Path parts are percent-decoded (gender%3DF). limit and n above max_page_limit, or not
/// non-negative integers, answer 400; a partition restoring or moving 503 with Retry-After.
/// leaderboard_job_topology adds them; a topology built with apply_leaderboard calls this
/// itself (once per builder: the paths are fixed).
void add_leaderboard_endpoints(streams_builder& builder, const leaderboard_options& options);

/// Read-only queries of the boards held by one task's ranked index (the task that owns the
/// segment). Answers from committed state plus the task's own pending writes when used from
/// the task's thread; see the file comment for threading.
class leaderboard_view {
 public:
  explicit leaderboard_view(state::ranked_index& index) : index_(&index) {}

  /// Entries at ranks positions [offset, offset + limit), and the board's size.
  board_page top(std::string_view segment, std::string_view board, std::uint64_t offset, std::uint64_t limit);
  /// The user's entry, or nullopt if the user is not on the board.
  std::optional<board_entry> entry(std::string_view segment, std::string_view board, std::string_view user);
  /// The entries from position -n to +n around the user (empty if the user is not on it).
  std::vector<board_entry> around(std::string_view segment, std::string_view board, std::string_view user,
                                  std::uint64_t n);
  /// Users on the board.
  std::uint64_t size(std::string_view segment, std::string_view board);

 private:
  std::uint64_t rank_of(const std::string& index, std::string_view score);
  state::ranked_index* index_;
};

/// The boards of the segments this instance owns, from a running app (`app.queries()`) or a
/// TopologyTestDriver (`driver.queries()`): each call runs a leaderboard_view on the stream
/// thread that owns the segment's task, on committed state (sluice/queries.hpp), so under
/// exactly-once it never sees a write of an open transaction. The segment's task is the
/// partition its id falls in as a record key (murmur2 of its bytes, as Kafka's producer
/// places it).
///
///   sluice::topologies::leaderboard_queries boards(app.queries());
///   auto page = boards.top("s1", "gender=F", 0, 10);          // ranks 1.. of the page
///   auto me = boards.entry("s1", "overall", "u7");            // nullopt: not on the board
///
/// Errors: a segment whose task runs on another instance throws sluice::query_error with
/// outcome not_local (the HTTP endpoints forward those to the owner); one restoring or moving,
/// or an app not started yet, throws it with unavailable (retry); a limit or n above
/// max_page_limit throws sluice::error(errc::invalid_config).
///
/// Threading: safe from any thread, concurrently; each call blocks until the owning thread
/// answers (at most interactive_queries::default_timeout, then query_error timed_out).
/// Lifecycle: valid while the app (or driver) whose queries it reads lives.
class leaderboard_queries {
 public:
  /// `board_store`: the leaderboard_options::board_store of the topology.
  explicit leaderboard_queries(interactive_queries& queries, std::string board_store = "leaderboard-boards")
      : queries_(&queries), store_(std::move(board_store)) {}

  /// Entries at positions [offset, offset + limit) with their ranks, and the board's size.
  board_page top(std::string_view segment, std::string_view board, std::uint64_t offset, std::uint64_t limit) const;
  /// The user's entry (rank, effort, elapsed), or nullopt when the user is not on the board.
  std::optional<board_entry> entry(std::string_view segment, std::string_view board, std::string_view user) const;
  /// The entries from position -n to +n around the user, the user's own included (fewer at
  /// the ends of the board); empty when the user is not on the board.
  std::vector<board_entry> around(std::string_view segment, std::string_view board, std::string_view user,
                                  std::uint64_t n) const;
  /// Users on the board; 0 for an unknown segment or board.
  std::uint64_t size(std::string_view segment, std::string_view board) const;
  /// The partition (task) holding `segment`; throws query_error(unavailable) while the app
  /// does not know its partition counts yet (before it runs).
  std::int32_t partition_of(std::string_view segment) const;

  /// The store the boards live in.
  const std::string& store() const noexcept { return store_; }

 private:
  template <class F>
  auto read(std::string_view segment, F&& fn) const {
    return queries_->read<ranked_index_store>(store_, partition_of(segment), [&](ranked_index_store& s) {
      leaderboard_view view(s.index());
      return fn(view);
    });
  }

  interactive_queries* queries_;
  std::string store_;
};

}  // namespace sluice::topologies
