// The in-memory order-statistic list behind ranked_index: (score, member) entries in order,
// in blocks of at most max_block entries, with a Fenwick tree over the block sizes.
//
// Costs, n entries, B = max_block: locating an entry is a binary search over the blocks' last
// entries and then inside one block, O(log n) comparisons; a position is a Fenwick prefix sum
// over the blocks, O(log(n / B)); the entry at a position is a Fenwick descent, O(log(n / B));
// an insert or erase moves at most B entry handles inside one block (a memmove of 40-byte
// structs) and updates the Fenwick tree in O(log(n / B)). A block that overflows is split and
// a block that empties (or can merge with its successor) is removed, and then the Fenwick
// tree is rebuilt, O(n / B): that happens at most once per B / 2 writes. Private to
// sluice_state; one thread.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::state::detail {

/// One member of an index: its score and its name in one string, the score first.
struct order_entry {
  std::string bytes;
  std::uint32_t score_len = 0;

  order_entry() = default;
  order_entry(std::string_view score, std::string_view member) : score_len(static_cast<std::uint32_t>(score.size())) {
    bytes.reserve(score.size() + member.size());
    bytes.append(score);
    bytes.append(member);
  }
  std::string_view score() const noexcept { return std::string_view(bytes).substr(0, score_len); }
  std::string_view member() const noexcept { return std::string_view(bytes).substr(score_len); }

  /// Estimated bytes this entry costs in memory: the struct, plus the heap block of a string
  /// too long for the small-string buffer (glibc rounds to 16 bytes and adds 8 of header).
  static std::size_t cost(std::size_t length) noexcept {
    constexpr std::size_t small_string_capacity = 15;
    std::size_t heap = length > small_string_capacity ? (length + 1 + 8 + 15) / 16 * 16 : 0;
    return sizeof(order_entry) + heap;
  }
};

/// (score, member) of `e` < (score, member)?
inline bool entry_less(const order_entry& e, std::string_view score, std::string_view member) noexcept {
  int c = e.score().compare(score);
  return c < 0 || (c == 0 && e.member() < member);
}
inline bool entry_less(const order_entry& a, const order_entry& b) noexcept {
  return entry_less(a, b.score(), b.member());
}

class order_list {
 public:
  static constexpr std::size_t max_block = 512;

  std::uint64_t size() const noexcept { return size_; }
  /// Estimated memory: entries (order_entry::cost) plus block bookkeeping.
  std::size_t memory_bytes() const noexcept {
    return entry_bytes_ + blocks_.capacity() * (sizeof(block) + sizeof(std::uint64_t)) +
           (slots_ - static_cast<std::size_t>(size_)) * sizeof(order_entry);
  }

  /// Replaces the contents with `sorted` (ascending by entry_less, no duplicates).
  void assign_sorted(std::vector<order_entry> sorted) {
    blocks_.clear();
    entry_bytes_ = 0;
    slots_ = 0;
    size_ = sorted.size();
    const std::size_t fill = max_block / 2;
    for (std::size_t at = 0; at < sorted.size(); at += fill) {
      auto end = std::min(sorted.size(), at + fill);
      block b;
      b.reserve(end - at);
      slots_ += end - at;
      for (std::size_t i = at; i < end; ++i) {
        entry_bytes_ += order_entry::cost(sorted[i].bytes.size());
        b.push_back(std::move(sorted[i]));
      }
      blocks_.push_back(std::move(b));
    }
    rebuild_fenwick();
  }

  /// Inserts (score, member). Precondition: not present.
  void insert(std::string_view score, std::string_view member) {
    if (blocks_.empty()) {  // no block may be empty: block_for reads every block's last entry
      blocks_.emplace_back();
      blocks_.back().emplace_back(score, member);
      slots_ += blocks_.back().capacity();
      entry_bytes_ += order_entry::cost(score.size() + member.size());
      size_ = 1;
      rebuild_fenwick();
      return;
    }
    std::size_t b = block_for(score, member);
    auto& blk = blocks_[b];
    auto it = std::lower_bound(blk.begin(), blk.end(), std::pair{score, member},
                               [](const order_entry& e, const auto& k) { return entry_less(e, k.first, k.second); });
    const std::size_t capacity_before = blk.capacity();
    blk.emplace(it, score, member);
    slots_ += blk.capacity() - capacity_before;
    entry_bytes_ += order_entry::cost(score.size() + member.size());
    ++size_;
    if (blk.size() > max_block) {
      split(b);
    } else {
      fenwick_add(b, 1);
    }
  }

  /// Erases (score, member); false if absent.
  bool erase(std::string_view score, std::string_view member) {
    auto found = find(score, member);
    if (!found) return false;
    auto [b, i] = *found;
    auto& blk = blocks_[b];
    entry_bytes_ -= order_entry::cost(blk[i].bytes.size());
    blk.erase(blk.begin() + static_cast<std::ptrdiff_t>(i));
    --size_;
    if (blk.empty()) {
      slots_ -= blk.capacity();
      blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(b));
      rebuild_fenwick();
    } else if (b + 1 < blocks_.size() && blk.size() + blocks_[b + 1].size() <= max_block / 2) {
      auto& next = blocks_[b + 1];
      slots_ -= blk.capacity() + next.capacity();
      blk.insert(blk.end(), std::make_move_iterator(next.begin()), std::make_move_iterator(next.end()));
      slots_ += blk.capacity();
      blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(b + 1));
      rebuild_fenwick();
    } else {
      fenwick_add(b, -1);
    }
    return true;
  }

  /// The 0-based position of (score, member), nullopt if absent.
  std::optional<std::uint64_t> position(std::string_view score, std::string_view member) const {
    auto found = find(score, member);
    if (!found) return std::nullopt;
    return prefix(found->first) + found->second;
  }

  /// Entries whose score is bytewise smaller than `bound`.
  std::uint64_t count_below(std::string_view bound) const {
    // The first block whose last score is >= bound holds the boundary.
    auto b =
        static_cast<std::size_t>(std::partition_point(blocks_.begin(), blocks_.end(),
                                                      [&](const block& blk) { return blk.back().score() < bound; }) -
                                 blocks_.begin());
    if (b == blocks_.size()) return size_;
    const auto& blk = blocks_[b];
    auto i = std::partition_point(blk.begin(), blk.end(), [&](const order_entry& e) { return e.score() < bound; }) -
             blk.begin();
    return prefix(b) + static_cast<std::uint64_t>(i);
  }

  /// Calls f(entry, position) for positions [offset, offset + limit) that exist, in order.
  template <class F>
  void visit(std::uint64_t offset, std::uint64_t limit, F&& f) const {
    if (offset >= size_ || limit == 0) return;
    auto [b, i] = locate(offset);
    std::uint64_t pos = offset;
    const std::uint64_t end = offset + std::min(limit, size_ - offset);
    while (pos < end) {
      const auto& blk = blocks_[b];
      for (; i < blk.size() && pos < end; ++i, ++pos) f(blk[i], pos);
      ++b;
      i = 0;
    }
  }

 private:
  using block = std::vector<order_entry>;

  /// The block where (score, member) is or belongs: the first whose last entry is not less
  /// than it, else the last block. Precondition: blocks_ not empty.
  std::size_t block_for(std::string_view score, std::string_view member) const {
    auto it = std::partition_point(blocks_.begin(), blocks_.end(),
                                   [&](const block& blk) { return entry_less(blk.back(), score, member); });
    if (it == blocks_.end()) return blocks_.size() - 1;
    return static_cast<std::size_t>(it - blocks_.begin());
  }

  std::optional<std::pair<std::size_t, std::size_t>> find(std::string_view score, std::string_view member) const {
    if (blocks_.empty()) return std::nullopt;
    std::size_t b = block_for(score, member);
    const auto& blk = blocks_[b];
    auto it = std::partition_point(blk.begin(), blk.end(),
                                   [&](const order_entry& e) { return entry_less(e, score, member); });
    if (it == blk.end() || it->score() != score || it->member() != member) return std::nullopt;
    return std::pair{b, static_cast<std::size_t>(it - blk.begin())};
  }

  void split(std::size_t b) {
    auto& blk = blocks_[b];
    block upper;
    upper.reserve(max_block / 2 + 1);
    slots_ += upper.capacity();
    auto mid = blk.begin() + static_cast<std::ptrdiff_t>(blk.size() / 2);
    upper.insert(upper.end(), std::make_move_iterator(mid), std::make_move_iterator(blk.end()));
    blk.erase(mid, blk.end());
    blocks_.insert(blocks_.begin() + static_cast<std::ptrdiff_t>(b + 1), std::move(upper));
    rebuild_fenwick();
  }

  // Fenwick tree over block sizes, 1-based: fenwick_[i] covers blocks (i - lowbit(i), i].
  void rebuild_fenwick() {
    fenwick_.assign(blocks_.size() + 1, 0);
    for (std::size_t i = 1; i <= blocks_.size(); ++i) {
      fenwick_[i] += blocks_[i - 1].size();
      std::size_t parent = i + (i & (~i + 1));
      if (parent <= blocks_.size()) fenwick_[parent] += fenwick_[i];
    }
  }
  void fenwick_add(std::size_t b, std::int64_t delta) {
    for (std::size_t i = b + 1; i < fenwick_.size(); i += i & (~i + 1))
      fenwick_[i] = static_cast<std::uint64_t>(static_cast<std::int64_t>(fenwick_[i]) + delta);
  }
  /// Entries in blocks [0, b).
  std::uint64_t prefix(std::size_t b) const {
    std::uint64_t sum = 0;
    for (std::size_t i = b; i > 0; i -= i & (~i + 1)) sum += fenwick_[i];
    return sum;
  }
  /// (block, index in block) of position `pos`. Precondition: pos < size_.
  std::pair<std::size_t, std::size_t> locate(std::uint64_t pos) const {
    std::size_t at = 0;
    std::uint64_t remaining = pos;
    std::size_t step = 1;
    while (step * 2 < fenwick_.size()) step *= 2;
    for (; step > 0; step /= 2) {
      if (at + step < fenwick_.size() && fenwick_[at + step] <= remaining) {
        at += step;
        remaining -= fenwick_[at];
      }
    }
    return {at, static_cast<std::size_t>(remaining)};  // `at` blocks hold <= pos entries
  }

  std::vector<block> blocks_;
  std::vector<std::uint64_t> fenwick_{0};
  std::uint64_t size_ = 0;
  std::size_t entry_bytes_ = 0;
  std::size_t slots_ = 0;  // sum of the blocks' capacities
};

}  // namespace sluice::state::detail
