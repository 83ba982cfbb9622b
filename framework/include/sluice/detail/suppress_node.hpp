// The node behind ktable::suppress (sluice/suppress.hpp): Kafka Streams 3.9's
// KTableSuppressProcessor over a time-ordered buffer kept in a changelogged key-value store.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "sluice/detail/dsl_nodes.hpp"
#include "sluice/detail/node.hpp"
#include "sluice/detail/suppression_buffer.hpp"
#include "sluice/error.hpp"
#include "sluice/metrics.hpp"
#include "sluice/record.hpp"
#include "sluice/serde/serde.hpp"
#include "sluice/suppressed.hpp"
#include "sluice/windows.hpp"

namespace sluice::detail {

/// The time a buffered key is due by: its window's end (until_window_closes) or the
/// timestamp of the update that first buffered it (until_time_limit).
enum class suppression_time { window_end, record_timestamp };

struct suppression_spec {
  std::chrono::milliseconds wait{0};  ///< due when buffer time <= observed stream time - wait
  buffer_config buffer{};
  suppression_time buffer_time = suppression_time::record_timestamp;
};

/// Buffers each update of a key, replacing the key's earlier buffered update, and emits a
/// key's latest update when it is due (a session's: its end, the last record's timestamp;
/// until_window_closes drops tombstones, which only merged-away sessions produce) (buffer time <= observed stream time
/// - wait) or, with buffer_full::emit_early, when the buffer is over its limits (oldest first). Exactly as Kafka
/// Streams: observed stream time is the highest timestamp of the updates this node has received (it starts again at -1
/// after a restart, so nothing is emitted before the next update arrives); a key keeps the buffer time of its first
/// buffered update (non-resetting); due keys come out in (buffer time, serialized key) order, each with the timestamp
/// and headers of its latest update.
///
/// The buffer also keeps, per buffered key, its prior value: the table's value before the
/// update that first buffered the key, i.e. what this node last emitted for it (absent if it
/// never did), which the parent table passes as its old value (prior_value_source), as Kafka
/// Streams' buffer keeps the first buffered change's old value. A join of the suppressed
/// table answers a buffered key's lookup with it (suppression_buffer_view). What this node
/// emits for a key carries, as its prior value (for a suppression of this table), the old
/// value of the latest update it buffered for the key, as Kafka Streams' buffer emits its
/// latest change with that change's old value.
///
/// Store layout: see detail/suppression_buffer.hpp (one key-value store, changelogged, so
/// the buffer survives restarts and commits with the outputs under exactly-once). Key bytes
/// are the key's topic serde (windowed keys: TimeWindowedSerializer's layout, the key's bytes
/// then the window start), so keys of one buffer time sort as in Kafka Streams.
template <class K, class V>
class suppress_node final : public typed_node<K, V>, public prior_value_keeper<typename unwrap_optional<V>::type> {
 public:
  using KS = default_serde<K>;
  using VS = buffered_value_serde<V>;
  using T = typename unwrap_optional<V>::type;
  using PS = buffered_value_serde<std::optional<T>>;

  suppress_node(std::string store, suppression_spec spec) : store_name_(std::move(store)), spec_(spec) {}

  void init(task_context& task) override {
    node::init(task);
    // The table this node suppresses tells it each key's value before an update.
    parent_ = this->parents().size() == 1 ? dynamic_cast<prior_value_source<T>*>(this->parents()[0]) : nullptr;
    if (!parent_)
      throw error(errc::invalid_topology, "suppression buffer '" + store_name_ +
                                              "': its parent is not a table node that passes prior values (a bug "
                                              "in how the topology was built)");
    parent_->send_prior_values();
    auto binding = task.store(store_name_);
    store_ = kv_store_of(binding);
    changelog_ = binding.changelog;
    // The buffer's size comes back from the (restored) store: its entries and its index
    // entries, which hold the keys' prior values.
    records_ = bytes_ = 0;
    for (auto it = store_->prefix("t"); it.valid(); it.next()) {
      ++records_;
      bytes_ += it.key().size() + it.value().size();
    }
    for (const char* prefix : {"k", "o"})
      for (auto it = store_->prefix(prefix); it.valid(); it.next()) bytes_ += it.key().size() + it.value().size();
    observed_ = -1;
    emitted_ = &task.metrics().get_counter("sluice_suppression_emitted_total", "task=\"" + std::string(task.task_id()) +
                                                                                   "\",store=\"" + store_name_ + "\"");
  }

  void on_record(const record<K, V>& r) override {
    observed_ = std::max(observed_, r.timestamp);
    buffer(r);
    enforce_constraints();
  }

 private:
  void buffer(const record<K, V>& r) {
    key_bytes_.clear();
    KS::serialize(r.key, key_bytes_);
    std::int64_t window_end = 0;
    if constexpr (is_windowed<K>::value || is_session_windowed<K>::value) window_end = r.key.window.end;
    std::int64_t time = spec_.buffer_time == suppression_time::window_end ? window_end : r.timestamp;

    index_key_.assign("k").append(key_bytes_);
    const bool first = !(store_->get(index_key_, scratch_) && scratch_.size() >= old_index_entry_size);
    if (!first) {
      time = static_cast<std::int64_t>(state::read_u64(scratch_, 0));
    } else {
      // First buffered: the key's prior value is the table's value before this update.
      entry_.clear();
      state::append_u64(entry_, static_cast<std::uint64_t>(time));
      PS::serialize(parent_->prior_value(), scratch_);
      entry_.append(scratch_);
      write(index_key_, entry_);
      bytes_ += index_key_.size() + entry_.size();
    }
    if (this->sends_prior_values()) keep_old_value(first);
    entry_key_.assign("t");
    state::append_u64(entry_key_, static_cast<std::uint64_t>(time));
    entry_key_.append(key_bytes_);
    if (store_->get(entry_key_, scratch_)) {
      bytes_ -= entry_key_.size() + scratch_.size();
    } else {
      ++records_;
    }
    entry_.clear();
    state::append_u64(entry_, static_cast<std::uint64_t>(r.timestamp));
    state::append_u64(entry_, static_cast<std::uint64_t>(window_end));
    state::append_u32(entry_, static_cast<std::uint32_t>(r.headers.size()));
    for (const auto& h : r.headers) {
      state::append_u32(entry_, static_cast<std::uint32_t>(h.key.size()));
      entry_.append(h.key);
      state::append_u32(entry_, h.value ? static_cast<std::uint32_t>(h.value->size()) : 0xFFFFFFFFu);
      if (h.value) entry_.append(*h.value);
    }
    scratch_.clear();
    VS::serialize(r.value, scratch_);
    entry_.append(scratch_);
    write(entry_key_, entry_);
    bytes_ += entry_key_.size() + entry_.size();
  }

  /// A suppression of this table sees, as the old value of each update this node emits, the
  /// old value of the latest update buffered for the key (Kafka Streams' buffer emits its
  /// latest change whole, new and old value), not the key's prior value. The first update's
  /// old value is the prior value in the index entry; a later one's goes into an 'o' entry.
  void keep_old_value(bool first) {
    old_key_.assign("o").append(key_bytes_);
    if (store_->get(old_key_, scratch_)) {
      bytes_ -= old_key_.size() + scratch_.size();
    } else if (first) {
      return;
    }
    PS::serialize(parent_->prior_value(), entry_);
    write(old_key_, entry_);
    bytes_ += old_key_.size() + entry_.size();
  }

  void enforce_constraints() {
    // observed >= -1 and 0 <= wait <= INT64_MAX: no overflow.
    const std::int64_t expiry = observed_ - spec_.wait.count();
    evict_while([&](std::int64_t buffer_time) { return buffer_time <= expiry; });
    if (!over_capacity()) return;
    if (spec_.buffer.when_full == buffer_full::emit_early) {
      evict_while([&](std::int64_t) { return over_capacity(); });
      return;
    }
    throw error(errc::state, "suppression buffer '" + store_name_ + "' is full: " + std::to_string(records_) + "/" +
                                 limit(spec_.buffer.max_records) + " records and " + std::to_string(bytes_) + "/" +
                                 limit(spec_.buffer.max_bytes) +
                                 " bytes; raise buffer_config's max_records or max_bytes (the buffer holds one entry "
                                 "per key and open window, with the value it last emitted for the key), or use "
                                 "until_time_limit(...) with buffer_full::emit_early");
  }

  static std::string limit(std::uint64_t n) {
    return n == std::numeric_limits<std::uint64_t>::max() ? std::string("unlimited") : std::to_string(n);
  }

  bool over_capacity() const noexcept { return records_ > spec_.buffer.max_records || bytes_ > spec_.buffer.max_bytes; }

  /// Emits buffered keys oldest first while `due(buffer time)` holds.
  template <class Due>
  void evict_while(Due due) {
    for (auto it = store_->prefix("t"); it.valid(); it.next()) {
      const std::string_view key = it.key(), value = it.value();
      const auto time = static_cast<std::int64_t>(state::read_u64(key, 1));
      if (!due(time)) return;
      const std::string_view key_bytes = key.substr(9);
      out_.timestamp = static_cast<std::int64_t>(state::read_u64(value, 0));
      const auto window_end = static_cast<std::int64_t>(state::read_u64(value, 8));
      out_.headers.clear();
      std::size_t at = 20;
      for (std::uint32_t n = state::read_u32(value, 16); n > 0; --n) {
        const std::uint32_t klen = state::read_u32(value, at);
        std::string hkey(value.substr(at + 4, klen));
        at += 4 + klen;
        const std::uint32_t vlen = state::read_u32(value, at);
        at += 4;
        if (vlen == 0xFFFFFFFFu) {
          out_.headers.add(std::move(hkey), std::nullopt);
        } else {
          out_.headers.add(std::move(hkey), std::string(value.substr(at, vlen)));
          at += vlen;
        }
      }
      out_.value = VS::deserialize(value.substr(at));
      out_.key = KS::deserialize(key_bytes);
      if constexpr (is_windowed<K>::value) out_.key.window.end = window_end;
      --records_;
      bytes_ -= key.size() + value.size();
      index_key_.assign("k").append(key_bytes);
      const bool indexed = store_->get(index_key_, scratch_);
      if (indexed) bytes_ -= index_key_.size() + scratch_.size();
      old_key_.assign("o").append(key_bytes);
      if (store_->get(old_key_, old_value_)) {
        // The old value of a later update of the key (keep_old_value).
        bytes_ -= old_key_.size() + old_value_.size();
        if (this->sends_prior_values()) this->set_prior(PS::deserialize(old_value_));
        remove(old_key_);
      } else if (this->sends_prior_values()) {
        // The key's one buffered update: its old value is the prior value (unknown for an
        // entry of the old format).
        if (indexed && scratch_.size() > old_index_entry_size)
          this->set_prior(PS::deserialize(std::string_view(scratch_).substr(old_index_entry_size)));
        else
          this->set_prior(std::nullopt);
      }
      remove(index_key_);
      remove(std::string(key));
      // Final results drop tombstones (a session merged into another), as Kafka Streams'
      // final-results suppression, which counts them safe to drop.
      if constexpr (is_optional_v<V>)
        if (spec_.buffer_time == suppression_time::window_end && !out_.value) continue;
      emitted_->add();
      this->forward_erased(&out_);
    }
  }

  void write(std::string_view key, std::string_view value) {
    store_->put(key, value);
    if (changelog_) changelog_->log(key, value, this->context_->stream_time());
  }
  void remove(const std::string& key) {
    store_->remove(key);
    if (changelog_) changelog_->log(key, std::nullopt, this->context_->stream_time());
  }

  std::string store_name_;
  suppression_spec spec_;
  state::kv_store* store_ = nullptr;
  changelog_writer* changelog_ = nullptr;
  counter* emitted_ = nullptr;
  prior_value_source<T>* parent_ = nullptr;
  std::int64_t observed_ = -1;
  std::uint64_t records_ = 0, bytes_ = 0;
  std::string key_bytes_, index_key_, old_key_, entry_key_, entry_, scratch_, old_value_;
  record<K, V> out_;
};

}  // namespace sluice::detail
