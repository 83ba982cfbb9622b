// The in-memory kv_store: an ordered map of committed entries plus an ordered pending batch,
// with the RocksDB store's semantics (read-your-writes, commit/abort, offset, TTL).
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sluice/state/kv_store.hpp"
#include "store_common.hpp"

namespace sluice::state {
namespace {

using detail::decode_or_throw;
using detail::encode_value;
using detail::is_live;
using detail::key_bounds;

class memory_store final : public kv_store {
 public:
  explicit memory_store(const store_options& options)
      : name_(options.name),
        mode_(options.mode),
        threshold_(options.write_through_threshold_bytes),
        before_write_through_(options.before_write_through),
        ttl_ms_(options.ttl.count()),
        now_(detail::resolve_clock(options)) {}

  ~memory_store() override { close(); }

  const std::string& name() const noexcept override { return name_; }

  using kv_store::get;

  bool get(std::string_view key, std::string& out) override {
    const std::string* stored = nullptr;
    if (auto p = pending_.find(key); p != pending_.end()) {
      if (!p->second) {
        return false;
      }
      stored = &*p->second;
    } else if (!ranges_.empty() && ranges_.covers(key)) {
      return false;
    } else if (auto c = committed_.find(key); c != committed_.end()) {
      stored = &c->second;
      auto d = decode_or_throw(*stored, name_);
      if (!is_live(d.expiry_ms, now_)) {
        committed_.erase(c);  // invisible anyway; reclaim the memory
        return false;
      }
      out.assign(d.value);
      return true;
    } else {
      return false;
    }
    auto d = decode_or_throw(*stored, name_);
    if (!is_live(d.expiry_ms, now_)) {
      return false;
    }
    out.assign(d.value);
    return true;
  }

  void put(std::string_view key, std::string_view value) override {
    encode_value(scratch_, value, detail::expiry_now(now_, ttl_ms_));
    pending_bytes_ += key.size() + scratch_.size();
    auto [it, inserted] = pending_.try_emplace(std::string(key));
    it->second = scratch_;
    maybe_write_through();
  }

  bool put_if_absent(std::string_view key, std::string_view value) override {
    if (get(key, scratch_get_)) {
      return false;
    }
    put(key, value);
    return true;
  }

  void remove(std::string_view key) override {
    pending_bytes_ += key.size();
    auto [it, inserted] = pending_.try_emplace(std::string(key));
    it->second.reset();
    maybe_write_through();
  }

  void remove_range(std::string_view from, std::string_view to) override {
    if (from >= to) {
      return;
    }
    // Pending writes in the range came before it: they go. Later puts land in pending_ again
    // and shadow the range.
    pending_.erase(pending_.lower_bound(from), pending_.lower_bound(to));
    ranges_.add(from, to);
    maybe_write_through();
  }

  std::uint64_t approximate_count() override {
    std::uint64_t n = committed_.size();
    for (const auto& [from, to] : ranges_.ranges()) {
      n -= static_cast<std::uint64_t>(std::distance(committed_.lower_bound(from), committed_.lower_bound(to)));
    }
    for (const auto& [k, v] : pending_) {
      bool in_committed = committed_.find(k) != committed_.end() && !ranges_.covers(k);
      if (v && !in_committed) {
        ++n;
      } else if (!v && in_committed) {
        --n;
      }
    }
    return n;
  }

  std::optional<changelog_offset> committed_offset() const noexcept override { return offset_; }

  void commit(changelog_offset next_changelog_offset) override {
    apply_pending();
    offset_ = next_changelog_offset;
  }

  void abort() override {
    pending_.clear();
    ranges_.clear();
    pending_bytes_ = 0;
  }

  void restore(std::span<const restore_record> batch, changelog_offset next_offset) override {
    if (!pending_.empty() || !ranges_.empty()) {
      throw sluice::error(errc::state,
                          "restore of state store '" + name_ + "' with pending writes; commit or abort them first");
    }
    const std::int64_t now = now_();
    for (const auto& r : batch) {
      std::int64_t expiry = detail::expiry_for(r.timestamp_ms.value_or(now), ttl_ms_);
      if (!r.value || !is_live(expiry, now)) {
        if (auto it = committed_.find(r.key); it != committed_.end()) {
          committed_.erase(it);
        }
        continue;
      }
      encode_value(scratch_, *r.value, expiry);
      auto [it, inserted] = committed_.try_emplace(std::string(r.key));
      it->second = scratch_;
    }
    offset_ = next_offset;
  }

  void flush() override {}

  std::size_t pending_bytes() const noexcept override { return pending_bytes_ + ranges_.bytes(); }

  void close() override {
    if (closed_) {
      return;
    }
    require_no_open_iterators("close");
    closed_ = true;
    abort();
    committed_.clear();
  }

 protected:
  kv_iterator make_range(std::string_view from, std::string_view to, direction dir) override {
    return snapshot(key_bounds::range(from, to), dir);
  }
  kv_iterator make_prefix(std::string_view key_prefix, direction dir) override {
    return snapshot(key_bounds::prefix(key_prefix), dir);
  }
  kv_iterator make_all(direction dir) override { return snapshot(key_bounds::all(), dir); }

 private:
  using committed_map = std::map<std::string, std::string, std::less<>>;
  using pending_map = std::map<std::string, std::optional<std::string>, std::less<>>;

  template <class Map>
  static auto first_in(const Map& m, const key_bounds& b) {
    return b.lo ? m.lower_bound(*b.lo) : m.begin();
  }

  // Copies the merged, live view of the bounds: O(entries in range) at creation, then a
  // snapshot that later writes cannot disturb.
  kv_iterator snapshot(const key_bounds& b, direction dir) {
    std::vector<std::pair<std::string, std::string>> out;
    if (!b.empty()) {
      const std::int64_t now = now_();
      auto emit = [&](const std::string& k, const std::string& stored) {
        auto d = decode_or_throw(stored, name_);
        if (is_live(d.expiry_ms, now)) {
          out.emplace_back(k, std::string(d.value));
        }
      };
      auto c = first_in(committed_, b);
      auto p = first_in(pending_, b);
      auto c_in = [&] {
        // Committed entries under a pending range delete are gone; skip the whole range.
        while (c != committed_.end() && b.below_hi(c->first) && ranges_.covers(c->first)) {
          c = committed_.lower_bound(ranges_.end_of_range_covering(c->first));
        }
        return c != committed_.end() && b.below_hi(c->first);
      };
      auto p_in = [&] { return p != pending_.end() && b.below_hi(p->first); };
      while (c_in() || p_in()) {
        if (p_in() && (!c_in() || p->first <= c->first)) {
          if (c_in() && c->first == p->first) {
            ++c;  // the pending write shadows the committed entry
          }
          if (p->second) {
            emit(p->first, *p->second);
          }
          ++p;
        } else {
          emit(c->first, c->second);
          ++c;
        }
      }
      if (dir == direction::reverse) {
        std::reverse(out.begin(), out.end());
      }
    }
    return wrap_iterator(std::make_unique<detail::vector_iterator>(std::move(out)));
  }

  void apply_pending() {
    for (const auto& [from, to] : ranges_.ranges()) {
      committed_.erase(committed_.lower_bound(from), committed_.lower_bound(to));
    }
    ranges_.clear();
    for (auto& [k, v] : pending_) {
      if (v) {
        committed_.insert_or_assign(k, std::move(*v));
      } else if (auto it = committed_.find(k); it != committed_.end()) {
        committed_.erase(it);
      }
    }
    pending_.clear();
    pending_bytes_ = 0;
  }

  void maybe_write_through() {
    if (mode_ == write_mode::write_through && pending_bytes() > threshold_) {
      if (before_write_through_) before_write_through_();
      apply_pending();
    }
  }

  std::string name_;
  write_mode mode_;
  std::size_t threshold_;
  std::function<void()> before_write_through_;
  std::int64_t ttl_ms_;
  detail::clock_fn now_;
  committed_map committed_;
  pending_map pending_;
  detail::range_set ranges_;
  std::size_t pending_bytes_ = 0;
  std::optional<changelog_offset> offset_;
  std::string scratch_;
  std::string scratch_get_;
  bool closed_ = false;
};

}  // namespace

std::unique_ptr<kv_store> open_memory_store(const store_options& options) {
  detail::validate_store_name(options.name);
  return std::make_unique<memory_store>(options);
}

}  // namespace sluice::state
