// Internals shared by the RocksDB and in-memory stores: the stored value format (expiry
// header), key bounds of range/prefix scans, option checks. Private to sluice_state.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <iterator>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/error.hpp"
#include "sluice/state/big_endian.hpp"
#include "sluice/state/changelog_offset.hpp"
#include "sluice/state/kv_store.hpp"

namespace sluice::state::detail {

/// Hashes std::string and std::string_view alike (with std::equal_to<>), so a lookup by view
/// in a map keyed by std::string does not build a string.
struct string_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

using clock_fn = std::function<std::int64_t()>;

/// The store's clock: the injected one, or the system clock.
inline clock_fn resolve_clock(const store_options& options) {
  if (options.now_ms) {
    return options.now_ms;
  }
  return [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
}

/// Throws errc::invalid_config unless `name` can be a directory name of its own.
void validate_store_name(const std::string& name);

// Stored value format, both stores: one tag byte, then
//   0x00 <user value>                       never expires
//   0x01 <expiry ms, 8 bytes big-endian> <user value>
// One byte per value when TTL is off; a store may switch TTL on or off between opens.
inline constexpr char tag_no_expiry = 0x00;
inline constexpr char tag_expiry = 0x01;

/// Expiry time of a write at `write_time_ms` under `ttl_ms` (0: never expires).
inline std::int64_t expiry_for(std::int64_t write_time_ms, std::int64_t ttl_ms) noexcept {
  return ttl_ms > 0 ? write_time_ms + ttl_ms : 0;
}

/// Writes the stored form of `value` into `out` (reusing its capacity).
inline void encode_value(std::string& out, std::string_view value, std::int64_t expiry_ms) {
  out.clear();
  if (expiry_ms == 0) {
    out.reserve(1 + value.size());
    out.push_back(tag_no_expiry);
  } else {
    out.reserve(9 + value.size());
    out.push_back(tag_expiry);
    append_u64(out, static_cast<std::uint64_t>(expiry_ms));
  }
  out.append(value);
}

// A RocksDB store's changelog offset, as its meta column family holds it (written by its
// commits and by the SST files of a restore from empty): 8 bytes, big-endian.
inline std::string encode_offset(changelog_offset next) {
  std::string out;
  append_u64(out, static_cast<std::uint64_t>(next.value()));
  return out;
}

inline std::optional<changelog_offset> decode_offset(std::string_view s) noexcept {
  if (s.size() != 8) return std::nullopt;
  return changelog_offset(static_cast<std::int64_t>(read_u64(s)));
}

struct decoded_value {
  std::string_view value;
  std::int64_t expiry_ms = 0;  ///< 0: never
  bool ok = true;              ///< false: not in the stored format (corruption)
};

inline decoded_value decode_value(std::string_view stored) noexcept {
  if (!stored.empty() && stored[0] == tag_no_expiry) {
    return {stored.substr(1), 0, true};
  }
  if (stored.size() >= 9 && stored[0] == tag_expiry) {
    return {stored.substr(9), static_cast<std::int64_t>(read_u64(stored, 1)), true};
  }
  return {{}, 0, false};
}

inline bool is_live(std::int64_t expiry_ms, std::int64_t now_ms) noexcept {
  return expiry_ms == 0 || expiry_ms > now_ms;
}

/// Like is_live, reading the clock only for an entry that expires: stores without TTL never
/// pay for a clock read (and a std::function call) per get.
inline bool is_live(std::int64_t expiry_ms, const clock_fn& now) { return expiry_ms == 0 || expiry_ms > now(); }

/// Expiry of a write made now under `ttl_ms`; reads the clock only when a TTL is set.
inline std::int64_t expiry_now(const clock_fn& now, std::int64_t ttl_ms) { return ttl_ms > 0 ? now() + ttl_ms : 0; }

/// Decodes or throws errc::state naming the store.
inline decoded_value decode_or_throw(std::string_view stored, const std::string& store) {
  auto d = decode_value(stored);
  if (!d.ok) {
    throw sluice::error(errc::state, "store '" + store +
                                         "' holds a value in an unknown format (corruption?); "
                                         "wipe the store to rebuild it from its changelog");
  }
  return d;
}

/// The keys a scan visits: lo (inclusive) to hi (inclusive or exclusive); absent = open.
struct key_bounds {
  std::optional<std::string> lo;
  std::optional<std::string> hi;
  bool hi_inclusive = true;

  bool above_lo(std::string_view k) const noexcept { return !lo || k >= std::string_view(*lo); }
  bool below_hi(std::string_view k) const noexcept {
    if (!hi) {
      return true;
    }
    return hi_inclusive ? k <= std::string_view(*hi) : k < std::string_view(*hi);
  }
  bool contains(std::string_view k) const noexcept { return above_lo(k) && below_hi(k); }
  bool empty() const noexcept {
    if (!lo || !hi) {
      return false;
    }
    return hi_inclusive ? *lo > *hi : *lo >= *hi;
  }

  static key_bounds range(std::string_view from, std::string_view to) {
    return {std::string(from), std::string(to), true};
  }
  static key_bounds all() { return {}; }
  /// Keys starting with `p`: [p, successor(p)), where successor drops trailing 0xFF bytes
  /// and increments the last remaining byte; a prefix of only 0xFF bytes has no upper bound.
  static key_bounds prefix(std::string_view p) {
    key_bounds b;
    if (p.empty()) {
      return b;
    }
    b.lo = std::string(p);
    std::string succ(p);
    while (!succ.empty() && static_cast<unsigned char>(succ.back()) == 0xFF) {
      succ.pop_back();
    }
    if (!succ.empty()) {
      succ.back() = static_cast<char>(static_cast<unsigned char>(succ.back()) + 1);
      b.hi = std::move(succ);
      b.hi_inclusive = false;
    }
    return b;
  }
};

/// Pending range deletes of one store: disjoint half-open ranges [from, to), merged as they
/// are added (so many pops of one queue in one commit interval become one range). Both stores
/// keep one; the order of range deletes against puts is handled by the stores (a pending put
/// inside a new range is dropped, a later put survives), so only the union matters here.
class range_set {
 public:
  using map_type = std::map<std::string, std::string, std::less<>>;

  bool empty() const noexcept { return ranges_.empty(); }
  const map_type& ranges() const noexcept { return ranges_; }
  /// Bytes of the bounds held (counted as pending bytes).
  std::size_t bytes() const noexcept { return bytes_; }

  /// Adds [from, to); no-op when from >= to.
  void add(std::string_view from, std::string_view to) {
    if (from >= to) {
      return;
    }
    std::string lo(from);
    std::string hi(to);
    // Merge every range that overlaps or touches [lo, hi).
    auto it = ranges_.upper_bound(std::string_view(lo));
    if (it != ranges_.begin()) {
      auto prev = std::prev(it);
      if (prev->second >= lo) {
        it = prev;
      }
    }
    while (it != ranges_.end() && it->first <= hi) {
      if (it->first < lo) {
        lo = it->first;
      }
      if (it->second > hi) {
        hi = it->second;
      }
      bytes_ -= it->first.size() + it->second.size();
      it = ranges_.erase(it);
    }
    bytes_ += lo.size() + hi.size();
    ranges_.emplace(std::move(lo), std::move(hi));
  }

  /// True if `key` lies in one of the ranges.
  bool covers(std::string_view key) const noexcept {
    if (ranges_.empty()) {
      return false;
    }
    auto it = ranges_.upper_bound(key);
    if (it == ranges_.begin()) {
      return false;
    }
    --it;
    return key < std::string_view(it->second);
  }

  /// The end of the range covering `key`. Precondition: covers(key).
  const std::string& end_of_range_covering(std::string_view key) const {
    return std::prev(ranges_.upper_bound(key))->second;
  }

  /// The ranges that intersect `b`, in ascending order (an iterator's snapshot).
  std::vector<std::pair<std::string, std::string>> intersecting(const key_bounds& b) const {
    std::vector<std::pair<std::string, std::string>> out;
    auto it = b.lo ? ranges_.upper_bound(std::string_view(*b.lo)) : ranges_.begin();
    if (b.lo && it != ranges_.begin()) {
      auto prev = std::prev(it);
      if (std::string_view(prev->second) > std::string_view(*b.lo)) {
        it = prev;
      }
    }
    for (; it != ranges_.end() && b.below_hi(it->first); ++it) {
      out.emplace_back(it->first, it->second);
    }
    // A range starting exactly at an exclusive upper bound does not intersect; below_hi
    // already excludes it.
    return out;
  }

  void clear() noexcept {
    ranges_.clear();
    bytes_ = 0;
  }

 private:
  map_type ranges_;
  std::size_t bytes_ = 0;
};

/// Where `key` falls among sorted disjoint ranges (an iterator's snapshot): the index of the
/// range covering it, or -1.
inline std::ptrdiff_t covering_range(const std::vector<std::pair<std::string, std::string>>& r,
                                     std::string_view key) noexcept {
  auto it = std::upper_bound(r.begin(), r.end(), key,
                             [](std::string_view k, const auto& e) { return k < std::string_view(e.first); });
  if (it == r.begin()) {
    return -1;
  }
  --it;
  return key < std::string_view(it->second) ? (it - r.begin()) : -1;
}

/// An iterator over entries copied at creation (the in-memory store's snapshot).
class vector_iterator final : public kv_iterator_impl {
 public:
  explicit vector_iterator(std::vector<std::pair<std::string, std::string>> entries) : entries_(std::move(entries)) {}
  bool valid() const noexcept override { return pos_ < entries_.size(); }
  std::string_view key() const noexcept override { return entries_[pos_].first; }
  std::string_view value() const noexcept override { return entries_[pos_].second; }
  void next() override { ++pos_; }

 private:
  std::vector<std::pair<std::string, std::string>> entries_;
  std::size_t pos_ = 0;
};

}  // namespace sluice::state::detail
