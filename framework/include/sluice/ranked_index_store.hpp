// sluice::ranked_index_store: a processor's handle to a ranked-index store (state/README.md,
// "Ranked index"): per index key, members ordered by a byte score, with positions, pages and
// neighbours in O(log n + k).
//
//   b.add_state_store(sluice::ranked_index_materialized("scores"));
//   ... in init():  scores_.emplace(ctx.state_store<sluice::ranked_index_store>("scores"));
//   ... per record: scores_->upsert(board, user, score);  auto p = scores_->position(board, user);
//
// Writes carry the task's stream time as their changelog timestamp. A handle belongs to the
// task that gave it out; use it from that task's thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/builder.hpp"
#include "sluice/detail/node.hpp"
#include "sluice/error.hpp"
#include "sluice/state/ranked_index.hpp"

namespace sluice {

/// A store declaration for a ranked index: the runtime opens the kv_store for it (RocksDB by
/// default) and composes the index over it.
inline materialized ranked_index_materialized(std::string name, state::ranked_index_options options = {}) {
  materialized m;
  m.name = std::move(name);
  m.make_store = [options](std::unique_ptr<state::kv_store> storage,
                           state::changelog_sink* changelog) -> std::unique_ptr<state::state_store> {
    return state::open_ranked_index(std::move(storage), changelog, options);
  };
  return m;
}

class ranked_index_store {
 public:
  /// Throws sluice::error(errc::invalid_topology) naming the store when it is not a ranked
  /// index (declare it with ranked_index_materialized).
  ranked_index_store(detail::store_binding binding, detail::task_context* context)
      : index_(detail::store_of_kind<state::ranked_index>(binding, "ranked index")), context_(context) {}

  /// For code that already holds the index (tools, a read path outside a processor); writes
  /// take `context`'s stream time, so a read-only user may pass nullptr.
  ranked_index_store(state::ranked_index& index, detail::task_context* context) : index_(&index), context_(context) {}

  void upsert(std::string_view index, std::string_view member, std::string_view score) {
    index_->upsert(index, member, score, context_->stream_time());
  }
  bool remove(std::string_view index, std::string_view member) {
    return index_->remove(index, member, context_->stream_time());
  }
  std::optional<std::string> score(std::string_view index, std::string_view member) {
    return index_->score(index, member);
  }
  std::optional<std::uint64_t> position(std::string_view index, std::string_view member) {
    return index_->position(index, member);
  }
  std::uint64_t count_below(std::string_view index, std::string_view bound) {
    return index_->count_below(index, bound);
  }
  std::vector<state::ranked_member> range(std::string_view index, std::uint64_t offset, std::uint64_t limit) {
    return index_->range(index, offset, limit);
  }
  std::vector<state::ranked_member> around(std::string_view index, std::string_view member, std::uint64_t n) {
    return index_->around(index, member, n);
  }
  std::uint64_t count(std::string_view index) { return index_->count(index); }

  /// The store itself (read queries such as a leaderboard_view).
  state::ranked_index& index() noexcept { return *index_; }

 private:
  state::ranked_index* index_;
  detail::task_context* context_;
};

}  // namespace sluice
