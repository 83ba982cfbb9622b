// record_size_limits: the largest record sluice may produce to each topic, learned at start
// from the producer's message.max.bytes and the topics' max.message.bytes, so that a task
// finds an oversized record before the producer (or, worse, the broker inside a transaction)
// refuses it.
//
// Lifecycle: filled by the app before its stream threads start (or by the test driver), then
// read only. Threading: const after that; safe to read from every stream thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "kafka/types.hpp"
#include "sluice/config.hpp"
#include "sluice/record.hpp"

namespace sluice::runtime {

/// librdkafka's message.max.bytes when the producer's configuration does not set it.
inline constexpr std::int64_t default_producer_max_message_bytes = 1000000;

/// The message.max.bytes the job's producer uses: producer.message.max.bytes, else a bare
/// message.max.bytes, else librdkafka's default; read with config::get_int, which throws
/// sluice::error(errc::invalid_config) naming the key when it is not an integer in
/// librdkafka's range (1000 .. 1000000000).
std::int64_t producer_max_message_bytes(const config& cfg);

/// Bytes one record takes on the wire in a v2 record batch, an upper bound: key, value,
/// header names and values, and their framing (varint lengths, attributes, deltas) at its
/// largest. Uncompressed: a compressed batch may be smaller, never counted on.
std::int64_t record_wire_bytes(const std::optional<std::string_view>& key, const std::optional<std::string_view>& value,
                               const sluice::headers& headers) noexcept;

/// The framing bytes record_wire_bytes() adds to a record with no headers (its key and value
/// excluded), and to each header (its name and value excluded).
inline constexpr std::int64_t record_framing_bytes = 64;
inline constexpr std::int64_t header_framing_bytes = 10;
/// A record batch's own header (v2), which a topic's max.message.bytes counts too.
inline constexpr std::int64_t batch_framing_bytes = 61;

/// What binds a record's size on one topic: the byte limit and the setting to change.
struct record_limit {
  std::int64_t bytes;   ///< the largest record_wire_bytes() accepted
  std::string setting;  ///< e.g. "the producer's message.max.bytes (1000000)"
};

class record_size_limits {
 public:
  /// `producer_max_message_bytes`: the message.max.bytes the runtime's producer really uses.
  explicit record_size_limits(std::int64_t producer_max_message_bytes = default_producer_max_message_bytes);

  /// A topic's max.message.bytes, as described by the broker. A topic never described keeps
  /// only the producer's limit.
  void set_topic_max_message_bytes(const std::string& topic, std::int64_t max_message_bytes);

  /// The limit on records produced to `topic`: the smaller of the producer's and the topic's.
  record_limit limit(std::string_view topic) const;

  /// What a processing error says of a record of `wire_bytes` over limit(topic): the topic,
  /// the size, the limit and the setting to change.
  std::string oversized_message(std::string_view topic, std::int64_t wire_bytes) const;

  /// True when a record of `wire_bytes` (record_wire_bytes) fits every topic: the check on
  /// the hot path that needs no lookup.
  bool fits_everywhere(std::int64_t wire_bytes) const noexcept { return wire_bytes <= smallest_; }

  std::int64_t producer_max_message_bytes() const noexcept { return producer_max_; }

 private:
  std::int64_t producer_max_;
  std::int64_t smallest_;  ///< the smallest record_wire_bytes() limit of all
  /// Topic -> its max.message.bytes, for topics where it binds before the producer's limit.
  std::unordered_map<std::string, std::int64_t, kafka::string_hash, std::equal_to<>> topics_;
};

}  // namespace sluice::runtime
