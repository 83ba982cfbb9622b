// The layout of a suppression buffer's store (ktable::suppress, detail/suppress_node.hpp)
// and the read-only view a join of the suppressed table takes of it: the value the
// suppression last emitted for a buffered key.
//
// Store layout (one key-value store, changelogged):
//   't' <u64 buffer time> <key bytes>  ->  <u64 timestamp> <u64 window end> <headers> <value>
//   'k' <key bytes>                    ->  <u64 buffer time> <prior value>
//   'o' <key bytes>                    ->  <old value>
// <prior value> is what the suppression last emitted for the key before it was buffered
// (the table's value before the update that buffered it; for a key or window the update
// created, the old value its aggregation passes, e.g. a count's 0, as Kafka Streams' old
// values, see prior_value_source): a presence byte, then the value in
// its state encoding. <old value>, in the same encoding, is the table's value before the
// latest update buffered for the key, kept only when the key has had more than one and the
// suppressed table is itself suppressed: the old value the node emits with the key (for one
// update, the prior value). Entries written before sluice kept prior values have an 8-byte 'k'
// value (the buffer time only); the node restores and emits them as before, and a lookup of
// such a key fails with old_buffer_entry_error (see suppression_buffer_view).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/detail/node.hpp"
#include "sluice/error.hpp"
#include "sluice/serde/serde.hpp"
#include "sluice/state/big_endian.hpp"

namespace sluice::detail {

/// A buffered value in its state encoding. A std::optional value (a session table's, nullopt
/// for a session merged into another; a prior value) as a presence byte, then the value.
template <class V>
struct buffered_value_serde {
  static void serialize(const V& v, std::string& out) { default_state_serde<V>::serialize(v, out); }
  static V deserialize(std::string_view in) { return default_state_serde<V>::deserialize(in); }
};
template <class T>
struct buffered_value_serde<std::optional<T>> {
  static void serialize(const std::optional<T>& v, std::string& out) {
    out.clear();
    out.push_back(v ? '\1' : '\0');
    if (!v) return;
    std::string bytes;
    default_state_serde<T>::serialize(*v, bytes);
    out.append(bytes);
  }
  static std::optional<T> deserialize(std::string_view in) {
    if (in.empty() || in[0] == '\0') return std::nullopt;
    return default_state_serde<T>::deserialize(in.substr(1));
  }
};

/// The size of a 'k' entry's value written before sluice kept prior values: the buffer time.
inline constexpr std::size_t old_index_entry_size = 8;

/// The error for a lookup of a key whose buffer entry has no prior value (written by a sluice
/// that kept none, restored from the changelog): names the buffer, its changelog and the fixes.
[[noreturn]] inline void throw_old_buffer_entry(std::string_view store, std::string_view application_id) {
  throw error(errc::state,
              "suppression buffer '" + std::string(store) +
                  "' holds an entry restored from its changelog in the format of an older sluice, which does not "
                  "keep the value last emitted for a buffered key, so a join cannot look the suppressed table up; "
                  "run the previous topology (without the join) on the older sluice until the buffer has emitted "
                  "its keys, or reset the buffer by deleting the topic '" +
                  std::string(application_id) + "-" + std::string(store) +
                  "-changelog' and the local state while the application is stopped");
}

/// A suppression buffer as a join's lookup reads it. init binds the task's store; prior_value
/// answers for a key (its bytes in the key's topic serde, as the buffer keys it): nullopt
/// when the key is not buffered, else its prior value (itself nullopt when the table had no
/// value before, e.g. a reduce's new key). One instance per task, used by its thread only.
template <class T>
class suppression_buffer_view {
 public:
  explicit suppression_buffer_view(std::string store) : name_(std::move(store)) {}

  void init(task_context& task) {
    store_ = kv_store_of(task.store(name_));
    application_id_ = std::string(task.application_id());
  }

  std::optional<std::optional<T>> prior_value(std::string_view key_bytes) {
    index_key_.assign("k").append(key_bytes);
    if (!store_->get(index_key_, scratch_)) return std::nullopt;
    if (scratch_.size() <= old_index_entry_size) throw_old_buffer_entry(name_, application_id_);
    return buffered_value_serde<std::optional<T>>::deserialize(std::string_view(scratch_).substr(8));
  }

 private:
  std::string name_;
  std::string application_id_;
  state::kv_store* store_ = nullptr;
  std::string index_key_, scratch_;
};

}  // namespace sluice::detail
