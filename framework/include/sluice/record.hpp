// Records as processors see them: a typed key and value, a timestamp and headers, plus
// where the record came from (topic, partition, offset) when it came from Kafka.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice {

/// One Kafka record header. A header value may be null, as in Kafka.
struct header {
  std::string key;
  std::optional<std::string> value;
  friend bool operator==(const header&, const header&) = default;
};

/// Headers in the order they were added; keys may repeat, as in Kafka.
class headers {
 public:
  headers() = default;
  headers(std::initializer_list<header> list) : items_(list) {}

  void add(std::string key, std::optional<std::string> value) { items_.push_back({std::move(key), std::move(value)}); }
  /// The value of the last header named `key`, or nullptr when there is none.
  const std::optional<std::string>* last(std::string_view key) const {
    for (auto it = items_.rbegin(); it != items_.rend(); ++it)
      if (it->key == key) return &it->value;
    return nullptr;
  }
  void remove(std::string_view key) {
    std::erase_if(items_, [&](const header& h) { return h.key == key; });
  }
  void clear() noexcept { items_.clear(); }
  bool empty() const noexcept { return items_.empty(); }
  std::size_t size() const noexcept { return items_.size(); }
  auto begin() const noexcept { return items_.begin(); }
  auto end() const noexcept { return items_.end(); }
  std::vector<header>& items() noexcept { return items_; }
  const std::vector<header>& items() const noexcept { return items_; }

  friend bool operator==(const headers&, const headers&) = default;

 private:
  std::vector<header> items_;
};

/// A record lent, not copied: views into a reader's buffers, valid only during the call
/// that lends it (topic_reader::poll_views()). Without headers: reading them is most of a
/// small record's cost. A null key (or value) is std::nullopt; an empty one is empty.
struct raw_view {
  std::string_view topic;
  std::int32_t partition = -1;
  std::int64_t offset = -1;
  std::int64_t timestamp = -1;  ///< ms since the epoch; -1 when the broker sent none
  std::optional<std::string_view> key;
  std::optional<std::string_view> value;
};

/// Where a record was read from. Offset and partition are -1 for records a punctuator made.
struct record_metadata {
  std::string_view topic;
  std::int32_t partition = -1;
  std::int64_t offset = -1;
};

/// A typed record flowing between processors.
template <class K, class V>
struct record {
  K key{};
  V value{};
  std::int64_t timestamp = 0;  ///< milliseconds since the epoch
  sluice::headers headers;

  template <class V2>
  record<K, V2> with_value(V2 v) const {
    return {key, std::move(v), timestamp, headers};
  }
};

}  // namespace sluice
